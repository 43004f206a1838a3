//! `sapwood params`: the parameter reference, from the table the tests hold to the code.

use std::io::Write;

use anyhow::Result;
use sapwood::{aliases, canonical_name, param_doc, ParamDoc, PARAM_DOCS};
use serde_json::json;

use crate::cli::ParamsArgs;

/// Prints every parameter and run option (or the one named), as text or JSON.
pub fn run(args: ParamsArgs) -> Result<()> {
    let chosen: Vec<&ParamDoc> = match &args.name {
        None => PARAM_DOCS.iter().collect(),
        // every canonical name has an entry (a test of PARAM_DOCS holds it)
        Some(key) => param_doc(canonical_name(key)?).into_iter().collect(),
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let rows: Vec<_> = chosen
            .iter()
            .map(|d| {
                json!({
                    "name": d.name,
                    "aliases": aliases(d.name),
                    "default": d.default,
                    "kind": d.kind,
                    "range": d.range,
                    "applies": d.applies,
                    "about": d.about,
                    "run_option": d.run_option,
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    for (i, d) in chosen.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let default = if d.default.is_empty() {
            "unset"
        } else {
            d.default
        };
        let what = if d.run_option {
            "run option"
        } else {
            "parameter"
        };
        writeln!(out, "{} ({what}, {}, default {default})", d.name, d.kind)?;
        let a = aliases(d.name);
        if !a.is_empty() {
            writeln!(out, "  aliases: {}", a.join(", "))?;
        }
        writeln!(out, "  values: {}", d.range)?;
        writeln!(out, "  applies to: {}", d.applies)?;
        writeln!(out, "  {}", d.about)?;
    }
    Ok(())
}
