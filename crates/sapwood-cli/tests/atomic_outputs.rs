//! Outputs are atomic *mid-write*: a failure after the first row group or the first bytes
//! of a file were written leaves no output (or the previous file, unchanged) and no
//! temporary, for `predict`, `train --model`, `--summary` and checkpoints.
//!
//! `predict` fails on a real column that breaks mid-stream (`fixtures/corrupt_second_row_group.parquet`,
//! made by `fixtures/make_fixtures.py`); the JSON outputs fail through the test-only hook
//! `SAPWOOD_TEST_FAIL_WRITE=<file name>:<bytes>` of `sapwood_core::files::write_atomic`,
//! which writes that many bytes to the temporary file, syncs them, and fails as a full disk
//! would.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sapwood() -> Command {
    Command::cargo_bin("sapwood").unwrap()
}

const FAIL_WRITE: &str = "SAPWOOD_TEST_FAIL_WRITE";

/// The names of the files in `dir`, sorted.
fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `sapwood train` on the synthetic dataset (binary, 28 features) with `extra` arguments.
fn train(extra: &[&str]) -> Command {
    let mut c = sapwood();
    c.args([
        "train",
        "--quiet",
        "--label",
        "y",
        "--objective",
        "binary:logistic",
    ])
    .args(["--rounds", "6", "--max-depth", "3", "--data"])
    .arg(repo().join("datasets/synthetic/train.parquet"))
    .args(extra);
    c
}

fn stderr_of(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stderr).into_owned()
}

