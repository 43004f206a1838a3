//! Whether the kernels may use the CPU's vector extensions (AVX2, AVX-512).
//!
//! Every kernel with a vector path gives the bits of its portable path, so this decides
//! speed only. Setting the environment variable [`PORTABLE_ENV`] (to anything but `0` or
//! nothing) before the process starts makes every kernel take its portable path, as on a
//! CPU without those extensions, so that the portable code's speed can be measured on any
//! machine (NumPy's `NPY_DISABLE_CPU_FEATURES` habit).

use std::sync::OnceLock;

/// The environment variable that turns the vector paths off.
pub const PORTABLE_ENV: &str = "SAPWOOD_PORTABLE";

/// Whether the vector paths may be taken where the CPU has them (read once a process).
pub fn vectors_allowed() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| !portable_requested(std::env::var_os(PORTABLE_ENV).as_deref()))
}

/// Whether a value of [`PORTABLE_ENV`] asks for the portable paths.
fn portable_requested(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

/// The vector paths the kernels take in this process, in words (for `sapwood --version`).
pub fn describe() -> String {
    if !vectors_allowed() {
        return format!("portable ({PORTABLE_ENV} is set)");
    }
    #[cfg(target_arch = "x86_64")]
    {
        let has = |f: bool, name: &str| f.then(|| name.to_string());
        let found: Vec<String> = [
            has(std::arch::is_x86_feature_detected!("avx2"), "AVX2"),
            has(std::arch::is_x86_feature_detected!("avx512f"), "AVX-512 F"),
            has(
                std::arch::is_x86_feature_detected!("avx512vbmi"),
                "AVX-512 VBMI",
            ),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !found.is_empty() {
            return format!(
                "{} (set {PORTABLE_ENV}=1 for the portable paths)",
                found.join(", ")
            );
        }
    }
    "portable (the CPU has no vector extension the kernels use)".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn any_value_but_zero_or_nothing_asks_for_the_portable_paths() {
        assert!(!portable_requested(None));
        assert!(!portable_requested(Some(OsStr::new(""))));
        assert!(!portable_requested(Some(OsStr::new("0"))));
        assert!(portable_requested(Some(OsStr::new("1"))));
        assert!(portable_requested(Some(OsStr::new("yes"))));
    }
}
