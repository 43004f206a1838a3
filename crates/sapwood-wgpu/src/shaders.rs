//! The WGSL sources: one kernel per file in `shaders/wgsl/`, each composed with the shared
//! helper files it needs before it is handed to wgpu (and, in the tests, to naga).

const COMMON: &str = include_str!("../../../shaders/wgsl/common.wgsl");
const PARAMS: &str = include_str!("../../../shaders/wgsl/params.wgsl");
const BINS: &str = include_str!("../../../shaders/wgsl/bins.wgsl");
const ROUTE: &str = include_str!("../../../shaders/wgsl/route.wgsl");
const CODEC: &str = include_str!("../../../shaders/wgsl/codec.wgsl");

/// The declaration the loader rewrites with the adapter's tile size.
pub(crate) const TILE_DECL: &str = "const TILE_WORDS: u32 = 4096u;";

pub(crate) use sapwood_core::backend::shard::kernels::{CodecKernel, Helper, Kernel};

/// The WGSL text of a kernel (the kernel list itself is the core's, shared with CUDA).
pub(crate) trait Wgsl: Copy {
    /// The kernel's file name, used as its label.
    fn name(self) -> String;
    /// The kernel's own file.
    fn body(self) -> &'static str;
    /// The complete WGSL module; `tile_words` sizes the shared histogram tile.
    fn source(self, tile_words: u32) -> String;
}

fn helper_text(h: Helper) -> &'static str {
    match h {
        Helper::Common => COMMON,
        Helper::Params => PARAMS,
        Helper::Bins => BINS,
        Helper::Route => ROUTE,
    }
}

impl Wgsl for Kernel {
    fn name(self) -> String {
        format!("{}.wgsl", self.stem())
    }

    fn body(self) -> &'static str {
        match self {
            Kernel::Gradients => include_str!("../../../shaders/wgsl/gradients.wgsl"),
            Kernel::Quantise => include_str!("../../../shaders/wgsl/quantise.wgsl"),
            Kernel::SampleRows => include_str!("../../../shaders/wgsl/sample_rows.wgsl"),
            Kernel::HistShared => include_str!("../../../shaders/wgsl/hist_shared.wgsl"),
            Kernel::HistGlobal => include_str!("../../../shaders/wgsl/hist_global.wgsl"),
            Kernel::Partition => include_str!("../../../shaders/wgsl/partition.wgsl"),
            Kernel::LeafSums => include_str!("../../../shaders/wgsl/leaf_sums.wgsl"),
            Kernel::SquareSums => include_str!("../../../shaders/wgsl/square_sums.wgsl"),
            Kernel::Predict => include_str!("../../../shaders/wgsl/predict.wgsl"),
        }
    }

    fn source(self, tile_words: u32) -> String {
        let mut s = String::new();
        for &h in self.helpers() {
            s.push_str(helper_text(h));
            s.push('\n');
        }
        let body = self.body();
        if self == Kernel::HistShared {
            s.push_str(&body.replace(
                TILE_DECL,
                &format!("const TILE_WORDS: u32 = {tile_words}u;"),
            ));
        } else {
            s.push_str(body);
        }
        s
    }
}

impl Wgsl for CodecKernel {
    fn name(self) -> String {
        format!("{}.wgsl", self.stem())
    }

    fn body(self) -> &'static str {
        match self {
            CodecKernel::Pack => include_str!("../../../shaders/wgsl/pack.wgsl"),
            CodecKernel::Groups => include_str!("../../../shaders/wgsl/groups.wgsl"),
        }
    }

    fn source(self, _tile_words: u32) -> String {
        [COMMON, CODEC, self.body()].join("\n")
    }
}

/// The parameter-block declarations on their own (for the layout test).
#[cfg(test)]
pub(crate) fn params_source() -> &'static str {
    PARAMS
}

/// The encoders' helper file on its own (for the layout test).
#[cfg(test)]
pub(crate) fn codec_source() -> &'static str {
    CODEC
}

