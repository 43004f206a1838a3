//! Binning a real value: counting a feature's thresholds below it, sixteen at a time.
//!
//! A binary search over 255 thresholds is eight dependent loads and compares, most of
//! them mispredicted, for every value of every row binned (training, evaluation sets,
//! prediction). Here the thresholds are cut into blocks of 16, with the last threshold of
//! each block (its pivot) in one more block of 16: a value's bin is 16 × (pivots below
//! it) + (thresholds below it in the block that follows). Each count is 16 independent
//! compares of fixed length, which the compiler turns into four 4-wide compares, and the
//! count is exactly the binary search's, whatever the values (±0, infinities): the same
//! `t < v` compares on the same floats.
#![allow(unsafe_code)]

/// Thresholds per block (and pivots, so at most `BLOCK * BLOCK` thresholds).
const BLOCK: usize = 16;

/// A numeric feature's thresholds laid out for [`BinSearch::bin`].
#[derive(Debug, Clone)]
pub struct BinSearch {
    /// the last threshold of each block (+inf past the last block)
    pivots: [f32; BLOCK],
    /// the thresholds, `BLOCK` a block, padded with +inf; one more block of +inf when the
    /// last is full
    blocks: Vec<[f32; BLOCK]>,
}

/// How many of `block` (increasing, so those below `v` come first) are below `v`: four
/// 4-wide compares, and the length of the run of ones in their mask (SSE is part of every
/// x86_64; a fixed-length loop elsewhere).
#[inline(always)]
fn below(block: &[f32; BLOCK], v: f32) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_cmplt_ps, _mm_loadu_ps, _mm_movemask_ps, _mm_set1_ps};
        // SAFETY: SSE is enabled on every x86_64 target, and the four loads read the
        // block's 16 f32s, in bounds.
        let bits = unsafe {
            let vv = _mm_set1_ps(v);
            let p = block.as_ptr();
            let mask = |i: usize| _mm_movemask_ps(_mm_cmplt_ps(_mm_loadu_ps(p.add(i)), vv)) as u32;
            mask(0) | (mask(4) << 4) | (mask(8) << 8) | (mask(12) << 12)
        };
        (!bits).trailing_zeros() as usize
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        block.iter().map(|&t| usize::from(t < v)).sum()
    }
}

impl BinSearch {
    /// The layout of `thresholds`; `None` beyond 256 of them, or unless they strictly
    /// increase (a hostile model's cuts: the binary search handles those).
    pub fn new(thresholds: &[f32]) -> Option<Self> {
        if thresholds.len() > BLOCK * BLOCK || !thresholds.windows(2).all(|w| w[0] < w[1]) {
            return None;
        }
        let mut blocks: Vec<[f32; BLOCK]> = thresholds
            .chunks(BLOCK)
            .map(|c| {
                let mut b = [f32::INFINITY; BLOCK];
                b[..c.len()].copy_from_slice(c);
                b
            })
            .collect();
        let mut pivots = [f32::INFINITY; BLOCK];
        for (p, b) in pivots.iter_mut().zip(&blocks) {
            *p = b[BLOCK - 1];
        }
        // every pivot below a value: the value is past the last (full) block
        blocks.push([f32::INFINITY; BLOCK]);
        Some(BinSearch { pivots, blocks })
    }

    /// The bin of `v`: 0 for NaN (missing), else 1 + the number of thresholds below `v`,
    /// as [`crate::data::FeatureCuts::bin_value`] gives it.
    #[inline]
    pub fn bin(&self, v: f32) -> u16 {
        if v.is_nan() {
            return 0;
        }
        let p = below(&self.pivots, v).min(self.blocks.len() - 1);
        (1 + BLOCK * p + below(&self.blocks[p], v)) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::FeatureCuts;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_bin_is_the_binary_searchs(
            mut thresholds in proptest::collection::vec(-1e3f32..1e3, 0..=256),
            values in proptest::collection::vec(prop_oneof![
                -2e3f32..2e3,
                Just(f32::NAN), Just(f32::INFINITY), Just(f32::NEG_INFINITY),
                Just(0.0f32), Just(-0.0f32), Just(f32::MAX), Just(-f32::MIN_POSITIVE),
            ], 1..64),
        ) {
            thresholds.sort_by(f32::total_cmp);
            thresholds.dedup();
            let s = BinSearch::new(&thresholds).unwrap();
            // every threshold itself, and its neighbours, as well as the drawn values
            let probes = values.iter().copied().chain(thresholds.iter().flat_map(|&t| {
                [t, f32::from_bits(t.to_bits() + 1), f32::from_bits(t.to_bits().wrapping_sub(1))]
            }));
            for v in probes {
                prop_assert_eq!(s.bin(v), FeatureCuts::bin_value(&thresholds, v), "value {}", v);
            }
        }
    }

    #[test]
    fn full_blocks_and_the_limit() {
        for k in [0usize, 1, 15, 16, 17, 255, 256] {
            let t: Vec<f32> = (0..k).map(|i| i as f32).collect();
            let s = BinSearch::new(&t).unwrap();
            for i in -1..=(k as i32 + 1) {
                let v = i as f32 + 0.5;
                assert_eq!(
                    s.bin(v),
                    FeatureCuts::bin_value(&t, v),
                    "{k} thresholds, {v}"
                );
                assert_eq!(s.bin(i as f32), FeatureCuts::bin_value(&t, i as f32));
            }
            assert_eq!(s.bin(f32::INFINITY), k as u16 + 1);
        }
        assert!(BinSearch::new(&(0..257).map(|i| i as f32).collect::<Vec<_>>()).is_none());
        // not strictly increasing (a hostile model): left to the binary search
        assert!(BinSearch::new(&[1.0, 1.0]).is_none());
        assert!(BinSearch::new(&[f32::NAN, 1.0]).is_none());
    }
}
