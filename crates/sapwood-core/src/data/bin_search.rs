//! Binning a real value: counting a feature's thresholds below it, sixteen at a time.
//!
//! A binary search over 255 thresholds is eight dependent loads and compares, most of
//! them mispredicted, for every value of every row binned (training, evaluation sets,
//! prediction). Here the thresholds are cut into blocks of 16, with the last threshold of
//! each block (its pivot) in one more block of 16: a value's bin is 16 × (pivots below
//! it) + (thresholds below it in the block that follows). Each count is 16 independent
//! compares of fixed length, which the compiler turns into four 4-wide compares, and the
//! count is exactly the binary search's, whatever the values (±0, infinities): the same
//! `t < v` compares on the same floats. [`BinSearch::bins`] bins 64 values at once in
//! AVX-512 lanes with the same counts (the pivots searched by permutes, the block by
//! gathers).
#![allow(unsafe_code)]

/// Thresholds per block (and pivots, so at most `BLOCK * BLOCK` thresholds).
const BLOCK: usize = 16;

/// A numeric feature's thresholds laid out for [`BinSearch::bin`].
#[derive(Debug, Clone)]
pub struct BinSearch {
    /// the last threshold of each block (+inf past the last block)
    pivots: [f32; BLOCK],
    /// the thresholds, `BLOCK` a block, padded with +inf, and always one more block of
    /// +inf (a value above every pivot of 16 full blocks counts 16 and reads it)
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

/// Values binned at once by [`BinSearch::bins`].
pub const LANES: usize = 64;
/// Values in one AVX-512 register.
const WIDTH: usize = 16;
/// Registers searched side by side: a search's probes wait on each other, four searches
/// do not.
const CHAINS: usize = LANES / WIDTH;

impl BinSearch {
    /// The bins of 64 values, each as [`BinSearch::bin`] gives it: in AVX-512 lanes where
    /// the CPU has them (a fifth of the instructions a value).
    #[inline]
    pub fn bins(&self, v: &[f32; LANES]) -> [u16; LANES] {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::vectors_allowed() && std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512 F (checked above)
            return unsafe { self.bins_avx512(v) };
        }
        v.map(|x| self.bin(x))
    }

    /// [`BinSearch::bins`] in lanes, four registers of 16 searched side by side: each
    /// value's pivot count by a branchless search of the 16 pivots (one register, probed
    /// by permutes: five probes for the 17 possible counts), then its count within that
    /// block by a search of four gathered probes (the block's last threshold, its pivot,
    /// is not below the value, so its count is at most 15). Both searches count the
    /// thresholds `t < v` of an increasing list, as the compares of [`below`] do; NaN is
    /// bin 0.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn bins_avx512(&self, v: &[f32; LANES]) -> [u16; LANES] {
        use std::arch::x86_64::*;
        let mut out = [0u16; LANES];
        // SAFETY: 64 floats of `v`, 16 of the pivots; a gathered index is block * 16 + (at
        // most 14) with block <= blocks.len() - 1, inside the blocks; 64 u16 stored
        unsafe {
            let x: [__m512; CHAINS] =
                std::array::from_fn(|c| _mm512_loadu_ps(v.as_ptr().add(WIDTH * c)));
            let pivots = _mm512_loadu_ps(self.pivots.as_ptr());
            let mut p = [_mm512_setzero_si512(); CHAINS];
            for half in [8, 4, 2, 1, 1] {
                for c in 0..CHAINS {
                    let at = _mm512_add_epi32(p[c], _mm512_set1_epi32(half - 1));
                    let t = _mm512_permutexvar_ps(at, pivots);
                    let below = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(t, x[c]);
                    p[c] = _mm512_mask_add_epi32(p[c], below, p[c], _mm512_set1_epi32(half));
                }
            }
            let last = _mm512_set1_epi32(self.blocks.len() as i32 - 1);
            let first = p.map(|p| _mm512_slli_epi32::<4>(_mm512_min_epu32(p, last)));
            let blocks = self.blocks.as_ptr().cast::<f32>();
            let mut count = [_mm512_setzero_si512(); CHAINS];
            for half in [8, 4, 2, 1] {
                for c in 0..CHAINS {
                    let at = _mm512_add_epi32(first[c], count[c]);
                    let at = _mm512_add_epi32(at, _mm512_set1_epi32(half - 1));
                    let t = _mm512_i32gather_ps::<4>(at, blocks);
                    let below = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(t, x[c]);
                    count[c] =
                        _mm512_mask_add_epi32(count[c], below, count[c], _mm512_set1_epi32(half));
                }
            }
            for c in 0..CHAINS {
                let bin =
                    _mm512_add_epi32(_mm512_add_epi32(first[c], count[c]), _mm512_set1_epi32(1));
                let number = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(x[c], x[c]);
                let bin = _mm512_maskz_mov_epi32(number, bin);
                _mm256_storeu_si256(
                    out.as_mut_ptr().add(WIDTH * c).cast(),
                    _mm512_cvtepi32_epi16(bin),
                );
            }
        }
        out
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
            let probes: Vec<f32> = probes.collect();
            for &v in &probes {
                prop_assert_eq!(s.bin(v), FeatureCuts::bin_value(&thresholds, v), "value {}", v);
            }
            // 64 at a time (the lanes), every probe in every lane
            for start in 0..probes.len() {
                let v: [f32; LANES] = std::array::from_fn(|i| probes[(start + i) % probes.len()]);
                prop_assert_eq!(s.bins(&v), v.map(|x| FeatureCuts::bin_value(&thresholds, x)));
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
            let v: [f32; LANES] = std::array::from_fn(|i| match i {
                0 => f32::NAN,
                1 => f32::INFINITY,
                2 => f32::NEG_INFINITY,
                _ => (i % 16) as f32 * k as f32 / 12.0 - 1.0 + (i / 16) as f32 * 0.5,
            });
            assert_eq!(
                s.bins(&v),
                v.map(|x| FeatureCuts::bin_value(&t, x)),
                "{k} thresholds"
            );
        }
        assert!(BinSearch::new(&(0..257).map(|i| i as f32).collect::<Vec<_>>()).is_none());
        // not strictly increasing (a hostile model): left to the binary search
        assert!(BinSearch::new(&[1.0, 1.0]).is_none());
        assert!(BinSearch::new(&[f32::NAN, 1.0]).is_none());
    }
}
