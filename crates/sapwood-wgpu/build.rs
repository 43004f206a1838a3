//! Probes for a Vulkan driver so the tests that need a wgpu adapter are compiled as ignored
//! (reported as such, never as passed) where there is none. `SAPWOOD_REQUIRE_ADAPTER=1`
//! turns the probe off: the tests then run and fail without an adapter.

use std::path::Path;

fn has_json(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|d| {
        d.flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "json"))
    })
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(sapwood_no_adapter)");
    println!("cargo::rerun-if-changed=build.rs");
    for var in [
        "SAPWOOD_REQUIRE_ADAPTER",
        "VK_ICD_FILENAMES",
        "VK_DRIVER_FILES",
        "XDG_DATA_DIRS",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    if std::env::var("SAPWOOD_REQUIRE_ADAPTER").is_ok_and(|v| v == "1") {
        return;
    }
    let target = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    // Metal and DX12 ship with the operating system
    if target == "macos" || target == "ios" || target == "windows" {
        return;
    }
    let mut dirs: Vec<String> = [
        "/usr/share/vulkan/icd.d",
        "/usr/local/share/vulkan/icd.d",
        "/etc/vulkan/icd.d",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Ok(x) = std::env::var("XDG_DATA_DIRS") {
        dirs.extend(x.split(':').map(|d| format!("{d}/vulkan/icd.d")));
    }
    for d in &dirs {
        // rerun when a driver is installed later: watch the nearest existing directory (a
        // missing path would rerun this script, and rebuild the crate, on every build)
        if let Some(p) = Path::new(d).ancestors().find(|p| p.exists()) {
            println!("cargo::rerun-if-changed={}", p.display());
        }
    }
    let from_env = ["VK_ICD_FILENAMES", "VK_DRIVER_FILES"].iter().any(|v| {
        std::env::var(v).is_ok_and(|files| files.split(':').any(|f| Path::new(f).exists()))
    });
    if !from_env && !dirs.iter().any(|d| has_json(Path::new(d))) {
        println!("cargo::rustc-cfg=sapwood_no_adapter");
        println!(
            "cargo::warning=sapwood-wgpu: no Vulkan driver found; tests that need an adapter \
             are ignored (run crates/sapwood-wgpu/install-lavapipe.sh)"
        );
    }
}
