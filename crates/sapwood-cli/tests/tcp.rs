//! `sapwood train --collective tcp` on one host (loopback): 1–4 processes save the
//! single-process model with every codec, and a rank that is killed, or presents a wrong
//! token, ends the job with a clear error within `comm_timeout` and no model.

mod support;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{check_rows_read, repo, train_args};

fn free_coordinator() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", l.local_addr().unwrap().port())
}

/// Starts rank `rank` of `world` with `args` (a `train` command line).
fn spawn_rank(args: &[String], rank: usize, world: usize, coordinator: &str, token: &str) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("sapwood"))
        .args(args)
        .args(["--collective", "tcp", "--coordinator", coordinator])
        .args(["--rank", &rank.to_string(), "--world", &world.to_string()])
        .env("SAPWOOD_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs a whole job of `world` processes and returns each one's output, by rank.
fn run_job(args: &[String], world: usize) -> Vec<Output> {
    let coordinator = free_coordinator();
    let ranks: Vec<Child> = (0..world)
        .map(|r| spawn_rank(args, r, world, &coordinator, "a-job-token"))
        .collect();
    ranks
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

#[test]
fn one_to_four_processes_save_the_single_process_model_with_every_codec() {
    let t = tempfile::tempdir().unwrap();
    let cases = [
        ("synthetic", "y", "binary:logistic", "none"),
        ("diamonds", "price", "reg:squarederror", "auto"),
        ("digits", "target", "multi:softprob", "packed"),
        ("synthetic", "y", "binary:logistic", "sparse"),
    ];
    for (name, label, objective, codec) in cases {
        let data = repo().join("datasets").join(name).join("train.parquet");
        let extra = ["--rounds", "8", "--set", "grad_bits=8"];
        let single = t.path().join(format!("{name}-{codec}-single.json"));
        let s = Command::new(assert_cmd::cargo::cargo_bin("sapwood"))
            .args(train_args(&data, label, objective, &extra, &single))
            .status()
            .unwrap();
        assert!(s.success());
        for world in 1..=4 {
            let model = t.path().join(format!("{name}-{codec}-{world}.json"));
            let codec_set = format!("comm_codec={codec}");
            let extra = [&extra[..], &["--set", &codec_set]].concat();
            // not quiet: each rank says which rows it read
            let mut args = train_args(&data, label, objective, &extra, &model);
            args.retain(|a| a != "--quiet");
            let outs = run_job(&args, world);
            let mut stderr = String::new();
            for (r, o) in outs.iter().enumerate() {
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(
                    o.status.success(),
                    "{name} {codec} rank {r} of {world}: {err}"
                );
                stderr += &err;
            }
            check_rows_read(&stderr, world, &format!("{name} {codec} world={world}"));
            assert!(
                std::fs::read(&model).unwrap() == std::fs::read(&single).unwrap(),
                "{name} {codec}: {world} processes differ from one"
            );
        }
    }
}

/// Ranks of a job that would train for a long time: killed when the test ends, whether it
/// passes or fails, so that a failed assertion leaves no process training on.
struct KillOnDrop(Vec<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits for `child` at most until `limit`; kills it past that.
fn wait_until(child: &mut Child, limit: Instant) -> Option<std::process::ExitStatus> {
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut s).unwrap();
    s
}

fn no_outputs(dir: &Path, model: &Path) {
    assert!(!model.exists(), "a model was written");
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        leftovers
            .iter()
            .all(|n| !n.to_string_lossy().ends_with(".tmp")),
        "{leftovers:?}"
    );
}

/// kill -9 of one rank at a random moment of training: the others end at once (its
/// connections close) with an error naming it; nothing is written.
#[test]
fn a_killed_rank_ends_the_others_with_an_error_naming_it() {
    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("m.json");
    let data = repo().join("datasets/diamonds/train.parquet");
    let args = train_args(
        &data,
        "price",
        "reg:squarederror",
        &["--rounds", "1000000", "--set", "comm_timeout=10"],
        &model,
    );
    let coordinator = free_coordinator();
    let mut ranks = KillOnDrop(
        (0..3)
            .map(|r| spawn_rank(&args, r, 3, &coordinator, "tok"))
            .collect(),
    );
    let ranks = &mut ranks.0;
    // a moment in training that differs from run to run
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    std::thread::sleep(Duration::from_millis(2500 + u64::from(nanos % 2000)));
    assert!(
        ranks.iter_mut().all(|c| c.try_wait().unwrap().is_none()),
        "every rank trains"
    );
    let killed_at = Instant::now();
    ranks[1].kill().unwrap();
    let _ = ranks[1].wait();
    let limit = killed_at + Duration::from_secs(10 + 20);
    for r in [0, 2] {
        let status = wait_until(&mut ranks[r], limit).expect("the survivor ended");
        let err = stderr_of(&mut ranks[r]);
        assert!(!status.success(), "rank {r}: {err}");
        assert!(
            err.contains(&format!("rank {r}: rank 1 closed its connection"))
                || err.contains("closed its connection"),
            "rank {r}: {err}"
        );
    }
    // the peers notice a closed connection at once, well before the timeout
    assert!(
        killed_at.elapsed() < Duration::from_secs(10),
        "{:?}",
        killed_at.elapsed()
    );
    no_outputs(t.path(), &model);
}

/// A rank started with another job's token is refused (and says so); the job's rank 0
/// waits for the real rank 1 until `comm_timeout`, then ends naming it. No model.
#[test]
fn a_rank_with_a_wrong_token_is_refused_and_the_job_times_out_naming_the_missing_rank() {
    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("m.json");
    let data = repo().join("datasets/synthetic/train.parquet");
    let args = train_args(
        &data,
        "y",
        "binary:logistic",
        &["--rounds", "5", "--set", "comm_timeout=4"],
        &model,
    );
    let coordinator = free_coordinator();
    let start = Instant::now();
    let mut rank0 = spawn_rank(&args, 0, 2, &coordinator, "right");
    let mut stray = spawn_rank(&args, 1, 2, &coordinator, "wrong");
    let limit = start + Duration::from_secs(4 + 20);
    let s = wait_until(&mut stray, limit).expect("the stray ended");
    let err = stderr_of(&mut stray);
    assert!(!s.success());
    assert!(err.contains("refused this worker: a wrong token"), "{err}");
    let s = wait_until(&mut rank0, limit).expect("rank 0 ended");
    let err = stderr_of(&mut rank0);
    assert!(!s.success());
    assert!(
        err.contains("refused a connection from 127.0.0.1") && err.contains("wrong token"),
        "rank 0 logs the stray: {err}"
    );
    assert!(
        err.contains("waited 4 s (comm_timeout) for the coordinator rank(s) 1"),
        "{err}"
    );
    no_outputs(t.path(), &model);
}

#[test]
fn tcp_flags_are_checked() {
    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("m.json");
    let data = repo().join("datasets/synthetic/train.parquet");
    let args = train_args(&data, "y", "binary:logistic", &["--rounds", "2"], &model);
    let run = |extra: &[&str], token: Option<&str>| {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("sapwood"));
        c.args(&args).args(extra).env_remove("SAPWOOD_TOKEN");
        if let Some(t) = token {
            c.env("SAPWOOD_TOKEN", t);
        }
        let o = c.output().unwrap();
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let c = free_coordinator();
    let base = [
        "--collective",
        "tcp",
        "--rank",
        "0",
        "--world",
        "2",
        "--coordinator",
        &c,
    ];
    assert!(run(&base, None)
        .contains("--collective tcp needs --token or the environment variable SAPWOOD_TOKEN"));
    assert!(run(&base[..6], Some("x")).contains("--collective tcp needs --coordinator"));
    assert!(run(&["--rank", "1"], None).contains("--rank is for --collective tcp"));
    assert!(run(&[&base[..], &["--ports", "9-3"]].concat(), Some("x")).contains("--ports 9-3"));
    assert!(run(
        &[
            "--collective",
            "tcp",
            "--rank",
            "2",
            "--world",
            "2",
            "--coordinator",
            &c
        ],
        Some("x")
    )
    .contains("rank 2 is out of range"));
    assert!(!model.exists());
}
