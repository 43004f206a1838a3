//! Binning a real value: counting a feature's thresholds below it, sixteen at a time.
//!
//! A binary search over 255 thresholds is eight dependent loads and compares, most of
//! them mispredicted, for every value of every row binned (training, evaluation sets,
//! prediction). Here the thresholds are cut into blocks of 16, with the last threshold of
//! each block (its pivot) in one more block of 16: a value's bin is 16 × (pivots below
//! it) + (thresholds below it in the block that follows). Each count is 16 independent
//! compares of fixed length, which the compiler turns into four 4-wide compares, and the
//! count is exactly the binary search's, whatever the values (±0, infinities): the same
//! `t < v` compares on the same floats. Past 256 thresholds (`max_bin` above 256) they are
//! cut into parts of 256 first, with each part's last threshold in one more block of 16,
//! and a value's bin is 256 × (parts below it) + its count in the part that follows.
//! [`BinSearch::bins`] bins 64 values at once: in AVX-512 lanes with the same counts (the
//! part and the pivots searched by permutes or gathers, the block by gathers), else a
//! level at a time over the 64 (every value's part, then every value's pivot count, then
//! every count in a block), with 8-wide compares where the CPU has AVX2.
#![allow(unsafe_code)]

/// Thresholds per block (and pivots a part, and parts, so at most `BLOCK^3` thresholds).
const BLOCK: usize = 16;
/// Thresholds per part.
const PART: usize = BLOCK * BLOCK;
/// Blocks a part holds: 16 of thresholds and one of +inf (a value above every pivot of
/// 16 full blocks counts 16 and reads it).
const PART_BLOCKS: usize = BLOCK + 1;

/// A numeric feature's thresholds laid out for [`BinSearch::bin`].
#[derive(Debug, Clone)]
pub struct BinSearch {
    /// the last threshold of each part (+inf past the last part)
    tops: [f32; BLOCK],
    /// per part, the last threshold of each of its blocks (+inf past its last block)
    pivots: Vec<[f32; BLOCK]>,
    /// the thresholds, `BLOCK` a block, padded with +inf, [`PART_BLOCKS`] blocks a part
    blocks: Vec<[f32; BLOCK]>,
}

/// How many of `block` (increasing, so those below `v` come first) are below `v` (0 for a
/// NaN): four 4-wide compares packed into one 16-bit mask, and the length of its run of
/// ones (SSE2 is part of every x86_64; a fixed-length loop elsewhere).
#[inline(always)]
fn below(block: &[f32; BLOCK], v: f32) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            _mm_castps_si128, _mm_cmplt_ps, _mm_loadu_ps, _mm_movemask_epi8, _mm_packs_epi16,
            _mm_packs_epi32, _mm_set1_ps,
        };
        // SAFETY: SSE2 is enabled on every x86_64 target, and the four loads read the
        // block's 16 f32s, in bounds.
        let bits = unsafe {
            let vv = _mm_set1_ps(v);
            let p = block.as_ptr();
            let lt = |i: usize| _mm_castps_si128(_mm_cmplt_ps(_mm_loadu_ps(p.add(i)), vv));
            // each compare's lanes are 0 or -1, which the saturating packs keep
            let low = _mm_packs_epi32(lt(0), lt(4));
            let high = _mm_packs_epi32(lt(8), lt(12));
            _mm_movemask_epi8(_mm_packs_epi16(low, high)) as u32
        };
        (!bits).trailing_zeros() as usize
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        block.iter().map(|&t| usize::from(t < v)).sum()
    }
}

/// How many of the first 4 of `tops` are below `v` (at most 4 parts: 1,024 thresholds; 0
/// for a NaN): one compare.
#[inline(always)]
fn below4(tops: &[f32; BLOCK], v: f32) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_cmplt_ps, _mm_loadu_ps, _mm_movemask_ps, _mm_set1_ps};
        // SAFETY: SSE is enabled on every x86_64 target, and the load reads 4 of 16 f32s
        let bits =
            unsafe { _mm_movemask_ps(_mm_cmplt_ps(_mm_loadu_ps(tops.as_ptr()), _mm_set1_ps(v))) };
        (!(bits as u32)).trailing_zeros() as usize
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        tops[..4].iter().map(|&t| usize::from(t < v)).sum()
    }
}

