//! A bounded, seeded mutation fuzzer on stable Rust, for the decoders of untrusted bytes
//! (model files, histogram messages, split records, cut samples, Parquet and CSV files).
//!
//! Each target starts from a corpus of valid inputs and runs mutants of them (bit flips,
//! interesting bytes and integers, inserted, deleted, duplicated and spliced ranges,
//! truncation) through a function that must return, never panic, for a time budget:
//! `SAPWOOD_FUZZ_SECONDS` per target (default 3). Each run draws a new seed (printed with the
//! target's report, so a failure replays with `SAPWOOD_FUZZ_SEED=<seed>`), so CI explores
//! new mutants on every commit. Every input has a time limit (`SAPWOOD_FUZZ_INPUT_SECONDS`,
//! default 60): a decoder that hangs is saved and ends the run with an error instead of
//! hanging CI. There is no coverage feedback: it is blind mutation, cheap enough to run in CI
//! on every commit. A panic writes the input to `crashes/<target>-<hash>.bin` and fails the
//! target with that path; once fixed, the file moves to `regressions/<target>/` (committed),
//! which every run replays first.
#![deny(missing_docs)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::{Duration, Instant};

pub use sapwood_testkit::Rng;

/// Byte values that often sit on a decoder's boundaries.
const INTERESTING: [u8; 10] = [0, 1, 2, 0x7f, 0x80, 0xff, b'0', b'-', b'"', b','];

/// One to four stacked mutations of `input`, with `corpus` as splice material.
pub fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.index(4) {
        let n = v.len();
        match rng.index(9) {
            0 if n > 0 => {
                let i = rng.index(n);
                v[i] ^= 1 << rng.index(8);
            }
            1 if n > 0 => {
                let i = rng.index(n);
                v[i] = INTERESTING[rng.index(INTERESTING.len())];
            }
            2 if n >= 8 => {
                // an extreme little-endian integer where a length or count may be
                let i = rng.index(n - 7);
                let x: u64 = [0, u64::MAX, u32::MAX as u64, 1 << 63, 0x8000_0000][rng.index(5)];
                v[i..i + 8].copy_from_slice(&x.to_le_bytes());
            }
            3 if n > 0 => {
                let at = rng.index(n);
                let len = 1 + rng.index((n - at).min(64));
                v.drain(at..at + len);
            }
            4 => {
                let at = rng.index(n + 1);
                let bytes: Vec<u8> = (0..1 + rng.index(16))
                    .map(|_| rng.next_u64() as u8)
                    .collect();
                v.splice(at..at, bytes);
            }
            5 if n > 0 => {
                let from = rng.index(n);
                let len = 1 + rng.index((n - from).min(256));
                let chunk = v[from..from + len].to_vec();
                let at = rng.index(n + 1);
                v.splice(at..at, chunk);
            }
            6 if n > 0 => v.truncate(rng.index(n)),
            7 if !corpus.is_empty() => {
                let other = &corpus[rng.index(corpus.len())];
                if !other.is_empty() {
                    let from = rng.index(other.len());
                    let len = 1 + rng.index((other.len() - from).min(256));
                    let at = rng.index(n + 1);
                    let end = (at + len).min(n);
                    v.splice(at..end, other[from..from + len].iter().copied());
                }
            }
            _ if n > 0 => {
                // a decimal digit changed: reaches number parsers in text formats
                let i = rng.index(n);
                v[i] = b'0' + rng.index(10) as u8;
            }
            _ => v.push(rng.next_u64() as u8),
        }
    }
    v
}

/// What a target did in its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Inputs run (regressions, corpus and mutants).
    pub runs: u64,
}

/// Seconds per target, from `SAPWOOD_FUZZ_SECONDS`.
pub fn budget() -> Duration {
    let secs = std::env::var("SAPWOOD_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(3.0);
    Duration::from_secs_f64(secs.max(0.0))
}

/// The run's seed: `SAPWOOD_FUZZ_SEED`, else drawn from the clock (printed by [`fuzz`]).
fn seed() -> u64 {
    std::env::var("SAPWOOD_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            now.as_nanos() as u64 ^ u64::from(std::process::id()).rotate_left(32)
        })
}

