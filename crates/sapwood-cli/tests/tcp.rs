//! `sapwood train --collective tcp` on one host (loopback): 1–4 processes save the
//! single-process model with every codec, and a rank that is killed, or presents a wrong
//! token, ends the job with a clear error within `comm_timeout` and no model.

mod support;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{assert_blocks_sent_with, check_rows_read, communication, repo, train_args};

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
            let summary = t
                .path()
                .join(format!("{name}-{codec}-{world}.summary.json"));
            args.extend(["--summary".into(), summary.display().to_string()]);
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
            if world > 1 {
                assert_blocks_sent_with(&summary, codec, &format!("{name} {world} ranks"));
            }
        }
    }
}

#[test]
fn tcp_ranks_exchange_behind_the_builds_only_with_comm_overlap() {
    // overlap splits a level's exchange into chunks sent beside the builds: more calls for
    // the same bytes; a rank that ignored the setting would make the same calls either way
    let t = tempfile::tempdir().unwrap();
    let data = repo().join("datasets/synthetic/train.parquet");
    let calls = |overlap: &str| {
        let model = t.path().join(format!("{overlap}.json"));
        let summary = t.path().join(format!("{overlap}.summary.json"));
        let setting = format!("comm_overlap={overlap}");
        let extra = ["--rounds", "4", "--max-depth", "6", "--set", &setting];
        let mut args = train_args(&data, "y", "binary:logistic", &extra, &model);
        args.extend(["--summary".into(), summary.display().to_string()]);
        for (r, o) in run_job(&args, 2).iter().enumerate() {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "overlap {overlap}, rank {r}: {err}");
        }
        (
            communication(&summary)["allreduce_calls"].as_u64().unwrap(),
            std::fs::read(&model).unwrap(),
        )
    };
    let (with, a) = calls("true");
    let (without, b) = calls("false");
    assert!(
        with > without,
        "allreduce calls: {with} with overlap, {without} without"
    );
    assert!(a == b, "overlap changed the model");
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

