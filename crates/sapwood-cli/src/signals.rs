//! SIGINT (Ctrl-C) and SIGTERM (what Slurm and Kubernetes send before SIGKILL) turned into
//! a flag every stage polls: reading stops between batches, training after the current
//! round (saving the model, summary and checkpoint), prediction between batches (its
//! temporary removed). A second signal ends the process at once.
//!
//! The flag is the process's own: a signal is delivered to the process, so its record is
//! process-wide by nature.
// installing a handler is a call into the C library: the only unsafe code of the command
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicI32, Ordering};

/// The first signal received (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    // async-signal-safe only: an atomic swap, and _exit on the second signal
    if RECEIVED.swap(signal, Ordering::SeqCst) != 0 {
        // SAFETY: _exit is async-signal-safe and takes any status
        unsafe { libc::_exit(128 + signal) };
    }
}

/// Routes SIGINT and SIGTERM to the flag. Blocking calls are restarted after the handler
/// (SA_RESTART), so a signal never surfaces as an I/O error in the middle of an exchange.
pub fn install() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; the handler only touches an atomic
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// A signal that asks the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal(i32);

impl Signal {
    /// SIGINT, what Ctrl-C sends.
    pub const INTERRUPT: Signal = Signal(libc::SIGINT);

    /// The exit status after it: 128 + its number (130 for SIGINT, 143 for SIGTERM), as a
    /// shell reports a process it ended.
    pub fn exit_code(self) -> u8 {
        (128 + self.0).clamp(0, 255) as u8
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self.0 {
            libc::SIGINT => "SIGINT (Ctrl-C)",
            libc::SIGTERM => "SIGTERM",
            _ => "a signal",
        }
    }
}

/// The first stop signal received so far, if any.
pub fn received() -> Option<Signal> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(Signal(s)),
    }
}

/// Test only: `SAPWOOD_TEST_RAISE_AT_BATCH=<n>` makes the process send itself SIGINT as it
/// reaches the n-th batch (1-based) of a data file, so tests can show that every command
/// that reads stops there, cleanly, whatever the machine's speed. Never set it elsewhere.
pub const TEST_RAISE_ENV: &str = "SAPWOOD_TEST_RAISE_AT_BATCH";

/// Test only: `SAPWOOD_TEST_RAISE_AT_SLICE=<n>` makes `predict --contributions` send itself
/// SIGINT as it starts explaining the n-th slice of rows (1-based, counted over the whole
/// run), so a test can show that a signal is heard inside a batch. Never set it elsewhere.
pub const TEST_RAISE_SLICE_ENV: &str = "SAPWOOD_TEST_RAISE_AT_SLICE";

/// Raises SIGINT when [`TEST_RAISE_ENV`] names batch `n`.
pub fn test_raise_at_batch(n: usize) {
    test_raise(TEST_RAISE_ENV, n);
}

/// Raises SIGINT when [`TEST_RAISE_SLICE_ENV`] names slice `n`.
pub fn test_raise_at_slice(n: usize) {
    test_raise(TEST_RAISE_SLICE_ENV, n);
}

/// Raises SIGINT when the variable `env` holds `n`.
fn test_raise(env: &str, n: usize) {
    if std::env::var(env).ok().and_then(|v| v.parse().ok()) == Some(n) {
        // SAFETY: raise is always safe to call
        unsafe { libc::raise(libc::SIGINT) };
    }
}
