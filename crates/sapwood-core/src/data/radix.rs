//! Sorting the binning sample: (value, weight) pairs as 64-bit keys, by radix.
//!
//! Cuts sort every feature's sampled (value, weight) pairs in total order (200,000 rows a
//! feature by default). A comparison sort on pairs of floats took about 5 ms a feature,
//! a fifth of the fixed cost of training a million rows. The same order is the unsigned
//! order of a key holding both floats' total-order bits, and a least-significant-digit
//! radix sort of such keys skips the bytes every key shares (the weights' four, when rows
//! are unweighted).

/// The bits of `x` as an unsigned integer in the order of [`f32::total_cmp`].
#[inline]
fn ordered(x: f32) -> u32 {
    let b = x.to_bits();
    // negative floats: every bit but the sign flipped, so larger magnitudes come first
    (b ^ ((((b as i32) >> 31) as u32) >> 1)) ^ 0x8000_0000
}

/// Inverse of [`ordered`].
#[inline]
fn unordered(k: u32) -> f32 {
    let t = k ^ 0x8000_0000;
    f32::from_bits(if t & 0x8000_0000 != 0 {
        t ^ 0x7fff_ffff
    } else {
        t
    })
}

/// Sorts `pairs` by value, then weight, both in [`f32::total_cmp`] order (the order of
/// `sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)))`, bit for bit).
pub fn sort_pairs(pairs: &mut [(f32, f32)]) {
    let mut keys: Vec<u64> = pairs
        .iter()
        .map(|&(v, w)| (ordered(v) as u64) << 32 | ordered(w) as u64)
        .collect();
    sort_keys(&mut keys);
    for (p, k) in pairs.iter_mut().zip(keys) {
        *p = (unordered((k >> 32) as u32), unordered(k as u32));
    }
}

/// Sorts `keys` ascending: one pass counts all eight bytes, then one stable scatter per
/// byte that not every key shares.
fn sort_keys(keys: &mut Vec<u64>) {
    let mut counts = [[0usize; 256]; 8];
    for &k in keys.iter() {
        for (d, c) in counts.iter_mut().enumerate() {
            c[(k >> (8 * d)) as usize & 0xff] += 1;
        }
    }
    let n = keys.len();
    let mut other = vec![0u64; n];
    for (d, c) in counts.iter().enumerate() {
        if c.contains(&n) {
            continue;
        }
        let mut start = [0usize; 256];
        let mut acc = 0;
        for (s, &x) in start.iter_mut().zip(c) {
            *s = acc;
            acc += x;
        }
        for &k in keys.iter() {
            let b = (k >> (8 * d)) as usize & 0xff;
            other[start[b]] = k;
            start[b] += 1;
        }
        std::mem::swap(keys, &mut other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn by_comparison(pairs: &[(f32, f32)]) -> Vec<(u32, u32)> {
        let mut v = pairs.to_vec();
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        v.iter().map(|p| (p.0.to_bits(), p.1.to_bits())).collect()
    }

    fn by_radix(pairs: &[(f32, f32)]) -> Vec<(u32, u32)> {
        let mut v = pairs.to_vec();
        sort_pairs(&mut v);
        v.iter().map(|p| (p.0.to_bits(), p.1.to_bits())).collect()
    }

    fn float() -> impl Strategy<Value = f32> {
        prop_oneof![
            -1e3f32..1e3,
            any::<u32>().prop_map(f32::from_bits),
            Just(0.0f32),
            Just(-0.0f32),
            Just(f32::INFINITY),
            Just(f32::NEG_INFINITY),
            Just(f32::MIN_POSITIVE),
            Just(-f32::MIN_POSITIVE),
            Just(f32::MAX),
            Just(1.0f32),
        ]
    }

    proptest! {
        #[test]
        fn radix_order_is_the_total_order_bit_for_bit(
            pairs in proptest::collection::vec((float(), float()), 0..400),
        ) {
            prop_assert_eq!(by_radix(&pairs), by_comparison(&pairs));
        }

        #[test]
        fn unweighted_and_repeated_values_sort_alike(
            values in proptest::collection::vec(prop_oneof![-3i32..3, any::<i32>()], 0..400),
        ) {
            let pairs: Vec<(f32, f32)> = values.iter().map(|&v| (v as f32, 1.0)).collect();
            prop_assert_eq!(by_radix(&pairs), by_comparison(&pairs));
        }
    }

    #[test]
    fn the_key_order_is_the_total_order() {
        let xs = [
            f32::NEG_INFINITY,
            -f32::MAX,
            -1.0,
            -f32::MIN_POSITIVE,
            -0.0,
            0.0,
            f32::MIN_POSITIVE,
            1.0,
            f32::MAX,
            f32::INFINITY,
            f32::NAN,
        ];
        for w in xs.windows(2) {
            assert!(ordered(w[0]) < ordered(w[1]), "{} < {}", w[0], w[1]);
        }
        for x in xs.iter().copied().chain([-f32::NAN, f32::from_bits(1)]) {
            assert_eq!(unordered(ordered(x)).to_bits(), x.to_bits());
        }
    }
}
