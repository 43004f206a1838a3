//! A rank that dies or goes silent is detected by Sapwood's MPI transport within its
//! timeout, and every surviving rank fails with Sapwood's message naming itself, the rank it
//! waited for and the timeout (not OpenMPI's runtime, and not a hang). Built with `--features mpi`; needs
//! OpenMPI's `mpirun`.
//!
//! The ranks are this test binary again, started by `mpirun` on the ignored `rank` test
//! with `SAPWOOD_MPI_FAULT_RANK` set: each joins the job, says it is ready with its pid, and
//! sums histograms around the ring until an error ends it.
#![cfg(feature = "mpi")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use sapwood_collective::mpi_transport::MpiTransport;
use sapwood_collective::{RingCollective, Transport};
use sapwood_core::collective::Collective;
use sapwood_core::params::CommCodec;

/// Set (to the timeout in milliseconds) in the ranks' environment.
const RANK_ENV: &str = "SAPWOOD_MPI_FAULT_RANK";

/// The codec the ranks use (`packed` sums through `MPI_Iallreduce`, the others on the ring).
const CODEC_ENV: &str = "SAPWOOD_MPI_FAULT_CODEC";

/// Exit code of a rank that failed with an error (MPI is not finalised: peers are gone).
const FAILED: i32 = 3;

/// One rank of a fault test (started by the tests below, ignored otherwise).
#[test]
#[ignore = "a rank of the MPI fault tests, started by them through mpirun"]
fn rank() {
    let Ok(ms) = std::env::var(RANK_ENV) else {
        return;
    };
    let timeout = Duration::from_millis(ms.parse().expect("timeout in ms"));
    let transport = MpiTransport::init().unwrap().with_timeout(timeout);
    assert_eq!(transport.timeout(), timeout);
    let (r, p) = (transport.rank(), transport.size());
    let codec: CommCodec = std::env::var(CODEC_ENV).unwrap().parse().unwrap();
    let mut coll = RingCollective::new(transport, codec);
    let n = 3000;
    for round in 0u64.. {
        let mut data: Vec<i64> = (0..n).map(|i| (i as i64 + round as i64) % 17).collect();
        let want: Vec<i64> = data.iter().map(|v| v * p as i64).collect();
        if let Err(e) = coll.allreduce_sum(&mut data, 17 * p as u64) {
            // one write: the survivors report at the same instant, and mpirun forwards
            // their stderr into one stream where separate writes interleave
            use std::io::Write;
            let line = format!("error: {e}\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            std::process::exit(FAILED);
        }
        assert_eq!(data, want, "rank {r} round {round}");
        if round == 0 {
            println!("rank {r} of {p} ready, pid {}", std::process::id());
        }
    }
}

/// What happens to rank 1 once every rank is ready.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGKILL, as a crash.
    Dies,
    /// SIGSTOP: alive, its connections open, but silent (a hung or swapped-out process).
    Stops,
}

/// The fault tests' jobs, one at a time. Two jobs of 3 ranks, each rank summing in a loop,
/// share a 2-core machine's cores with 6 busy processes: a rank can then miss its 3 s
/// deadline before its first sum, and its job ends before every rank says it is ready
/// (seen once in CI).
static ONE_JOB: Mutex<()> = Mutex::new(());

