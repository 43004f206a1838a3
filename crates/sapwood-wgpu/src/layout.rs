//! Uniform parameter blocks shared with the kernels. Each struct's WGSL twin is in
//! `shaders/wgsl/params.wgsl`; a test compares every field offset and the size with naga's
//! layout of the WGSL, so a mismatch fails a test instead of corrupting a dispatch.

use bytemuck::{Pod, Zeroable};
use sapwood_core::backend::device::BinScalars;
use sapwood_core::backend::shard::kernels::{GradScalars, QuantScalars, SampleScalars};

macro_rules! gpu_struct {
    ($(#[doc = $doc:literal])* $name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        $(#[doc = $doc])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
        pub(crate) struct $name {
            $(pub $field: $ty),*
        }

        impl $name {
            /// (name, size, field offsets) for the layout test.
            #[cfg(test)]
            pub(crate) fn layout() -> (&'static str, usize, Vec<(&'static str, usize)>) {
                (
                    stringify!($name),
                    std::mem::size_of::<Self>(),
                    vec![$((stringify!($field), std::mem::offset_of!($name, $field))),*],
                )
            }
        }
    };
}

gpu_struct! {
    /// Parameters of gradients.wgsl.
    GradParams { n: u32, k: u32, kind: u32, has_weights: u32, sigmoid_len: u32, exp_len: u32, c0: u32, c1: u32 }
}

gpu_struct! {
    /// Parameters of quantise.wgsl.
    QuantParams {
        n: u32, k: u32, group: u32, lowbit: u32, g_shift: i32, h_shift: i32, g_drop: u32,
        h_drop: u32, g_key: u32, h_key: u32, row_lo: u32, row_hi: u32,
    }
}

gpu_struct! {
    /// Parameters of sample_rows.wgsl.
    SampleParams { n: u32, key: u32, threshold: u32, keep_all: u32, row_lo: u32, row_hi: u32, pad0: u32, pad1: u32 }
}

gpu_struct! {
    /// Parameters of the kernels that read bins.
    BinParams {
        n_features: u32, row_words: u32, bin_bits: u32, total_bins: u32, chunk_lo: u32,
        chunk_hi: u32, k: u32, group: u32,
    }
}

gpu_struct! {
    /// Parameters of the histogram encoders (pack.wgsl, groups.wgsl; declared in codec.wgsl).
    CodecParams { values: u32, messages: u32, groups: u32, write: u32 }
}

impl From<BinScalars> for BinParams {
    fn from(s: BinScalars) -> Self {
        BinParams {
            n_features: s.n_features,
            row_words: s.row_words,
            bin_bits: s.bin_bits,
            total_bins: s.total_bins,
            chunk_lo: s.chunk_lo,
            chunk_hi: s.chunk_hi,
            k: s.k,
            group: s.group,
        }
    }
}

impl From<GradScalars> for GradParams {
    fn from(s: GradScalars) -> Self {
        GradParams {
            n: s.n,
            k: s.k,
            kind: s.kind,
            has_weights: s.has_weights,
            sigmoid_len: s.sigmoid_len,
            exp_len: s.exp_len,
            c0: s.c0,
            c1: s.c1,
        }
    }
}

/// A 64-bit row offset as the (lo, hi) words portable WGSL reads.
fn words64(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

impl From<QuantScalars> for QuantParams {
    fn from(s: QuantScalars) -> Self {
        let (row_lo, row_hi) = words64(s.row_offset);
        QuantParams {
            n: s.n,
            k: s.k,
            group: s.group,
            lowbit: s.lowbit,
            g_shift: s.g_shift,
            h_shift: s.h_shift,
            g_drop: s.g_drop,
            h_drop: s.h_drop,
            g_key: s.g_key,
            h_key: s.h_key,
            row_lo,
            row_hi,
        }
    }
}

impl From<SampleScalars> for SampleParams {
    fn from(s: SampleScalars) -> Self {
        let (row_lo, row_hi) = words64(s.row_offset);
        SampleParams {
            n: s.n,
            key: s.key,
            threshold: s.threshold,
            keep_all: s.keep_all,
            row_lo,
            row_hi,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_and_wgsl_parameter_blocks_have_the_same_layout() {
        let sources = [
            (
                crate::shaders::params_source(),
                vec![
                    GradParams::layout(),
                    QuantParams::layout(),
                    SampleParams::layout(),
                    BinParams::layout(),
                ],
            ),
            (crate::shaders::codec_source(), vec![CodecParams::layout()]),
        ];
        for (src, layouts) in sources {
            check_layouts(src, layouts);
        }
    }

    type Layout = (&'static str, usize, Vec<(&'static str, usize)>);

    fn check_layouts(src: &str, layouts: Vec<Layout>) {
        let m = naga::front::wgsl::parse_str(src).expect("the parameter blocks parse");
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(m.to_ctx()).expect("layout");
        for (name, size, fields) in layouts {
            let (handle, ty) = m
                .types
                .iter()
                .find(|(_, t)| t.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("{name} is not declared"));
            let naga::TypeInner::Struct { members, span } = &ty.inner else {
                panic!("{name} is not a struct");
            };
            assert_eq!(*span as usize, size, "{name}: size");
            assert_eq!(layouter[handle].size as usize, size, "{name}: size");
            // uniform blocks are bound whole: keep them a multiple of 16 bytes
            assert!(
                size.is_multiple_of(16),
                "{name}: size is not a multiple of 16"
            );
            let wgsl: Vec<(&str, usize)> = members
                .iter()
                .map(|mb| (mb.name.as_deref().unwrap_or("?"), mb.offset as usize))
                .collect();
            assert_eq!(wgsl, fields, "{name}: fields and offsets");
        }
    }
}
