//! The determinism contract on one machine: thread counts never change the saved model.

use sapwood::{Booster, GrowPolicy, ObjectiveKind, Params, Quantisation};
use sapwood_tests::synthetic;

fn model_with_threads(params: &Params, task: &str, threads: usize) -> String {
    let d = synthetic(6_000, task, 5);
    let p = Params {
        threads,
        ..params.clone()
    };
    Booster::train(&p, &d, &[]).unwrap().to_json()
}

#[test]
fn one_and_two_threads_save_identical_models() {
    for (task, objective) in [
        ("regression", ObjectiveKind::SquaredError),
        ("binary", ObjectiveKind::Logistic),
        ("multiclass", ObjectiveKind::Softprob),
    ] {
        for quantisation in [Quantisation::Exact, Quantisation::Bits(8)] {
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
                    subsample: 0.8,
                    colsample_bytree: 0.8,
                    seed: 42,
                    ..Default::default()
                };
                let one = model_with_threads(&params, task, 1);
                let two = model_with_threads(&params, task, 2);
                assert!(
                    one == two,
                    "{objective} {quantisation:?} {policy:?}: models differ"
                );
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