/// The longest one input may run, from `SAPWOOD_FUZZ_INPUT_SECONDS` (default 60: a hang
/// detector; the slowest input found so far, a Parquet page header running past the end of
/// the file, took minutes before the reader refused it and now takes under a millisecond).
fn input_limit() -> Duration {
    let secs = std::env::var("SAPWOOD_FUZZ_INPUT_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(60.0);
    Duration::from_secs_f64(secs.max(0.01))
}

/// The input being run and since when (None between inputs), shared with the watchdog.
type Running = std::sync::Arc<std::sync::Mutex<Option<(Instant, Vec<u8>)>>>;

/// The input being run and since when, watched by a thread that ends the process (saving
/// the input) when one runs past the limit: a hang in a decoder cannot be unwound, and a
/// hung test would hang CI instead of failing it.
struct Watchdog {
    current: Running,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Watchdog {
    fn start(name: &str, seed: u64) -> Watchdog {
        let current: Running = Default::default();
        let done: std::sync::Arc<std::sync::atomic::AtomicBool> = Default::default();
        let (c, d, name) = (current.clone(), done.clone(), name.to_string());
        let limit = input_limit();
        std::thread::spawn(move || {
            while !d.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
                let guard = c.lock().unwrap_or_else(|p| p.into_inner());
                if let Some((since, input)) = guard.as_ref() {
                    if since.elapsed() > limit {
                        let path = save_crash(&name, input);
                        eprintln!(
                            "fuzz target `{name}` (seed {seed}): an input ran past {} s \
                             (SAPWOOD_FUZZ_INPUT_SECONDS): saved as {}",
                            limit.as_secs_f64(),
                            path.display()
                        );
                        std::process::exit(101);
                    }
                }
            }
        });
        Watchdog { current, done }
    }

    fn running(&self, input: Option<&[u8]>) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) =
            input.map(|i| (Instant::now(), i.to_vec()));
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Files `regressions/<target>/*.bin`, replayed before any mutant.
pub fn regressions(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = crate_dir().join("regressions").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "bin"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
        .into_iter()
        .filter_map(|p| std::fs::read(&p).ok().map(|b| (p, b)))
        .collect()
}

fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Runs `target` on the regressions, the corpus and mutants of it until the budget is spent;
/// panics (failing the test) with the saved input's path at the first input that panics.
pub fn fuzz(name: &str, corpus: &[Vec<u8>], target: impl Fn(&[u8])) -> Report {
    static QUIET: Once = Once::new();
    // a panic is reported once, by this driver, with its input saved
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let deadline = Instant::now() + budget();
    let seed = seed();
    let mut rng = Rng::seeded(seed ^ fnv64(name.as_bytes()));
    let watchdog = Watchdog::start(name, seed);
    let mut runs = 0u64;
    let mut check = |input: &[u8], origin: &str| {
        runs += 1;
        watchdog.running(Some(input));
        let outcome = catch_unwind(AssertUnwindSafe(|| target(input)));
        watchdog.running(None);
        if let Err(p) = outcome {
            let path = save_crash(name, input);
            let report = format!(
                "fuzz target `{name}` panicked on {origin} ({}; replay with \
                 SAPWOOD_FUZZ_SEED={seed}): {}",
                path.display(),
                message(p.as_ref())
            );
            // the quiet hook prints no panic, and the test harness shows only what was
            // printed: without this line a failing target would name neither input nor seed
            eprintln!("{report}");
            panic!("{report}");
        }
    };
    for (path, bytes) in regressions(name) {
        check(&bytes, &format!("regression {}", path.display()));
    }
    for input in corpus {
        check(input, "a corpus input");
    }
    if corpus.is_empty() {
        return Report { runs };
    }
    let start = Instant::now();
    while Instant::now() < deadline {
        let base = &corpus[rng.index(corpus.len())];
        let m = mutate(&mut rng, base, corpus);
        check(&m, "a mutant");
    }
    eprintln!(
        "fuzz target `{name}`: {runs} inputs in {:.1} s (SAPWOOD_FUZZ_SEED={seed})",
        start.elapsed().as_secs_f64()
    );
    Report { runs }
}

fn save_crash(name: &str, input: &[u8]) -> PathBuf {
    let dir = crate_dir().join("crashes");
    let path = dir.join(format!("{name}-{:016x}.bin", fnv64(input)));
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(&path, input);
    path
}

/// Every file in `dir` (a corpus folder), sorted by name.
pub fn files_in(dir: &Path) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| std::fs::read(p).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutation_is_seeded_and_changes_inputs() {
        let corpus = vec![b"hello, world".to_vec(), vec![0u8; 40]];
        let (mut a, mut b) = (Rng::seeded(1), Rng::seeded(1));
        let mut changed = 0;
        for i in 0..200 {
            let x = mutate(&mut a, &corpus[i % 2], &corpus);
            assert_eq!(x, mutate(&mut b, &corpus[i % 2], &corpus));
            changed += (x != corpus[i % 2]) as usize;
        }
        assert!(
            changed > 150,
            "{changed} of 200 mutants differ from their base"
        );
    }

    /// A target that never returns ends the run (exit status 101) naming the limit and the
    /// saved input, instead of hanging CI: run in a child of this test binary.
    #[test]
    fn a_hanging_input_ends_the_run_instead_of_hanging_it() {
        const NAME: &str = "tests::a_hanging_input_ends_the_run_instead_of_hanging_it";
        if std::env::var("SAPWOOD_FUZZ_HANG_CHILD").is_ok() {
            fuzz("hangtest", &[b"x".to_vec()], |_| loop {
                std::thread::sleep(Duration::from_secs(1));
            });
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--nocapture", "--test-threads", "1"])
            .env("SAPWOOD_FUZZ_HANG_CHILD", "1")
            .env("SAPWOOD_FUZZ_INPUT_SECONDS", "0.3")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(101), "{err}");
        assert!(err.contains("ran past 0.3 s"), "{err}");
        if let Some(path) = err.split("saved as ").nth(1).and_then(|s| s.lines().next()) {
            assert_eq!(std::fs::read(path.trim()).unwrap(), b"x");
            std::fs::remove_file(path.trim()).unwrap();
        }
    }

    #[test]
    fn a_panic_names_the_seed_that_replays_it() {
        let run = || {
            let r = catch_unwind(|| {
                fuzz("seedtest", &[b"abcdefgh".to_vec()], |b| {
                    assert!(!b.contains(&b'q'), "found q");
                })
            });
            message(r.expect_err("some mutant holds a q").as_ref())
        };
        let msg = run();
        let seed = msg
            .split("SAPWOOD_FUZZ_SEED=")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .expect("the seed in the message");
        assert!(seed.parse::<u64>().is_ok(), "{msg}");
        if let Some(p) = msg.split(" (").nth(1).and_then(|s| s.split(';').next()) {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn a_panicking_target_fails_with_its_saved_input() {
        let r = catch_unwind(|| {
            fuzz("selftest", &[b"abc".to_vec()], |b| {
                assert!(!b.contains(&b'z'), "found z");
            })
        });
        let msg = message(r.expect_err("the target panics on some mutant").as_ref());
        assert!(msg.contains("selftest") && msg.contains("found z"), "{msg}");
        let path = msg.split(" (").nth(1).unwrap().split(';').next().unwrap();
        let saved = std::fs::read(path).unwrap();
        assert!(saved.contains(&b'z'));
        std::fs::remove_file(path).unwrap();
    }
}
