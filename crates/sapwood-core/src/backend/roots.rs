//! Several groups' root histograms in one pass over the bins.
//!
//! With k groups (classes) a round grows k trees, and each tree's root adds every row's
//! (g, h) to the bin of each feature: k passes over the same bins, each add a
//! read-modify-write of one 16-byte entry. Here a pass adds [`GROUPS_A_PASS`] groups'
//! values at once, as one 64-byte entry a bin: a row's bins are read once for four trees,
//! and each add is one vector read-modify-write instead of four. The sums are integers, so
//! every group's histogram is the one its own pass gives, bit for bit.
#![allow(unsafe_code)]

use std::ops::Range;

use rayon::prelude::*;

use crate::hist::HistBin;
use crate::quantise::quantise_pairs;

/// Groups a pass adds at once: four (g, h) pairs of i64 fill 64 bytes, one AVX-512
/// vector and one cache line.
pub(super) const GROUPS_A_PASS: usize = 4;

/// One bin's sums for a pass's groups, (g, h) of each in group order, on a cache line of
/// its own (an entry across two lines costs two reads and two writes).
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct Lanes([i64; 2 * GROUPS_A_PASS]);

/// Entries a feature takes in a pass's histogram: one for each value of a u8 bin, so
/// feature f's bin b is entry `f * BINS + b` whatever the features' widths.
const BINS: usize = 256;

/// Most features one task's histogram holds: 32 × 256 entries of 64 bytes are 512 KiB,
/// within a Zen 4 core's 1 MiB L2.
const FEATURES_A_TASK: usize = 32;

/// Most features a shard may have for its roots to be built here: a pass over a wide
/// shard's bins holds 16 KiB of entries a feature (its histograms are built a range of
/// features at a time, one a thread), where most of a wide shard's features are narrow.
const MAX_FEATURES: usize = 256;

/// Whether the roots of a shard of `nf` features are built here.
pub(super) fn fits(nf: usize) -> bool {
    nf <= MAX_FEATURES
}

/// Rows quantised at a time: their values (16 KiB) stay in L1 while they are added.
const BLOCK: usize = 256;

/// Fewest rows a task takes: with fewer, zeroing and summing the task's histogram costs
/// more than adding its rows.
const MIN_TASK_ROWS: usize = 16_384;

/// The root histograms (every one of the `n` rows of `bins`, `nf` u8 bins a row) of the
/// groups whose gradients are `grads` (n a group), each quantised by its `factors` as
/// [`quantise_pairs`] quantises them: `out[i]` receives group i's, feature f's bin b at
/// `offsets[f] + b` (every entry is overwritten). A bin past its feature's width is not
/// counted (the backend checked every bin when it was built).
///
/// # Panics
/// When `grads`, `factors` and `out` differ in length, a group's gradients are not `n`
/// long, `bins` is not `n * nf` long or a histogram is not `offsets[nf]` long.
pub(super) fn build_roots(
    bins: &[u8],
    offsets: &[u32],
    grads: &[&[[f32; 2]]],
    factors: &[[f64; 2]],
    out: &mut [Vec<HistBin>],
) {
    assert!(grads.len() == factors.len() && grads.len() == out.len());
    let nf = offsets.len() - 1;
    let width = offsets[nf] as usize;
    let n = grads.first().map_or(0, |g| g.len());
    assert!(grads.iter().all(|g| g.len() == n), "n gradients a group");
    assert!(bins.len() >= n * nf, "nf bins a row");
    assert!(
        out.iter().all(|h| h.len() == width),
        "histograms of every bin"
    );
    for h in out.iter_mut() {
        h.fill([0; 2]);
    }
    let features: Vec<Range<usize>> = (0..nf)
        .step_by(FEATURES_A_TASK)
        .map(|s| s..(s + FEATURES_A_TASK).min(nf))
        .collect();
    let parts = (n / MIN_TASK_ROWS).clamp(1, rayon::current_num_threads());
    let row_parts: Vec<Range<usize>> = (0..parts)
        .map(|p| n * p / parts..n * (p + 1) / parts)
        .collect();
    for ((grads, factors), out) in grads
        .chunks(GROUPS_A_PASS)
        .zip(factors.chunks(GROUPS_A_PASS))
        .zip(out.chunks_mut(GROUPS_A_PASS))
    {
        // a feature range at a time: only its parts' histograms are held at once
        for feats in &features {
            let sums: Vec<Vec<Lanes>> = row_parts
                .par_iter()
                .map(|rows| {
                    let mut hist = vec![Lanes::default(); feats.len() * BINS];
                    add_rows(
                        bins,
                        nf,
                        feats.clone(),
                        rows.clone(),
                        grads,
                        factors,
                        &mut hist,
                    );
                    hist
                })
                .collect();
            for hist in &sums {
                for (f, entries) in feats.clone().zip(hist.chunks_exact(BINS)) {
                    let at = offsets[f] as usize..offsets[f + 1] as usize;
                    for (j, h) in out.iter_mut().enumerate() {
                        for (o, e) in h[at.clone()].iter_mut().zip(entries) {
                            o[0] += e.0[2 * j];
                            o[1] += e.0[2 * j + 1];
                        }
                    }
                }
            }
        }
    }
}

