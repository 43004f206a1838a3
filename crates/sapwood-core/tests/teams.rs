//! A round's trees grown by teams of threads at once (`HistBackend::grow_round` of the CPU
//! backend) against the same backend growing them one after another: whole trainings save
//! the same bytes and report the same metrics, and teams do form where they should.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sapwood_core::backend::{
    BackendFactory, CpuFactory, GrowTree, HistBackend, NodeSplit, ShardData, TreeBackend, TreeSetup,
};
use sapwood_core::collective::SingleWorker;
use sapwood_core::data::{Column, FeatureMatrix};
use sapwood_core::error::Result;
use sapwood_core::hist::HistBin;
use sapwood_core::objective::ObjectiveKind;
use sapwood_core::params::{Checked, GrowPolicy, Params, Quantisation};
use sapwood_core::train::{self, Control, EvalInput, Quiet, RoundReport, Shard, TrainObserver};
use sapwood_core::tree::{NodeId, Tree};
use sapwood_testkit::train::first_difference;
use sapwood_testkit::Rng;

/// Classes of the data: enough trees a round for two teams.
const CLASSES: usize = 17;

/// A CPU backend that forwards everything, and either forms teams (counting the rounds
/// grown in teams) or never does.
struct Wrapped {
    inner: Box<dyn HistBackend>,
    teams: bool,
    rounds_in_teams: Arc<AtomicUsize>,
}

impl TreeBackend for Wrapped {
    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        self.inner.start_tree(s)
    }
    fn build_histograms(&mut self, nodes: &[NodeId], out: &mut [HistBin]) -> Result<()> {
        self.inner.build_histograms(nodes, out)
    }
    fn apply_splits(&mut self, s: &[NodeSplit]) -> Result<Vec<[u64; 2]>> {
        self.inner.apply_splits(s)
    }
    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<HistBin>> {
        self.inner.exact_sums(nodes)
    }
    fn square_sums(&mut self, nodes: &[NodeId], shift: i32) -> Result<Vec<i64>> {
        self.inner.square_sums(nodes, shift)
    }
}

impl HistBackend for Wrapped {
    fn num_rows(&self) -> usize {
        self.inner.num_rows()
    }
    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>> {
        self.inner.compute_gradients()
    }
    fn set_gradients(&mut self, grad: &[[f32; 2]]) -> Result<()> {
        self.inner.set_gradients(grad)
    }
    fn start_round(&mut self, setups: &[TreeSetup]) -> Result<()> {
        self.inner.start_round(setups)
    }
    fn update_margins(&mut self, tree: &Tree, group: usize) -> Result<()> {
        self.inner.update_margins(tree, group)
    }
    fn margins(&self) -> Result<Vec<f32>> {
        self.inner.margins()
    }
    fn runs_on_pool(&self) -> bool {
        self.inner.runs_on_pool()
    }
    fn round_teams(&self, trees: usize, grower_bytes: usize) -> usize {
        if self.teams {
            self.inner.round_teams(trees, grower_bytes)
        } else {
            1
        }
    }
    fn grow_round(
        &mut self,
        setups: &[TreeSetup],
        teams: usize,
        grow: &GrowTree<'_>,
    ) -> Option<Result<Vec<Tree>>> {
        if !self.teams {
            return None;
        }
        let grown = self.inner.grow_round(setups, teams, grow);
        if grown.is_some() {
            self.rounds_in_teams.fetch_add(1, Ordering::Relaxed);
        }
        grown
    }
}

/// Factories of [`Wrapped`] CPU backends.
struct Factory {
    teams: bool,
    rounds_in_teams: Arc<AtomicUsize>,
}

