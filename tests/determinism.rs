//! The determinism contract on one machine: thread counts never change the saved model.

use sapwood::{Booster, GrowPolicy, ObjectiveKind, Params, Quantisation, Quiet, RunOptions};
use sapwood_tests::synthetic;

fn train_as(
    params: &Params,
    run: RunOptions,
    d: &sapwood::Dataset<'_>,
    evals: &[(&str, &sapwood::Dataset<'_>)],
) -> sapwood::Result<Booster> {
    Booster::train_with(params, &run, d, evals, &mut Quiet)
}

/// The model trained with `threads`, after checking the run really had that many: equal
/// models alone would also pass if the setting were ignored.
fn model_with_threads(params: &Params, task: &str, threads: usize) -> String {
    let d = synthetic(6_000, task, 5);
    let run = RunOptions {
        threads,
        ..Default::default()
    };
    let b = train_as(params, run, &d, &[]).unwrap();
    let record = b.run_record();
    assert_eq!(record.threads, [threads], "the pool the run had");
    assert_eq!(record.backends, ["cpu"]);
    b.to_json()
}

#[test]
fn one_two_three_and_seven_threads_save_identical_models() {
    for (task, objective) in [
        ("regression", ObjectiveKind::SquaredError),
        ("binary", ObjectiveKind::Logistic),
        ("multiclass", ObjectiveKind::Softprob),
    ] {
        // every row in the bag too: the CPU then builds several classes' roots in one pass
        for (quantisation, subsample) in [
            (Quantisation::Exact, 0.8),
            (Quantisation::Bits(8), 0.8),
            (Quantisation::Exact, 1.0),
        ] {
            for (policy, max_depth, max_leaves) in [
                (GrowPolicy::Depthwise, 6, 0),
                (GrowPolicy::Lossguide, 0, 31),
            ] {
                let params = Params {
                    objective,
                    quantisation,
                    grow_policy: policy,
                    max_depth,
                    max_leaves,
                    num_rounds: 12,
                    subsample,
                    colsample_bytree: 0.8,
                    seed: 42,
                    ..Default::default()
                };
                let one = model_with_threads(&params, task, 1);
                // 7 exceeds the cores of most CI machines: rayon still builds the pool
                for threads in [2, 3, 7] {
                    let other = model_with_threads(&params, task, threads);
                    assert!(
                        one == other,
                        "{objective} {quantisation:?} subsample {subsample} {policy:?}: \
                         {threads} threads differ"
                    );
                }
                assert!(one.len() > 1000);
            }
        }
    }
}

#[test]
fn seeds_change_sampled_models() {
    let params = Params {
        objective: ObjectiveKind::Logistic,
        num_rounds: 5,
        subsample: 0.5,
        ..Default::default()
    };
    let a = model_with_threads(&params, "binary", 2);
    let b = model_with_threads(&Params { seed: 1, ..params }, "binary", 2);
    assert_ne!(a, b);
}

#[test]
fn one_to_four_in_process_workers_save_identical_models_with_every_codec_overlapped_or_not() {
    use sapwood::CommCodec;
    for (task, objective) in [
        ("regression", ObjectiveKind::SquaredError),
        ("binary", ObjectiveKind::Logistic),
        ("multiclass", ObjectiveKind::Softprob),
    ] {
        let d = synthetic(3_001, task, 17);
        for (quantisation, subsample) in [
            (Quantisation::Exact, 0.9),
            (Quantisation::Bits(8), 0.9),
            (Quantisation::Exact, 1.0),
        ] {
            let base = Params {
                objective,
                quantisation,
                num_rounds: 6,
                max_depth: 5,
                subsample,
                seed: 3,
                // the 5 colours searched as many levels are: the nodes' squared gradients,
                // which measure their noise, are summed over workers with their counts
                max_cat_to_onehot: 1,
                max_cat_threshold: 2,
                ..Default::default()
            };
            let reference = Booster::train(&base, &d, &[("train", &d)])
                .unwrap()
                .to_json();
            for workers in 2..=4 {
                for comm_codec in [
                    CommCodec::None,
                    CommCodec::Packed,
                    CommCodec::Sparse,
                    CommCodec::Auto,
                ] {
                    let run = RunOptions {
                        workers,
                        comm_codec,
                        threads: 2,
                        ..Default::default()
                    };
                    // the level's exchange in one piece, then in chunks behind the builds
                    let serial = RunOptions {
                        comm_overlap: false,
                        ..run
                    };
                    let s = train_as(&base, serial, &d, &[("train", &d)]).unwrap();
                    assert!(
                        s.to_json() == reference,
                        "{objective} {quantisation:?} subsample {subsample} {workers} workers {comm_codec:?}, no overlap: model differs"
                    );
                    let b = train_as(&base, run, &d, &[("train", &d)]).unwrap();
                    assert!(
                        b.to_json() == reference,
                        "{objective} {quantisation:?} subsample {subsample} {workers} workers {comm_codec:?}: model differs"
                    );
                    // the deep levels (8 and 16 histograms) went in chunks
                    assert!(
                        b.comm_stats().allreduce_calls > s.comm_stats().allreduce_calls,
                        "overlap: {:?}, none: {:?}",
                        b.comm_stats(),
                        s.comm_stats()
                    );
                    assert!(b.comm_stats().allreduce_calls > 0);
                    // every worker trained and talked, not just rank 0
                    let record = b.run_record();
                    assert_eq!(record.workers(), workers, "workers that trained");
                    assert_eq!(record.backends, vec!["cpu"; workers]);
                    assert_eq!(record.threads, vec![1; workers], "2 threads over {workers}");
                    for (rank, c) in record.comm.iter().enumerate() {
                        assert!(
                            c.bytes_sent > 0,
                            "{workers} workers: rank {rank} sent nothing"
                        );
                        assert!(c.allreduce_calls > 0, "rank {rank} reduced nothing");
                        // the codec asked for is the one that encoded the blocks
                        let k = c.blocks;
                        let (mine, others) = match comm_codec {
                            CommCodec::None => (k.plain, k.packed + k.sparse + k.bitmap + k.groups),
                            CommCodec::Packed => {
                                (k.packed, k.plain + k.sparse + k.bitmap + k.groups)
                            }
                            CommCodec::Sparse => {
                                (k.sparse + k.bitmap, k.plain + k.packed + k.groups)
                            }
                            CommCodec::Auto => (k.groups + k.sparse, k.plain + k.packed + k.bitmap),
                        };
                        assert!(
                            mine > 0 && others == 0,
                            "{comm_codec:?}, rank {rank}: blocks by encoding {k:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn workers_beyond_the_rows_are_refused_and_empty_shards_are_not_needed() {
    let d = synthetic(3, "regression", 1);
    let four = RunOptions {
        workers: 4,
        ..Default::default()
    };
    let e = train_as(&Params::default(), four, &d, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("workers") && e.contains("3 rows"), "{e}");
    // exactly one row per worker still trains the same model
    let one = Booster::train(
        &Params {
            num_rounds: 2,
            min_child_weight: 0.0,
            ..Default::default()
        },
        &d,
        &[],
    )
    .unwrap();
    let three = train_as(
        &Params {
            num_rounds: 2,
            min_child_weight: 0.0,
            ..Default::default()
        },
        RunOptions {
            workers: 3,
            ..Default::default()
        },
        &d,
        &[],
    )
    .unwrap();
    assert_eq!(one.to_json(), three.to_json());
}
