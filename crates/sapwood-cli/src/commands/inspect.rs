//! `sapwood inspect`: what a model holds.

use std::io::Write;

use anyhow::Result;
use sapwood::FeatureCuts;
use sapwood::SplitRule;
use sapwood::{Booster, Importance};
use sapwood::{NodeId, Tree};

use crate::cli::InspectArgs;

/// Indentation stops growing here, so a very deep tree prints in linear, not quadratic, size.
const MAX_INDENT: usize = 32;

/// A split's rule in values: `name <= threshold` or `name in {levels}`.
fn rule_text(s: &sapwood::Split, names: &[String], cuts: &[FeatureCuts]) -> String {
    match (&s.rule, &cuts[s.feature]) {
        (SplitRule::Numeric { bin }, FeatureCuts::Numeric { thresholds }) => format!(
            "{} <= {}",
            names[s.feature],
            FeatureCuts::split_threshold(thresholds, *bin)
        ),
        (SplitRule::Categorical { .. }, FeatureCuts::Categorical { .. }) => format!(
            "{} in {{{}}}",
            names[s.feature],
            left_levels(s, cuts).join(", ")
        ),
        _ => "?".into(),
    }
}

/// The levels a categorical split sends left.
fn left_levels<'a>(s: &sapwood::Split, cuts: &'a [FeatureCuts]) -> Vec<&'a str> {
    match (&s.rule, &cuts[s.feature]) {
        (
            SplitRule::Categorical { left },
            FeatureCuts::Categorical {
                levels, level_bins, ..
            },
        ) => levels
            .iter()
            .zip(level_bins)
            .filter(|(_, &b)| left.contains(b))
            .map(|(l, _)| l.as_str())
            .collect(),
        _ => Vec::new(),
    }
}

/// A tree as JSON: a flat list of nodes (no nesting, so a deep tree never nests deeply).
fn tree_json(
    tree: &Tree,
    index: usize,
    groups: usize,
    names: &[String],
    cuts: &[FeatureCuts],
) -> serde_json::Value {
    let nodes: Vec<serde_json::Value> = tree
        .nodes
        .iter()
        .enumerate()
        .map(|(id, n)| match &n.split {
            None => serde_json::json!({"id": id, "leaf": n.value, "cover": n.cover}),
            Some(s) => {
                let mut v = serde_json::json!({
                    "id": id, "feature": names[s.feature], "left": s.left.0, "right": s.right.0,
                    "missing": if s.default_left { "left" } else { "right" },
                    "gain": s.gain, "cover": n.cover,
                });
                match (&s.rule, &cuts[s.feature]) {
                    (SplitRule::Numeric { bin }, FeatureCuts::Numeric { thresholds }) => {
                        v["threshold"] = FeatureCuts::split_threshold(thresholds, *bin).into();
                    }
                    _ => v["left_levels"] = left_levels(s, cuts).into(),
                }
                v
            }
        })
        .collect();
    serde_json::json!({"tree": index, "group": index % groups.max(1), "nodes": nodes})
}

/// Prints a tree depth-first with an explicit stack: trees may be tens of thousands of
/// levels deep, far beyond what recursion on the thread's stack allows.
fn print_tree(
    out: &mut impl Write,
    tree: &Tree,
    names: &[String],
    cuts: &[FeatureCuts],
) -> std::io::Result<()> {
    let mut stack = vec![(NodeId::ROOT, 0usize)];
    while let Some((id, depth)) = stack.pop() {
        let node = &tree.nodes[id.index()];
        let pad = "  ".repeat(depth.min(MAX_INDENT) + 1);
        let deep = if depth > MAX_INDENT {
            format!("[depth {depth}] ")
        } else {
            String::new()
        };
        match &node.split {
            None => writeln!(
                out,
                "{pad}{deep}leaf {}: {:.6} (cover {:.3})",
                id.0, node.value, node.cover
            )?,
            Some(s) => {
                let rule = rule_text(s, names, cuts);
                let missing = if s.default_left { "left" } else { "right" };
                writeln!(
                    out,
                    "{pad}{deep}node {}: {rule} (missing {missing}, gain {:.4}, cover {:.3})",
                    id.0, s.gain, node.cover
                )?;
                // right first, so the left subtree prints first
                stack.push((s.right, depth + 1));
                stack.push((s.left, depth + 1));
            }
        }
    }
    Ok(())
}