/// Runs one job of ranks (rank r with `args[r]`) to their end (at most 60 s) and returns
/// each one's exit code and stderr. A coordinator port found free can be taken by another
/// process before rank 0 listens on it: the job then runs again on another port.
fn ended_ranks(args: &[Vec<String>], token: &str) -> Vec<(Option<i32>, String)> {
    for _ in 0..5 {
        let coordinator = free_coordinator();
        let world = args.len();
        let mut ranks = KillOnDrop(
            args.iter()
                .enumerate()
                .map(|(r, a)| spawn_rank(a, r, world, &coordinator, token))
                .collect(),
        );
        let limit = Instant::now() + Duration::from_secs(60);
        let ended: Vec<(Option<i32>, String)> = ranks
            .0
            .iter_mut()
            .map(|c| (wait_until(c, limit).and_then(|s| s.code()), stderr_of(c)))
            .collect();
        if !ended[0].1.contains("Address already in use") {
            return ended;
        }
    }
    panic!("no free coordinator port in 5 tries");
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
        assert_eq!(status.code(), Some(1), "rank {r}: {err}");
        // rank 1 was killed; the survivor may see the other survivor close first, once that
        // one failed: either way the message names a rank that closed
        assert!(
            [0, 1, 2]
                .iter()
                .any(|&k| k != r && err.contains(&format!("rank {k} closed its connection"))),
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

/// iproute2's `ip`, where the build found it.
fn ip_binary() -> &'static str {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("ip")
}

/// Runs `ip ARGS`, failing the test with its stderr if it fails.
fn ip(args: &[&str]) {
    let out = Command::new(ip_binary()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Hosts on one machine: a network namespace each, with one interface on a bridge in a
/// namespace of its own (the switch), addressed 10.201.0.1, .2, ...; no loopback between
/// them, so every byte crosses a real (virtual) Ethernet link. Removed on drop.
struct Hosts {
    names: Vec<String>,
    switch: String,
}

impl Hosts {
    fn new(n: usize) -> Hosts {
        let id = std::process::id();
        let switch = format!("sw-{id}");
        // made first, so that a failure half-way removes what was made
        let mut hosts = Hosts {
            names: Vec::new(),
            switch: switch.clone(),
        };
        ip(&["netns", "add", &switch]);
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &switch, "link", "set", "br0", "up"]);
        for i in 0..n {
            let h = format!("h{i}-{id}");
            ip(&["netns", "add", &h]);
            hosts.names.push(h.clone());
            let port = format!("p{i}");
            ip(&[
                "link", "add", "eth0", "netns", &h, "type", "veth", "peer", "name", &port, "netns",
                &switch,
            ]);
            ip(&["-n", &switch, "link", "set", &port, "master", "br0", "up"]);
            let addr = format!("{}/24", Hosts::address(i));
            ip(&["-n", &h, "addr", "add", &addr, "dev", "eth0"]);
            ip(&["-n", &h, "link", "set", "eth0", "up"]);
            ip(&["-n", &h, "link", "set", "lo", "up"]);
        }
        hosts
    }

    /// The IP address of host `i`.
    fn address(i: usize) -> String {
        format!("10.201.0.{}", i + 1)
    }

    /// `program` to run on host `i`.
    fn command(&self, i: usize, program: &Path) -> Command {
        let mut c = Command::new(ip_binary());
        c.args(["netns", "exec", &self.names[i]]).arg(program);
        c
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // removing a namespace removes its end of each veth pair, and so the pair
        for n in self.names.iter().chain([&self.switch]) {
            let _ = Command::new(ip_binary()).args(["netns", "del", n]).status();
        }
    }
}

/// Three hosts (network namespaces on a virtual switch, no shared loopback), one rank
/// each, with the commands of the README: no `--bind`, so every rank listens on all its
/// interfaces and the ranks above 0 reach each other at the addresses rank 0 saw them
/// connect from. The model is the single process's, byte for byte, for two codecs.
#[test]
#[cfg_attr(
    sapwood_no_netns,
    ignore = "needs root and iproute2 (network namespaces stand in for hosts); \
              SAPWOOD_REQUIRE_NETNS=1 at build time makes it run"
)]
fn ranks_on_three_hosts_save_the_single_process_model() {
    let t = tempfile::tempdir().unwrap();
    let data = repo().join("datasets/diamonds/train.parquet");
    let single = t.path().join("single.json");
    let extra = ["--rounds", "6", "--set", "comm_timeout=20"];
    let s = Command::new(assert_cmd::cargo::cargo_bin("sapwood"))
        .args(train_args(
            &data,
            "price",
            "reg:squarederror",
            &extra,
            &single,
        ))
        .status()
        .unwrap();
    assert!(s.success());
    let hosts = Hosts::new(3);
    let coordinator = format!("{}:7000", Hosts::address(0));
    for codec in ["auto", "none"] {
        let model = t.path().join(format!("{codec}.json"));
        let codec_set = format!("comm_codec={codec}");
        let extra = [&extra[..], &["--set", &codec_set]].concat();
        let mut args = train_args(&data, "price", "reg:squarederror", &extra, &model);
        args.retain(|a| a != "--quiet");
        let mut ranks = KillOnDrop(
            (0..3)
                .map(|r| {
                    hosts
                        .command(r, &assert_cmd::cargo::cargo_bin("sapwood"))
                        .args(&args)
                        .args(["--collective", "tcp", "--coordinator", &coordinator])
                        .args(["--rank", &r.to_string(), "--world", "3"])
                        .env("SAPWOOD_TOKEN", "three-hosts")
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap()
                })
                .collect(),
        );
        let limit = Instant::now() + Duration::from_secs(120);
        let mut stderr = String::new();
        for (r, c) in ranks.0.iter_mut().enumerate() {
            let status = wait_until(c, limit).expect("the rank ended");
            let err = stderr_of(c);
            assert!(status.success(), "{codec}: rank {r}: {err}");
            stderr += &err;
        }
        check_rows_read(&stderr, 3, &format!("three hosts, {codec}"));
        assert!(
            std::fs::read(&model).unwrap() == std::fs::read(&single).unwrap(),
            "{codec}: three hosts differ from one process"
        );
    }
}

