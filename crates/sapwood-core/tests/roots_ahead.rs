//! The CPU backend's roots built ahead (several classes' root histograms in one pass over
//! the bins, from [`HistBackend::start_round`]) against the same backend building each
//! tree's root on its own: whole trainings save the same bytes.

use sapwood_core::backend::{
    BackendFactory, CpuFactory, HistBackend, NodeSplit, ShardData, TreeBackend, TreeSetup,
};
use sapwood_core::error::Result;
use sapwood_core::hist::HistBin;
use sapwood_core::objective::ObjectiveKind;
use sapwood_core::params::{Params, Quantisation};
use sapwood_core::tree::{NodeId, Tree};
use sapwood_testkit::train::{first_difference, train_json, Job};

/// CPU backends that never hear of a round, so each root is built alone.
struct OneRootAtATime;

struct Alone(Box<dyn HistBackend>);

impl TreeBackend for Alone {
    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        self.0.start_tree(s)
    }
    fn build_histograms(&mut self, nodes: &[NodeId], out: &mut [HistBin]) -> Result<()> {
        self.0.build_histograms(nodes, out)
    }
    fn apply_splits(&mut self, s: &[NodeSplit]) -> Result<Vec<[u64; 2]>> {
        self.0.apply_splits(s)
    }
    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<HistBin>> {
        self.0.exact_sums(nodes)
    }
    fn square_sums(&mut self, nodes: &[NodeId], shift: i32) -> Result<Vec<i64>> {
        self.0.square_sums(nodes, shift)
    }
}

impl HistBackend for Alone {
    fn num_rows(&self) -> usize {
        self.0.num_rows()
    }
    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>> {
        self.0.compute_gradients()
    }
    fn set_gradients(&mut self, grad: &[[f32; 2]]) -> Result<()> {
        self.0.set_gradients(grad)
    }
    fn update_margins(&mut self, tree: &Tree, group: usize) -> Result<()> {
        self.0.update_margins(tree, group)
    }
    fn margins(&self) -> Result<Vec<f32>> {
        self.0.margins()
    }
    fn runs_on_pool(&self) -> bool {
        self.0.runs_on_pool()
    }
}

impl BackendFactory for OneRootAtATime {
    fn create(&self, shard: ShardData) -> Result<Box<dyn HistBackend>> {
        Ok(Box::new(Alone(CpuFactory.create(shard)?)))
    }
}

#[test]
fn roots_built_ahead_give_the_models_of_roots_built_alone() {
    // six classes (two passes: four, then two), softmax and softprob, every row in the bag
    // (where roots are built ahead) and a sample (where they are not), one and three workers
    for (objective, subsample) in [
        (ObjectiveKind::Softprob, 1.0),
        (ObjectiveKind::Softmax, 1.0),
        (ObjectiveKind::Softprob, 0.7),
    ] {
        let params = Params {
            objective,
            num_class: Some(6),
            quantisation: Quantisation::Exact,
            num_rounds: 5,
            max_depth: 4,
            subsample,
            ..Default::default()
        };
        for workers in [1, 3] {
            let job = Job::rows(3_000).workers(workers);
            let ahead = train_json(&params, &CpuFactory, job);
            let alone = train_json(&params, &OneRootAtATime, job);
            assert!(
                ahead == alone,
                "{objective:?} subsample {subsample}, {workers} workers: {}",
                first_difference(&ahead, &alone)
            );
        }
    }
}
