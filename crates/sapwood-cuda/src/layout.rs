//! Parameter blocks passed to the kernels by value. Each struct's CUDA twin is in
//! `shaders/cuda/params.cuh`. NVRTC has no compile-time `offsetof`, so a test compiles probe
//! kernels and reads the layout off the PTX: the declared size and alignment of a by-value
//! parameter, and the offset and width of the load of each single field, checked against
//! these Rust layouts: a mismatch fails a test instead of corrupting a launch.
#![allow(unsafe_code)]

use sapwood_core::backend::gpu_layout::BinLayout;
use sapwood_core::backend::shard::kernels::{GradScalars, QuantScalars, SampleScalars};
use sapwood_core::detmath::pow2;

macro_rules! kernel_struct {
    ($(#[doc = $doc:literal])* $name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        $(#[doc = $doc])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, Default, PartialEq)]
        pub(crate) struct $name {
            $(pub $field: $ty),*
        }

        // SAFETY: a plain #[repr(C)] struct of integers and floats, laid out as its CUDA twin
        // (checked by `layouts_match_the_cuda_structs`).
        unsafe impl cudarc::driver::DeviceRepr for $name {}

        impl $name {
            /// The layout, for the layout tests.
            #[allow(dead_code)]
            pub(crate) fn layout() -> Layout {
                Layout {
                    name: stringify!($name),
                    size: std::mem::size_of::<Self>(),
                    align: std::mem::align_of::<Self>(),
                    fields: vec![$(Field {
                        name: stringify!($field),
                        offset: std::mem::offset_of!($name, $field),
                        size: std::mem::size_of::<$ty>(),
                    }),*],
                }
            }
        }
    };
}

kernel_struct! {
    /// Parameters of gradients.cu.
    GradParams { n: u32, k: u32, kind: u32, has_weights: u32, sigmoid_len: u32, exp_len: u32, c0: u32, c1: u32 }
}

kernel_struct! {
    /// Parameters of quantise.cu.
    QuantParams {
        n: u32, k: u32, group: u32, lowbit: u32, g_scale: f64, h_scale: f64, g_drop: u32,
        h_drop: u32, g_key: u32, h_key: u32, row_offset: u64,
    }
}

kernel_struct! {
    /// Parameters of sample_rows.cu.
    SampleParams { n: u32, key: u32, threshold: u32, keep_all: u32, row_offset: u64 }
}

kernel_struct! {
    /// Parameters of the kernels that read bins.
    BinParams {
        n_rows: u32, row_words: u32, bin_bits: u32, total_bins: u32, k: u32, group: u32,
        word_shift: u32, bin_shift: u32,
    }
}

impl BinParams {
    /// The parameters of `n_rows` rows laid out as `layout` (8- or 16-bit bins), with
    /// `total_bins` histogram bins a node and margins of group `group` of `k`: bin lookups
    /// use shifts, never a division.
    pub(crate) fn new(
        layout: &BinLayout,
        n_rows: u32,
        total_bins: u32,
        k: u32,
        group: u32,
    ) -> Self {
        debug_assert!(
            layout.bits == 8 || layout.bits == 16,
            "{} bits",
            layout.bits
        );
        let bin_shift = layout.bits.trailing_zeros();
        BinParams {
            n_rows,
            row_words: layout.row_words as u32,
            bin_bits: layout.bits,
            total_bins,
            k,
            group,
            word_shift: 5 - bin_shift,
            bin_shift,
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

impl From<QuantScalars> for QuantParams {
    /// CUDA multiplies by the scale 2^shift in f64 (exact for every shift in use).
    fn from(s: QuantScalars) -> Self {
        QuantParams {
            n: s.n,
            k: s.k,
            group: s.group,
            lowbit: s.lowbit,
            g_scale: pow2(s.g_shift),
            h_scale: pow2(s.h_shift),
            g_drop: s.g_drop,
            h_drop: s.h_drop,
            g_key: s.g_key,
            h_key: s.h_key,
            row_offset: s.row_offset,
        }
    }
}

impl From<SampleScalars> for SampleParams {
    fn from(s: SampleScalars) -> Self {
        SampleParams {
            n: s.n,
            key: s.key,
            threshold: s.threshold,
            keep_all: s.keep_all,
            row_offset: s.row_offset,
        }
    }
}

/// A field of a parameter block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its name.
    pub name: &'static str,
    /// Byte offset.
    pub offset: usize,
    /// Bytes.
    pub size: usize,
}

/// The Rust layout of a parameter block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The struct's name (as in params.cuh).
    pub name: &'static str,
    /// Bytes.
    pub size: usize,
    /// Alignment.
    pub align: usize,
    /// Fields in declaration order.
    pub fields: Vec<Field>,
}

/// Every parameter block's layout.
pub fn all_layouts() -> Vec<Layout> {
    vec![
        GradParams::layout(),
        QuantParams::layout(),
        SampleParams::layout(),
        BinParams::layout(),
    ]
}

/// The probe kernel reading only `field` of `layout`'s struct.
pub fn probe_name(layout: &Layout, field: &Field) -> String {
    format!("probe_{}_{}", layout.name, field.name)
}

/// The probe kernel taking `layout`'s struct by value (for its size and alignment).
pub fn size_probe_name(layout: &Layout) -> String {
    format!("probe_{}", layout.name)
}

/// CUDA source of the probe kernels (appended to the headers): one per struct taking it by
/// value, one per field reading only that field through a pointer (a by-value parameter's
/// fields may be loaded as vectors, which hides their offsets).
pub fn probe_kernels() -> String {
    let mut s = String::new();
    for l in all_layouts() {
        s.push_str(&format!(
            "extern \"C\" __global__ void {}({} p, u64* out) {{ out[0] = (u64)p.{}; }}\n",
            size_probe_name(&l),
            l.name,
            l.fields[0].name
        ));
        for f in &l.fields {
            s.push_str(&format!(
                "extern \"C\" __global__ void {}(const {}* p, u64* out) {{ out[0] = (u64)p->{}; }}\n",
                probe_name(&l, f),
                l.name,
                f.name
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_of_params_cuh_has_a_rust_twin() {
        // the structs' field names, in order, as params.cuh declares them
        let src = include_str!("../../../shaders/cuda/params.cuh");
        for l in all_layouts() {
            let start = src
                .find(&format!("struct {} {{", l.name))
                .unwrap_or_else(|| panic!("params.cuh has no struct {}", l.name));
            let body = &src[start..start + src[start..].find("};").expect("closed")];
            let declared: Vec<&str> = body
                .lines()
                .skip(1)
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("//"))
                .map(|l| {
                    l.trim_end_matches(';')
                        .split_whitespace()
                        .last()
                        .expect("a field")
                })
                .collect();
            let rust: Vec<&str> = l.fields.iter().map(|f| f.name).collect();
            assert_eq!(declared, rust, "{}", l.name);
        }
    }

    #[test]
    fn layouts_are_the_natural_c_layouts() {
        assert_eq!(GradParams::layout().size, 32);
        let q = QuantParams::layout();
        assert_eq!((q.size, q.align), (56, 8));
        assert_eq!((q.fields[4].name, q.fields[4].offset), ("g_scale", 16));
        assert_eq!((q.fields[10].name, q.fields[10].offset), ("row_offset", 48));
        assert_eq!(SampleParams::layout().size, 24);
        assert_eq!(BinParams::layout().size, 32);
        assert!(probe_kernels()
            .contains("probe_QuantParams_row_offset(const QuantParams* p, u64* out)"));
    }

    #[test]
    fn bin_params_shift_exactly_as_the_packing_divides() {
        for bits in [8u32, 16] {
            let layout = BinLayout { bits, row_words: 3 };
            let bp = BinParams::new(&layout, 10, 99, 2, 1);
            let per_word = 32 / bits;
            assert_eq!(1 << bp.word_shift, per_word);
            assert_eq!(1 << bp.bin_shift, bits);
            for f in 0..64u32 {
                assert_eq!(f >> bp.word_shift, f / per_word);
                assert_eq!(
                    (f & ((1 << bp.word_shift) - 1)) << bp.bin_shift,
                    (f % per_word) * bits
                );
            }
        }
    }
}
