//! Which body encodes and decodes groups on this CPU: 512-bit lanes where it has AVX-512
//! VBMI, the scalar body compiled for AVX-512 where it has that alone, else the portable
//! scalar body. Every choice writes and reads the same bytes.

use sapwood_core::Result;

use super::groups;

/// Appends the group encoding of `values` to `out`; returns how many values are nonzero.
/// Where the CPU has AVX-512 VBMI a block is encoded in 512-bit lanes (`group_lanes`);
/// where it has AVX-512 without VBMI the scalar body is compiled a second time, so that a
/// group's scan takes 64-bit compares in 512-bit lanes, not SSE2's emulated ones. The same
/// bytes every way.
pub(super) fn encode(values: &[i64], out: &mut Vec<u8>) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if super::group_lanes::available() {
            // SAFETY: the CPU has the lanes' features (checked just now)
            #[allow(unsafe_code)]
            return unsafe { super::group_lanes::encode(values, out) };
        }
        if sapwood_core::simd::avx512_allowed()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512bw")
        {
            #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
            #[allow(unsafe_code)]
            unsafe fn wide(values: &[i64], out: &mut Vec<u8>) -> usize {
                groups::encode_inlined(values, out)
            }
            // SAFETY: the CPU has the features `wide` is compiled for (checked above)
            #[allow(unsafe_code)]
            return unsafe { wide(values, out) };
        }
    }
    groups::encode_inlined(values, out)
}

/// Decodes the groups in `data` (everything after the tag) into `dst`, adding when `ADD`:
/// in 512-bit lanes where the CPU has AVX-512 VBMI (`group_lanes`), else one value at a
/// time.
pub(super) fn decode<const ADD: bool>(data: &[u8], dst: &mut [i64]) -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    if super::group_lanes::available() {
        // SAFETY: the CPU has the lanes' features (checked just now)
        #[allow(unsafe_code)]
        return unsafe { super::group_lanes::decode::<ADD>(data, dst) };
    }
    groups::decode_scalar::<ADD>(data, dst)
}

#[cfg(test)]
mod tests {
    use super::groups::{decode_scalar, encode_inlined};
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn every_version_writes_and_reads_the_same_bytes(
            // a block's magnitude (so its groups take every width) and its values, some zero
            values in (0u32..63).prop_flat_map(|bits| proptest::collection::vec(
                prop_oneof![
                    2 => Just(0i64),
                    5 => -(1i64 << bits)..(1i64 << bits),
                    1 => any::<i64>().prop_map(move |v| (v >> (63 - bits)) << 5),
                ],
                0..200,
            )),
        ) {
            // the dispatched encoder (in lanes, or compiled for AVX-512, where the CPU has
            // them) against the scalar body
            #[cfg(target_arch = "x86_64")]
            if std::env::var_os("SAPWOOD_REQUIRE_AVX512").is_some() {
                prop_assert!(super::super::group_lanes::available(), "no lanes to test here");
            }
            let (mut fast, mut base) = (Vec::new(), Vec::new());
            let nnz = encode(&values, &mut fast);
            prop_assert_eq!(nnz, encode_inlined(&values, &mut base));
            prop_assert_eq!(&fast, &base);
            prop_assert_eq!(nnz, values.iter().filter(|&&v| v != 0).count());
            let start: Vec<i64> = (0..values.len() as i64).map(|i| i * 7 - 300).collect();
            type Decoder = fn(&[u8], &mut [i64], bool) -> Result<()>;
            let decoders: [Decoder; 2] = [
                |d, v, add| if add { decode::<true>(d, v) } else { decode::<false>(d, v) },
                |d, v, add| if add { decode_scalar::<true>(d, v) } else { decode_scalar::<false>(d, v) },
            ];
            for decoder in decoders {
                let mut back = vec![7i64; values.len()];
                decoder(&fast, &mut back, false).unwrap();
                prop_assert_eq!(&back, &values);
                let mut sum = start.clone();
                decoder(&fast, &mut sum, true).unwrap();
                let want: Vec<i64> = start.iter().zip(&values).map(|(a, b)| a.wrapping_add(*b)).collect();
                prop_assert_eq!(sum, want);
            }
        }
    }
}
