//! Parameters that name features: monotone and interaction constraints, as XGBoost and
//! LightGBM users write them (by position or by name), resolved against the training
//! features when training starts.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// `monotone_constraints`: +1 (increasing), -1 (decreasing) or 0 per feature, by position
/// (`(1,0,-1)`) or by feature name (`{"carat": 1}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MonotoneConstraints {
    /// One direction per feature, in the features' order; missing trailing ones are 0.
    ByPosition(Vec<i8>),
    /// Directions of the named features; the others are 0.
    ByName(BTreeMap<String, i8>),
}

impl Default for MonotoneConstraints {
    fn default() -> Self {
        MonotoneConstraints::ByPosition(Vec::new())
    }
}

const MONOTONE: &str = "monotone_constraints";
const INTERACTION: &str = "interaction_constraints";

fn direction(v: i64) -> Result<i8> {
    match v {
        -1..=1 => Ok(v as i8),
        other => Err(Error::param(
            MONOTONE,
            format!("{other} is not -1 (decreasing), 0 (none) or 1 (increasing)"),
        )),
    }
}

/// A list as users type it: `(a,b)`, `[a,b]` or `a,b`, items trimmed; empty for `()`.
fn list_items(v: &str) -> Vec<&str> {
    let t = v.trim();
    let inner = t
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .or_else(|| t.strip_prefix('[').and_then(|s| s.strip_suffix(']')))
        .unwrap_or(t);
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// JSON as Python prints it too: single quotes and tuples accepted.
fn relaxed_json(v: &str) -> std::result::Result<serde_json::Value, serde_json::Error> {
    serde_json::from_str(v).or_else(|_| {
        let fixed: String = v
            .chars()
            .map(|c| match c {
                '\'' => '"',
                '(' => '[',
                ')' => ']',
                c => c,
            })
            .collect();
        // a one-element Python tuple ends with ",]"
        serde_json::from_str(&fixed.replace(",]", "]"))
    })
}

impl FromStr for MonotoneConstraints {
    type Err = Error;
    fn from_str(v: &str) -> Result<Self> {
        let t = v.trim();
        if t.starts_with('{') {
            let map = relaxed_json(t).map_err(|e| {
                Error::param(
                    MONOTONE,
                    format!("`{t}` is not a {{\"feature\": direction}} map: {e}"),
                )
            })?;
            let obj = map.as_object().ok_or_else(|| {
                Error::param(
                    MONOTONE,
                    format!("`{t}` is not a {{\"feature\": direction}} map"),
                )
            })?;
            let mut out = BTreeMap::new();
            for (name, d) in obj {
                let d = d.as_i64().ok_or_else(|| {
                    Error::param(
                        MONOTONE,
                        format!("feature `{name}`: `{d}` is not -1, 0 or 1"),
                    )
                })?;
                out.insert(name.clone(), direction(d)?);
            }
            return Ok(MonotoneConstraints::ByName(out));
        }
        list_items(t)
            .into_iter()
            .map(|s| {
                s.parse::<i64>()
                    .map_err(|_| Error::param(MONOTONE, format!("`{s}` is not -1, 0 or 1")))
                    .and_then(direction)
            })
            .collect::<Result<_>>()
            .map(MonotoneConstraints::ByPosition)
    }
}

impl MonotoneConstraints {
    /// Whether no feature is constrained.
    pub fn is_empty(&self) -> bool {
        match self {
            MonotoneConstraints::ByPosition(v) => v.iter().all(|&d| d == 0),
            MonotoneConstraints::ByName(m) => m.values().all(|&d| d == 0),
        }
    }

    /// Checks the directions (a loaded model's too).
    pub fn validate(&self) -> Result<()> {
        let all: Vec<i8> = match self {
            MonotoneConstraints::ByPosition(v) => v.clone(),
            MonotoneConstraints::ByName(m) => m.values().copied().collect(),
        };
        for d in all {
            direction(d as i64)?;
        }
        Ok(())
    }

    /// One direction per feature of `names`; a name that is not a feature, or more
    /// directions than features, is an error.
    pub fn resolve(&self, names: &[String]) -> Result<Vec<i8>> {
        let mut out = vec![0i8; names.len()];
        match self {
            MonotoneConstraints::ByPosition(v) => {
                if v.len() > names.len() {
                    return Err(Error::param(
                        MONOTONE,
                        format!("{} directions given for {} features", v.len(), names.len()),
                    ));
                }
                out[..v.len()].copy_from_slice(v);
            }
            MonotoneConstraints::ByName(m) => {
                for (name, &d) in m {
                    let f = feature_index(MONOTONE, name, names)?;
                    out[f] = d;
                }
            }
        }
        Ok(out)
    }
}

/// How monotone constraints bound leaf values (LightGBM's `monotone_constraints_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum MonotoneMethod {
    /// The children of a constrained split are bounded by the midpoint of their values, and
    /// every descendant by its ancestors' bounds: fast, and over-constrained.
    #[default]
    #[serde(rename = "basic")]
    Basic,
    /// Each leaf is bounded by the values of the leaves adjacent to it along a constrained
    /// feature, updated after every split: looser bounds, better fits.
    #[serde(rename = "intermediate")]
    Intermediate,
}

impl FromStr for MonotoneMethod {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "basic" => Ok(MonotoneMethod::Basic),
            "intermediate" => Ok(MonotoneMethod::Intermediate),
            other => Err(Error::param(
                "monotone_constraints_method",
                format!("`{other}` is not basic or intermediate"),
            )),
        }
    }
}

