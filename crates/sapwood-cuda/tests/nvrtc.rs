//! Every kernel compiles with NVRTC (no GPU needed): PTX for compute_80 and compute_90,
//! CUBIN for sm_80 and sm_90; a broken kernel's error carries the compiler log; the
//! parameter blocks of params.cuh have the Rust layouts; the objective constants match.
//!
//! Ignored where the build script found no NVRTC; `SAPWOOD_REQUIRE_NVRTC=1` makes them run
//! and fail instead.

use sapwood_cuda::kernels::{self, compile, compile_source, Target};
use sapwood_cuda::{layout, CudaSource, Kernel};

fn require_nvrtc() {
    assert!(
        kernels::nvrtc_present(),
        "NVRTC cannot be loaded: run crates/sapwood-cuda/install-nvrtc.sh and put the \
         directory it prints on LD_LIBRARY_PATH"
    );
}

const TARGETS: [Target; 4] = [
    Target::Ptx(80),
    Target::Ptx(90),
    Target::Cubin(80),
    Target::Cubin(90),
];

#[test]
#[cfg_attr(sapwood_no_nvrtc, ignore = "NVRTC not found: run install-nvrtc.sh")]
fn nvrtc_is_version_13_0() {
    require_nvrtc();
    let v = kernels::nvrtc_version().unwrap();
    assert_eq!(v, (13, 0), "the CUDA 13.0 driver needs NVRTC 13.0");
    let archs = kernels::supported_archs().unwrap();
    assert!(archs.contains(&80) && archs.contains(&90), "{archs:?}");
}

#[test]
#[cfg_attr(sapwood_no_nvrtc, ignore = "NVRTC not found: run install-nvrtc.sh")]
fn every_kernel_compiles_for_sm80_and_sm90() {
    require_nvrtc();
    for target in TARGETS {
        for k in Kernel::ALL {
            let c = compile(k, target).unwrap_or_else(|e| panic!("{}: {e}", k.file()));
            assert_eq!(c.kernel, Some(k));
            match target {
                Target::Ptx(a) => {
                    let ptx = String::from_utf8(c.image).expect("PTX is text");
                    assert!(ptx.contains(&format!(".target sm_{a}")), "{}", k.file());
                    assert!(
                        ptx.contains(&format!(".entry {}(", k.entry())),
                        "{} has no entry {}",
                        k.file(),
                        k.entry()
                    );
                }
                Target::Cubin(_) => {
                    assert_eq!(&c.image[..4], b"\x7fELF", "{} is not a CUBIN", k.file());
                    assert!(c.image.len() > 1000);
                }
            }
        }
    }
}

#[test]
#[cfg_attr(sapwood_no_nvrtc, ignore = "NVRTC not found: run install-nvrtc.sh")]
fn float_kernels_have_no_fused_multiply_add() {
    // the bit-exact contract: single IEEE operations only, never a*b+c rounded once
    require_nvrtc();
    for k in [Kernel::Gradients, Kernel::Quantise, Kernel::Predict] {
        for a in [80, 90] {
            let ptx = String::from_utf8(compile(k, Target::Ptx(a)).unwrap().image).unwrap();
            for bad in [
                "fma.rn.f32",
                "fma.rn.f64",
                "fma.rn.ftz",
                ".approx.",
                "ex2.",
                "rcp.",
            ] {
                assert!(
                    !ptx.contains(bad),
                    "{} for compute_{a} uses {bad}",
                    k.file()
                );
            }
            assert!(!ptx.contains(".ftz.f32"), "{} flushes subnormals", k.file());
        }
    }
}

#[test]
#[cfg_attr(sapwood_no_nvrtc, ignore = "NVRTC not found: run install-nvrtc.sh")]
fn histogram_kernels_use_64_bit_atomics() {
    require_nvrtc();
    let ptx =
        String::from_utf8(compile(Kernel::HistShared, Target::Ptx(90)).unwrap().image).unwrap();
    assert!(ptx.contains("atom.shared.add.u64"), "shared 64-bit atomics");
    assert!(ptx.contains("atom.global.add.u64") || ptx.contains("red.global.add.u64"));
}

#[test]
#[cfg_attr(sapwood_no_nvrtc, ignore = "NVRTC not found: run install-nvrtc.sh")]
fn a_broken_kernel_reports_the_compiler_log() {
    require_nvrtc();
    let src = "#line 1 \"broken.cu\"\nextern \"C\" __global__ void broken(int* x) {\n    x[0] = undeclared_thing;\n}\n";
    for target in [Target::Ptx(90), Target::Cubin(80)] {
        let e = compile_source(src, "broken.cu", target).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, sapwood_core::Error::Backend(_)), "{e:?}");
        assert!(msg.contains("compiler log"), "{msg}");
        assert!(
            msg.contains("broken.cu(2)"),
            "the log names file and line: {msg}"
        );
        assert!(msg.contains("undeclared_thing"), "{msg}");
    }
}

