//! Counter-based hashing: reproducible randomness keyed on (seed, stream, round, index).
//!
//! Every random choice in training (row sampling for cuts, bagging, stochastic rounding, column
//! sampling) is a pure function of these keys, never a stateful generator, so it is identical
//! however rows are sharded and on whichever backend evaluates it. Only 32-bit integer
//! operations are used, so the WGSL and CUDA kernels compute the same bits.

/// A 32-bit avalanche mixer (Wellons' "lowbias32" constants).
#[inline]
pub const fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// Which random decision a hash is drawn for; keeps the streams independent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Stream {
    /// Rows sampled to compute quantile cuts.
    CutSample = 0x0c75_a3e1,
    /// Rows sampled for one round (`subsample`).
    RowSample = 0x5ab5_1e00,
    /// Stochastic rounding noise for quantised gradients.
    GradNoise = 0x6e01_5e9a,
    /// Stochastic rounding noise for quantised hessians.
    HessNoise = 0x6e01_5e4e,
    /// Columns sampled for one tree (`colsample_bytree`).
    ColSample = 0xc015_a3e1,
    /// Partners drawn for each document by the `mean` ranking pair method.
    RankPairs = 0x9a13_5e7d,
    /// Columns sampled for one depth level of a tree (`colsample_bylevel`).
    ColSampleLevel = 0xc015_1e7e,
    /// Columns sampled for one node (`colsample_bynode`).
    ColSampleNode = 0xc015_0de0,
    /// The random threshold of a feature at a node (`extra_trees`).
    ExtraTrees = 0xe7a7_7ee5,
}

/// The per-(seed, stream, round) prefix of a hash: computed once per tree, then each row's
/// hash costs two mixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashKey(pub u32);

impl HashKey {
    /// The key of (seed, stream, round).
    #[inline]
    pub const fn new(seed: u64, stream: Stream, round: u32) -> Self {
        let mut h = mix32(stream as u32);
        h = mix32(h ^ seed as u32);
        h = mix32(h ^ (seed >> 32) as u32);
        HashKey(mix32(h ^ round))
    }

    /// 32 uniformly distributed bits for `index`.
    #[inline]
    pub const fn hash32(self, index: u64) -> u32 {
        let h = mix32(self.0 ^ index as u32);
        mix32(h ^ (index >> 32) as u32)
    }

    /// 64 bits for `index`: the 32-bit draw and one more mix of it.
    #[inline]
    pub const fn hash64(self, index: u64) -> u64 {
        let lo = self.hash32(index);
        let hi = mix32(lo ^ 0x68e3_1da4);
        ((hi as u64) << 32) | lo as u64
    }