/// Adds the quantised (g, h) of `grads` (at most [`GROUPS_A_PASS`] groups) for rows `rows`
/// to the entries of features `feats` in `hist` (the first of them at entry 0), in the
/// widest vectors the CPU and [`crate::simd`] allow.
fn add_rows(
    bins: &[u8],
    nf: usize,
    feats: Range<usize>,
    rows: Range<usize>,
    grads: &[&[[f32; 2]]],
    factors: &[[f64; 2]],
    hist: &mut [Lanes],
) {
    check_task(bins, nf, &feats, &rows, grads, hist);
    #[cfg(target_arch = "x86_64")]
    {
        if crate::simd::avx512_allowed() && std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512 F; the task was checked above
            return unsafe { add_rows_avx512(bins, nf, feats, rows, grads, factors, hist) };
        }
        if crate::simd::avx2() {
            // SAFETY: the CPU has AVX2; the task was checked above
            return unsafe { add_rows_avx2(bins, nf, feats, rows, grads, factors, hist) };
        }
    }
    // SAFETY: the task was checked above
    unsafe { add_rows_by(bins, nf, feats, rows, grads, factors, hist) }
}

/// Panics unless rows `rows` and features `feats` lie within `bins` (rows of `nf`) and
/// every group's gradients, and `hist` holds the entries of `feats`.
fn check_task(
    bins: &[u8],
    nf: usize,
    feats: &Range<usize>,
    rows: &Range<usize>,
    grads: &[&[[f32; 2]]],
    hist: &[Lanes],
) {
    assert!(grads.len() <= GROUPS_A_PASS, "at most a pass's groups");
    assert!(
        feats.start <= feats.end && feats.end <= nf,
        "features within a row"
    );
    assert!(rows.start <= rows.end && rows.end <= bins.len() / nf.max(1));
    assert!(
        grads.iter().all(|g| rows.end <= g.len()),
        "rows within the gradients"
    );
    assert_eq!(
        hist.len(),
        feats.len() * BINS,
        "a histogram of the features"
    );
}

/// [`add_rows_by`] compiled for AVX-512 F (a bin's add is one 512-bit read-modify-write).
///
/// # Safety
/// The CPU has AVX-512 F; the task passes [`check_task`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn add_rows_avx512(
    bins: &[u8],
    nf: usize,
    feats: Range<usize>,
    rows: Range<usize>,
    grads: &[&[[f32; 2]]],
    factors: &[[f64; 2]],
    hist: &mut [Lanes],
) {
    // SAFETY: forwarded from this function's contract
    unsafe { add_rows_by(bins, nf, feats, rows, grads, factors, hist) }
}

/// [`add_rows_by`] compiled for AVX2 (two 256-bit read-modify-writes a bin).
///
/// # Safety
/// The CPU has AVX2; the task passes [`check_task`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn add_rows_avx2(
    bins: &[u8],
    nf: usize,
    feats: Range<usize>,
    rows: Range<usize>,
    grads: &[&[[f32; 2]]],
    factors: &[[f64; 2]],
    hist: &mut [Lanes],
) {
    // SAFETY: forwarded from this function's contract
    unsafe { add_rows_by(bins, nf, feats, rows, grads, factors, hist) }
}

