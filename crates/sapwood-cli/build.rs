//! Probes for what the multi-host test needs, so that where it cannot run it is compiled
//! as ignored (reported as such, never as passed): `sapwood_no_netns` unless this build
//! runs as root with iproute2's `ip` (network namespaces stand in for hosts), or
//! `SAPWOOD_REQUIRE_NETNS=1`, which makes the test run and fail without them.

use std::path::Path;

/// Whether the effective user is root, from `/proc/self/status` (no libc call needed).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(sapwood_no_netns)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=SAPWOOD_REQUIRE_NETNS");
    let required = std::env::var_os("SAPWOOD_REQUIRE_NETNS").is_some_and(|v| v == "1");
    let has_ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .iter()
        .any(|p| Path::new(p).exists());
    let runnable = required || (is_root() && has_ip);
    if !runnable {
        println!("cargo::rustc-cfg=sapwood_no_netns");
    }
}
