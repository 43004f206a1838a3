//! `mpirun -np N sapwood train --collective mpi`: the model equals one worker's, and a rank
//! that dies takes the job down in bounded time. Built with `--features mpi`; needs
//! OpenMPI's `mpirun` (the test script installs it).
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn mpirun(np: usize) -> Command {
    let mut c = Command::new("mpirun");
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--mca",
        "btl",
        "self,tcp",
        "-np",
        &np.to_string(),
    ]);
    c.env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    c
}

fn train_args(
    data: &Path,
    label: &str,
    objective: &str,
    extra: &[&str],
    model: &Path,
) -> Vec<String> {
    let mut v: Vec<String> = [
        "train",
        "--quiet",
        "--label",
        label,
        "--objective",
        objective,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v.push("--data".into());
    v.push(data.display().to_string());
    v.push("--model".into());
    v.push(model.display().to_string());
    v
}

#[test]
fn one_to_four_ranks_save_the_single_worker_model() {
    let bin = assert_cmd::cargo::cargo_bin("sapwood");
    let t = tempfile::tempdir().unwrap();
    let cases = [
        ("synthetic", "y", "binary:logistic"),
        ("diamonds", "price", "reg:squarederror"),
        ("digits", "target", "multi:softprob"),
    ];
    for (name, label, objective) in cases {
        let data = repo().join("datasets").join(name).join("train.parquet");
        for grad_bits in ["0", "8"] {
            let extra = ["--rounds", "8", "--set", &format!("grad_bits={grad_bits}")];
            let single = t.path().join(format!("{name}-{grad_bits}-single.json"));
            let s = Command::new(&bin)
                .args(train_args(&data, label, objective, &extra, &single))
                .status()
                .unwrap();
            assert!(s.success());
            for np in 1..=4 {
                let model = t.path().join(format!("{name}-{grad_bits}-{np}.json"));
                let out = mpirun(np)
                    .arg(&bin)
                    .args(train_args(&data, label, objective, &extra, &model))
                    .args(["--collective", "mpi"])
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{name} np={np}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(
                    std::fs::read(&model).unwrap() == std::fs::read(&single).unwrap(),
                    "{name} grad_bits={grad_bits}: {np} ranks differ from one worker"
                );
            }
        }
    }
}

#[test]
fn a_rank_that_dies_stops_the_job_with_an_error() {
    let bin = assert_cmd::cargo::cargo_bin("sapwood");
    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("never-written-fault-test.json");
    let data = repo().join("datasets/diamonds/train.parquet");
    let start = Instant::now();
    let mut job = mpirun(3)
        .arg(&bin)
        .args(train_args(
            &data,
            "price",
            "reg:squarederror",
            &["--rounds", "1000000"],
            &model,
        ))
        .args(["--collective", "mpi"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    // kill one rank (not mpirun itself) as a crash would
    let pids = Command::new("pgrep")
        .args(["-f", "never-written-fault-test"])
        .output()
        .unwrap();
    let pids: Vec<String> = String::from_utf8_lossy(&pids.stdout)
        .lines()
        .map(String::from)
        .filter(|p| *p != job.id().to_string())
        .collect();
    let victim = pids.iter().find(|p| {
        std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sapwood")
    });
    let victim = victim.expect("a rank process is running");
    assert!(Command::new("kill")
        .args(["-9", victim])
        .status()
        .unwrap()
        .success());
    let out = loop {
        if let Some(status) = job.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the job hung after a rank died"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(job.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!out.success(), "the job must fail");
    assert!(!err.trim().is_empty(), "mpirun says what happened");
    assert!(!model.exists());
}
