//! Learning to rank: LambdaMART over query groups learns, keeps the determinism contract for
//! 1–4 workers (queries are never split), and refuses bad groups by row.

use sapwood::{Booster, Dataset, Device, Metric, ObjectiveKind, Params, Quiet, RunOptions};

/// Queries of 3 to 27 documents; relevance 0–4 from a noisy signal of the first two features.
fn ranking_data(queries: usize, seed: u64) -> (Dataset<'static>, Vec<i64>) {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let (mut x0, mut x1, mut x2, mut y, mut qid) = (vec![], vec![], vec![], vec![], vec![]);
    for q in 0..queries {
        let docs = 3 + (next() * 25.0) as usize;
        let shift = next() as f32;
        for _ in 0..docs {
            let (a, b, c) = (next() as f32, next() as f32, next() as f32);
            let s = 2.0 * a + b * b - 0.5 * shift + 0.4 * (next() as f32 - 0.5);
            x0.push(a);
            x1.push(b);
            x2.push(c + shift);
            y.push((s.clamp(0.0, 2.49) * 2.0).floor());
            qid.push(1000 + q as i64);
        }
    }
    let mut d = Dataset::builder()
        .numeric("x0", x0)
        .numeric("x1", x1)
        .numeric("x2", x2)
        .label(y)
        .build()
        .unwrap();
    d.set_group(&qid).unwrap();
    (d, qid)
}

fn params(objective: ObjectiveKind) -> Params {
    Params {
        objective,
        num_rounds: 15,
        max_depth: 4,
        learning_rate: 0.2,
        subsample: 0.9,
        seed: 5,
        eval_metric: vec![Metric::Ndcg(Some(5)), Metric::Map(None)],
        ..Default::default()
    }
}

#[test]
fn every_ranking_loss_learns_and_saves_one_model_for_one_to_four_workers() {
    let (train, _) = ranking_data(120, 1);
    let (valid, _) = ranking_data(40, 2);
    for objective in [
        ObjectiveKind::RankNdcg,
        ObjectiveKind::RankMap,
        ObjectiveKind::RankPairwise,
    ] {
        let one = Booster::train(&params(objective), &train, &[("valid", &valid)]).unwrap();
        // each loss improves the metric it targets on held-out queries
        let h = one.history();
        let m = if objective == ObjectiveKind::RankMap {
            1
        } else {
            0
        };
        let (first, last) = (h[0][m].value, h[h.len() - 1][m].value);
        // both are in [0, 1]: the shortfall from 1 shrinks by a tenth at least
        assert!(
            1.0 - last < 0.9 * (1.0 - first),
            "{objective}: {} on held-out queries went from {first} to {last}",
            h[0][m].metric
        );
        for workers in 2..=4 {
            let run = RunOptions {
                workers,
                threads: 1,
                ..Default::default()
            };
            let b = Booster::train_with(
                &params(objective),
                &run,
                &train,
                &[("valid", &valid)],
                &mut Quiet,
            )
            .unwrap();
            assert_eq!(b.run_record().workers(), workers);
            assert!(
                b.to_json() == one.to_json(),
                "{objective}: {workers} workers save another model"
            );
        }
        // the WGSL backend builds the histograms of the same host gradients
        let run = RunOptions {
            device: Device::Wgpu,
            ..Default::default()
        };
        match Booster::train_with(&params(objective), &run, &train, &[], &mut Quiet) {
            Ok(b) => {
                let cpu = Booster::train(&params(objective), &train, &[]).unwrap();
                assert!(b.to_json() == cpu.to_json(), "{objective}: wgpu differs");
            }
            Err(e) => assert!(
                std::env::var_os("SAPWOOD_REQUIRE_ADAPTER").is_none(),
                "{objective}: wgpu failed: {e}"
            ),
        }
    }
}

#[test]
fn ranking_needs_contiguous_query_groups() {
    let (mut d, mut qid) = ranking_data(10, 3);
    let e = Booster::train(
        &params(ObjectiveKind::RankNdcg),
        &{
            let mut plain = d.clone();
            plain.set_group_sizes(&[plain.n_rows() as u32]).unwrap();
            plain
        },
        &[],
    );
    assert!(e.is_ok(), "one query holding every row is a valid grouping");
    // a query that comes back after another is refused with its row
    let back = qid.iter().position(|&q| q == 1003).unwrap();
    qid[back] = 1000;
    let err = d.set_group(&qid).unwrap_err().to_string();
    assert!(
        err.contains(&format!("row {}", back + 1)) || err.contains(&format!("row {back}")),
        "{err}"
    );
    // a ranking loss without groups names the parameter
    let no_groups = Dataset::from_parts(d.features().clone(), d.label().cloned(), None).unwrap();
    let err = Booster::train(&params(ObjectiveKind::RankNdcg), &no_groups, &[])
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("group"), "{err}");
    // more workers than queries
    d.set_group_sizes(&[d.n_rows() as u32 - 1, 1]).unwrap();
    let run = RunOptions {
        workers: 3,
        ..Default::default()
    };
    let err = Booster::train_with(&params(ObjectiveKind::RankNdcg), &run, &d, &[], &mut Quiet)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("workers") && err.contains("queries"), "{err}");
}

