//! Every kernel compiles with NVRTC (no GPU needed): PTX for compute_80 and compute_90, and
//! a CUBIN for every real architecture this NVRTC supports (sm_75 to sm_121 for 13.0: a
//! kernel that fails on one of them would stop the whole backend on such a GPU, since every
//! kernel is compiled when a device opens); a broken kernel's error carries the compiler log; the
//! parameter blocks of params.cuh have the Rust layouts; the objective constants match.
//!
//! Ignored where the build script found no NVRTC; `SAPWOOD_REQUIRE_NVRTC=1` makes them run
//! and fail instead.

use sapwood_cuda::kernels::{self, compile, compile_codec, compile_source, Target};
use sapwood_cuda::{layout, CodecKernel, CudaSource, Kernel};

fn require_nvrtc() {
    assert!(
        kernels::nvrtc_present(),
        "NVRTC cannot be loaded: run crates/sapwood-cuda/install-nvrtc.sh and put the \
         directory it prints on LD_LIBRARY_PATH"
    );
}

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
fn every_kernel_compiles_for_every_supported_architecture() {
    require_nvrtc();
    let archs = kernels::supported_archs().unwrap();
    assert!(archs.contains(&75) && archs.contains(&121), "{archs:?}");
    let targets = [Target::Ptx(80), Target::Ptx(90)]
        .into_iter()
        .chain(archs.iter().map(|&a| Target::Cubin(a)));
    for target in targets {
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
        // the histogram encoders, kernels of the GPU backends alone
        for k in CodecKernel::ALL {
            let c = compile_codec(k, target).unwrap_or_else(|e| panic!("{}: {e}", k.file()));
            assert_eq!(c.kernel, None);
            match target {
                Target::Ptx(a) => {
                    let ptx = String::from_utf8(c.image).expect("PTX is text");
                    assert!(ptx.contains(&format!(".target sm_{a}")), "{}", k.file());
                    assert!(
                        ptx.contains(&format!(".entry {}(", k.entry())),
                        "{}",
                        k.file()
                    );
                }
                Target::Cubin(_) => assert_eq!(&c.image[..4], b"\x7fELF", "{}", k.file()),
            }
        }
    }
}

#[test]
#[cfg_attr(sapwood_no_nvrtc, ignore = "NVRTC not found: run install-nvrtc.sh")]
fn encoders_use_warp_reductions_and_no_float_or_shared_memory() {
    // groups.cu is one warp per group: its ORs are warp reductions (sm_80's redux.sync) and
    // its bitmap a ballot; both encoders are integer-only and keep nothing in shared memory
    require_nvrtc();
    for a in [80, 90] {
        for k in CodecKernel::ALL {
            let ptx = String::from_utf8(compile_codec(k, Target::Ptx(a)).unwrap().image).unwrap();
            let what = format!("{} for compute_{a}", k.file());
            for line in instructions(&ptx) {
                let op = operands(line).0;
                assert!(float_to_int(op).is_none(), "{what}: `{line}`");
                assert!(
                    !op.contains(".f32") && !op.contains(".f64"),
                    "{what}: `{line}`"
                );
                assert!(!op.contains(".shared"), "{what}: `{line}`");
            }
            if k == CodecKernel::Groups {
                assert!(ptx.contains("redux.sync.or.b32"), "{what}: warp reductions");
                assert!(ptx.contains("vote.sync.ballot.b32"), "{what}: a ballot");
                assert!(
                    ptx.contains("atom.global.or.b32") || ptx.contains("red.global.or.b32"),
                    "{what}: the writes are ORed in"
                );
            }
        }
    }
}