/// [`below`] in two 8-wide AVX compares: the same `t < v` on the same floats (a NaN `v`
/// counts 0 in both), half the instructions, and the count as the ones of the two masks (the
/// block increases, so they are the run below `v`): two `popcnt`s where a 16-bit mask took
/// the compiler five packs and shuffles.
///
/// # Safety
/// The CPU must have AVX and POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,popcnt")]
#[inline]
unsafe fn below_avx(block: &[f32; BLOCK], v: f32) -> usize {
    // SAFETY: the two loads read the block's 16 f32s, in bounds; AVX and POPCNT by the
    // contract
    unsafe {
        let p = block.as_ptr();
        (below_avx8(p, v) + below_avx8(p.add(8), v)) as usize
    }
}

/// How many of the 8 increasing floats at `p` are below `v`: one 8-wide compare (a NaN
/// `v` counts 0, as no `t < NaN` holds).
///
/// # Safety
/// The CPU must have AVX and POPCNT, and `p` must point to 8 floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,popcnt")]
#[inline]
unsafe fn below_avx8(p: *const f32, v: f32) -> u32 {
    use std::arch::x86_64::_CMP_LT_OQ;
    use std::arch::x86_64::{_mm256_cmp_ps, _mm256_loadu_ps, _mm256_movemask_ps, _mm256_set1_ps};
    // SAFETY: by the function's contract
    unsafe {
        let lt = _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_loadu_ps(p), _mm256_set1_ps(v));
        (_mm256_movemask_ps(lt) as u32).count_ones()
    }
}

impl BinSearch {
    /// The layout of `thresholds`; `None` beyond 4,096 of them, or unless they strictly
    /// increase (a hostile model's cuts: the binary search handles those).
    pub fn new(thresholds: &[f32]) -> Option<Self> {
        if thresholds.len() > BLOCK * PART || !thresholds.windows(2).all(|w| w[0] < w[1]) {
            return None;
        }
        let mut tops = [f32::INFINITY; BLOCK];
        let mut pivots = Vec::new();
        let mut blocks = Vec::new();
        // no thresholds: one part of +inf blocks, every value counts 0
        let parts: Vec<&[f32]> = match thresholds.len() {
            0 => vec![&[]],
            _ => thresholds.chunks(PART).collect(),
        };
        for (top, part) in tops.iter_mut().zip(&parts) {
            *top = part.last().copied().unwrap_or(f32::INFINITY);
            let mut p = [f32::INFINITY; BLOCK];
            let start = blocks.len();
            blocks.resize(start + PART_BLOCKS, [f32::INFINITY; BLOCK]);
            for ((pivot, block), c) in p
                .iter_mut()
                .zip(&mut blocks[start..])
                .zip(part.chunks(BLOCK))
            {
                block[..c.len()].copy_from_slice(c);
                *pivot = block[BLOCK - 1];
            }
            pivots.push(p);
        }
        Some(BinSearch {
            tops,
            pivots,
            blocks,
        })
    }

    /// The bin of `v`: 0 for NaN (missing), else 1 + the number of thresholds below `v`,
    /// as [`crate::data::FeatureCuts::bin_value`] gives it.
    #[inline]
    pub fn bin(&self, v: f32) -> u16 {
        self.bin_by(v, below)
    }