/// Runs 3 ranks with `timeout`, applies `fault` to rank 1, and checks how the job ends.
fn job_with_a_faulty_rank(fault: Fault, codec: &str, timeout: Duration) {
    // a test that failed while holding it leaves nothing behind that the next one needs
    let _one_job = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let exe = std::env::current_exe().unwrap();
    let mut job = Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            // a rank's death is left to the survivors (Sapwood) instead of OpenMPI's
            // runtime, which would otherwise end the job itself
            "--enable-recovery",
            "--mca",
            "btl",
            "self,tcp",
            "-np",
            "3",
        ])
        .arg(&exe)
        .args([
            "rank",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(RANK_ENV, timeout.as_millis().to_string())
        .env(CODEC_ENV, codec)
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (ready_tx, ready) = mpsc::channel();
    let stdout = job.stdout.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap_or_default();
            // "rank R of 3 ready, pid P", after the test harness's "test rank ... "
            if let Some(rest) = line.rfind("rank ").map(|i| &line[i + "rank ".len()..]) {
                if let Some((head, pid)) = rest.split_once(" ready, pid ") {
                    let rank: usize = head.split(' ').next().unwrap().parse().unwrap();
                    let _ = ready_tx.send((rank, pid.trim().parse::<u32>().unwrap()));
                }
            }
            all += &line;
            all.push('\n');
        }
        all
    });
    // Sapwood's reports ("error: collective: rank R: ... for T s (comm_timeout): ..."), as
    // they come
    let (report_tx, reports) = mpsc::channel();
    let secs = timeout.as_secs_f64();
    let needle = format!(" waited {secs} s (comm_timeout) for ");
    let stderr = job.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap_or_default();
            if line.contains(&needle) {
                let _ = report_tx.send((Instant::now(), line.clone()));
            }
            all += &line;
            all.push('\n');
        }
        all
    });
    let mut pids = [0u32; 3];
    for _ in 0..3 {
        match ready.recv_timeout(Duration::from_secs(120)) {
            Ok((rank, pid)) => pids[rank] = pid,
            Err(e) => {
                // the job's own words say why (a rank's error, mpirun's)
                let _ = job.kill();
                let _ = job.wait();
                let out = out_reader.join().unwrap();
                let err = err_reader.join().unwrap();
                panic!("every rank says it is ready: {e}; {fault:?} ({codec}):\n{out}\n{err}");
            }
        }
    }
    let signal = match fault {
        Fault::Dies => "-KILL",
        Fault::Stops => "-STOP",
    };
    let faulted_at = Instant::now();
    assert!(Command::new("kill")
        .args([signal, &pids[1].to_string()])
        .status()
        .unwrap()
        .success());
    // a survivor's deadline runs from its last call before the fault: each must report
    // within one timeout, plus the time to notice
    let limit = faulted_at + timeout + Duration::from_secs(15);
    let mut reported = Vec::new();
    while reported.len() < 2 {
        let left = limit.saturating_duration_since(Instant::now());
        match reports.recv_timeout(left) {
            Ok(report) => reported.push(report),
            Err(_) => break,
        }
    }
    // both survivors ended (their processes are gone or wait to be reaped)
    let ended = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z'))
        })
    };
    let survivors_ended = loop {
        if ended(pids[0]) && ended(pids[2]) {
            break true;
        }
        if Instant::now() > limit {
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // rank 1 (stopped, or already dead) must not outlive the test; then mpirun ends
    let _ = Command::new("kill")
        .args(["-KILL", &pids[1].to_string()])
        .stderr(Stdio::null())
        .status();
    let mpirun_ended = loop {
        if job.try_wait().unwrap().is_some() {
            break true;
        }
        if Instant::now() > limit + Duration::from_secs(10) {
            let _ = job.kill();
            let _ = job.wait();
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = out_reader.join().unwrap();
    let err = err_reader.join().unwrap();
    let context = format!("{fault:?} ({codec}):\n{out}\n{err}");
    assert!(mpirun_ended, "mpirun did not end: {context}");
    // Sapwood's own message from each survivor: itself, the rank it waited for, the timeout
    let mut who: Vec<&str> = Vec::new();
    for (at, line) in &reported {
        let after = at.duration_since(faulted_at);
        assert!(
            after >= timeout.saturating_sub(Duration::from_millis(100)),
            "reported after {after:?}, before the {timeout:?} timeout: {line}\n{context}"
        );
        // "error: collective: rank R waited T s (comm_timeout) for a message from rank P: ..."
        // or "... for rank P to take a message: ..."; an MPI sum (packed) cannot tell which
        // rank is missing
        let rest = line
            .strip_prefix("error: collective: rank ")
            .unwrap_or_else(|| panic!("a Sapwood error naming its rank: {line}\n{context}"));
        who.push(&rest[..1]);
        let peer = rest
            .split_once(" rank ")
            .and_then(|(_, r)| r.split([' ', ':']).next())
            .and_then(|p| p.parse::<usize>().ok());
        assert!(
            codec == "packed" || peer.is_some_and(|p| p < 3 && p.to_string() != rest[..1]),
            "a ring step names the rank it waited for: {line}"
        );
        println!("{fault:?} ({codec}): after {after:?} (timeout {timeout:?}): {line}");
    }
    who.sort_unstable();
    assert_eq!(who, ["0", "2"], "each survivor reports: {context}");
    assert!(survivors_ended, "the survivors must end: {context}");
}

#[test]
fn a_rank_that_dies_is_reported_by_the_survivors_within_the_timeout() {
    job_with_a_faulty_rank(Fault::Dies, "auto", Duration::from_secs(3));
}

#[test]
fn a_rank_that_dies_during_an_mpi_sum_is_reported_within_the_timeout() {
    job_with_a_faulty_rank(Fault::Dies, "packed", Duration::from_secs(3));
}

#[test]
fn a_rank_that_goes_silent_is_reported_by_the_survivors_within_the_timeout() {
    job_with_a_faulty_rank(Fault::Stops, "auto", Duration::from_secs(3));
}
