//! `sapwood inspect`: what a model holds.

use anyhow::Result;
use sapwood::FeatureCuts;
use sapwood::SplitRule;
use sapwood::{Booster, Importance};
use sapwood::{NodeId, Tree};

use crate::cli::InspectArgs;

fn print_tree(tree: &Tree, names: &[String], cuts: &[FeatureCuts], id: NodeId, depth: usize) {
    let node = &tree.nodes[id.index()];
    let pad = "  ".repeat(depth + 1);
    match &node.split {
        None => println!(
            "{pad}leaf {}: {:.6} (cover {:.3})",
            id.0, node.value, node.cover
        ),
        Some(s) => {
            let rule = match (&s.rule, &cuts[s.feature]) {
                (SplitRule::Numeric { bin }, FeatureCuts::Numeric { thresholds }) => {
                    format!(
                        "{} <= {}",
                        names[s.feature],
                        FeatureCuts::split_threshold(thresholds, *bin)
                    )
                }
                (
                    SplitRule::Categorical { left },
                    FeatureCuts::Categorical {
                        levels, level_bins, ..
                    },
                ) => {
                    let lv: Vec<&str> = levels
                        .iter()
                        .zip(level_bins)
                        .filter(|(_, &b)| left.contains(b))
                        .map(|(l, _)| l.as_str())
                        .collect();
                    format!("{} in {{{}}}", names[s.feature], lv.join(", "))
                }
                _ => "?".into(),
            };
            let missing = if s.default_left { "left" } else { "right" };
            println!(
                "{pad}node {}: {rule} (missing {missing}, gain {:.4}, cover {:.3})",
                id.0, s.gain, node.cover
            );
            print_tree(tree, names, cuts, s.left, depth + 1);
            print_tree(tree, names, cuts, s.right, depth + 1);
        }
    }
}

/// Runs `sapwood inspect`.
pub fn run(a: InspectArgs) -> Result<()> {
    let booster = Booster::load(&a.model)?;
    let m = booster.model();
    println!("model: {}", a.model.display());
    println!("objective: {}", m.params.objective);
    if let Some(c) = &m.classes {
        println!(
            "classes: {}",
            c.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(l) = &m.label_name {
        println!("label: {l}");
    }
    println!(
        "rounds: {}  trees: {}  best iteration: {}",
        m.num_rounds(),
        m.trees.len(),
        m.best_iteration.map_or("-".into(), |b| b.to_string())
    );
    let leaves: usize = m.trees.iter().map(|t| t.num_leaves()).sum();
    let depth = m.trees.iter().map(|t| t.depth()).max().unwrap_or(0);
    println!(
        "leaves: {leaves} (mean {:.1} per tree), deepest tree: {depth}",
        leaves as f64 / m.trees.len().max(1) as f64
    );
    println!("base margin: {:?}", m.base_margin);
    let gain = booster.feature_importance(Importance::Gain);
    let split = booster.feature_importance(Importance::Split);
    let cover = booster.feature_importance(Importance::Cover);
    println!("\nfeatures ({}):", m.feature_names.len());
    println!(
        "  {:<28} {:<12} {:>6} {:>14} {:>8} {:>14}",
        "name", "kind", "bins", "gain", "splits", "cover"
    );
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
        println!(
            "  {:<28} {:<12} {:>6} {:>14.3} {:>8} {:>14.3}",
            name,
            kind,
            fc.n_bins(),
            gain.get(name).copied().unwrap_or(0.0),
            split.get(name).copied().unwrap_or(0.0),
            cover.get(name).copied().unwrap_or(0.0)
        );
    }
    println!("\nparameters:");
    let params = serde_json::to_value(&m.params)?;
    if let Some(obj) = params.as_object() {
        for (k, v) in obj {
            println!("  {k} = {v}");
        }
    }
    for (i, tree) in m.trees.iter().take(a.trees).enumerate() {
        println!("\ntree {i} (group {}):", i % m.groups);
        print_tree(tree, &m.feature_names, m.cuts.features(), NodeId::ROOT, 0);
    }
    Ok(())
}