#[test]
#[cfg_attr(sapwood_no_nvrtc, ignore = "NVRTC not found: run install-nvrtc.sh")]
fn the_sm75_group_encoder_ors_by_shuffles() {
    // sm_75 has no redux.sync (it would stop every kernel's compilation there): its warp ORs
    // are butterfly shuffles, and sm_80 keeps the one-instruction reduction
    require_nvrtc();
    let ptx = |a| {
        String::from_utf8(
            compile_codec(CodecKernel::Groups, Target::Ptx(a))
                .unwrap()
                .image,
        )
        .unwrap()
    };
    let turing = ptx(75);
    assert!(
        !turing.contains("redux.sync"),
        "compute_75 has no warp reduction"
    );
    assert!(
        turing.contains("shfl.sync.bfly.b32"),
        "compute_75: butterfly shuffles"
    );
    assert!(ptx(80).contains("redux.sync.or.b32"));
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
fn shared_histograms_add_32_bit_words_and_global_ones_64_bit_values() {
    // a 64-bit shared atomic add is a compare-and-swap loop on sm_80/sm_90 (see the SASS
    // test below); hist_shared adds u32 words with a carry, as the WGSL twin does
    require_nvrtc();
    for a in [80, 90] {
        let ptx =
            String::from_utf8(compile(Kernel::HistShared, Target::Ptx(a)).unwrap().image).unwrap();
        assert!(
            ptx.contains("atom.shared.add.u32"),
            "compute_{a}: 32-bit shared adds"
        );
        for bad in ["atom.shared.add.u64", "atom.shared.cas", ".shared.add.s64"] {
            assert!(!ptx.contains(bad), "compute_{a}: hist_shared uses {bad}");
        }
        assert!(
            ptx.contains("match.any.sync.b32"),
            "compute_{a}: warp aggregation"
        );
        assert!(ptx.contains("atom.global.add.u64") || ptx.contains("red.global.add.u64"));
        let global =
            String::from_utf8(compile(Kernel::HistGlobal, Target::Ptx(a)).unwrap().image).unwrap();
        assert!(global.contains("atom.global.add.u64") || global.contains("red.global.add.u64"));
    }
}

/// The PTX instructions of `ptx` (comments and blank lines dropped), trimmed.
fn instructions(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .map(|l| l.split("//").next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect()
}

/// (opcode, destination, first source) of a PTX instruction `op d, a, ...;`.
fn operands(line: &str) -> (&str, &str, &str) {
    let (op, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let mut args = rest.trim().trim_end_matches(';').split(',').map(str::trim);
    (op, args.next().unwrap_or(""), args.next().unwrap_or(""))
}

/// Source and destination types of a float-to-integer `cvt` (e.g. `cvt.rni.s64.f64` gives
/// ("f64", "s64")), `None` for any other instruction.
fn float_to_int(op: &str) -> Option<(&str, &str)> {
    let parts: Vec<&str> = op.split('.').collect();
    if parts.first() != Some(&"cvt") || parts.len() < 3 {
        return None;
    }
    let (dst, src) = (parts[parts.len() - 2], parts[parts.len() - 1]);
    let int = |t: &str| t.starts_with('s') || t.starts_with('u');
    (src.starts_with('f') && int(dst)).then_some((src, dst))
}

/// Every float-to-integer conversion a kernel may compile to, with why it agrees with the
/// core's Rust (`as`: saturating, NaN to 0). The PTX ISA saturates every float-to-integer
/// `cvt`; for NaN it gives 0 only when the source is not f64 and the destination not 64-bit,
/// MININT otherwise: those must be guarded.
const AUDITED: &[(Kernel, &str, &str)] = &[
    (
        Kernel::Quantise,
        "cvt.rni.s64.f64",
        "quantise_exact: saturates like `as i64`; NaN guarded in f64_to_i64_rn",
    ),
    (
        Kernel::SquareSums,
        "cvt.rni.s64.f64",
        "quantise_exact in square_term: saturates like `as i64` before the clamp; NaN guarded \
         in f64_to_i64_rn",
    ),
    (
        Kernel::Gradients,
        "cvt.rni.s32.f32",
        "margin_fixed: NaN replaced by 0 and the input clamped to 20 * 2^24 first",
    ),
    (
        Kernel::Gradients,
        "cvt.rni.u32.f32",
        "exp_neg_fixed: NaN and d >= 20 return first, max(d, 0) < 20 * 2^24",
    ),
    (
        Kernel::Gradients,
        "cvt.rzi.u32.f32",
        "softmax label class: saturates (2^32 up matches no class); NaN guarded in \
         f32_to_u32_rz",
    ),
];

#[test]
#[cfg_attr(sapwood_no_nvrtc, ignore = "NVRTC not found: run install-nvrtc.sh")]
fn every_float_to_integer_conversion_is_audited_and_nan_guarded() {
    require_nvrtc();
    for a in [80, 90] {
        for k in Kernel::ALL {
            let ptx = String::from_utf8(compile(k, Target::Ptx(a)).unwrap().image).unwrap();
            let lines = instructions(&ptx);
            let mut seen = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                let (op, dst, src) = operands(line);
                let Some((src_type, dst_type)) = float_to_int(op) else {
                    continue;
                };
                let what = format!("{} for compute_{a}: `{line}`", k.file());
                assert!(
                    AUDITED.iter().any(|&(ak, aop, _)| ak == k && aop == op),
                    "{what} is not in the audit table: check its NaN and out-of-range \
                     results against the core's Rust and add it"
                );
                seen.push(op);
                if src_type == "f64" || dst_type.ends_with("64") {
                    // NaN gives MININT here: setp.nan on the source right before, and the
                    // result replaced by 0 right after (f64_to_i64_rn's inline PTX)
                    let before = operands(lines[i - 1]);
                    let after = lines.get(i + 1).copied().unwrap_or("");
                    assert!(
                        before.0 == format!("setp.nan.{src_type}")
                            && lines[i - 1].ends_with(&format!("{src}, {src};")),
                        "{what}: no NaN test of {src} before it (got `{}`)",
                        lines[i - 1]
                    );
                    let pred = before.1;
                    let width = &dst_type[1..];
                    assert_eq!(
                        after,
                        format!("@{pred} mov.b{width} {dst}, 0;"),
                        "{what}: NaN does not give 0"
                    );
                }
            }
            for &(ak, aop, why) in AUDITED {
                if ak == k {
                    assert!(
                        seen.contains(&aop),
                        "{} for compute_{a} no longer holds {aop} ({why}): update the audit",
                        k.file()
                    );
                }
            }
        }
    }
}

#[test]
#[cfg_attr(sapwood_no_nvrtc, ignore = "NVRTC not found: run install-nvrtc.sh")]
fn bin_lookups_shift_instead_of_dividing() {
    // bins.cuh reads a bin with the word and bin shifts of BinParams: no runtime division
    // on every (row, feature) of the hot kernels
    require_nvrtc();
    for k in [
        Kernel::HistShared,
        Kernel::HistGlobal,
        Kernel::Partition,
        Kernel::Predict,
    ] {
        let ptx = String::from_utf8(compile(k, Target::Ptx(90)).unwrap().image).unwrap();
        for line in instructions(&ptx) {
            let op = operands(line).0;
            assert!(
                !op.starts_with("div.") && !op.starts_with("rem."),
                "{}: `{line}`",
                k.file()
            );
        }
    }
}

/// The nvdisasm the build script found, or the one `SAPWOOD_NVDISASM` names now.
fn nvdisasm() -> std::path::PathBuf {
    std::env::var_os("SAPWOOD_NVDISASM")
        .map(Into::into)
        .or(option_env!("SAPWOOD_NVDISASM_BUILD").map(Into::into))
        .unwrap_or_else(|| "nvdisasm".into())
}

/// The SASS of `k` built as a CUBIN for `sm_{arch}`, by nvdisasm.
fn sass(k: Kernel, arch: u32) -> String {
    let cubin = compile(k, Target::Cubin(arch))
        .unwrap_or_else(|e| panic!("{}: {e}", k.file()))
        .image;
    disassemble(&cubin, k.entry(), arch)
}

/// The SASS of the encoder `k` built as a CUBIN for `sm_{arch}`.
fn codec_sass(k: CodecKernel, arch: u32) -> String {
    let cubin = compile_codec(k, Target::Cubin(arch))
        .unwrap_or_else(|e| panic!("{}: {e}", k.file()))
        .image;
    disassemble(&cubin, k.entry(), arch)
}

/// `cubin` disassembled by nvdisasm.
fn disassemble(cubin: &[u8], entry: &str, arch: u32) -> String {
    let dir = std::env::temp_dir().join(format!("sapwood-sass-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{entry}_sm{arch}.cubin"));
    std::fs::write(&path, cubin).unwrap();
    let tool = nvdisasm();
    let out = std::process::Command::new(&tool)
        .arg(&path)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): run crates/sapwood-cuda/install-nvdisasm.sh and set \
                 SAPWOOD_NVDISASM to the nvdisasm it installs",
                tool.display()
            )
        });
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "nvdisasm failed on {entry}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("SASS is text")
}

