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
