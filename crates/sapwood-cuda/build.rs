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

/// The dynamic shared area a kernel body declares (`extern __shared__ T name[];`), as
/// (T, name).
#[cfg(feature = "sim")]
fn dynamic_shared(body: &str) -> Option<(String, String)> {
    let decl = body.split("extern __shared__").nth(1)?;
    let decl = decl.split(';').next()?.trim();
    let (ty, name) = decl.rsplit_once(char::is_whitespace)?;
    let name = name.trim().strip_suffix("[]")?;
    Some((ty.trim().to_string(), name.to_string()))
}

/// Feature `sim`: every kernel of `shaders/cuda/` compiled as C++ for the CPU simulator.
/// A kernel's translation unit is `sim/sim.h`, every helper header and the kernel's own
/// file, unchanged (NVRTC compiles each kernel with the helpers it lists; the extra ones
/// only add unused inline functions), then the line that exports its launcher
/// (`sapwood_sim_kernel_<file stem>`), naming the dynamic shared area it declares. A
/// registry maps entry names to launchers.
#[cfg(feature = "sim")]
fn build_simulator(manifest: &Path) {
    let shaders = manifest.join("../../shaders/cuda");
    let sim = manifest.join("sim");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("sim");
    std::fs::create_dir_all(&out).expect("the build directory is writable");
    println!("cargo::rerun-if-changed={}", shaders.display());
    println!("cargo::rerun-if-changed={}", sim.display());
    let read = |p: &Path| {
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
    };
    let helpers = [
        "common.cuh",
        "params.cuh",
        "bins.cuh",
        "route.cuh",
        "codec.cuh",
    ];
    let mut prelude = String::from("#include \"sim.h\"\n");
    for h in helpers {
        prelude.push_str(&format!("#line 1 \"{h}\"\n{}\n", read(&shaders.join(h))));
    }
    let mut kernels: Vec<String> = std::fs::read_dir(&shaders)
        .expect("shaders/cuda exists")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.strip_suffix(".cu").map(str::to_string)
        })
        .collect();
    kernels.sort();
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        .include(&sim)
        .flag("-ffp-contract=off")
        .flag("-fno-fast-math")
        .flag("-fno-strict-aliasing")
        .warnings(false);
    let mut registry =
        String::from("#include <stdio.h>\n#include <string.h>\n#include \"sim.h\"\n");
    let mut table = String::new();
    let mut sm75 = Vec::new();
    for k in &kernels {
        let body = read(&shaders.join(format!("{k}.cu")));
        let export = match dynamic_shared(&body) {
            Some((ty, name)) => format!("SIM_KERNEL_DYNAMIC({k}, {ty}, {name})"),
            None => format!("SIM_KERNEL({k})"),
        };
        let mut variants = vec![(k.clone(), String::new())];
        if body.contains("warp_or(") {
            sm75.push(k.clone());
            // a second build acting as sm_75, whose warp ORs are shuffles (codec.cuh)
            variants.push((
                format!("{k}_sm75"),
                format!("#define SAPWOOD_SIM_SM75\n#define {k} {k}_sm75\n"),
            ));
        }
        for (name, defines) in variants {
            let export = export.replace(&format!("({k}"), &format!("({name}"));
            let tu = format!("{defines}{prelude}#line 1 \"{k}.cu\"\n{body}\n{export}\n");
            let file = out.join(format!("{name}.cpp"));
            std::fs::write(&file, tu).expect("the build directory is writable");
            build.file(&file);
            registry.push_str(&format!(
                "extern \"C\" int sapwood_sim_kernel_{name}(const SimLaunch*, void**, char*, \
                 size_t);\n"
            ));
            table.push_str(&format!(
                "    if (strcmp(entry, \"{name}\") == 0) return sapwood_sim_kernel_{name}(l, a, \
                 err, n);\n"
            ));
        }
    }
    registry.push_str(&format!(
        "extern \"C\" int sapwood_sim_launch(const char* entry, const SimLaunch* l, void** a, \
         char* err, size_t n) {{\n{table}    snprintf(err, n, \"the simulator has no kernel \
         named %s\", entry);\n    return 1;\n}}\n"
    ));
    std::fs::write(
        out.join("../sim_builds.rs"),
        format!("/// Kernels with a second build acting as sm_75.\nconst SM75_BUILDS: &[&str] = &{sm75:?};\n"),
    )
    .expect("the build directory is writable");
    let file = out.join("registry.cpp");
    std::fs::write(&file, registry).expect("the build directory is writable");
    build.file(&file);
    for f in std::fs::read_dir(&sim).expect("sim/ exists").flatten() {
        let p = f.path();
        if matches!(p.extension().and_then(|e| e.to_str()), Some("cpp" | "S")) {
            build.file(&p);
        }
    }
    build.compile("sapwood_sim");
}

fn main() {
    #[cfg(feature = "sim")]
    build_simulator(Path::new(
        &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    ));
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
