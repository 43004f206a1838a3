//! Which bins of a histogram may hold rows: a bit per bin, set wherever a row of the node
//! fell (and possibly elsewhere), so every bin whose bit is clear is exactly [0, 0].
//!
//! A sparse shard's deep nodes hold rows in a small share of the bins (a node of 3,000
//! rows of a 5,000-feature text table touches about a fifth of them), yet subtracting a
//! sibling and scanning for splits went over every bin. With the bits, both go over the
//! bins that can hold something and nothing else changes: the histogram is the same, and
//! the scan passes over exactly the candidates it already passed over (a bin of no rows
//! repeats its predecessor's left sums).

/// 64-bit words holding a bit for each of `width` bins.
#[inline]
pub fn words_for(width: usize) -> usize {
    width.div_ceil(64)
}

/// Sets bin `b`'s bit.
#[inline(always)]
pub fn set(bits: &mut [u64], b: usize) {
    bits[b / 64] |= 1 << (b % 64);
}

/// Calls `each(b)` for every set bit `b` in `start..end`, ascending.
#[inline]
pub fn each_set(bits: &[u64], start: usize, end: usize, mut each: impl FnMut(usize)) {
    while_set(bits, start, end, |b| {
        each(b);
        true
    });
}

/// Calls `each(b)` for the set bits `b` in `start..end`, ascending, until it returns false.
#[inline]
pub fn while_set(bits: &[u64], start: usize, end: usize, mut each: impl FnMut(usize) -> bool) {
    if start >= end {
        return;
    }
    let (first, last) = (start / 64, (end - 1) / 64);
    for (w, &word) in bits.iter().enumerate().take(last + 1).skip(first) {
        let mut word = word;
        if w == first {
            word &= u64::MAX << (start % 64);
        }
        if w == last && !end.is_multiple_of(64) {
            word &= u64::MAX >> (64 - end % 64);
        }
        while word != 0 {
            if !each(w * 64 + word.trailing_zeros() as usize) {
                return;
            }
            word &= word - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::lcg;

    #[test]
    fn set_bits_are_visited_in_order_within_any_range() {
        let mut next = lcg(7);
        for width in [1usize, 63, 64, 65, 130, 700] {
            let mut bits = vec![0u64; words_for(width)];
            let mut want = vec![false; width];
            for _ in 0..width / 3 + 1 {
                let b = ((next() >> 33) % width as u64) as usize;
                set(&mut bits, b);
                want[b] = true;
            }
            for _ in 0..50 {
                let a = ((next() >> 33) % (width as u64 + 1)) as usize;
                let z = ((next() >> 33) % (width as u64 + 1)) as usize;
                let (a, z) = (a.min(z), a.max(z));
                let mut got = Vec::new();
                each_set(&bits, a, z, |b| got.push(b));
                let expect: Vec<usize> = (a..z).filter(|&b| want[b]).collect();
                assert_eq!(got, expect, "width {width}, {a}..{z}");
                // stopped after the first two
                let mut two = Vec::new();
                while_set(&bits, a, z, |b| {
                    two.push(b);
                    two.len() < 2
                });
                assert_eq!(
                    two,
                    expect[..expect.len().min(2)],
                    "width {width}, {a}..{z}"
                );
            }
        }
    }
}
