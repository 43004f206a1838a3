//! Serde helpers writing non-finite f32 values as strings (JSON has no infinities): the
//! model file's thresholds and the cuts keep their infinities.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Repr {
    Num(f32),
    Str(String),
}

/// Writes the values, infinities as "inf"/"-inf".
pub fn serialize<S: Serializer>(v: &[f32], s: S) -> Result<S::Ok, S::Error> {
    let r: Vec<Repr> = v
        .iter()
        .map(|&x| {
            if x.is_finite() {
                Repr::Num(x)
            } else if x.is_nan() {
                Repr::Str("nan".into())
            } else if x > 0.0 {
                Repr::Str("inf".into())
            } else {
                Repr::Str("-inf".into())
            }
        })
        .collect();
    r.serialize(s)
}

/// Reads values written by [`serialize`].
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
    let r: Vec<Repr> = Vec::deserialize(d)?;
    r.into_iter()
        .map(|x| match x {
            Repr::Num(v) => Ok(v),
            Repr::Str(s) => match s.as_str() {
                "inf" => Ok(f32::INFINITY),
                "-inf" => Ok(f32::NEG_INFINITY),
                "nan" => Ok(f32::NAN),
                other => Err(serde::de::Error::custom(format!(
                    "`{other}` is not a number"
                ))),
            },
        })
        .collect()
}
