//! The CUDA sources: one kernel per file in `shaders/cuda/` (named as their WGSL twins in
//! `shaders/wgsl/` where they do the same job), each composed with the helper headers it
//! needs and compiled with NVRTC at first use.
//!
//! Compilation targets either PTX for a virtual architecture (`compute_XY`) or a CUBIN for a
//! real one (`sm_XY`). Devices load CUBIN built for their own architecture, so the driver
//! never JIT-compiles PTX and an NVRTC newer than the driver cannot produce PTX it refuses.
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};

use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};
use sapwood_core::error::{Error, Result};

const COMMON: (&str, &str) = (
    "common.cuh",
    include_str!("../../../shaders/cuda/common.cuh"),
);
const PARAMS: (&str, &str) = (
    "params.cuh",
    include_str!("../../../shaders/cuda/params.cuh"),
);
const BINS: (&str, &str) = ("bins.cuh", include_str!("../../../shaders/cuda/bins.cuh"));
const ROUTE: (&str, &str) = ("route.cuh", include_str!("../../../shaders/cuda/route.cuh"));
const CODEC: (&str, &str) = ("codec.cuh", include_str!("../../../shaders/cuda/codec.cuh"));

/// NVRTC options of every kernel: no contraction of a * b + c into an FMA, IEEE division
/// and square root, subnormals kept (the kernels flush explicitly where the core does).
pub const NVRTC_OPTIONS: [&str; 5] = [
    "--fmad=false",
    "--prec-div=true",
    "--prec-sqrt=true",
    "--ftz=false",
    "--std=c++17",
];

pub use sapwood_core::backend::shard::kernels::{CodecKernel, Helper, Kernel};

/// The CUDA text of a kernel (the kernel list itself is the core's, shared with WGSL).
pub trait CudaSource: Copy {
    /// The entry point's name.
    fn entry(self) -> &'static str;
    /// The kernel's file name in `shaders/cuda/`.
    fn file(self) -> String;
    /// The complete translation unit, with `#line` markers so compiler messages name the
    /// file and line in `shaders/cuda/`.
    fn source(self) -> String;
}

fn helper_file(h: Helper) -> (&'static str, &'static str) {
    match h {
        Helper::Common => COMMON,
        Helper::Params => PARAMS,
        Helper::Bins => BINS,
        Helper::Route => ROUTE,
    }
}

fn body(k: Kernel) -> &'static str {
    match k {
        Kernel::Gradients => include_str!("../../../shaders/cuda/gradients.cu"),
        Kernel::Quantise => include_str!("../../../shaders/cuda/quantise.cu"),
        Kernel::SampleRows => include_str!("../../../shaders/cuda/sample_rows.cu"),
        Kernel::HistShared => include_str!("../../../shaders/cuda/hist_shared.cu"),
        Kernel::HistGlobal => include_str!("../../../shaders/cuda/hist_global.cu"),
        Kernel::Partition => include_str!("../../../shaders/cuda/partition.cu"),
        Kernel::LeafSums => include_str!("../../../shaders/cuda/leaf_sums.cu"),
        Kernel::SquareSums => include_str!("../../../shaders/cuda/square_sums.cu"),
        Kernel::Predict => include_str!("../../../shaders/cuda/predict.cu"),
    }
}

impl CudaSource for Kernel {
    fn entry(self) -> &'static str {
        self.stem()
    }

    fn file(self) -> String {
        format!("{}.cu", self.stem())
    }

    fn source(self) -> String {
        let mut s = String::new();
        for &h in self.helpers() {
            let (name, text) = helper_file(h);
            push_file(&mut s, name, text);
        }
        push_file(&mut s, &self.file(), body(self));
        s
    }
}

impl CudaSource for CodecKernel {
    fn entry(self) -> &'static str {
        self.stem()
    }

    fn file(self) -> String {
        format!("{}.cu", self.stem())
    }

    fn source(self) -> String {
        let body = match self {
            CodecKernel::Pack => include_str!("../../../shaders/cuda/pack.cu"),
            CodecKernel::Groups => include_str!("../../../shaders/cuda/groups.cu"),
        };
        let mut s = String::new();
        for (name, text) in [COMMON, CODEC, (&self.file(), body)] {
            push_file(&mut s, name, text);
        }
        s
    }
}

/// Compiles the encoder `kernel` for `target` (its `kernel` field is `None`: it is not in
/// the core's list).
pub fn compile_codec(kernel: CodecKernel, target: Target) -> Result<Compiled> {
    compile_source(&kernel.source(), &kernel.file(), target)
}

fn push_file(s: &mut String, name: &str, text: &str) {
    s.push_str(&format!("#line 1 \"{name}\"\n"));
    s.push_str(text);
    s.push('\n');
}

/// The helper headers on their own (for tests that compile generated code against them).
pub fn header_source() -> String {
    let mut s = String::new();
    for (name, text) in [COMMON, PARAMS, BINS, ROUTE] {
        push_file(&mut s, name, text);
    }
    s
}

/// What NVRTC should produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// PTX for the virtual architecture `compute_{0}` (e.g. 80, 90).
    Ptx(u32),
    /// A CUBIN for the real architecture `sm_{0}`.
    Cubin(u32),
}

impl Target {
    /// The `--gpu-architecture` value.
    pub fn arch(self) -> String {
        match self {
            Target::Ptx(a) => format!("compute_{a}"),
            Target::Cubin(a) => format!("sm_{a}"),
        }
    }
}

/// A compiled kernel: PTX text (NUL-free) or CUBIN bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    /// The kernel.
    pub kernel: Option<Kernel>,
    /// What was produced.
    pub target: Target,
    /// PTX text or CUBIN image.
    pub image: Vec<u8>,
}

