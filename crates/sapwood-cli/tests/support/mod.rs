//! What the multi-process tests (MPI, TCP) share: the repository, a `train` command line,
//! the check that each rank read only its own rows, and what the summary says was sent.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `sapwood train --quiet` arguments for `data` with `label` and `objective`, writing
/// `model`.
pub fn train_args(
    data: &Path,
    label: &str,
    objective: &str,
    extra: &[&str],
    model: &Path,
) -> Vec<String> {
    let mut v: Vec<String> = [
        "train",
        "--quiet",
        "--label",
        label,
        "--objective",
        objective,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v.push("--data".into());
    v.push(data.display().to_string());
    v.push("--model".into());
    v.push(model.display().to_string());
    v
}

/// Checks each rank's "rank r of n: read N rows (s..e of T, row groups [..])" line: every
/// rank read only its own contiguous rows, in whole row groups, and together all of them
/// (an equal model alone would also pass if `--collective mpi` trained every rank alone).
pub fn check_rows_read(stderr: &str, np: usize, context: &str) {
    let mut shares: Vec<(usize, u64, u64, u64, u64, Vec<usize>)> = stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("rank ")?;
            let (rank, rest) = rest.split_once(" of ")?;
            let (size, rest) = rest.split_once(": read ")?;
            let (n, rest) = rest.split_once(" rows (")?;
            let (range, rest) = rest.split_once(" of ")?;
            let (total, groups) = rest.split_once(", row groups [")?;
            let (start, end) = range.split_once("..")?;
            assert_eq!(size.parse::<usize>().ok()?, np, "{context}: {l}");
            let groups = groups
                .trim_end_matches("])")
                .split(", ")
                .filter(|g| !g.is_empty())
                .map(|g| g.parse().unwrap())
                .collect();
            Some((
                rank.parse().ok()?,
                n.parse().ok()?,
                start.parse().ok()?,
                end.parse().ok()?,
                total.parse().ok()?,
                groups,
            ))
        })
        .collect();
    shares.sort();
    assert_eq!(shares.len(), np, "{context}: one line per rank in {stderr}");
    let (mut next_row, mut next_group) = (0u64, 0usize);
    for (i, (rank, n, start, end, total, groups)) in shares.iter().enumerate() {
        assert_eq!(*rank, i, "{context}");
        if start == end {
            // more ranks than row groups: this one has nothing to read
            assert!(*n == 0 && groups.is_empty(), "{context}: rank {rank}");
            continue;
        }
        assert_eq!(
            (*start, *n),
            (next_row, end - start),
            "{context}: rank {rank}"
        );
        let want: Vec<usize> = (next_group..next_group + groups.len()).collect();
        assert_eq!(groups, &want, "{context}: rank {rank}'s row groups");
        if np > 1 {
            assert!(n < total, "{context}: rank {rank} read all {total} rows");
        }
        (next_row, next_group) = (*end, next_group + groups.len());
    }
    assert_eq!(next_row, shares[0].4, "{context}: every row read once");
}

/// The `communication` section of a run's `--summary` file.
pub fn communication(summary: &Path) -> serde_json::Value {
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(summary).unwrap()).unwrap();
    s["communication"].clone()
}

/// Checks that rank 0 of a job of several ranks sent histogram blocks encoded only as
/// `comm_codec=codec` encodes them (a rank that ignored the setting would send another
/// codec's blocks, and the models would still be equal).
pub fn assert_blocks_sent_with(summary: &Path, codec: &str, context: &str) {
    let c = communication(summary);
    let b = &c["blocks_by_encoding"];
    let count = |k: &str| {
        b[k].as_u64()
            .unwrap_or_else(|| panic!("{context}: no {k} in {b}"))
    };
    let sent: &[&str] = match codec {
        "none" => &["plain"],
        "packed" => &["packed"],
        "sparse" => &["sparse", "bitmap"],
        // groups, or index/value pairs for a block almost all zero
        "auto" => &["groups", "sparse"],
        other => panic!("no such codec {other}"),
    };
    assert!(
        sent.iter().map(|k| count(k)).sum::<u64>() > 0,
        "{context}: no {sent:?} blocks with comm_codec={codec}: {b}"
    );
    for k in ["plain", "packed", "sparse", "bitmap", "groups"] {
        if !sent.contains(&k) {
            assert_eq!(
                count(k),
                0,
                "{context}: {k} blocks with comm_codec={codec}: {b}"
            );
        }
    }
}