#[test]
#[cfg_attr(sapwood_no_nvrtc, ignore = "NVRTC not found: run install-nvrtc.sh")]
fn parameter_layouts_match_params_cuh() {
    // one probe kernel per field reads only that field of its by-value parameter: the PTX
    // names the parameter's size and alignment and the offset and width of the load
    require_nvrtc();
    let src = sapwood_cuda::layout_probe_source();
    let ptx = compile_source(&src, "layout_probe.cu", Target::Ptx(80))
        .unwrap_or_else(|e| panic!("{e}"))
        .image;
    let ptx = String::from_utf8(ptx).unwrap();
    let mut checked = 0;
    let body_of = |name: &str| -> &str {
        let at = ptx
            .find(&format!(".entry {name}("))
            .unwrap_or_else(|| panic!("no probe {name}"));
        &ptx[at..at + ptx[at..].find("ret;").expect("a body")]
    };
    for l in layout::all_layouts() {
        let name = layout::size_probe_name(&l);
        let decl = format!(".param .align {} .b8 {name}_param_0[{}]", l.align, l.size);
        assert!(body_of(&name).contains(&decl), "{name}: expected `{decl}`");
        for f in &l.fields {
            let name = layout::probe_name(&l, f);
            let body = body_of(&name);
            let load = body
                .lines()
                .find(|line| line.contains("ld.global"))
                .unwrap_or_else(|| panic!("{name}: no load in\n{body}"));
            let at = if f.offset == 0 {
                "]".to_string()
            } else {
                format!("+{}]", f.offset)
            };
            assert!(
                load.contains(&at),
                "{name}: expected a load at offset {}: {load}",
                f.offset
            );
            let width = if load.contains("64 ") {
                8
            } else if load.contains("32 ") {
                4
            } else {
                0
            };
            assert_eq!(width, f.size, "{name}: {load}");
            checked += 1;
        }
    }
    let total: usize = layout::all_layouts().iter().map(|l| l.fields.len()).sum();
    assert_eq!(checked, total);
}

#[test]
fn gradient_constants_match_the_core() {
    use sapwood_core::objective as o;
    let src = Kernel::Gradients.source();
    let define = |name: &str| -> String {
        let line = src
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("no #define {name}"));
        line.split_whitespace().nth(2).unwrap().to_string()
    };
    let uint = |s: String| -> u64 {
        let s = s.trim_end_matches('u');
        match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).unwrap(),
            None => s.parse().unwrap(),
        }
    };
    assert_eq!(uint(define("MARGIN_FRAC_BITS")), o::MARGIN_FRAC_BITS as u64);
    assert_eq!(uint(define("SIGMOID_RANGE")), o::SIGMOID_RANGE as u64);
    assert_eq!(
        uint(define("SIGMOID_STEP_BITS")),
        o::SIGMOID_STEP_BITS as u64
    );
    assert_eq!(uint(define("EXP_RANGE")), o::EXP_RANGE as u64);
    assert_eq!(uint(define("EXP_STEP_BITS")), o::EXP_STEP_BITS as u64);
    assert_eq!(uint(define("PROB_SHIFT")), o::PROB_BITS as u64);
    assert_eq!(uint(define("ONE")), 1u64 << o::PROB_BITS);
    assert_eq!(
        uint(define("MIN_HESSIAN_BITS")),
        o::MIN_HESSIAN.to_bits() as u64
    );
    let inv: f32 = define("INV_ONE").trim_end_matches('f').parse().unwrap();
    assert_eq!(inv, 1.0 / (1u32 << o::PROB_BITS) as f32);
}

#[test]
fn every_kernel_file_is_in_shaders_cuda_and_named_like_its_wgsl_twin() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shaders");
    for k in Kernel::ALL {
        let cu = std::path::Path::new(root).join("cuda").join(k.file());
        assert!(cu.exists(), "{}", cu.display());
        let wgsl = std::path::Path::new(root)
            .join("wgsl")
            .join(format!("{}.wgsl", k.entry()));
        assert!(wgsl.exists(), "{} has no WGSL twin", k.file());
        let src = k.source();
        assert!(
            src.contains(&format!(
                "extern \"C\" __global__ void __launch_bounds__(256) {}(",
                k.entry()
            )),
            "{} defines entry {}",
            k.file(),
            k.entry()
        );
    }
}