impl Factory {
    fn new(teams: bool) -> Self {
        Factory {
            teams,
            rounds_in_teams: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn rounds_in_teams(&self) -> usize {
        self.rounds_in_teams.load(Ordering::Relaxed)
    }
}

impl BackendFactory for Factory {
    fn create(&self, shard: ShardData) -> Result<Box<dyn HistBackend>> {
        Ok(Box::new(Wrapped {
            inner: CpuFactory.create(shard)?,
            teams: self.teams,
            rounds_in_teams: self.rounds_in_teams.clone(),
        }))
    }
}

/// `n` rows of `classes` classes: dense numeric features (one with missing values) and a
/// categorical one, or (`sparse`) twenty features missing in most rows, which the CPU
/// backend keeps as each row's uncommon bins. Labels, weights.
fn data(
    n: usize,
    classes: usize,
    sparse: bool,
    seed: u64,
) -> (FeatureMatrix<'static>, Vec<f32>, Vec<f32>) {
    let mut rng = Rng(seed);
    let width = if sparse { 20 } else { 5 };
    let mut columns: Vec<Vec<f32>> = (0..width)
        .map(|f| {
            (0..n)
                .map(|i| {
                    let missing = if sparse {
                        rng.unit() < 0.95
                    } else {
                        f == 1 && i % 5 == 0
                    };
                    if missing {
                        f32::NAN
                    } else {
                        rng.unit() * 4.0 - 2.0
                    }
                })
                .collect()
        })
        .collect();
    let codes: Vec<u32> = (0..n).map(|_| rng.below(9) as u32).collect();
    let labels: Vec<f32> = (0..n)
        .map(|i| {
            let v = |f: usize| {
                let x: f32 = columns[f][i];
                if x.is_nan() {
                    0.5
                } else {
                    x
                }
            };
            let s = v(0) * 2.0 + v(1) + v(2) * v(3) + codes[i] as f32 * 0.4 + rng.unit();
            ((s + 6.0) * 1.5).floor().clamp(0.0, (classes - 1) as f32)
        })
        .collect();
    let weights = (0..n).map(|i| 0.5 + (i % 3) as f32 * 0.5).collect();
    let mut names: Vec<String> = (0..width).map(|f| format!("x{f}")).collect();
    names.push("c".into());
    let mut cols: Vec<Column<'static>> = columns
        .drain(..)
        .map(|c| Column::Numeric(c.into()))
        .collect();
    cols.push(Column::Categorical {
        codes: codes.into(),
        levels: (0..9).map(|l| format!("l{l}")).collect(),
    });
    let features = FeatureMatrix::new(names, cols).expect("valid columns");
    (features, labels, weights)
}

/// The saved model and the metrics of every round of training `params` on the data of
/// `sparse` with backends from `factory` on a pool of `threads` threads, with the last
/// 600 rows as an evaluation set.
fn train_on(
    params: &Params,
    factory: &dyn BackendFactory,
    threads: usize,
    sparse: bool,
) -> (String, String) {
    train_with(params, factory, threads, sparse, false)
}

/// [`train_on`], the gradients from the host (a custom objective's softmax) where `host`.
fn train_with(
    params: &Params,
    factory: &dyn BackendFactory,
    threads: usize,
    sparse: bool,
    host: bool,
) -> (String, String) {
    let n = 2_600;
    let classes = params.num_class.unwrap_or(1);
    let (features, labels, weights) = data(n, classes, sparse, 5);
    let params = Checked::new(params.clone()).unwrap_or_else(|e| panic!("{params:?}: {e}"));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a pool");
    pool.install(|| {
        let shard = Shard {
            features: features.slice_rows(0..2_000),
            labels: labels[..2_000].to_vec(),
            weights: Some(weights[..2_000].to_vec()),
            row_offset: 0,
            queries: None,
        };
        let eval = EvalInput {
            name: "held".into(),
            features: features.slice_rows(2_000..n),
            labels: labels[2_000..].to_vec(),
            weights: None,
            base_margin: None,
            queries: None,
        };
        let mut custom = HostSoftmax(labels[..2_000].to_vec());
        let observer: &mut dyn TrainObserver = if host { &mut custom } else { &mut Quiet };
        let trained = train::train(
            &params,
            shard,
            vec![eval],
            &mut SingleWorker,
            factory,
            observer,
        )
        .unwrap_or_else(|e| panic!("{params:?}: {e}"));
        (trained.model.to_json(), format!("{:?}", trained.history))
    })
}

/// A custom objective: softmax gradients computed on the host from the margins, so that the
/// backend's gradients are set rather than computed.
struct HostSoftmax(Vec<f32>);

impl TrainObserver for HostSoftmax {
    fn on_round(&mut self, _: &RoundReport<'_>) -> Control {
        Control::Continue
    }
    fn has_custom_objective(&self) -> bool {
        true
    }
    fn gradients(&mut self, margins: &[f32], k: usize) -> Option<Result<Vec<[f32; 2]>>> {
        let mut out = Vec::with_capacity(margins.len());
        for (row, z) in margins.chunks(k).enumerate() {
            let top = z.iter().copied().fold(f32::MIN, f32::max);
            let e: Vec<f32> = z.iter().map(|v| (v - top).exp()).collect();
            let sum: f32 = e.iter().sum();
            for (c, ec) in e.iter().enumerate() {
                let p = ec / sum;
                let t = f32::from(self.0[row] as usize == c);
                out.push([p - t, (p * (1.0 - p)).max(1e-6)]);
            }
        }
        Some(Ok(out))
    }
}

fn multiclass(objective: ObjectiveKind) -> Params {
    Params {
        objective,
        num_class: Some(CLASSES),
        quantisation: Quantisation::Exact,
        num_rounds: 4,
        max_depth: 4,
        ..Default::default()
    }
}

/// Trains `params` one tree after another on one thread and in teams on `threads`, and
/// checks the same model and metrics come out, with every round grown in teams.
fn same_in_teams(what: &str, params: &Params, threads: &[usize], sparse: bool) {
    let alone = Factory::new(false);
    let (want, want_history) = train_on(params, &alone, 1, sparse);
    assert_eq!(alone.rounds_in_teams(), 0);
    for &t in threads {
        // one after another on as many threads: the same bytes, no team formed
        let (got, history) = train_on(params, &alone, t, sparse);
        assert!(
            got == want,
            "{what}, {t} threads: {}",
            first_difference(&want, &got)
        );
        assert_eq!(history, want_history, "{what}, {t} threads");
        let teams = Factory::new(true);
        let (got, history) = train_on(params, &teams, t, sparse);
        assert!(
            got == want,
            "{what}, teams on {t} threads: {}",
            first_difference(&want, &got)
        );
        assert_eq!(history, want_history, "{what}, teams on {t} threads");
        assert_eq!(
            teams.rounds_in_teams(),
            params.num_rounds,
            "{what}: every round grown in teams on {t} threads"
        );
    }
}

#[test]
fn trees_grown_in_teams_are_those_grown_one_after_another() {
    // two teams of one thread, of two and one, and of two each
    let threads = [2, 3, 4];
    same_in_teams(
        "softprob",
        &multiclass(ObjectiveKind::Softprob),
        &threads,
        false,
    );
    same_in_teams(
        "softmax, rows and features sampled",
        &Params {
            subsample: 0.7,
            colsample_bytree: 0.6,
            ..multiclass(ObjectiveKind::Softmax)
        },
        &threads,
        false,
    );
    same_in_teams(
        "8-bit gradients",
        &Params {
            quantisation: Quantisation::Bits(8),
            ..multiclass(ObjectiveKind::Softprob)
        },
        &[2],
        false,
    );
    same_in_teams(
        "16-bit bins, loss-guided",
        &Params {
            max_bin: 1024,
            grow_policy: GrowPolicy::Lossguide,
            max_leaves: 12,
            max_depth: 0,
            ..multiclass(ObjectiveKind::Softprob)
        },
        &[2],
        false,
    );
    same_in_teams(
        "sparse shard, rows sampled",
        &Params {
            subsample: 0.8,
            ..multiclass(ObjectiveKind::Softprob)
        },
        &[2, 5],
        true,
    );
}

#[test]
fn trees_of_host_gradients_grown_in_teams_are_those_grown_one_after_another() {
    let params = Params {
        objective: ObjectiveKind::Custom,
        ..multiclass(ObjectiveKind::Softprob)
    };
    let alone = Factory::new(false);
    let (want, want_history) = train_with(&params, &alone, 1, false, true);
    let teams = Factory::new(true);
    let (got, history) = train_with(&params, &teams, 2, false, true);
    assert!(got == want, "{}", first_difference(&want, &got));
    assert_eq!(history, want_history);
    assert_eq!(teams.rounds_in_teams(), params.num_rounds);
    // the host's gradients grow other trees than the built-in loss's
    let (built_in, _) = train_on(&multiclass(ObjectiveKind::Softprob), &alone, 1, false);
    assert!(built_in != want);
}

#[test]
fn early_stopping_in_teams_stops_where_one_after_another_does() {
    let params = Params {
        num_rounds: 40,
        learning_rate: 0.8,
        early_stopping_rounds: Some(2),
        ..multiclass(ObjectiveKind::Softprob)
    };
    let (want, want_history) = train_on(&params, &Factory::new(false), 1, false);
    let teams = Factory::new(true);
    let (got, history) = train_on(&params, &teams, 2, false);
    assert!(got == want, "{}", first_difference(&want, &got));
    assert_eq!(history, want_history);
    // stopped early, every round grown in teams
    let rounds = history.matches("EvalResult").count();
    assert!(rounds < 40, "{rounds} rounds");
    assert!(teams.rounds_in_teams() > 0);
}

#[test]
fn few_trees_a_round_or_one_thread_form_no_teams() {
    for (classes, threads) in [(CLASSES, 1), (15, 2)] {
        let params = Params {
            num_class: Some(classes),
            num_rounds: 2,
            ..multiclass(ObjectiveKind::Softprob)
        };
        let teams = Factory::new(true);
        train_on(&params, &teams, threads, false);
        assert_eq!(
            teams.rounds_in_teams(),
            0,
            "{classes} classes on {threads} threads"
        );
    }
}