#[test]
fn mean_pairs_learn_and_save_one_model_for_one_to_four_workers_and_on_wgpu() {
    let (train, _) = ranking_data(120, 1);
    let (valid, _) = ranking_data(40, 2);
    let mut p = params(ObjectiveKind::RankNdcg);
    p.set("lambdarank_pair_method", "mean").unwrap();
    p.set("lambdarank_num_pair_per_sample", "3").unwrap();
    let one = Booster::train(&p, &train, &[("valid", &valid)]).unwrap();
    let h = one.history();
    let (first, last) = (h[0][0].value, h[h.len() - 1][0].value);
    assert!(
        1.0 - last < 0.9 * (1.0 - first),
        "mean pairs: ndcg@5 went from {first} to {last}"
    );
    // the draws change with the seed (they are random), and with the pair count
    let mut reseeded = p.clone();
    reseeded.seed += 1;
    let other = Booster::train(&reseeded, &train, &[]).unwrap();
    let same_seed = Booster::train(&p, &train, &[]).unwrap();
    assert!(other.model().trees != same_seed.model().trees);
    let mut topk = p.clone();
    topk.set("lambdarank_pair_method", "topk").unwrap();
    assert!(Booster::train(&topk, &train, &[]).unwrap().model().trees != same_seed.model().trees);
    for workers in 2..=4 {
        let run = RunOptions {
            workers,
            threads: 1,
            ..Default::default()
        };
        let b = Booster::train_with(&p, &run, &train, &[("valid", &valid)], &mut Quiet).unwrap();
        assert_eq!(b.run_record().workers(), workers);
        assert!(
            b.to_json() == one.to_json(),
            "mean pairs: {workers} workers save another model"
        );
    }
    let run = RunOptions {
        device: Device::Wgpu,
        ..Default::default()
    };
    match Booster::train_with(&p, &run, &train, &[], &mut Quiet) {
        Ok(b) => assert!(
            b.to_json() == same_seed.to_json(),
            "mean pairs: wgpu differs"
        ),
        Err(e) => assert!(
            std::env::var_os("SAPWOOD_REQUIRE_ADAPTER").is_none(),
            "mean pairs: wgpu failed: {e}"
        ),
    }
    // saved and read back: the method and the pair count are part of the model
    let json = one.to_json();
    assert!(
        json.contains("\"lambdarank_pair_method\":\"mean\""),
        "{json:.300}"
    );
    let back = Booster::from_json(&json).unwrap();
    assert!(back.to_json() == json);
}

/// Brute-force NDCG@k of `scores` over the queries of `qid`, with `gain` per label (ranks
/// by score, ties in row order; a query without relevant documents scores 1).
fn brute_ndcg(
    qid: &[i64],
    labels: &[f32],
    scores: &[f32],
    k: usize,
    gain: impl Fn(f32) -> f64,
) -> f64 {
    let mut starts: Vec<usize> = (0..qid.len())
        .filter(|&i| i == 0 || qid[i] != qid[i - 1])
        .collect();
    starts.push(qid.len());
    let mut total = 0.0;
    for w in starts.windows(2) {
        let (y, s) = (&labels[w[0]..w[1]], &scores[w[0]..w[1]]);
        let mut order: Vec<usize> = (0..y.len()).collect();
        order.sort_by(|&a, &b| s[b].total_cmp(&s[a]).then(a.cmp(&b)));
        let disc = |r: usize| 1.0 / ((r + 2) as f64).log2();
        let dcg: f64 = order
            .iter()
            .take(k)
            .enumerate()
            .map(|(r, &i)| gain(y[i]) * disc(r))
            .sum();
        let mut ideal = y.to_vec();
        ideal.sort_by(|a, b| b.total_cmp(a));
        let idcg: f64 = ideal
            .iter()
            .take(k)
            .enumerate()
            .map(|(r, &v)| gain(v) * disc(r))
            .sum();
        total += if idcg > 0.0 { dcg / idcg } else { 1.0 };
    }
    total / (starts.len() - 1) as f64
}

