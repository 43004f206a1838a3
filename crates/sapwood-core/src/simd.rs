//! Which of the CPU's vector extensions (AVX2, AVX-512) the kernels may use.
//!
//! Every kernel with a vector path gives the bits of its portable path, so this decides
//! speed only. The environment variable [`PORTABLE_ENV`], read once a process, limits the
//! paths taken, so that the speed of each can be measured on any machine (NumPy's
//! `NPY_DISABLE_CPU_FEATURES` habit): `avx2` takes the AVX2 paths but none of AVX-512, as
//! on the many CPUs that have the one but not the other; any other value but `0` or
//! nothing takes the portable paths only, as on a CPU with neither.

use std::sync::OnceLock;

/// The environment variable that limits the vector paths.
pub const PORTABLE_ENV: &str = "SAPWOOD_PORTABLE";

/// The widest vector extension the kernels may use, where the CPU has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Vectors {
    /// None: the portable paths (SSE2 on x86-64, which every such CPU has).
    Portable,
    /// AVX2 (and the BMI, LZCNT and FMA extensions that come with it), not AVX-512.
    Avx2,
    /// AVX-512 too.
    Avx512,
}

/// The vector paths this process may take (read once).
pub fn allowed() -> Vectors {
    static ALLOWED: OnceLock<Vectors> = OnceLock::new();
    *ALLOWED.get_or_init(|| requested(std::env::var_os(PORTABLE_ENV).as_deref()))
}

/// Whether the AVX-512 paths may be taken where the CPU has them.
pub fn avx512_allowed() -> bool {
    allowed() == Vectors::Avx512
}

/// Whether the AVX2 paths may be taken where the CPU has them.
pub fn avx2_allowed() -> bool {
    allowed() >= Vectors::Avx2
}

/// Whether the AVX2 paths are taken: allowed, and the CPU has AVX2 with the extensions
/// that came with it (BMI1, BMI2, LZCNT, POPCNT, FMA: x86-64-v3), which the paths compiled
/// for AVX2 may use. Read once a process.
pub fn avx2() -> bool {
    static TAKEN: OnceLock<bool> = OnceLock::new();
    *TAKEN.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            avx2_allowed()
                && std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("bmi1")
                && std::arch::is_x86_feature_detected!("bmi2")
                && std::arch::is_x86_feature_detected!("lzcnt")
                && std::arch::is_x86_feature_detected!("popcnt")
                && std::arch::is_x86_feature_detected!("fma")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// The paths a value of [`PORTABLE_ENV`] allows.
fn requested(value: Option<&std::ffi::OsStr>) -> Vectors {
    match value {
        None => Vectors::Avx512,
        Some(v) if v.is_empty() || v == "0" => Vectors::Avx512,
        Some(v) if v.eq_ignore_ascii_case("avx2") => Vectors::Avx2,
        Some(_) => Vectors::Portable,
    }
}

/// The vector paths the kernels take in this process, in words (for `sapwood --version`).
pub fn describe() -> String {
    let limit = allowed();
    if limit == Vectors::Portable {
        return format!("portable ({PORTABLE_ENV} is set)");
    }
    #[cfg(target_arch = "x86_64")]
    {
        let has = |f: bool, name: &str| f.then(|| name.to_string());
        let wide = limit == Vectors::Avx512;
        let found: Vec<String> = [
            // the AVX2 paths are taken with the extensions that came with it
            has(avx2(), "AVX2"),
            has(
                wide && std::arch::is_x86_feature_detected!("avx512f"),
                "AVX-512 F",
            ),
            has(
                wide && std::arch::is_x86_feature_detected!("avx512vbmi"),
                "AVX-512 VBMI",
            ),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !found.is_empty() {
            let how = if wide {
                format!("set {PORTABLE_ENV}=avx2 for no AVX-512, {PORTABLE_ENV}=1 for none")
            } else {
                format!("no AVX-512: {PORTABLE_ENV}=avx2 is set")
            };
            return format!("{} ({how})", found.join(", "));
        }
    }
    "portable (the CPU has no vector extension the kernels use)".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn the_variable_limits_the_paths_to_avx2_or_to_none() {
        assert_eq!(requested(None), Vectors::Avx512);
        assert_eq!(requested(Some(OsStr::new(""))), Vectors::Avx512);
        assert_eq!(requested(Some(OsStr::new("0"))), Vectors::Avx512);
        assert_eq!(requested(Some(OsStr::new("avx2"))), Vectors::Avx2);
        assert_eq!(requested(Some(OsStr::new("AVX2"))), Vectors::Avx2);
        assert_eq!(requested(Some(OsStr::new("1"))), Vectors::Portable);
        assert_eq!(requested(Some(OsStr::new("yes"))), Vectors::Portable);
    }
}
