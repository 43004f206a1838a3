//! Probes for the libraries the tests need, so tests that cannot run here are compiled as
//! ignored (reported as such, never as passed):
//! - `sapwood_no_nvrtc` when no `libnvrtc.so*` is found (NVRTC compile tests), unless
//!   `SAPWOOD_REQUIRE_NVRTC=1`, which makes those tests run and fail without NVRTC;
//! - `sapwood_no_cuda` when no `libcuda.so*` is found (GPU tests), unless
//!   `SAPWOOD_REQUIRE_CUDA=1`, which makes them run and fail without a driver;
//! - `sapwood_no_nvdisasm` when no `nvdisasm` is found (the SASS inspection test), unless
//!   `SAPWOOD_REQUIRE_NVDISASM=1`. It is looked for at `SAPWOOD_NVDISASM` (the binary) and
//!   where `install-nvdisasm.sh` puts it (`target/nvdisasm`); the path found is passed to
//!   the tests as `SAPWOOD_NVDISASM_BUILD`.
//!
//! Directories searched: `SAPWOOD_NVRTC_LIB_DIR`, `LD_LIBRARY_PATH`, `CUDA_PATH`/lib64 and
//! the system library directories.

use std::path::{Path, PathBuf};

fn has_lib(dir: &Path, prefix: &str) -> bool {
    std::fs::read_dir(dir).is_ok_and(|d| {
        d.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(prefix) && !name.contains("builtins")
        })
    })
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(sapwood_no_nvrtc)");
    println!("cargo::rustc-check-cfg=cfg(sapwood_no_cuda)");
    println!("cargo::rustc-check-cfg=cfg(sapwood_no_nvdisasm)");
    println!("cargo::rerun-if-changed=build.rs");
    for var in [
        "SAPWOOD_REQUIRE_NVRTC",
        "SAPWOOD_REQUIRE_CUDA",
        "SAPWOOD_REQUIRE_NVDISASM",
        "SAPWOOD_NVDISASM",
        "SAPWOOD_NVRTC_LIB_DIR",
        "LD_LIBRARY_PATH",
        "CUDA_PATH",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["SAPWOOD_NVRTC_LIB_DIR", "LD_LIBRARY_PATH"] {
        if let Ok(v) = std::env::var(var) {
            dirs.extend(v.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
        }
    }
    if let Ok(c) = std::env::var("CUDA_PATH") {
        dirs.push(Path::new(&c).join("lib64"));
    }
    for d in [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/cuda/lib64",
        "/usr/lib/wsl/lib",
    ] {
        dirs.push(PathBuf::from(d));
    }
    let require = |v: &str| std::env::var(v).is_ok_and(|x| x == "1");
    if !require("SAPWOOD_REQUIRE_NVRTC") && !dirs.iter().any(|d| has_lib(d, "libnvrtc.so")) {
        println!("cargo::rustc-cfg=sapwood_no_nvrtc");
        println!(
            "cargo::warning=sapwood-cuda: NVRTC not found; the kernel compile tests are \
             ignored (run crates/sapwood-cuda/install-nvrtc.sh and put the directory it prints \
             on LD_LIBRARY_PATH)"
        );
    }
    // the driver ships with the NVIDIA kernel module, never with the toolkit's stubs
    let cuda_dirs: Vec<&PathBuf> = dirs
        .iter()
        .filter(|d| !d.to_string_lossy().contains("stubs"))
        .collect();
    if !require("SAPWOOD_REQUIRE_CUDA") && !cuda_dirs.iter().any(|d| has_lib(d, "libcuda.so")) {
        println!("cargo::rustc-cfg=sapwood_no_cuda");
    }
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let nvdisasm = std::env::var("SAPWOOD_NVDISASM")
        .ok()
        .map(PathBuf::from)
        .into_iter()
        .chain([Path::new(&manifest).join("../../target/nvdisasm/nvidia/cu13/bin/nvdisasm")])
        .find(|p| p.is_file());
    match nvdisasm {
        Some(p) => println!("cargo::rustc-env=SAPWOOD_NVDISASM_BUILD={}", p.display()),
        None if !require("SAPWOOD_REQUIRE_NVDISASM") => {
            println!("cargo::rustc-cfg=sapwood_no_nvdisasm");
        }
        None => {}
    }
}