    /// [`BinSearch::bin`] counting each block's thresholds below `v` by `below`: the part
    /// it ends in (the parts wholly below it, or the last), the pivots below it in that
    /// part, the thresholds below it in the block after them.
    #[inline(always)]
    fn bin_by(&self, v: f32, below: impl Fn(&[f32; BLOCK], f32) -> usize) -> u16 {
        if v.is_nan() {
            return 0;
        }
        let s = if self.pivots.len() == 1 {
            0
        } else {
            below(&self.tops, v).min(self.pivots.len() - 1)
        };
        let p = below(&self.pivots[s], v);
        (1 + PART * s + BLOCK * p + below(&self.blocks[PART_BLOCKS * s + p], v)) as u16
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
    /// the CPU has them (a fifth of the instructions a value), else a level at a time with
    /// AVX2's or SSE2's compares.
    #[inline]
    pub fn bins(&self, v: &[f32; LANES]) -> [u16; LANES] {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx512_allowed() && std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512 F (checked above)
            return unsafe { self.bins_avx512(v) };
        }
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx2() {
            // SAFETY: the CPU has AVX2, and with it AVX, and POPCNT (`avx2` checks both)
            return unsafe { self.bins_avx(v) };
        }
        self.bins_portable(v)
    }

    /// [`BinSearch::bins`] with [`below`]'s compares (SSE2's, 4 wide, on every x86_64), the
    /// parts' last thresholds in one compare ([`below4`]) where there are at most 4 parts.
    fn bins_portable(&self, v: &[f32; LANES]) -> [u16; LANES] {
        if self.pivots.len() <= 4 {
            self.bins_by(v, below4, below)
        } else {
            self.bins_by(v, below, below)
        }
    }

    /// [`BinSearch::bins`] with 8-wide compares ([`below_avx`]), the parts' last thresholds
    /// in one where there are at most 8 parts: for CPUs with AVX2 but not AVX-512 (the
    /// search in lanes needs AVX-512's permutes and masks; AVX2's gathers are slow on many
    /// of those CPUs).
    ///
    /// # Safety
    /// The CPU must have AVX and POPCNT.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx,popcnt")]
    unsafe fn bins_avx(&self, v: &[f32; LANES]) -> [u16; LANES] {
        // at most 8 parts (2,048 thresholds): their last thresholds in one compare
        let top8 = |_: &[f32; BLOCK], x: f32| {
            // SAFETY: `tops` holds 16 floats; AVX and POPCNT by the function's contract
            unsafe { below_avx8(self.tops.as_ptr(), x) as usize }
        };
        // SAFETY: AVX and POPCNT by the function's contract
        let below = |b: &[f32; BLOCK], x: f32| unsafe { below_avx(b, x) };
        if self.pivots.len() <= BLOCK / 2 {
            self.bins_by(v, top8, below)
        } else {
            self.bins_by(v, below, below)
        }
    }

    /// The bins of 64 values, each as [`BinSearch::bin_by`] counts it, a level at a time:
    /// every value's part, then every value's pivots below it, then every value's count
    /// in its block. A value's three counts wait on each other (a compare, a mask, then a
    /// load at the index it gives), so one value at a time kept few in flight; a level's
    /// 64 counts are independent and overlap (with AVX2 and 1,023 thresholds, half the time).
    /// `tops` counts a value's parts below it (given [`BinSearch::tops`]), `below` a
    /// block's thresholds below it.
    #[inline(always)]
    fn bins_by(
        &self,
        v: &[f32; LANES],
        tops: impl Fn(&[f32; BLOCK], f32) -> usize,
        below: impl Fn(&[f32; BLOCK], f32) -> usize,
    ) -> [u16; LANES] {
        let parts = self.pivots.len();
        // each value's part
        let mut part = [0usize; LANES];
        if parts > 1 {
            for (s, &x) in part.iter_mut().zip(v) {
                *s = tops(&self.tops, x).min(parts - 1);
            }
        }
        // each value's block among `blocks`, and the bin before that block's thresholds
        let mut block = [0usize; LANES];
        let mut before = [0u16; LANES];
        for (((b, f), &s), &x) in block.iter_mut().zip(&mut before).zip(&part).zip(v) {
            let p = below(&self.pivots[s], x);
            *b = PART_BLOCKS * s + p;
            *f = (1 + PART * s + BLOCK * p) as u16;
        }
        // a NaN is below no threshold (every count 0, a valid index) and is bin 0
        let mut out = [0u16; LANES];
        for (((o, &b), &f), &x) in out.iter_mut().zip(&block).zip(&before).zip(v) {
            let bin = f + below(&self.blocks[b], x) as u16;
            *o = if x.is_nan() { 0 } else { bin };
        }
        out
    }