/// A feature named by its position or its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FeatureRef {
    /// Position among the training features.
    Index(usize),
    /// Name of a training feature.
    Name(String),
}

fn feature_index(param: &'static str, name: &str, names: &[String]) -> Result<usize> {
    names.iter().position(|n| n == name).ok_or_else(|| {
        Error::param(
            param,
            format!("`{name}` is not a feature of the training data"),
        )
    })
}

/// Parses `interaction_constraints`: a list of lists of feature indices or names
/// (`[[0,1],[2,3,4]]`, `[["age","income"]]`).
pub fn parse_interactions(v: &str) -> Result<Vec<Vec<FeatureRef>>> {
    let t = v.trim();
    if t.is_empty() || t == "[]" {
        return Ok(Vec::new());
    }
    let bad = |why: String| {
        Error::param(
            INTERACTION,
            format!("`{t}` is not a list of lists of features: {why}"),
        )
    };
    let json = relaxed_json(t).map_err(|e| bad(e.to_string()))?;
    let sets = json.as_array().ok_or_else(|| bad("not a list".into()))?;
    sets.iter()
        .map(|s| {
            s.as_array()
                .ok_or_else(|| bad(format!("`{s}` is not a list")))?
                .iter()
                .map(|f| match f {
                    serde_json::Value::String(n) => Ok(FeatureRef::Name(n.clone())),
                    f => f
                        .as_u64()
                        .map(|i| FeatureRef::Index(i as usize))
                        .ok_or_else(|| bad(format!("`{f}` is not a feature index or name"))),
                })
                .collect()
        })
        .collect()
}

/// The interaction sets as feature indices of `names`, each sorted and deduplicated.
pub fn resolve_interactions(sets: &[Vec<FeatureRef>], names: &[String]) -> Result<Vec<Vec<usize>>> {
    sets.iter()
        .map(|s| {
            let mut out = s
                .iter()
                .map(|f| match f {
                    FeatureRef::Index(i) if *i < names.len() => Ok(*i),
                    FeatureRef::Index(i) => Err(Error::param(
                        INTERACTION,
                        format!(
                            "feature index {i} is out of range ({} features)",
                            names.len()
                        ),
                    )),
                    FeatureRef::Name(n) => feature_index(INTERACTION, n, names),
                })
                .collect::<Result<Vec<usize>>>()?;
            out.sort_unstable();
            out.dedup();
            Ok(out)
        })
        .collect()
}

/// Parses `feature_weights`: one non-negative number per feature.
pub fn parse_weights(v: &str) -> Result<Vec<f64>> {
    list_items(v)
        .into_iter()
        .map(|s| {
            s.parse::<f64>().map_err(|_| {
                Error::param("feature_weights", format!("`{s}` is not a valid number"))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        ["carat", "depth", "table"].map(String::from).to_vec()
    }

    #[test]
    fn monotone_constraints_parse_as_xgboost_and_python_write_them() {
        for text in ["(1,0,-1)", "[1, 0, -1]", "1,0,-1"] {
            let m: MonotoneConstraints = text.parse().unwrap();
            assert_eq!(m.resolve(&names()).unwrap(), [1, 0, -1], "{text}");
        }
        for text in [r#"{"carat":1, "table": -1}"#, "{'carat': 1, 'table': -1}"] {
            let m: MonotoneConstraints = text.parse().unwrap();
            assert_eq!(m.resolve(&names()).unwrap(), [1, 0, -1], "{text}");
        }
        let short: MonotoneConstraints = "(1,)".parse().unwrap();
        assert_eq!(short.resolve(&names()).unwrap(), [1, 0, 0]);
        assert!("()".parse::<MonotoneConstraints>().unwrap().is_empty());
    }

    #[test]
    fn bad_constraints_name_the_parameter_and_the_feature() {
        let e = "(2,0)"
            .parse::<MonotoneConstraints>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("monotone_constraints") && e.contains('2'), "{e}");
        let m: MonotoneConstraints = r#"{"price": 1}"#.parse().unwrap();
        let e = m.resolve(&names()).unwrap_err().to_string();
        assert!(
            e.contains("monotone_constraints") && e.contains("price"),
            "{e}"
        );
        let m: MonotoneConstraints = "1,1,1,1".parse().unwrap();
        assert!(m.resolve(&names()).is_err());
        let sets = parse_interactions(r#"[["carat", "colour"]]"#).unwrap();
        let e = resolve_interactions(&sets, &names())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("interaction_constraints") && e.contains("colour"),
            "{e}"
        );
        let sets = parse_interactions("[[0, 7]]").unwrap();
        let e = resolve_interactions(&sets, &names())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("interaction_constraints") && e.contains('7'),
            "{e}"
        );
        assert!(parse_interactions("[0, 1]").is_err());
    }

    #[test]
    fn interaction_sets_take_indices_names_and_tuples() {
        for text in [
            "[[0,1],[2,1]]",
            r#"[["carat","depth"],["table","depth"]]"#,
            "((0, 1), (2, 1))",
        ] {
            let sets = parse_interactions(text).unwrap();
            assert_eq!(
                resolve_interactions(&sets, &names()).unwrap(),
                [vec![0, 1], vec![1, 2]],
                "{text}"
            );
        }
    }
}