/// Runs `sapwood inspect`.
pub fn run(a: InspectArgs) -> Result<()> {
    let booster = Booster::load(&a.model)?;
    // written, not printed: a closed pipe (`| head`) is an error to stop on, not a panic
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let out = &mut out;
    let m = booster.model();
    let wanted = if a.trees > 0 { a.trees } else { m.trees.len() };
    match a.dump.as_deref() {
        Some("json") => {
            let trees: Vec<serde_json::Value> = m
                .trees
                .iter()
                .take(wanted)
                .enumerate()
                .map(|(i, t)| tree_json(t, i, m.groups, &m.feature_names, m.cuts.features()))
                .collect();
            serde_json::to_writer(&mut *out, &trees)?;
            writeln!(out)?;
            out.flush()?;
            return Ok(());
        }
        Some(_) => {
            for (i, tree) in m.trees.iter().take(wanted).enumerate() {
                writeln!(out, "tree {i} (group {}):", i % m.groups)?;
                print_tree(out, tree, &m.feature_names, m.cuts.features())?;
            }
            out.flush()?;
            return Ok(());
        }
        None => {}
    }
    writeln!(out, "model: {}", a.model.display())?;
    writeln!(out, "objective: {}", m.params.objective)?;
    if let Some(c) = &m.classes {
        writeln!(
            out,
            "classes: {}",
            c.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    if let Some(l) = &m.label_name {
        writeln!(out, "label: {l}")?;
    }
    writeln!(
        out,
        "rounds: {}  trees: {}  best iteration: {}",
        m.num_rounds(),
        m.trees.len(),
        m.best_iteration.map_or("-".into(), |b| b.to_string())
    )?;
    let leaves: usize = m.trees.iter().map(|t| t.num_leaves()).sum();
    let depth = m.trees.iter().map(|t| t.depth()).max().unwrap_or(0);
    writeln!(
        out,
        "leaves: {leaves} (mean {:.1} per tree), deepest tree: {depth}",
        leaves as f64 / m.trees.len().max(1) as f64
    )?;
    writeln!(out, "base margin: {:?}", m.base_margin)?;
    let gain = booster.feature_importance(Importance::TotalGain);
    let split = booster.feature_importance(Importance::Weight);
    let cover = booster.feature_importance(Importance::TotalCover);
    writeln!(out, "\nfeatures ({}):", m.feature_names.len())?;
    writeln!(
        out,
        "  {:<28} {:<12} {:>6} {:>14} {:>8} {:>14}",
        "name", "kind", "bins", "gain", "splits", "cover"
    )?;
    let mut order: Vec<usize> = (0..m.feature_names.len()).collect();
    order.sort_by(|&a, &b| {
        let g = |i: usize| gain.get(&m.feature_names[i]).copied().unwrap_or(0.0);
        g(b).total_cmp(&g(a)).then(a.cmp(&b))
    });
    for i in order {
        let name = &m.feature_names[i];
        let fc = m.cuts.feature(i);
        let kind = if fc.is_categorical() {
            "categorical"
        } else {
            "numeric"
        };
        writeln!(
            out,
            "  {:<28} {:<12} {:>6} {:>14.3} {:>8} {:>14.3}",
            name,
            kind,
            fc.n_bins(),
            gain.get(name).copied().unwrap_or(0.0),
            split.get(name).copied().unwrap_or(0.0),
            cover.get(name).copied().unwrap_or(0.0)
        )?;
    }
    writeln!(out, "\nparameters:")?;
    let params = serde_json::to_value(&m.params)?;
    if let Some(obj) = params.as_object() {
        for (k, v) in obj {
            writeln!(out, "  {k} = {v}")?;
        }
    }
    for (i, tree) in m.trees.iter().take(a.trees).enumerate() {
        writeln!(out, "\ntree {i} (group {}):", i % m.groups)?;
        print_tree(out, tree, &m.feature_names, m.cuts.features())?;
    }
    out.flush()?;
    Ok(())
}
