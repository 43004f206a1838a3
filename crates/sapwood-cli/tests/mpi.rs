//! `mpirun -np N sapwood train --collective mpi`: the model equals one worker's, and a rank
//! that dies takes the job down in bounded time. Built with `--features mpi`; needs
//! OpenMPI's `mpirun` (the test script installs it).
#![cfg(feature = "mpi")]

mod support;

use std::path::Path;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{assert_blocks_sent_with, check_rows_read, communication, repo, train_args};

/// `mpirun` of `np` ranks whose OpenMPI session directory lies under `dir` (the test's own
/// temporary folder): tests running at once otherwise race to make the shared one under
/// /tmp ("mkdir /tmp/ompi.<host>.0: File exists", seen once in CI).
fn mpirun(np: usize, dir: &Path) -> Command {
    let mut c = Command::new("mpirun");
    c.env("TMPDIR", dir);
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
            // exchanges behind the builds (the default) and without overlap
            let runs = (1..=4)
                .map(|np| (np, "true"))
                .chain((2..=4).map(|np| (np, "false")));
            for (np, overlap) in runs {
                let model = t
                    .path()
                    .join(format!("{name}-{grad_bits}-{np}-{overlap}.json"));
                // not quiet: each rank says which rows it read
                let mut args = train_args(&data, label, objective, &extra, &model);
                args.retain(|a| a != "--quiet");
                let out = mpirun(np, t.path())
                    .arg(&bin)
                    .args(args)
                    .args(["--collective", "mpi"])
                    .args(["--set", &format!("comm_overlap={overlap}")])
                    .output()
                    .unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success(), "{name} np={np}: {err}");
                check_rows_read(&err, np, &format!("{name} np={np}"));
                assert!(
                    std::fs::read(&model).unwrap() == std::fs::read(&single).unwrap(),
                    "{name} grad_bits={grad_bits}: {np} ranks (overlap {overlap}) differ from one worker"
                );
            }
        }
    }
}

