//! Packed integer lanes: several signed values in one i64 word, so that a plain integer sum
//! of words (NCCL's `ncclInt64` sum, or any adder) is the word of the lane sums.
//!
//! A word is `Σ_i v_i · 2^(w·i)` (mod 2^64). Addition of words is addition of these
//! integers mod 2^64, whatever the order and whatever intermediate sums overflow, so the
//! final word is exactly `Σ_i S_i · 2^(w·i)` for the lane sums `S_i`. When every reduced
//! `|S_i| <= bound < 2^(w-1)` the lanes are recovered exactly from the lowest up (sign-extend
//! the low `w` bits, subtract, shift). The core's `kernel::pack` of (g, h) is the two-lane case
//! with w = 32.
//!
//! The collective issue's wire codec uses the same idea on the network; this module is the
//! GPU side used by the `nccl` feature, and it is plain Rust so it is tested on any machine.

/// Bits per lane for reduced values bounded by `bound` in magnitude: the bits of `bound`
/// plus a sign bit (at least 2, at most 64).
pub fn lane_bits(bound: u64) -> u32 {
    (64 - bound.leading_zeros() + 1).clamp(2, 64)
}

/// Lanes per 64-bit word at `bits` per lane.
pub fn lanes_per_word(bits: u32) -> usize {
    (64 / bits.max(1)) as usize
}

/// Packs `values` into words of `lanes_per_word(bits)` lanes.
pub fn pack(values: &[i64], bits: u32) -> Vec<i64> {
    let per = lanes_per_word(bits);
    values
        .chunks(per)
        .map(|c| {
            c.iter().enumerate().fold(0i64, |w, (i, &v)| {
                w.wrapping_add(v.wrapping_shl(bits * i as u32))
            })
        })
        .collect()
}

/// Unpacks the sums held by `words` into `out` (its length says how many lanes to read).
pub fn unpack(words: &[i64], bits: u32, out: &mut [i64]) {
    let per = lanes_per_word(bits);
    for (c, &word) in out.chunks_mut(per).zip(words) {
        let mut w = word;
        for slot in c.iter_mut() {
            let v = if bits == 64 {
                w
            } else {
                // sign-extend the low `bits` bits
                let shift = 64 - bits;
                (w << shift) >> shift
            };
            *slot = v;
            w = if bits == 64 {
                0
            } else {
                w.wrapping_sub(v) >> bits
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64
    fn rng(mut s: u64) -> impl FnMut() -> u64 {
        move || {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    #[test]
    fn lane_widths() {
        assert_eq!(lane_bits(0), 2);
        assert_eq!(lane_bits(1), 2);
        assert_eq!(lane_bits(255), 9);
        assert_eq!(lane_bits(256), 10);
        assert_eq!(lane_bits(1 << 61), 63);
        assert_eq!(lane_bits(u64::MAX), 64);
        assert_eq!(lanes_per_word(9), 7);
        assert_eq!(lanes_per_word(32), 2);
    }

    #[test]
    fn the_sum_of_packed_words_unpacks_to_the_lane_sums() {
        let mut r = rng(5);
        for bound in [1u64, 7, 1000, 1 << 20, (1 << 31) - 1, 1 << 40, 1 << 61] {
            let bits = lane_bits(bound);
            for workers in [1usize, 2, 3, 8] {
                let len = 37;
                // per-worker values whose sums (and partial sums) respect the bound
                let per = (bound / workers as u64) as i64;
                let parts: Vec<Vec<i64>> = (0..workers)
                    .map(|_| {
                        (0..len)
                            .map(|_| {
                                let m = per as u64 + 1;
                                (r() % (2 * m)) as i64 - m as i64 + 1
                            })
                            .map(|v| v.clamp(-per, per))
                            .collect()
                    })
                    .collect();
                let want: Vec<i64> = (0..len).map(|i| parts.iter().map(|p| p[i]).sum()).collect();
                let mut words = vec![0i64; len.div_ceil(lanes_per_word(bits))];
                for p in &parts {
                    for (w, x) in words.iter_mut().zip(pack(p, bits)) {
                        *w = w.wrapping_add(x);
                    }
                }
                let mut got = vec![0i64; len];
                unpack(&words, bits, &mut got);
                assert_eq!(got, want, "bound {bound} workers {workers}");
            }
        }
    }

    #[test]
    fn extremes_of_the_bound_survive() {
        let bound = 1000u64;
        let bits = lane_bits(bound);
        let v = vec![1000, -1000, 0, -1, 1, 999, -999];
        let mut out = vec![0; v.len()];
        unpack(&pack(&v, bits), bits, &mut out);
        assert_eq!(out, v);
    }
}
