//! `--device` with an index or a list: bad forms are exit-2 errors naming `device`, a CUDA
//! GPU without a driver is a clear error (never a panic), and `wgpu:N` selects an adapter
//! while saving the CPU's model bytes.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Trains 4 rounds on penguins with `flags`; returns the output and the model's bytes.
fn train(dir: &Path, name: &str, flags: &[&str]) -> (std::process::Output, Option<Vec<u8>>) {
    let model = dir.join(format!("{name}.json"));
    let out = Command::cargo_bin("sapwood")
        .unwrap()
        .args(["train", "--quiet", "--label", "species", "--rounds", "4"])
        .args(["--objective", "multi:softprob", "--data"])
        .arg(repo().join("datasets/penguins/train.parquet"))
        .arg("--model")
        .arg(&model)
        .args(flags)
        .env("XDG_RUNTIME_DIR", dir)
        .output()
        .unwrap();
    let bytes = std::fs::read(&model).ok();
    (out, bytes)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_device_forms_are_exit_2_errors_naming_device() {
    let t = tempfile::tempdir().unwrap();
    for (flags, words) in [
        (&["--device", "cuda:x"][..], "`cuda:x`: the index after `:`"),
        (&["--device", "cpu:1"], "cpu takes no index"),
        (&["--device", "cuda:0,wgpu:1"], "mixes cuda and wgpu"),
        (&["--device", "cuda,cuda:1"], "needs an index"),
        (
            &["--device", "cuda:0,cuda:1", "--workers", "3"],
            "lists 2 devices for 3 workers",
        ),
        (
            &["--device", "wgpu:0,wgpu:0"],
            "lists 2 devices for 1 worker",
        ),
        (&["--set", "device=cuda:-1"], "whole number"),
    ] {
        let (out, model) = train(t.path(), "bad", flags);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(
            err.contains("`device`") && err.contains(words),
            "{flags:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(model.is_none(), "{flags:?}: a model was written");
    }
}

#[test]
fn a_cuda_index_without_a_driver_is_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let (_, cpu) = train(t.path(), "cpu", &[]);
    for device in ["cuda:1", "cuda:0,cuda:1"] {
        let workers = if device.contains(',') { "2" } else { "1" };
        let (out, model) = train(
            t.path(),
            "cuda",
            &["--device", device, "--workers", workers],
        );
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{err}");
        if out.status.success() {
            // a machine with two GPUs: the device never changes a bit
            assert_eq!(model, cpu, "{device}");
            continue;
        }
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            // no driver (this machine), or fewer GPUs than asked for
            (err.contains("NVIDIA driver") && err.contains(&format!("requested: {device}")))
                || err.contains("`cuda:1` requested, but the NVIDIA driver reports 1 GPU"),
            "{device}: {err}"
        );
        assert!(model.is_none());
    }
}

#[test]
fn wgpu_index_selects_an_adapter_and_saves_the_cpu_model() {
    let t = tempfile::tempdir().unwrap();
    let (_, cpu) = train(t.path(), "cpu", &[]);
    let (out, one) = train(t.path(), "wgpu0", &["--device", "wgpu:0"]);
    if !out.status.success() {
        // only acceptable without an adapter, and never where the test script installed one
        let err = stderr(&out);
        assert!(err.contains("no wgpu adapter found"), "{err}");
        assert!(
            std::env::var_os("SAPWOOD_REQUIRE_ADAPTER").is_none(),
            "an adapter was required: {err}"
        );
        return;
    }
    assert_eq!(one, cpu, "wgpu:0 and cpu models differ");
    // two workers on adapter 0, one logical device each
    let (out, two) = train(
        t.path(),
        "wgpu00",
        &["--device", "wgpu:0,wgpu:0", "--workers", "2"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(two, cpu, "two workers on wgpu:0 differ");
    // an index beyond the adapters names it and lists those found
    let (out, none) = train(t.path(), "wgpu9", &["--device", "wgpu:9"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`device`") && err.contains("`wgpu:9` requested") && err.contains("wgpu:0 "),
        "{err}"
    );
    assert!(none.is_none());
}

/// Trains 3 rounds of depth 6 on the synthetic task (28 features of 256 bins: its deep
/// levels are reduce-scattered) with `flags`; returns the model's bytes and the summary.
fn train_synthetic(dir: &Path, name: &str, flags: &[&str]) -> (Vec<u8>, serde_json::Value) {
    let (model, summary) = (
        dir.join(format!("{name}.json")),
        dir.join(format!("{name}-summary.json")),
    );
    let out = Command::cargo_bin("sapwood")
        .unwrap()
        .args(["train", "--quiet", "--label", "y", "--rounds", "3"])
        .args([
            "--objective",
            "binary:logistic",
            "--max-depth",
            "6",
            "--data",
        ])
        .arg(repo().join("datasets/synthetic/train.parquet"))
        .arg("--model")
        .arg(&model)
        .arg("--summary")
        .arg(&summary)
        .args(flags)
        .env("XDG_RUNTIME_DIR", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", stderr(&out));
    let s = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    (std::fs::read(&model).unwrap(), s)
}

#[test]
fn wgpu_workers_send_blocks_encoded_on_the_device_and_save_the_cpu_model() {
    let t = tempfile::tempdir().unwrap();
    if std::env::var_os("SAPWOOD_REQUIRE_ADAPTER").is_none() {
        let (out, _) = train(t.path(), "probe", &["--device", "wgpu:0"]);
        if !out.status.success() {
            assert!(stderr(&out).contains("no wgpu adapter found"));
            return;
        }
    }
    let (cpu, _) = train_synthetic(t.path(), "cpu", &[]);
    let devices = "wgpu:0,wgpu:0,wgpu:0";
    for (codec, overlap) in [("auto", "true"), ("auto", "false"), ("sparse", "true")] {
        let name = format!("wgpu-{codec}-{overlap}");
        let (model, s) = train_synthetic(
            t.path(),
            &name,
            &[
                "--device",
                devices,
                "--workers",
                "3",
                "--set",
                &format!("comm_codec={codec}"),
                "--set",
                &format!("comm_overlap={overlap}"),
            ],
        );
        assert!(model == cpu, "{name}: the model differs from the CPU's");
        let device = s["communication"]["device_encoded_blocks"]
            .as_u64()
            .unwrap();
        let groups = s["communication"]["blocks_by_encoding"]["groups"]
            .as_u64()
            .unwrap();
        if codec == "auto" {
            // rank 0's share of the reduce-scattered levels came from the device encoded
            assert!(device > 0 && device <= groups, "{name}: {s}");
        } else {
            assert_eq!(device, 0, "{name}: {s}");
        }
    }
}