/// Two ranks started for different jobs (a parameter, the rounds, the tree depth, the
/// objective, the codec, the data file, the label column) both fail before training, with
/// one error naming what differs, its two values and the ranks; nothing is written. With
/// only the feature count compared, most of these trained one garbled model and exited 0.
#[test]
fn ranks_started_for_different_jobs_fail_naming_the_first_difference() {
    let t = tempfile::tempdir().unwrap();
    let synthetic = repo().join("datasets/synthetic/train.parquet");
    let synthetic_test = repo().join("datasets/synthetic/test.parquet");
    let base = ["--rounds", "4", "--max-depth", "4"];
    // the same file with one byte of its data (not its footer) changed
    let mut bytes = std::fs::read(&synthetic).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    let flipped = t.path().join("flipped.parquet");
    std::fs::write(&flipped, bytes).unwrap();
    // (what rank 1 changes, rank 1's extra arguments, what the error must name)
    let cases: [(&str, Vec<&str>, &[&str]); 7] = [
        ("lambda", vec!["--set", "lambda=50"], &["`lambda`", "50"]),
        ("rounds", vec!["--rounds", "9"], &["`num_rounds`", "9", "4"]),
        (
            "depth",
            vec!["--max-depth", "6"],
            &["`max_depth`", "6", "4"],
        ),
        (
            "eta",
            vec!["--set", "learning_rate=0.05"],
            &["`learning_rate`", "0.05"],
        ),
        ("codec", vec!["--set", "comm_codec=none"], &["`comm_codec`"]),
        (
            "data",
            vec!["--data", synthetic_test.to_str().unwrap()],
            &["the data's"],
        ),
        (
            "a byte",
            vec!["--data", flipped.to_str().unwrap()],
            &["the data's content"],
        ),
    ];
    for (what, rank1_extra, named) in cases {
        let model = t.path().join(format!("{what}.json"));
        let rank0 = train_args(&synthetic, "y", "binary:logistic", &base, &model);
        let mut rank1 = rank0.clone();
        let mut i = 0;
        while i < rank1_extra.len() {
            // a flag rank 0 has is replaced; a new one (--set) is added
            let (flag, value) = (rank1_extra[i], rank1_extra[i + 1]);
            match rank1.iter().position(|a| a == flag && flag != "--set") {
                Some(p) => rank1[p + 1] = value.to_string(),
                None => rank1.extend([flag.to_string(), value.to_string()]),
            }
            i += 2;
        }
        for (r, (code, err)) in ended_ranks(&[rank0, rank1], "tok").iter().enumerate() {
            // a job that broke down is exit status 1, as the README says (not bad input: 2)
            assert_eq!(*code, Some(1), "{what}: rank {r}: {err}");
            assert!(
                err.contains("do not describe the same job")
                    && err.contains("rank 1")
                    && err.contains("rank 0"),
                "{what}: rank {r}: {err}"
            );
            for n in named {
                assert!(err.contains(n), "{what}: rank {r} does not name {n}: {err}");
            }
        }
        no_outputs(t.path(), &model);
    }
}

/// Ctrl-C to rank 1 (not rank 0) stops the whole job after the current round: rank 0 saves
/// the model it has and both exit 130, rank 0 saying that another rank was stopped. Before,
/// rank 1's Ctrl-C was ignored (only rank 0's stop counted).
#[test]
fn ctrl_c_to_a_rank_other_than_0_stops_the_whole_job() {
    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("m.json");
    let ck = t.path().join("ck.json");
    let data = repo().join("datasets/diamonds/train.parquet");
    let mut args = train_args(
        &data,
        "price",
        "reg:squarederror",
        &["--rounds", "1000000", "--set", "comm_timeout=30"],
        &model,
    );
    args.extend([
        "--checkpoint-every".into(),
        "2".into(),
        "--checkpoint".into(),
    ]);
    args.push(ck.display().to_string());
    let coordinator = free_coordinator();
    let mut ranks = KillOnDrop(
        (0..2)
            .map(|r| spawn_rank(&args, r, 2, &coordinator, "tok"))
            .collect(),
    );
    let deadline = Instant::now() + Duration::from_secs(300);
    while !ck.exists() {
        assert!(Instant::now() < deadline, "no checkpoint in 300 s");
        assert!(
            ranks.0.iter_mut().all(|c| c.try_wait().unwrap().is_none()),
            "a rank ended early"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let sent = Instant::now();
    let status = Command::new("kill")
        .args(["-INT", &ranks.0[1].id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let limit = sent + Duration::from_secs(20);
    let mut errs = Vec::new();
    for r in 0..2 {
        let status = wait_until(&mut ranks.0[r], limit).expect("the rank ended");
        let err = stderr_of(&mut ranks.0[r]);
        assert_eq!(status.code(), Some(130), "rank {r}: {err}");
        errs.push(err);
    }
    assert!(
        errs[0].contains("interrupted: saved the") && errs[0].contains("another rank"),
        "rank 0: {}",
        errs[0]
    );
    assert!(
        errs[1].contains("rank 1") && errs[1].contains("interrupted by SIGINT"),
        "rank 1: {}",
        errs[1]
    );
    let b = sapwood::Booster::load(&model).unwrap();
    assert!(b.num_rounds() >= 2 && b.num_rounds() < 1_000_000);
}