#[test]
fn predict_that_fails_in_the_second_row_group_leaves_no_output() {
    let t = tempfile::tempdir().unwrap();
    let models = t.path().join("models");
    std::fs::create_dir(&models).unwrap();
    let model = models.join("m.json");
    train(&["--model", model.to_str().unwrap()])
        .assert()
        .success();
    let data = repo().join("crates/sapwood-cli/tests/fixtures/corrupt_second_row_group.parquet");
    let out_dir = t.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("p.parquet");
    let predict = |out: &Path| {
        sapwood()
            .args(["predict", "--model", model.to_str().unwrap()])
            .args([
                "--data",
                data.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ])
            .assert()
            .failure()
    };
    let a = predict(&out);
    let err = stderr_of(&a);
    // the error is in row group 1: row group 0 was read, predicted and written first
    assert!(
        err.contains("corrupt_second_row_group.parquet") && err.contains("row group 1"),
        "{err}"
    );
    assert!(!err.contains("row group 0"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(files_in(&out_dir), Vec::<String>::new(), "{err}");
    // a previous output is left as it was
    std::fs::write(&out, b"previous predictions").unwrap();
    predict(&out);
    assert_eq!(std::fs::read(&out).unwrap(), b"previous predictions");
    assert_eq!(files_in(&out_dir), ["p.parquet"]);
}

#[test]
fn a_model_write_that_fails_mid_file_leaves_no_model_and_no_summary() {
    let t = tempfile::tempdir().unwrap();
    let (model, summary) = (t.path().join("m.json"), t.path().join("s.json"));
    let a = train(&["--model", model.to_str().unwrap()])
        .args(["--summary", summary.to_str().unwrap()])
        .env(FAIL_WRITE, "m.json:100")
        .assert()
        .failure();
    let err = stderr_of(&a);
    assert!(
        err.contains("m.json") && err.contains("write failed after 100 bytes"),
        "{err}"
    );
    assert_eq!(files_in(t.path()), Vec::<String>::new(), "{err}");
    // the hook fails only the file it names: the same run without it writes both
    train(&["--model", model.to_str().unwrap()])
        .args(["--summary", summary.to_str().unwrap()])
        .env(FAIL_WRITE, "other.json:100")
        .assert()
        .success();
    assert_eq!(files_in(t.path()), ["m.json", "s.json"]);
    // and a failed rewrite leaves the previous model whole
    let before = std::fs::read(&model).unwrap();
    train(&["--model", model.to_str().unwrap()])
        .env(FAIL_WRITE, "m.json:10")
        .assert()
        .failure();
    assert_eq!(std::fs::read(&model).unwrap(), before);
    assert_eq!(files_in(t.path()), ["m.json", "s.json"]);
}

#[test]
fn a_summary_write_that_fails_mid_file_leaves_no_summary() {
    let t = tempfile::tempdir().unwrap();
    let (model, summary) = (t.path().join("m.json"), t.path().join("s.json"));
    let a = train(&["--model", model.to_str().unwrap()])
        .args(["--summary", summary.to_str().unwrap()])
        .env(FAIL_WRITE, "s.json:50")
        .assert()
        .failure();
    let err = stderr_of(&a);
    assert!(
        err.contains("s.json") && err.contains("write failed after 50 bytes"),
        "{err}"
    );
    // the model, written before the summary, is whole; the summary is absent
    let files = files_in(t.path());
    assert!(files.is_empty() || files == ["m.json"], "{files:?}: {err}");
    if model.exists() {
        sapwood::Booster::load(&model).expect("a whole model");
    }
}

#[test]
fn a_checkpoint_write_that_fails_mid_file_leaves_the_previous_checkpoint() {
    let t = tempfile::tempdir().unwrap();
    let ck = t.path().join("ck.json");
    let checkpointing = |model: &str| {
        let mut c = train(&["--model", t.path().join(model).to_str().unwrap()]);
        c.args([
            "--checkpoint",
            ck.to_str().unwrap(),
            "--checkpoint-every",
            "2",
        ]);
        c
    };
    // no checkpoint yet: the first one fails after 10 bytes
    let a = checkpointing("a.json")
        .env(FAIL_WRITE, "ck.json:10")
        .assert()
        .failure();
    let err = stderr_of(&a);
    assert!(
        err.contains("ck.json") && err.contains("write failed after 10 bytes"),
        "{err}"
    );
    assert_eq!(files_in(t.path()), Vec::<String>::new(), "{err}");
    // a run that checkpoints, then one whose checkpoint write fails midway
    checkpointing("b.json").assert().success();
    assert_eq!(files_in(t.path()), ["b.json", "ck.json"]);
    let before = std::fs::read(&ck).unwrap();
    let a = checkpointing("c.json")
        .env(FAIL_WRITE, "ck.json:1000")
        .assert()
        .failure();
    let err = stderr_of(&a);
    assert!(err.contains("ck.json"), "{err}");
    assert_eq!(
        std::fs::read(&ck).unwrap(),
        before,
        "the previous checkpoint"
    );
    assert_eq!(files_in(t.path()), ["b.json", "ck.json"], "{err}");
}

/// A full disk while `predict` writes its last row group and footer (here: after 64 bytes)
/// fails naming the file and leaves neither the output nor its temporary behind.
#[test]
fn predict_that_fails_on_a_full_disk_leaves_no_temporary() {
    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("m.json");
    train(&["--model", model.to_str().unwrap()])
        .assert()
        .success();
    let out_dir = t.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("p.parquet");
    let a = sapwood()
        .env(FAIL_WRITE, "p.parquet:64")
        .args(["predict", "--model", model.to_str().unwrap(), "--data"])
        .arg(repo().join("datasets/synthetic/test.parquet"))
        .arg("--out")
        .arg(&out)
        .assert()
        .failure();
    assert!(stderr_of(&a).contains("p.parquet"), "{}", stderr_of(&a));
    assert_eq!(files_in(&out_dir), Vec::<String>::new());
}

/// What kind of node `p` is, without following a link.
fn kind(p: &Path) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::symlink_metadata(p).unwrap().file_type();
    if t.is_symlink() {
        "symlink"
    } else if t.is_fifo() {
        "fifo"
    } else if t.is_char_device() {
        "char device"
    } else if t.is_file() {
        "file"
    } else {
        "other"
    }
}

/// Makes a FIFO at `p` (mkfifo needs no privileges).
fn mkfifo(p: &Path) {
    let s = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(s.success());
}

/// Reads the FIFO at `p` to its end on a thread, as a consumer of the output would.
fn drain(p: &Path) -> std::thread::JoinHandle<Vec<u8>> {
    let p = p.to_path_buf();
    std::thread::spawn(move || std::fs::read(p).unwrap())
}

/// Every output (`predict --out` and `--summary`, `train --model` and `--summary`,
/// `export --out`) written to a symbolic link writes its target and keeps the link; to a
/// FIFO, writes into the FIFO (its reader gets the bytes) and keeps it; to a character
/// device of the test's own (a null device made with mknod, as root), writes to it and keeps
/// it. Renaming a temporary over them replaced the node itself: the link's target, the
/// FIFO's reader and the device never saw a byte.
#[test]
fn outputs_write_through_links_fifos_and_devices_instead_of_replacing_them() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let model = dir.join("m.json");
    train(&["--model", model.to_str().unwrap()])
        .assert()
        .success();
    let data = repo().join("datasets/synthetic/test.parquet");
    let predict = |out: &Path, summary: Option<&Path>| {
        let mut c = sapwood();
        c.args(["predict", "--model", model.to_str().unwrap(), "--data"])
            .arg(&data)
            .arg("--out")
            .arg(out);
        if let Some(s) = summary {
            c.arg("--summary").arg(s);
        }
        c.assert().success();
    };
    let export = |out: &Path| {
        sapwood()
            .args(["export", "--format", "lightgbm", "--model"])
            .arg(&model)
            .arg("--out")
            .arg(out)
            .assert()
            .success();
    };

    // links: relative and absolute, to a file that exists and to one that does not yet
    let targets = dir.join("targets");
    std::fs::create_dir(&targets).unwrap();
    std::fs::write(targets.join("p.parquet"), "old").unwrap();
    std::os::unix::fs::symlink("targets/p.parquet", dir.join("p-link")).unwrap();
    std::os::unix::fs::symlink(targets.join("s.json"), dir.join("s-link")).unwrap();
    predict(&dir.join("p-link"), Some(&dir.join("s-link")));
    assert_eq!(kind(&dir.join("p-link")), "symlink");
    assert_eq!(kind(&dir.join("s-link")), "symlink");
    assert!(std::fs::read(targets.join("p.parquet"))
        .unwrap()
        .starts_with(b"PAR1"));
    let summary = std::fs::read_to_string(targets.join("s.json")).unwrap();
    assert!(summary.contains("\"rows\""), "{summary}");
    std::os::unix::fs::symlink(targets.join("m2.json"), dir.join("m-link")).unwrap();
    train(&["--model", dir.join("m-link").to_str().unwrap()])
        .assert()
        .success();
    assert_eq!(kind(&dir.join("m-link")), "symlink");
    assert_eq!(
        std::fs::read(targets.join("m2.json")).unwrap(),
        std::fs::read(&model).unwrap()
    );
    std::os::unix::fs::symlink("targets/e.txt", dir.join("e-link")).unwrap();
    export(&dir.join("e-link"));
    assert_eq!(kind(&dir.join("e-link")), "symlink");
    assert!(std::fs::read_to_string(targets.join("e.txt"))
        .unwrap()
        .starts_with("tree"));
    // a chain of links, and no temporary left beside any link or target
    std::os::unix::fs::symlink("p-link", dir.join("p-link-2")).unwrap();
    predict(&dir.join("p-link-2"), None);
    assert_eq!(kind(&dir.join("p-link-2")), "symlink");
    assert!(files_in(dir).iter().all(|f| !f.ends_with(".tmp")));
    assert!(files_in(&targets).iter().all(|f| !f.ends_with(".tmp")));

    // FIFOs: the reader gets the whole output, and the FIFO stays a FIFO
    let fifo = dir.join("p.fifo");
    mkfifo(&fifo);
    let reader = drain(&fifo);
    predict(&fifo, None);
    let got = reader.join().unwrap();
    assert!(
        got.starts_with(b"PAR1") && got.ends_with(b"PAR1"),
        "{} bytes",
        got.len()
    );
    assert_eq!(kind(&fifo), "fifo");
    let reader = drain(&fifo);
    export(&fifo);
    assert!(reader.join().unwrap().starts_with(b"tree"));
    assert_eq!(kind(&fifo), "fifo");
    let reader = drain(&fifo);
    train(&["--model", fifo.to_str().unwrap()])
        .assert()
        .success();
    assert_eq!(reader.join().unwrap(), std::fs::read(&model).unwrap());
    assert_eq!(kind(&fifo), "fifo");

    // a character device of our own (root only: mknod); never the machine's /dev/null
    let null = dir.join("null");
    let made = std::process::Command::new("mknod")
        .arg(&null)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success());
    if made {
        predict(&null, None);
        export(&null);
        train(&["--model", null.to_str().unwrap()])
            .assert()
            .success();
        assert_eq!(kind(&null), "char device");
        assert!(files_in(dir).iter().all(|f| !f.ends_with(".tmp")));
    } else {
        assert_ne!(
            std::env::var("SAPWOOD_REQUIRE_NETNS").as_deref(),
            Ok("1"),
            "as root, mknod must make the test's own device"
        );
    }
}