#[test]
fn label_gain_sets_the_gains_of_the_loss_and_of_the_ndcg_metric() {
    let (train, _) = ranking_data(120, 1);
    let (valid, valid_qid) = ranking_data(40, 2);
    let labels = match valid.label() {
        Some(sapwood::Label::Values(v)) => v.clone(),
        _ => unreachable!("numeric labels"),
    };
    let with = |f: &dyn Fn(&mut Params)| {
        let mut p = params(ObjectiveKind::RankNdcg);
        p.eval_metric = vec![Metric::Ndcg(Some(5))];
        f(&mut p);
        let b = Booster::train(&p, &train, &[("valid", &valid)]).unwrap();
        let margins = b
            .predict_with(
                &valid,
                sapwood::PredictOptions {
                    output: sapwood::Output::Margin,
                    ..Default::default()
                },
            )
            .unwrap()
            .values;
        let metric: Vec<f64> = b.history().iter().map(|r| r[0].value).collect();
        (margins, metric)
    };
    let (exp, exp_metric) = with(&|_| {});
    // LightGBM's default table is 2^label - 1: the default model, bit for bit
    let (table, table_metric) = with(&|p| p.label_gain = vec![0.0, 1.0, 3.0, 7.0, 15.0]);
    assert!(table == exp && table_metric == exp_metric);
    // a table of the labels themselves is ndcg_exp_gain = false
    let (linear, linear_metric) = with(&|p| p.ndcg_exp_gain = false);
    let (identity, identity_metric) = with(&|p| p.label_gain = vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    assert!(identity == linear && identity_metric == linear_metric);
    assert!(
        linear != exp,
        "ndcg_exp_gain = false trained the default model"
    );
    // a table of its own trains another model, and the metric reads the same table
    let gains = [0.0, 0.0, 1.0, 10.0, 30.0];
    let (own, own_metric) = with(&|p| p.label_gain = gains.to_vec());
    assert!(own != exp && own != linear, "label_gain was ignored");
    for (margins, metric, gain) in [
        (
            &own,
            &own_metric,
            &(|y: f32| gains[y as usize]) as &dyn Fn(f32) -> f64,
        ),
        (&linear, &linear_metric, &|y: f32| y as f64),
        (&exp, &exp_metric, &|y: f32| 2f64.powf(y as f64) - 1.0),
    ] {
        let want = brute_ndcg(&valid_qid, &labels, margins, 5, gain);
        let got = *metric.last().unwrap();
        assert!(
            (got - want).abs() < 1e-9,
            "ndcg@5 {got} against brute force {want}"
        );
    }
    // bad tables and labels are named
    let err = |f: &dyn Fn(&mut Params)| {
        let mut p = params(ObjectiveKind::RankNdcg);
        f(&mut p);
        Booster::train(&p, &train, &[])
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let e = err(&|p| p.label_gain = vec![0.0, 1.0, 3.0, 7.0]);
    assert!(e.contains("label_gain") && e.contains("row"), "{e}");
    let e = err(&|p| p.label_gain = vec![0.0, -1.0, 3.0, 7.0, 15.0]);
    assert!(e.contains("label_gain") && e.contains("-1"), "{e}");
    let e = err(&|p| {
        p.label_gain = vec![0.0, 1.0, 3.0, 7.0, 15.0];
        p.ndcg_exp_gain = false;
    });
    assert!(
        e.contains("label_gain") && e.contains("ndcg_exp_gain"),
        "{e}"
    );
    // the parameter reads as text, as the CLI and Python give it
    let mut p = params(ObjectiveKind::RankNdcg);
    p.set("label_gain", "[0, 1, 3, 7, 15]").unwrap();
    assert_eq!(p.label_gain, vec![0.0, 1.0, 3.0, 7.0, 15.0]);
    assert!(p.set("label_gain", "0,one").is_err());
}

#[test]
fn lightgbms_pair_hessian_trains_another_model_alike_for_one_to_three_workers() {
    let (train, _) = ranking_data(120, 1);
    let mut p = params(ObjectiveKind::RankNdcg);
    let xgboosts = Booster::train(&p, &train, &[]).unwrap().to_json();
    p.set("lambdarank_hessian", "lightgbm").unwrap();
    let one = Booster::train(&p, &train, &[]).unwrap().to_json();
    assert!(one != xgboosts, "lambdarank_hessian was ignored");
    assert!(one.contains(r#""lambdarank_hessian":"lightgbm""#));
    for workers in 2..=3 {
        let run = RunOptions {
            workers,
            threads: 1,
            ..Default::default()
        };
        let b = Booster::train_with(&p, &run, &train, &[], &mut Quiet).unwrap();
        assert!(b.to_json() == one, "{workers} workers save another model");
    }
}