#[cfg(test)]
mod tests {
    use super::*;
    use naga::valid::{Capabilities, ValidationFlags, Validator};

    fn module(src: &str, what: &str) -> naga::Module {
        let m = naga::front::wgsl::parse_str(src)
            .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
        Validator::new(ValidationFlags::all(), Capabilities::empty())
            .validate(&m)
            .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
        m
    }

    #[test]
    fn every_kernel_is_valid_portable_wgsl() {
        // the smallest tile (16 KiB of workgroup storage) and a large one (32 KiB)
        for tile_words in [1024, 2048 * 4] {
            for k in Kernel::ALL {
                let m = module(&k.source(tile_words), &k.name());
                assert!(
                    m.entry_points.iter().any(|e| e.name == "main"),
                    "{} has no main",
                    k.name()
                );
            }
        }
        for k in CodecKernel::ALL {
            let m = module(&k.source(1024), &k.name());
            assert!(m.entry_points.iter().any(|e| e.name == "main"), "{k:?}");
        }
    }

    #[test]
    fn the_tile_size_is_substituted() {
        assert!(Kernel::HistShared.body().contains(TILE_DECL));
        assert!(Kernel::HistShared
            .source(1234)
            .contains("const TILE_WORDS: u32 = 1234u;"));
    }

    fn constant(m: &naga::Module, name: &str) -> naga::Literal {
        let c = m
            .constants
            .iter()
            .find(|(_, c)| c.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no constant {name}"))
            .1;
        match m.global_expressions[c.init] {
            naga::Expression::Literal(l) => l,
            ref e => panic!("{name} is not a literal: {e:?}"),
        }
    }

    #[test]
    fn the_square_bound_is_the_core_s() {
        let m = module(&Kernel::SquareSums.source(1024), "square_sums");
        assert_eq!(
            constant(&m, "SQUARE_BOUND"),
            naga::Literal::U32(1 << sapwood_core::quantise::SQUARE_ROOT_BITS)
        );
    }

    #[test]
    fn gradient_constants_match_the_core() {
        use naga::Literal::{F32, I32, U32};
        use sapwood_core::objective as o;
        let src = Kernel::Gradients.source(1024);
        let m = module(&src, "gradients");
        assert_eq!(constant(&m, "MARGIN_FRAC_BITS"), U32(o::MARGIN_FRAC_BITS));
        assert_eq!(constant(&m, "SIGMOID_RANGE"), I32(o::SIGMOID_RANGE));
        assert_eq!(constant(&m, "SIGMOID_STEP_BITS"), U32(o::SIGMOID_STEP_BITS));
        assert_eq!(constant(&m, "EXP_RANGE"), I32(o::EXP_RANGE));
        assert_eq!(constant(&m, "EXP_STEP_BITS"), U32(o::EXP_STEP_BITS));
        assert_eq!(constant(&m, "PROB_SHIFT"), U32(o::PROB_BITS));
        assert_eq!(constant(&m, "ONE"), U32(1 << o::PROB_BITS));
        match constant(&m, "MIN_HESSIAN") {
            F32(v) => assert_eq!(v.to_bits(), o::MIN_HESSIAN.to_bits()),
            l => panic!("MIN_HESSIAN is {l:?}"),
        }
        match constant(&m, "INV_ONE") {
            F32(v) => assert_eq!(v, 1.0 / (1u32 << o::PROB_BITS) as f32),
            l => panic!("INV_ONE is {l:?}"),
        }
        assert_eq!(constant(&m, "EXP2_STEP_BITS"), U32(o::EXP2_STEP_BITS));
        assert_eq!(
            constant(&m, "EXP2_VALUE_BITS"),
            I32(o::EXP2_VALUE_BITS as i32)
        );
        assert_eq!(constant(&m, "EXP2_LIMIT"), F32(o::EXP2_LIMIT));
        assert_eq!(constant(&m, "LOG2_E_BITS"), U32(o::LOG2_E.to_bits()));
    }
}
