#[test]
fn scratch() {
    use sapwood::*;
    let d = sapwood_tests::bundled("diamonds");
    for (l2, smooth, grp, onehot) in [(0.0, 10.0, 0, 4), (0.0, 1.0, 0, 4), (1.0, 0.0, 0, 4), (0.0, 0.0, 20, 4)] {
        let params = Params { objective: ObjectiveKind::SquaredError, max_depth: 6, learning_rate: 0.1, num_rounds: 200, cat_l2: l2, cat_smooth: smooth, min_data_per_group: grp, max_cat_to_onehot: onehot, eval_metric: vec![Metric::Rmse], ..Default::default() };
        let b = Booster::train(&params, &d.train, &[("test", &d.test)]).unwrap();
        println!("{l2} {smooth} {grp} {onehot}: {}", b.history().last().unwrap()[0].value);
    }
}