/// MPI ranks started for different jobs (here another `lambda` on rank 1) fail before the
/// first round, naming the setting and the ranks, as TCP ranks do: they used to train
/// together silently.
#[test]
fn mpi_ranks_started_for_different_jobs_fail_naming_the_difference() {
    let bin = assert_cmd::cargo::cargo_bin("sapwood");
    let t = tempfile::tempdir().unwrap();
    let data = repo().join("datasets/synthetic/train.parquet");
    let model = t.path().join("m.json");
    let args = |lambda: &str| {
        let mut a = train_args(&data, "y", "binary:logistic", &["--rounds", "4"], &model);
        a.extend(["--collective", "mpi", "--set"].map(String::from));
        a.push(format!("lambda={lambda}"));
        a
    };
    // one command per rank (MPMD): rank 0 with lambda 1, rank 1 with lambda 50
    let out = mpirun(1, t.path())
        .arg(&bin)
        .args(args("1"))
        .args([":", "-np", "1"])
        .arg(&bin)
        .args(args("50"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("do not describe the same job")
            && err.contains("`lambda`")
            && err.contains("50")
            && err.contains("rank 1")
            && err.contains("rank 0"),
        "{err}"
    );
    assert!(!model.exists(), "a model was saved: {err}");
}

#[test]
fn mpi_ranks_send_with_the_codec_and_overlap_they_are_given() {
    // every rank must encode with `comm_codec` and chunk with `comm_overlap`: the models are
    // equal whatever the ranks do, so the summary's counts are the evidence
    let bin = assert_cmd::cargo::cargo_bin("sapwood");
    let t = tempfile::tempdir().unwrap();
    let data = repo().join("datasets/synthetic/train.parquet");
    let run = |codec: &str, overlap: &str| {
        let model = t.path().join(format!("{codec}-{overlap}.json"));
        let summary = t.path().join(format!("{codec}-{overlap}.summary.json"));
        let extra = ["--rounds", "4", "--max-depth", "6", "--set", "grad_bits=8"];
        let out = mpirun(2, t.path())
            .arg(&bin)
            .args(train_args(&data, "y", "binary:logistic", &extra, &model))
            .args(["--collective", "mpi", "--summary"])
            .arg(&summary)
            .args(["--set", &format!("comm_codec={codec}")])
            .args(["--set", &format!("comm_overlap={overlap}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{codec} overlap {overlap}: {err}");
        (summary, std::fs::read(&model).unwrap())
    };
    let mut models = Vec::new();
    for codec in ["none", "packed", "sparse", "auto"] {
        let (summary, model) = run(codec, "true");
        assert_blocks_sent_with(&summary, codec, "2 MPI ranks");
        models.push(model);
    }
    assert!(
        models.windows(2).all(|w| w[0] == w[1]),
        "codecs changed the model"
    );
    let calls = |s: &Path| communication(s)["allreduce_calls"].as_u64().unwrap();
    let (with, _) = run("auto", "true");
    let (without, model) = run("auto", "false");
    assert!(
        calls(&with) > calls(&without),
        "allreduce calls: {} with overlap, {} without",
        calls(&with),
        calls(&without)
    );
    assert!(model == models[0], "overlap changed the model");
}

/// The sapwood processes mpirun started (its children; OpenMPI 4 forks local ranks itself).
fn ranks_of(mpirun: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{mpirun}/task")).unwrap() {
        let children = std::fs::read_to_string(task.unwrap().path().join("children"));
        pids.extend(
            children
                .unwrap_or_default()
                .split_whitespace()
                .map(|p| p.parse::<u32>().unwrap()),
        );
    }
    pids.retain(|p| {
        std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sapwood")
    });
    pids
}

/// A rank killed mid-training is detected by Sapwood, not by OpenMPI: with the runtime told
/// to leave failures to the job (`--enable-recovery`), a surviving rank reports the rank it
/// waited for and the timeout (`comm_timeout`) within that timeout, the job ends, and no
/// model is written.
#[test]
fn a_rank_that_dies_stops_the_job_with_sapwoods_error_within_its_timeout() {
    // set from the command line, so the test also shows the option takes effect (the
    // default is 60 s)
    let timeout = Duration::from_secs(5);
    let bin = assert_cmd::cargo::cargo_bin("sapwood");
    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("m.json");
    let data = repo().join("datasets/diamonds/train.parquet");
    let mut args = train_args(
        &data,
        "price",
        "reg:squarederror",
        &["--rounds", "1000000"],
        &model,
    );
    // not quiet: every rank's "read" line says it is past loading and about to train
    args.retain(|a| a != "--quiet");
    let mut job = mpirun(3, t.path())
        .arg("--enable-recovery")
        .arg(&bin)
        .args(args)
        .args(["--collective", "mpi", "--set", "comm_timeout=5"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = job.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let needle = format!(" waited {} s (comm_timeout) for ", timeout.as_secs_f64());
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
            let line = line.unwrap_or_default();
            if line.starts_with("rank ") && line.contains(": read ") {
                let _ = tx.send(None);
            }
            if line.contains(&needle) {
                let _ = tx.send(Some((Instant::now(), line.clone())));
            }
            all += &line;
            all.push('\n');
        }
        all
    });
    for _ in 0..3 {
        rx.recv_timeout(Duration::from_secs(120))
            .expect("every rank read its rows");
    }
    let ranks = ranks_of(job.id());
    assert_eq!(ranks.len(), 3, "mpirun's rank processes: {ranks:?}");
    // kill one rank (not mpirun itself) as a crash would
    let killed_at = Instant::now();
    assert!(Command::new("kill")
        .args(["-9", &ranks[1].to_string()])
        .status()
        .unwrap()
        .success());
    let limit = killed_at + timeout + Duration::from_secs(30);
    let report = rx.recv_timeout(limit.saturating_duration_since(Instant::now()));
    let status = loop {
        if let Some(status) = job.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > limit {
            let _ = job.kill();
            let _ = job.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = reader.join().unwrap();
    let Ok(Some((at, line))) = report else {
        panic!("no Sapwood timeout message within {timeout:?} of a rank's death: {err}");
    };
    let after = at.duration_since(killed_at);
    assert!(
        after >= timeout.saturating_sub(Duration::from_secs(1)),
        "reported after {after:?}, before the {timeout:?} timeout: {line}"
    );
    // "error: rank R: collective: rank R waited 60 s (comm_timeout) for a message from rank
    // P: ..." (or "for rank P to take a message"). Each rank writes its line at once, but
    // mpirun forwards the ranks' output in chunks, so the other survivor's line may be cut
    // into this one ("error: rank 0error: rank 2: ...")
    assert!(
        line.contains("error: rank 0: collective: rank 0 waited ")
            || line.contains("error: rank 2: collective: rank 2 waited "),
        "a survivor names itself: {line}"
    );
    assert!(
        line.contains(" from rank ") || line.contains(" for rank "),
        "the rank it waited for: {line}"
    );
    // the job ends (the reporting rank aborts it); under `--enable-recovery` mpirun's own
    // exit code does not carry the ranks' failure, so Sapwood's message is the check
    assert!(
        status.is_some(),
        "the job still ran {:?} after the rank died: {err}",
        limit - killed_at
    );
    assert!(!err.contains("interrupted: saved"), "{err}");
    assert!(!model.exists());
    let leftovers: Vec<_> = std::fs::read_dir(t.path())
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

/// Ranking and Cox across ranks: LambdaMART (both pair methods) on real queries whose row
/// groups end at query boundaries, and Cox proportional hazards (whose risk sets span every
/// rank's rows) from a CSV split by rows, save the single-process model; a query split
/// between two ranks is an error naming them.
#[test]
fn ranking_and_cox_across_ranks_save_the_single_process_model() {
    let bin = assert_cmd::cargo::cargo_bin("sapwood");
    let t = tempfile::tempdir().unwrap();
    let ranking = repo().join("datasets/lambdarank/train.parquet");
    let survival = repo().join("datasets/gbsg2/train.csv");
    let cases: [(&Path, &str, &str, &[&str]); 3] = [
        (&ranking, "relevance", "rank:ndcg", &["--group", "qid"]),
        (
            &ranking,
            "relevance",
            "rank:ndcg",
            &["--group", "qid", "--set", "lambdarank_pair_method=mean"],
        ),
        (
            &survival,
            "survival",
            "survival:cox",
            &["--categorical", "horTh,menostat,tgrade"],
        ),
    ];
    for (i, (data, label, objective, extra)) in cases.iter().enumerate() {
        let mut extra: Vec<&str> = extra.to_vec();
        extra.extend(["--rounds", "4"]);
        let single = t.path().join(format!("{i}-single.json"));
        let s = Command::new(&bin)
            .args(train_args(data, label, objective, &extra, &single))
            .status()
            .unwrap();
        assert!(s.success(), "case {i}");
        for np in 2..=3 {
            let model = t.path().join(format!("{i}-{np}.json"));
            let mut args = train_args(data, label, objective, &extra, &model);
            args.retain(|a| a != "--quiet");
            let out = mpirun(np, t.path())
                .arg(&bin)
                .args(args)
                .args(["--collective", "mpi"])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "case {i} np={np}: {err}");
            check_rows_read(&err, np, &format!("case {i} np={np}"));
            assert!(
                std::fs::read(&model).unwrap() == std::fs::read(&single).unwrap(),
                "case {i} ({objective}): {np} ranks differ from one process"
            );
        }
    }
    // one query of 40 rows in a CSV: two ranks each read half of it
    let csv = t.path().join("one-query.csv");
    let mut text = String::from("x,qid,rel\n");
    for r in 0..40 {
        text += &format!("{},7,{}\n", r as f32 / 40.0, r % 3);
    }
    std::fs::write(&csv, text).unwrap();
    let model = t.path().join("split.json");
    let out = mpirun(2, t.path())
        .arg(&bin)
        .args(train_args(
            &csv,
            "rel",
            "rank:ndcg",
            &["--group", "qid", "--rounds", "2"],
            &model,
        ))
        .args(["--collective", "mpi"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("group column `qid`") && err.contains("spans ranks 0 and 1"),
        "{err}"
    );
    assert!(!model.exists());
}

#[test]
fn wgpu_ranks_hand_mpi_histograms_encoded_on_the_device_and_save_the_cpu_model() {
    let bin = assert_cmd::cargo::cargo_bin("sapwood");
    let t = tempfile::tempdir().unwrap();
    let data = repo().join("datasets/synthetic/train.parquet");
    // depth 6 on 28 features of 256 bins: the deep levels are reduce-scattered
    let extra = ["--rounds", "3", "--max-depth", "6"];
    let cpu = t.path().join("cpu.json");
    let s = Command::new(&bin)
        .args(train_args(&data, "y", "binary:logistic", &extra, &cpu))
        .status()
        .unwrap();
    assert!(s.success());
    let probe = Command::new(&bin)
        .args(train_args(
            &data,
            "y",
            "binary:logistic",
            &extra,
            &t.path().join("p.json"),
        ))
        .args(["--device", "wgpu"])
        .env("XDG_RUNTIME_DIR", t.path())
        .output()
        .unwrap();
    if !probe.status.success() && std::env::var_os("SAPWOOD_REQUIRE_ADAPTER").is_none() {
        return;
    }
    // `packed` is summed by MPI itself, as packed words from the device (all-reduced
    // levels); `auto` sends blocks the device group-encoded (reduce-scattered levels)
    for (codec, kind) in [("packed", "packed"), ("auto", "groups")] {
        let model = t.path().join(format!("{codec}.json"));
        let summary = t.path().join(format!("{codec}-summary.json"));
        let out = mpirun(2, t.path())
            .arg(&bin)
            .args(train_args(&data, "y", "binary:logistic", &extra, &model))
            .args(["--collective", "mpi", "--device", "wgpu"])
            .args(["--set", &format!("comm_codec={codec}")])
            .arg("--summary")
            .arg(&summary)
            .env("XDG_RUNTIME_DIR", t.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{codec}: {err}");
        assert!(
            std::fs::read(&model).unwrap() == std::fs::read(&cpu).unwrap(),
            "{codec}: 2 wgpu ranks differ from one CPU worker"
        );
        let s: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        let c = &s["communication"];
        let device = c["device_encoded_blocks"].as_u64().unwrap();
        let of_kind = c["blocks_by_encoding"][kind].as_u64().unwrap();
        assert!(device > 0 && device <= of_kind, "{codec}: {c}");
    }
}
