//! Parameter blocks passed to the kernels by value. Each struct's CUDA twin is in
//! `shaders/cuda/params.cuh`; a test compiles `static_assert`s generated from these Rust
//! layouts with NVRTC, so a mismatch fails a test instead of corrupting a launch.
#![allow(unsafe_code)]

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
            /// (name, size, alignment, field offsets) for the layout test.
            #[allow(dead_code)]
            pub(crate) fn layout() -> (&'static str, usize, usize, Vec<(&'static str, usize)>) {
                (
                    stringify!($name),
                    std::mem::size_of::<Self>(),
                    std::mem::align_of::<Self>(),
                    vec![$((stringify!($field), std::mem::offset_of!($name, $field))),*],
                )
            }
        }
    };
}

kernel_struct! {
    /// Parameters of gradients.cu.
    GradParams { n: u32, k: u32, kind: u32, has_weights: u32, sigmoid_len: u32, exp_len: u32 }
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
    BinParams { n_rows: u32, row_words: u32, bin_bits: u32, total_bins: u32, k: u32, group: u32 }
}

/// Every parameter block's layout.
#[allow(dead_code)]
pub(crate) fn all_layouts() -> Vec<(&'static str, usize, usize, Vec<(&'static str, usize)>)> {
    vec![
        GradParams::layout(),
        QuantParams::layout(),
        SampleParams::layout(),
        BinParams::layout(),
    ]
}

/// CUDA `static_assert`s stating the Rust layouts, to compile after params.cuh.
#[allow(dead_code)]
pub(crate) fn layout_asserts() -> String {
    let mut s = String::new();
    for (name, size, align, fields) in all_layouts() {
        s.push_str(&format!(
            "static_assert(sizeof({name}) == {size}, \"size of {name}\");\n\
             static_assert(alignof({name}) == {align}, \"alignment of {name}\");\n"
        ));
        for (field, off) in fields {
            s.push_str(&format!(
                "static_assert(__builtin_offsetof({name}, {field}) == {off}, \"{name}.{field}\");\n"
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
        for (name, _, _, fields) in all_layouts() {
            let start = src
                .find(&format!("struct {name} {{"))
                .unwrap_or_else(|| panic!("params.cuh has no struct {name}"));
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
            let rust: Vec<&str> = fields.iter().map(|f| f.0).collect();
            assert_eq!(declared, rust, "{name}");
        }
    }

    #[test]
    fn layouts_are_the_natural_c_layouts() {
        assert_eq!(GradParams::layout().1, 24);
        let (_, size, align, fields) = QuantParams::layout();
        assert_eq!((size, align), (56, 8));
        assert_eq!(fields[4], ("g_scale", 16));
        assert_eq!(fields[10], ("row_offset", 48));
        assert_eq!(SampleParams::layout().1, 24);
        assert_eq!(BinParams::layout().1, 24);
        assert!(layout_asserts().contains("__builtin_offsetof(QuantParams, row_offset) == 48"));
    }
}