    /// [`BinSearch::bins`] in lanes, four registers of 16 searched side by side: each
    /// value's part by a branchless search of the parts' last thresholds (one register,
    /// probed by permutes: five probes for the 17 possible counts, kept below the parts),
    /// its pivot count in that part likewise (by permutes where there is one part, else by
    /// gathers), then its count within that block by a search of four gathered probes (the
    /// block's last threshold, its pivot, is not below the value, so its count is at most
    /// 15). Each search counts the thresholds `t < v` of an increasing list, as the
    /// compares of [`below`] do; NaN is bin 0.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn bins_avx512(&self, v: &[f32; LANES]) -> [u16; LANES] {
        use std::arch::x86_64::*;
        let mut out = [0u16; LANES];
        let parts = self.pivots.len();
        // a branchless search of 16 increasing values: the count of those below each lane
        // of `x`, `probe(at)` reading the value at index `at` (plus `base`) of each lane
        let search =
            |x: &[__m512; CHAINS], base: &[__m512i; CHAINS], probe: &dyn Fn(__m512i) -> __m512| {
                let mut p = [_mm512_setzero_si512(); CHAINS];
                for half in [8, 4, 2, 1, 1] {
                    for c in 0..CHAINS {
                        let at = _mm512_add_epi32(
                            _mm512_add_epi32(base[c], p[c]),
                            _mm512_set1_epi32(half - 1),
                        );
                        let below = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(probe(at), x[c]);
                        p[c] = _mm512_mask_add_epi32(p[c], below, p[c], _mm512_set1_epi32(half));
                    }
                }
                p
            };
        // SAFETY: 64 floats of `v`, 16 of the tops and of one part's pivots; a part is
        // below `parts`, a pivot count at most 16 (an index within the part's 17 blocks), a
        // gathered block index (part * 17 + count) * 16 + (at most 14) is inside the
        // blocks; 64 u16 stored
        unsafe {
            let x: [__m512; CHAINS] =
                std::array::from_fn(|c| _mm512_loadu_ps(v.as_ptr().add(WIDTH * c)));
            let zero = [_mm512_setzero_si512(); CHAINS];
            let s = if parts == 1 {
                zero
            } else {
                let tops = _mm512_loadu_ps(self.tops.as_ptr());
                let last = _mm512_set1_epi32(parts as i32 - 1);
                search(&x, &zero, &|at| _mm512_permutexvar_ps(at, tops))
                    .map(|s| _mm512_min_epu32(s, last))
            };
            let p = if parts == 1 {
                let pivots = _mm512_loadu_ps(self.pivots[0].as_ptr());
                search(&x, &zero, &|at| _mm512_permutexvar_ps(at, pivots))
            } else {
                let pivots = self.pivots.as_ptr().cast::<f32>();
                let base = s.map(|s| _mm512_slli_epi32::<4>(s));
                search(&x, &base, &|at| _mm512_i32gather_ps::<4>(at, pivots))
            };
            // where each lane's block starts among the thresholds, and its bin before it
            let first: [__m512i; CHAINS] = std::array::from_fn(|c| {
                let block = _mm512_add_epi32(
                    _mm512_mullo_epi32(s[c], _mm512_set1_epi32(PART_BLOCKS as i32)),
                    p[c],
                );
                _mm512_slli_epi32::<4>(block)
            });
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
                // 1 + 256 s + 16 p + count
                let before =
                    _mm512_add_epi32(_mm512_slli_epi32::<8>(s[c]), _mm512_slli_epi32::<4>(p[c]));
                let bin =
                    _mm512_add_epi32(_mm512_add_epi32(before, count[c]), _mm512_set1_epi32(1));
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
            mut thresholds in prop_oneof![
                proptest::collection::vec(-1e3f32..1e3, 0..=256),
                proptest::collection::vec(-1e3f32..1e3, 257..=1100),
            ],
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
                let expected = v.map(|x| FeatureCuts::bin_value(&thresholds, x));
                prop_assert_eq!(s.bins(&v), expected);
                prop_assert_eq!(s.bins_portable(&v), expected);
                // the AVX path too, where the CPU has it (`bins` takes the AVX-512 one)
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx")
                    && std::arch::is_x86_feature_detected!("popcnt")
                {
                    // SAFETY: the CPU has AVX and POPCNT
                    prop_assert_eq!(unsafe { s.bins_avx(&v) }, expected);
                }
            }
        }
    }

    /// `bins` and, where the CPU has AVX, the AVX path give `bin_value`'s bins of `v`.
    fn lanes_bin_as_the_reference(s: &BinSearch, t: &[f32], v: &[f32; LANES], what: &str) {
        let want = v.map(|x| FeatureCuts::bin_value(t, x));
        assert_eq!(s.bins(v), want, "{what}");
        assert_eq!(s.bins_portable(v), want, "{what}, SSE");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // SAFETY: the CPU has AVX and POPCNT
            assert_eq!(unsafe { s.bins_avx(v) }, want, "{what}, AVX");
        }
    }

    #[test]
    fn full_blocks_and_the_limit() {
        // every switch of the searches: one part, at most 4 (one SSE2 compare of the parts'
        // last thresholds), at most 8 (one AVX compare), and more, with and without the
        // +inf past the last part
        for k in [
            0usize, 1, 15, 16, 17, 255, 256, 257, 511, 512, 1000, 1024, 1025, 1280, 1793, 2047,
            2048, 2049, 3000, 3840, 4095, 4096,
        ] {
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
            // a threshold itself (the last, the middle one) and a value above them all too
            let v: [f32; LANES] = std::array::from_fn(|i| match i {
                0 => f32::NAN,
                1 => f32::INFINITY,
                2 => f32::NEG_INFINITY,
                3 => k as f32 - 1.0,
                4 => k as f32,
                5 => (k / 2) as f32,
                _ => (i % 16) as f32 * k as f32 / 12.0 - 1.0 + (i / 16) as f32 * 0.5,
            });
            lanes_bin_as_the_reference(&s, &t, &v, &format!("{k} thresholds"));
        }
        assert!(BinSearch::new(&(0..4097).map(|i| i as f32).collect::<Vec<_>>()).is_none());
        // +inf as a part's last threshold, -inf first, and the zeros' boundary: -0 is not
        // below +0 nor +0 below -0
        for k in [3usize, 256, 300, 512] {
            let mut t: Vec<f32> = (0..k).map(|i| i as f32 - (k / 2) as f32).collect();
            t[0] = f32::NEG_INFINITY;
            t[k - 1] = f32::INFINITY;
            let s = BinSearch::new(&t).unwrap();
            let probes = [
                f32::NEG_INFINITY,
                f32::INFINITY,
                -0.0,
                0.0,
                f32::MIN_POSITIVE,
                -f32::MIN_POSITIVE,
                f32::MAX,
                f32::MIN,
                f32::NAN,
            ];
            for v in probes {
                assert_eq!(
                    s.bin(v),
                    FeatureCuts::bin_value(&t, v),
                    "{k} thresholds, {v}"
                );
            }
            let v: [f32; LANES] = std::array::from_fn(|i| probes[i % probes.len()]);
            lanes_bin_as_the_reference(&s, &t, &v, &format!("{k} thresholds"));
        }
        // the lanes were taken where the CPU has them (scripts/test.sh sets it where
        // /proc/cpuinfo lists AVX-512)
        #[cfg(target_arch = "x86_64")]
        if std::env::var_os("SAPWOOD_REQUIRE_AVX512").is_some() {
            assert!(
                crate::simd::avx512_allowed() && std::arch::is_x86_feature_detected!("avx512f"),
                "SAPWOOD_REQUIRE_AVX512 is set but the lanes search is unavailable"
            );
        }
        // not strictly increasing (a hostile model): left to the binary search
        assert!(BinSearch::new(&[1.0, 1.0]).is_none());
        assert!(BinSearch::new(&[f32::NAN, 1.0]).is_none());
    }
}