/// Huge round counts with early stopping train as far as the stopping rule says: nothing is
/// reserved per round up front (a billion rounds asked for 80 GB and aborted; 2^64 - 1
/// overflowed).
#[test]
fn huge_round_counts_with_early_stopping_train_and_stop() {
    let t = tempfile::tempdir().unwrap();
    for rounds in ["1000000000", "18446744073709551615"] {
        let model = t.path().join(format!("{rounds}.json"));
        sapwood()
            .args([
                "train",
                "--quiet",
                "--label",
                "y",
                "--objective",
                "binary:logistic",
            ])
            .args(["--model", model.to_str().unwrap(), "--data"])
            .arg(repo().join("datasets/synthetic/train.parquet"))
            .args(["--rounds", rounds, "--early-stopping", "2", "--valid"])
            .arg(repo().join("datasets/synthetic/test.parquet"))
            .args(["--set", "learning_rate=1"])
            .assert()
            .success();
        let b = sapwood::Booster::load(&model).unwrap();
        assert!(
            b.model().num_rounds() < 1000,
            "{rounds}: {}",
            b.model().num_rounds()
        );
    }
}

/// A FIFO output that nobody reads: Ctrl-C or SIGTERM ends the wait for its reader (exit
/// 130 or 143). Opening it for writing used to block in a call the signal handler restarts,
/// so one signal did nothing and only a second one ended the process.
#[test]
fn a_signal_ends_the_wait_for_a_fifo_reader() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("m.json");
    train(&["--model", model.to_str().unwrap()])
        .assert()
        .success();
    let fifo = t.path().join("out.fifo");
    mkfifo(&fifo);
    let bin = assert_cmd::cargo::cargo_bin("sapwood");
    let data = repo().join("datasets/synthetic/train.parquet");
    let commands: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        (
            "predict",
            vec![
                "predict".into(),
                "--model".into(),
                model.clone().into(),
                "--data".into(),
                data.clone().into(),
                "--out".into(),
                fifo.clone().into(),
            ],
        ),
        (
            "export",
            vec![
                "export".into(),
                "--model".into(),
                model.clone().into(),
                "--format".into(),
                "xgboost".into(),
                "--out".into(),
                fifo.clone().into(),
            ],
        ),
        (
            "train",
            vec![
                "train".into(),
                "--quiet".into(),
                "--label".into(),
                "y".into(),
                "--rounds".into(),
                "2".into(),
                "--data".into(),
                data.clone().into(),
                "--model".into(),
                fifo.clone().into(),
            ],
        ),
    ];
    // readers that come one after another: the output is written and let go (its reader
    // sees the end) before the summary's reader is awaited
    let summary = t.path().join("summary.fifo");
    mkfifo(&summary);
    let mut child = std::process::Command::new(&bin)
        .args(["predict", "--model"])
        .arg(&model)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(&fifo)
        .arg("--summary")
        .arg(&summary)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (fifo2, summary2) = (fifo.clone(), summary.clone());
    let readers = std::thread::spawn(move || {
        let out = std::fs::read(&fifo2).unwrap();
        let summary = std::fs::read_to_string(&summary2).unwrap();
        (out, summary)
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !readers.is_finished() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the summary's reader never got it: the output's reader saw no end");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (out, summary_text) = readers.join().unwrap();
    assert!(out.starts_with(b"PAR1") && out.ends_with(b"PAR1"));
    assert!(summary_text.contains("\"rows\""), "{summary_text}");
    assert!(child.wait().unwrap().success());
    std::fs::remove_file(&summary).unwrap();
    for (what, args) in commands {
        for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
            let mut child = std::process::Command::new(&bin)
                .args(&args)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // ready: it says it waits for a reader
            let mut err = BufReader::new(child.stderr.take().unwrap());
            let mut line = String::new();
            err.read_line(&mut line).unwrap();
            assert!(
                line.contains("waiting for a reader of the FIFO"),
                "{what}: {line}"
            );
            let status = std::process::Command::new("kill")
                .arg(signal)
                .arg(child.id().to_string())
                .status()
                .unwrap();
            assert!(status.success());
            // generous: the wait looks for a signal every 20 ms
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break s;
                }
                if std::time::Instant::now() > deadline {
                    child.kill().unwrap();
                    panic!("{what}: one {signal} did not end the wait for a FIFO reader");
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            };
            let mut rest = String::new();
            std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
            assert_eq!(status.code(), Some(code), "{what} {signal}: {rest}");
            assert!(rest.contains("interrupted by SIG"), "{what}: {rest}");
            assert_eq!(files_in(t.path()), ["m.json", "out.fifo"], "{what}");
        }
    }
}
