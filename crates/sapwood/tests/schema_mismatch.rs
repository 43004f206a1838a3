//! A categorical feature trained on text levels and given integer codes at prediction (or
//! in an evaluation set binned with the training cuts) is refused with
//! `Error::SchemaMismatch` naming the column and both kinds of values, instead of every
//! value being an unseen level predicted as missing.

use sapwood::{Booster, CutPass, Dataset, Error, FeatureMatrix, Params, PredictOptions};

const COLOURS: [&str; 3] = ["blue", "green", "red"];

/// `colour` (text levels) and `x`, with a label that depends on the colour.
fn colours(n: usize, codes_as_numbers: bool) -> Dataset<'static> {
    let codes: Vec<u32> = (0..n).map(|i| (i * 7 % 3) as u32).collect();
    let x: Vec<f32> = (0..n).map(|i| (i % 10) as f32).collect();
    let label: Vec<f32> = codes
        .iter()
        .zip(&x)
        .map(|(&c, &v)| c as f32 * 3.0 + v * 0.1)
        .collect();
    // the same column, with its codes written as numbers (an integer id column)
    let levels: Vec<String> = if codes_as_numbers {
        (0..3).map(|c| c.to_string()).collect()
    } else {
        COLOURS.iter().map(|s| s.to_string()).collect()
    };
    Dataset::builder()
        .categorical("colour", codes, levels)
        .numeric("x", x)
        .label(label)
        .build()
        .unwrap()
}

fn params() -> Params {
    Params {
        num_rounds: 5,
        learning_rate: 0.3,
        ..Default::default()
    }
}

#[test]
fn integer_codes_for_a_text_category_are_refused_at_prediction() {
    let train = colours(300, false);
    let booster = Booster::train(&params(), &train, &[]).unwrap();
    // the text levels predict fine and use the colour
    let p = booster.predict(&train).unwrap();
    assert!(p.values.iter().any(|&v| v > 5.0), "the colour is used");
    let codes = colours(300, true);
    for opts in [
        PredictOptions::default(),
        PredictOptions {
            output: sapwood::Output::Contributions,
            ..Default::default()
        },
    ] {
        let e = booster.predict_with(&codes, opts).unwrap_err();
        assert!(matches!(e, Error::SchemaMismatch(_)), "{e:?}");
        let m = e.to_string();
        assert!(m.contains("`colour`"), "{m}");
        assert!(
            m.contains("numbers (0, 1, 2)") && m.contains("text categories (blue, green, red)"),
            "{m}"
        );
    }
    // a new text level is just unseen (predicted as missing), not an error
    let mut levels: Vec<String> = COLOURS.iter().map(|s| s.to_string()).collect();
    levels[0] = "purple".into();
    let unseen = Dataset::builder()
        .categorical("colour", vec![0u32, 1, 2], levels)
        .numeric("x", vec![1.0f32, 2.0, 3.0])
        .build()
        .unwrap();
    assert_eq!(booster.predict(&unseen).unwrap().n_rows(), 3);
}

#[test]
fn integer_codes_in_an_evaluation_set_binned_with_training_cuts_are_refused() {
    let train = colours(300, false);
    let mut cuts = CutPass::new(&params(), 300);
    cuts.push(train.features(), None).unwrap();
    let mut pass = cuts.finish().unwrap();
    pass.push(train.features(), train.label().cloned(), None)
        .unwrap();
    let binned = pass.finish().unwrap();
    // an evaluation set with the text levels bins fine
    let mut ok = binned.bin_like();
    ok.push(train.features(), train.label().cloned(), None)
        .unwrap();
    // the same column as integer codes does not
    let codes = colours(300, true);
    let mut bad = binned.bin_like();
    let e = bad
        .push(codes.features(), codes.label().cloned(), None)
        .unwrap_err();
    assert!(matches!(e, Error::SchemaMismatch(_)), "{e:?}");
    assert!(e.to_string().contains("`colour`"), "{e}");
}

#[test]
fn the_check_is_public_for_other_front_ends() {
    let train = colours(100, false);
    let booster = Booster::train(&params(), &train, &[]).unwrap();
    let codes = colours(100, true);
    let features: &FeatureMatrix<'_> = codes.features();
    assert!(sapwood::check_categorical_types(booster.model(), features).is_err());
    assert!(sapwood::check_categorical_types(booster.model(), train.features()).is_ok());
}