/// The pass itself: a block of rows is quantised group by group, laid out as one
/// [`Lanes`] a row (groups past `grads` stay 0), then each row's lanes are added to the
/// entry of each of its bins.
///
/// # Safety
/// The task passes [`check_task`].
#[inline(always)]
unsafe fn add_rows_by(
    bins: &[u8],
    nf: usize,
    feats: Range<usize>,
    rows: Range<usize>,
    grads: &[&[[f32; 2]]],
    factors: &[[f64; 2]],
    hist: &mut [Lanes],
) {
    let mut quantised = [[0i64; 2]; BLOCK];
    let mut lanes = [Lanes::default(); BLOCK];
    let h = hist.as_mut_ptr();
    let mut start = rows.start;
    while start < rows.end {
        let end = (start + BLOCK).min(rows.end);
        let len = end - start;
        for (j, (g, &f)) in grads.iter().zip(factors).enumerate() {
            quantise_pairs(&g[start..end], f, &mut quantised[..len]);
            for (l, q) in lanes.iter_mut().zip(&quantised[..len]) {
                l.0[2 * j] = q[0];
                l.0[2 * j + 1] = q[1];
            }
        }
        for (i, v) in lanes[..len].iter().enumerate() {
            let at = (start + i) * nf;
            // SAFETY: row start + i < rows.end and feats lie within a row of `bins`
            let row = unsafe { bins.get_unchecked(at + feats.start..at + feats.end) };
            for (k, &b) in row.iter().enumerate() {
                // SAFETY: feature k of the task owns entries k * BINS.. of `hist`, and
                // b < BINS
                let e = unsafe { &mut *h.add(k * BINS + b as usize) };
                for (s, &x) in e.0.iter_mut().zip(&v.0) {
                    *s += x;
                }
            }
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantise::quantise_by;
    use crate::test_rng::lcg;

    /// Each group's histogram, one row and one feature at a time.
    fn brute(
        bins: &[u8],
        offsets: &[u32],
        grads: &[&[[f32; 2]]],
        factors: &[[f64; 2]],
    ) -> Vec<Vec<HistBin>> {
        let nf = offsets.len() - 1;
        grads
            .iter()
            .zip(factors)
            .map(|(g, &[gf, hf])| {
                let mut h = vec![[0i64; 2]; offsets[nf] as usize];
                for (r, &[gv, hv]) in g.iter().enumerate() {
                    for f in 0..nf {
                        let e = &mut h[offsets[f] as usize + bins[r * nf + f] as usize];
                        e[0] += quantise_by(gv, gf);
                        e[1] += quantise_by(hv, hf);
                    }
                }
                h
            })
            .collect()
    }

    /// Random bins within `widths`, and `k` groups of gradients with large and small
    /// values of either sign.
    fn case(
        n: usize,
        widths: &[u32],
        k: usize,
        seed: u64,
    ) -> (Vec<u8>, Vec<u32>, Vec<Vec<[f32; 2]>>) {
        let mut state = lcg(seed);
        let mut next = move || state() >> 33;
        let offsets = sapwood_testkit::data::offsets_of(widths);
        let bins = (0..n * widths.len())
            .map(|i| (next() % widths[i % widths.len()] as u64) as u8)
            .collect();
        let grads = (0..k)
            .map(|_| {
                (0..n)
                    .map(|_| {
                        let g = (next() % 2_000_001) as f32 / 1e3 - 1e3;
                        let h = (next() % 1_000_000) as f32 / 1e4;
                        [g, h]
                    })
                    .collect()
            })
            .collect();
        (bins, offsets, grads)
    }

    #[test]
    fn every_group_gets_its_own_root_histogram() {
        // partial last passes (1..=9 groups), rows across blocks and tasks, features across
        // tasks, features of one bin and of 256
        for (n, nf, k) in [
            (0, 3, 2),
            (1, 1, 1),
            (700, 5, 3),
            (40_000, 40, 9),
            (3_000, 33, 4),
        ] {
            let widths: Vec<u32> = (0..nf).map(|f| [1, 2, 17, 255, 256][f % 5]).collect();
            let (bins, offsets, grads) = case(n, &widths, k, (n * 31 + k) as u64);
            let grads: Vec<&[[f32; 2]]> = grads.iter().map(|g| g.as_slice()).collect();
            let factors: Vec<[f64; 2]> = (0..k)
                .map(|j| [2f64.powi(20 + j as i32), 2f64.powi(30 - j as i32)])
                .collect();
            let want = brute(&bins, &offsets, &grads, &factors);
            let width = offsets[nf] as usize;
            // garbage in the outputs must be overwritten
            // four threads: 40,000 rows go in two parts whatever the machine's cores
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(4)
                .build()
                .unwrap();
            let mut got = vec![vec![[7i64, -7]; width]; k];
            pool.install(|| build_roots(&bins, &offsets, &grads, &factors, &mut got));
            assert!(got == want, "{n} rows, {nf} features, {k} groups");
        }
    }

    #[test]
    fn every_vector_path_adds_alike() {
        let widths = [256u32, 3, 100, 256, 1, 64];
        let (n, nf) = (1_000, widths.len());
        let (bins, _, grads) = case(n, &widths, 3, 5);
        let grads: Vec<&[[f32; 2]]> = grads.iter().map(|g| g.as_slice()).collect();
        let factors = [[2f64.powi(24), 2f64.powi(28)]; 3];
        let run = |path: &dyn Fn(&mut [Lanes])| {
            let mut hist = vec![Lanes::default(); (nf - 1) * BINS];
            path(&mut hist);
            hist.iter().map(|l| l.0).collect::<Vec<_>>()
        };
        let (feats, rows) = (1..nf, 10..n - 3);
        // SAFETY: the task is within the data (check_task passes)
        let portable = run(&|h| unsafe {
            add_rows_by(&bins, nf, feats.clone(), rows.clone(), &grads, &factors, h)
        });
        assert!(portable.iter().any(|l| l[4] != 0) && portable.iter().all(|l| l[6..] == [0, 0]));
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2
                let avx2 = run(&|h| unsafe {
                    add_rows_avx2(&bins, nf, feats.clone(), rows.clone(), &grads, &factors, h)
                });
                assert!(avx2 == portable, "AVX2");
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512 F
                let avx512 = run(&|h| unsafe {
                    add_rows_avx512(&bins, nf, feats.clone(), rows.clone(), &grads, &factors, h)
                });
                assert!(avx512 == portable, "AVX-512");
            }
        }
    }
}
