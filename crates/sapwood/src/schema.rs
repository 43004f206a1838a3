//! Checks that data given to a trained model holds what training saw, beyond names and
//! column kinds: a categorical feature trained on text levels and now given numbers.
//!
//! Levels are matched by name and unseen levels are predicted as missing, which is right
//! for a new level or two; but a column of integer codes (`0, 1, 2`) under the name of a
//! column trained on strings (`red, green, blue`) would have every value unseen, and every
//! prediction would silently ignore the feature. XGBoost and LightGBM refuse such input;
//! so does Sapwood.

use sapwood_core::data::{Column, FeatureCuts, FeatureMatrix};
use sapwood_core::model::Model;

use crate::{Error, Result};

/// Whether a level name reads as a number (`3`, `3.5`, `-1`).
fn is_number(level: &str) -> bool {
    level.trim().parse::<f64>().is_ok()
}

/// The first few levels, for a message.
fn sample(levels: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut s = levels
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if levels.len() > SHOWN {
        s.push_str(", ...");
    }
    s
}

/// Refuses a categorical column of `data` whose levels are all numbers, none of them a
/// level `trained` knows, when `trained` holds text levels: integer codes given for a
/// feature trained on strings. `trained` is each feature's name with its training levels
/// (`None` for numeric features); columns are matched by name, absent ones are skipped
/// (the caller reports those).
pub fn check_categorical_levels<'a>(
    trained: impl IntoIterator<Item = (&'a str, Option<&'a [String]>)>,
    data: &FeatureMatrix<'_>,
) -> Result<()> {
    for (name, seen) in trained {
        let Some(seen) = seen else { continue };
        let Some(j) = data.names().iter().position(|n| n == name) else {
            continue;
        };
        let Column::Categorical { levels, .. } = data.column(j) else {
            continue;
        };
        let numbers_now = !levels.is_empty() && levels.iter().all(|l| is_number(l));
        let text_before = seen.iter().any(|l| !is_number(l));
        if numbers_now && text_before && !levels.iter().any(|l| seen.contains(l)) {
            return Err(Error::SchemaMismatch(format!(
                "column `{name}` holds numbers ({}) but was trained as text categories ({}): \
                 every value would be an unseen level; pass the column's text values (or a \
                 pandas category column with the training levels), not integer codes",
                sample(levels),
                sample(seen)
            )));
        }
    }
    Ok(())
}

/// [`check_categorical_levels`] against a trained model's categorical features.
pub fn check_categorical_types(model: &Model, data: &FeatureMatrix<'_>) -> Result<()> {
    check_categorical_levels(
        model
            .feature_names
            .iter()
            .zip(model.cuts.features())
            .map(|(name, cuts)| {
                let levels = match cuts {
                    FeatureCuts::Categorical { levels, .. } => Some(levels.as_slice()),
                    FeatureCuts::Numeric { .. } => None,
                };
                (name.as_str(), levels)
            }),
        data,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn matrix(levels: &[&str]) -> FeatureMatrix<'static> {
        let levels: Vec<String> = levels.iter().map(|s| s.to_string()).collect();
        let codes: Vec<u32> = (0..levels.len() as u32).collect();
        FeatureMatrix::new(
            vec!["colour".into()],
            vec![Column::Categorical {
                codes: Cow::Owned(codes),
                levels,
            }],
        )
        .unwrap()
    }

    fn check(trained: &[&str], given: &[&str]) -> Result<()> {
        let trained: Vec<String> = trained.iter().map(|s| s.to_string()).collect();
        check_categorical_levels([("colour", Some(trained.as_slice()))], &matrix(given))
    }

    #[test]
    fn integer_codes_for_text_levels_are_refused_by_name() {
        let e = check(&["blue", "green", "red"], &["0", "1", "2"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`colour`") && e.contains("numbers (0, 1, 2)") && e.contains("text"),
            "{e}"
        );
        assert!(e.contains("blue, green, red"), "{e}");
    }

    #[test]
    fn matching_or_textual_levels_pass() {
        // numbers trained as numbers
        check(&["1", "2", "3"], &["1", "2", "7"]).unwrap();
        // new text levels are unseen levels, predicted as missing, not an error
        check(&["blue", "red"], &["purple"]).unwrap();
        // one number that is a training level: the column is the right one
        check(&["1", "blue"], &["1", "2"]).unwrap();
        // no level at all (every value missing)
        check(&["blue", "red"], &[]).unwrap();
    }
}