/// Whether the NVRTC library can be loaded (it is looked up by cudarc on the library path:
/// `libnvrtc.so`, `libnvrtc.so.13`, ...).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library by its candidate names.
    unsafe { nvrtc_sys::is_culib_present() }
}

/// The NVRTC version (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    require_nvrtc()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (checked above); both pointers are valid.
    unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| Error::Backend(format!("nvrtcVersion: {e:?}")))?;
    Ok((major, minor))
}

fn require_nvrtc() -> Result<()> {
    if nvrtc_present() {
        Ok(())
    } else {
        Err(Error::Backend(
            "the CUDA backend needs NVRTC (libnvrtc.so, CUDA 13.0), which was not found on the \
             library path; install the CUDA runtime compiler or run \
             crates/sapwood-cuda/install-nvrtc.sh and add the directory it prints to \
             LD_LIBRARY_PATH"
                .into(),
        ))
    }
}

/// Compiles `kernel` for `target`.
pub fn compile(kernel: Kernel, target: Target) -> Result<Compiled> {
    let mut c = compile_source(&kernel.source(), &kernel.file(), target)?;
    c.kernel = Some(kernel);
    Ok(c)
}

/// Owns an NVRTC program and destroys it on every path.
struct Program(nvrtc_sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by create_program and is destroyed once.
        let _ = unsafe { nvrtc::destroy_program(self.0) };
    }
}

fn log_of(p: &Program) -> String {
    // SAFETY: p holds a live program.
    match unsafe { nvrtc::get_program_log(p.0) } {
        Ok(raw) => {
            let bytes: Vec<u8> = raw
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            String::from_utf8_lossy(&bytes).trim().to_string()
        }
        Err(e) => format!("(no compiler log: {e:?})"),
    }
}

/// Compiles a complete CUDA translation unit named `name` for `target`; a compile error
/// carries NVRTC's log.
pub fn compile_source(source: &str, name: &str, target: Target) -> Result<Compiled> {
    require_nvrtc()?;
    let src = CString::new(source)
        .map_err(|_| Error::Backend(format!("{name}: the source holds a NUL byte")))?;
    let cname = CString::new(name).unwrap_or_else(|_| CString::from(c"kernel.cu"));
    let prog = Program(
        nvrtc::create_program(&src, Some(&cname))
            .map_err(|e| Error::Backend(format!("NVRTC could not create {name}: {e:?}")))?,
    );
    let mut options: Vec<String> = NVRTC_OPTIONS.iter().map(|s| s.to_string()).collect();
    options.push(format!("--gpu-architecture={}", target.arch()));
    // SAFETY: prog is live; the options are NUL-free strings.
    if let Err(e) = unsafe { nvrtc::compile_program(prog.0, &options) } {
        return Err(Error::Backend(format!(
            "NVRTC failed to compile {name} for {} ({e:?}); compiler log:\n{}",
            target.arch(),
            log_of(&prog)
        )));
    }
    let image = match target {
        Target::Ptx(_) => {
            // SAFETY: prog is live and compiled.
            let raw = unsafe { nvrtc::get_ptx(prog.0) }
                .map_err(|e| Error::Backend(format!("{name}: no PTX: {e:?}")))?;
            raw.iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect()
        }
        Target::Cubin(_) => get_cubin(&prog).map_err(|e| Error::Backend(format!("{name}: {e}")))?,
    };
    if image.is_empty() {
        return Err(Error::Backend(format!(
            "NVRTC produced nothing for {name} ({})",
            target.arch()
        )));
    }
    Ok(Compiled {
        kernel: None,
        target,
        image,
    })
}

fn get_cubin(p: &Program) -> std::result::Result<Vec<u8>, String> {
    let mut size = 0usize;
    // SAFETY: p is live and compiled for a real architecture; size is a valid pointer.
    unsafe { nvrtc_sys::nvrtcGetCUBINSize(p.0, &mut size) }
        .result()
        .map_err(|e| format!("no CUBIN size: {e:?}"))?;
    let mut buf = vec![0 as c_char; size];
    // SAFETY: buf holds exactly `size` bytes, as NVRTC asked.
    unsafe { nvrtc_sys::nvrtcGetCUBIN(p.0, buf.as_mut_ptr()) }
        .result()
        .map_err(|e| format!("no CUBIN: {e:?}"))?;
    Ok(buf.into_iter().map(|c| c as u8).collect())
}

/// The real architectures this NVRTC can build CUBINs for (e.g. 75, 80, 86, 89, 90, ...).
pub fn supported_archs() -> Result<Vec<u32>> {
    require_nvrtc()?;
    let mut n = 0i32;
    // SAFETY: NVRTC is loaded; n is a valid pointer.
    unsafe { nvrtc_sys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .map_err(|e| Error::Backend(format!("nvrtcGetNumSupportedArchs: {e:?}")))?;
    let mut v = vec![0i32; n.max(0) as usize];
    // SAFETY: v holds n entries, as NVRTC asked.
    unsafe { nvrtc_sys::nvrtcGetSupportedArchs(v.as_mut_ptr()) }
        .result()
        .map_err(|e| Error::Backend(format!("nvrtcGetSupportedArchs: {e:?}")))?;
    Ok(v.into_iter().map(|a| a as u32).collect())
}

/// A CStr view of PTX text, for loading.
pub(crate) fn ptx_text(image: &[u8]) -> Option<&str> {
    CStr::from_bytes_until_nul(image)
        .ok()
        .and_then(|c| c.to_str().ok())
        .or_else(|| std::str::from_utf8(image).ok())
}
