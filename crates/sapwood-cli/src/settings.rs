//! Parameters from a TOML file, the flags and `--set key=value`, in that order.

use std::path::Path;

use sapwood::Settings;

/// A malformed `--set` or config file (exit code 2).
#[derive(Debug)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

fn toml_value_text(v: &toml::Value) -> Option<String> {
    Some(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Array(a) => a
            .iter()
            .map(toml_value_text)
            .collect::<Option<Vec<_>>>()?
            .join(","),
        _ => return None,
    })
}

/// Applies a TOML file of `key = value` parameters and run options.
pub fn apply_config(settings: &mut Settings, path: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error(format!("{}: {e}", path.display())))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| Error(format!("{}: {}", path.display(), e.message())))?;
    for (key, value) in &table {
        let text = toml_value_text(value).ok_or_else(|| {
            Error(format!(
                "{}: `{key}` must be a number, string, boolean or list",
                path.display()
            ))
        })?;
        settings
            .set(key, &text)
            .map_err(|e| anyhow::Error::new(e).context(format!("{}", path.display())))?;
    }
    Ok(())
}

/// Applies `key=value` assignments from `--set`.
pub fn apply_sets(settings: &mut Settings, sets: &[String]) -> anyhow::Result<()> {
    for s in sets {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| Error(format!("--set `{s}` is not key=value")))?;
        settings.set(k.trim(), v.trim())?;
    }
    Ok(())
}