    /// [`HashKey::hash64`] of the indices `first..first + out.len()`, into `out`: the
    /// stochastic rounding of every row of a tree draws two, and sixteen lanes of AVX-512
    /// (eight of AVX2) mix them several times faster than one at a time (the bits are the
    /// same integer operations).
    pub fn hash64_run(self, first: u64, out: &mut [u64]) {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx512_allowed() && std::arch::is_x86_feature_detected!("avx512f") {
            #[allow(unsafe_code)]
            // SAFETY: the CPU has AVX-512 F, the only feature the function is compiled for.
            unsafe {
                return self.hash64_run_avx512(first, out);
            }
        }
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx2_allowed() && std::arch::is_x86_feature_detected!("avx2") {
            #[allow(unsafe_code)]
            // SAFETY: the CPU has AVX2, the only feature the function is compiled for.
            unsafe {
                return self.hash64_run_avx2(first, out);
            }
        }
        self.hash64_run_plain(first, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn hash64_run_avx2(self, first: u64, out: &mut [u64]) {
        self.hash64_run_plain(first, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn hash64_run_avx512(self, first: u64, out: &mut [u64]) {
        self.hash64_run_plain(first, out)
    }

    #[inline(always)]
    fn hash64_run_plain(self, first: u64, out: &mut [u64]) {
        for (j, o) in out.iter_mut().enumerate() {
            *o = self.hash64(first + j as u64);
        }
    }
}

/// Hash of (seed, stream, round, index) to 32 uniformly distributed bits.
#[inline]
pub const fn hash32(seed: u64, stream: Stream, round: u32, index: u64) -> u32 {
    HashKey::new(seed, stream, round).hash32(index)
}

/// Hash of (seed, stream, round, index) to 64 bits: two dependent 32-bit mixes.
#[inline]
pub const fn hash64(seed: u64, stream: Stream, round: u32, index: u64) -> u64 {
    HashKey::new(seed, stream, round).hash64(index)
}

/// A keep-probability expressed as an integer threshold on a 32-bit hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleRate {
    threshold: u64,
}

impl SampleRate {
    /// The rate `rate` (clamped to [0, 1]) as a threshold on 32-bit hashes.
    pub fn new(rate: f64) -> Self {
        let r = if rate.is_nan() {
            0.0
        } else {
            rate.clamp(0.0, 1.0)
        };
        Self {
            threshold: (r * 4_294_967_296.0) as u64,
        }
    }

    /// Whether every row is kept.
    pub fn keeps_all(self) -> bool {
        self.threshold >= 1 << 32
    }

    /// The integer threshold: a hash below it is kept.
    pub fn threshold(self) -> u64 {
        self.threshold
    }

    /// Whether a draw of 32 hash bits falls inside the rate.
    #[inline]
    pub fn keeps(self, hash: u32) -> bool {
        (hash as u64) < self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_rate_keeps_about_the_requested_fraction() {
        let rate = SampleRate::new(0.3);
        let kept = (0..100_000u64)
            .filter(|&i| rate.keeps(hash32(7, Stream::RowSample, 3, i)))
            .count();
        assert!((29_000..31_000).contains(&kept), "kept {kept}");
        assert!(SampleRate::new(1.0).keeps_all());
        assert!(!SampleRate::new(0.0).keeps(0));
    }

    #[test]
    fn a_run_of_hashes_is_each_hash() {
        let key = HashKey::new(11, Stream::GradNoise, 4);
        // runs crossing 2^32 (the high word enters the mix) and of every length near a lane
        for first in [0u64, 1, (1 << 32) - 5, 123_456_789_012] {
            for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100] {
                let mut runs = vec![vec![0u64; len]];
                key.hash64_run(first, &mut runs[0]);
                // each vector width this CPU has, whichever the dispatch picks
                #[cfg(target_arch = "x86_64")]
                #[allow(unsafe_code)]
                {
                    if std::arch::is_x86_feature_detected!("avx2") {
                        let mut out = vec![0u64; len];
                        // SAFETY: the CPU has AVX2
                        unsafe { key.hash64_run_avx2(first, &mut out) };
                        runs.push(out);
                    }
                    if std::arch::is_x86_feature_detected!("avx512f") {
                        let mut out = vec![0u64; len];
                        // SAFETY: the CPU has AVX-512 F
                        unsafe { key.hash64_run_avx512(first, &mut out) };
                        runs.push(out);
                    }
                }
                for out in &runs {
                    for (j, &h) in out.iter().enumerate() {
                        assert_eq!(h, key.hash64(first + j as u64), "first {first} j {j}");
                    }
                }
            }
        }
    }

    #[test]
    fn streams_and_rounds_are_independent() {
        let a = hash32(1, Stream::RowSample, 0, 5);
        assert_ne!(a, hash32(1, Stream::ColSample, 0, 5));
        assert_ne!(a, hash32(1, Stream::RowSample, 1, 5));
        assert_ne!(a, hash32(2, Stream::RowSample, 0, 5));
        assert_ne!(a, hash32(1, Stream::RowSample, 0, 5 + (1 << 32)));
    }
}