/// The SASS instructions of a disassembly: `OPCODE operands` with addresses and the
/// trailing `;` dropped.
fn sass_instructions(sass: &str) -> Vec<String> {
    sass.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("/*")?;
            let (_, ins) = rest.split_once("*/")?;
            let ins = ins.trim().trim_end_matches(';').trim();
            // a guard predicate (`@P0 `, `@!P1 `) is not part of the opcode
            let ins = match ins.strip_prefix('@') {
                Some(p) => p.split_once(' ').map_or("", |(_, i)| i).trim(),
                None => ins,
            };
            (!ins.is_empty()).then(|| ins.to_string())
        })
        .collect()
}

#[test]
#[cfg_attr(
    any(sapwood_no_nvrtc, sapwood_no_nvdisasm),
    ignore = "NVRTC or nvdisasm not found: run install-nvrtc.sh and install-nvdisasm.sh"
)]
fn sass_has_no_shared_compare_and_swap_loops_and_no_unguarded_f64_conversion() {
    require_nvrtc();
    for arch in [90, 80] {
        for k in Kernel::ALL {
            let text = sass(k, arch);
            let ins = sass_instructions(&text);
            assert!(
                ins.len() > 10,
                "{} for sm_{arch}: no SASS read:\n{text}",
                k.file()
            );
            let what = format!("{} for sm_{arch}", k.file());
            for i in &ins {
                // ATOMS.CAST.SPIN(.64) and ATOMS.CAS: a shared atomic emulated by a retry loop
                assert!(
                    !i.contains("ATOMS.CAST") && !i.contains("ATOMS.CAS"),
                    "{what}: `{i}`"
                );
            }
            // every conversion from f64 (its NaN gives MININT) is tested for NaN
            for i in ins
                .iter()
                .filter(|i| i.starts_with("F2I") && i.contains(".F64"))
            {
                let src = i
                    .split(',')
                    .nth(1)
                    .map(str::trim)
                    .unwrap_or_else(|| panic!("{what}: `{i}`"));
                assert!(
                    ins.iter().any(|t| t.starts_with("DSETP.NAN")
                        && t.contains(&format!("{src}, {src}"))),
                    "{what}: `{i}` has no DSETP.NAN on {src}"
                );
            }
            match k {
                Kernel::HistShared => {
                    assert!(ins.iter().any(|i| i.starts_with("ATOMS.ADD")), "{what}");
                    assert!(ins.iter().any(|i| i.starts_with("MATCH.ANY")), "{what}");
                    assert!(
                        !ins.iter().any(|i| i.starts_with("MUFU.RCP")),
                        "{what}: a runtime division"
                    );
                }
                Kernel::Quantise => {
                    let f2i = ins.iter().filter(|i| i.starts_with("F2I.S64.F64")).count();
                    assert!(f2i >= 2, "{what}: {f2i} F2I.S64.F64");
                }
                Kernel::HistGlobal | Kernel::Partition | Kernel::Predict => {
                    // the reciprocal of a runtime u32 division is gone with the shifts
                    assert!(
                        !ins.iter().any(|i| i.starts_with("MUFU.RCP")),
                        "{what}: a runtime division"
                    );
                }
                _ => {}
            }
        }
        for k in CodecKernel::ALL {
            let ins = sass_instructions(&codec_sass(k, arch));
            let what = format!("{} for sm_{arch}", k.file());
            assert!(ins.len() > 10, "{what}: no SASS read");
            // no shared memory at all, so no shared atomic and no retry loop
            assert!(!ins.iter().any(|i| i.starts_with("ATOMS")), "{what}");
            assert!(!ins.iter().any(|i| i.contains("ATOMG.E.CAS")), "{what}");
            if k == CodecKernel::Groups {
                assert!(ins.iter().any(|i| i.starts_with("REDUX.OR")), "{what}");
            }
        }
    }
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
    assert_eq!(uint(define("EXP2_STEP_BITS")), o::EXP2_STEP_BITS as u64);
    assert_eq!(uint(define("EXP2_VALUE_BITS")), o::EXP2_VALUE_BITS as u64);
    let limit: f32 = define("EXP2_LIMIT").trim_end_matches('f').parse().unwrap();
    assert_eq!(limit, o::EXP2_LIMIT);
    assert_eq!(uint(define("LOG2_E_BITS")), o::LOG2_E.to_bits() as u64);
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
    for k in CodecKernel::ALL {
        let cu = std::path::Path::new(root).join("cuda").join(k.file());
        assert!(cu.exists(), "{}", cu.display());
        let wgsl = std::path::Path::new(root)
            .join("wgsl")
            .join(format!("{}.wgsl", k.entry()));
        assert!(wgsl.exists(), "{} has no WGSL twin", k.file());
        assert!(k.source().contains(&format!(
            "extern \"C\" __global__ void __launch_bounds__(256) {}(",
            k.entry()
        )));
    }
}
