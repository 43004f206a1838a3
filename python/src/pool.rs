//! The extension's own thread pool, made again in a process forked after it was made.
//!
//! `fork` copies only the calling thread: the threads of a pool made before it do not exist
//! in the child, and work handed to that pool there waits forever (`predict_proba` in a
//! `multiprocessing` child, the fork start method, hung on a futex). Rayon's global pool
//! cannot be made again, so the extension never uses it: its parallel work runs in this
//! pool, which a child whose process id differs from the pool's maker makes afresh, as the
//! peers' OpenMP runtimes re-create theirs after a fork.

use std::sync::{Arc, Mutex};

/// The pool and the process that made it (the cache is the process's own, by nature of a
/// fork check).
static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);

/// This process's pool, made now when there is none or it belongs to the parent.
fn pool() -> Arc<rayon::ThreadPool> {
    let me = std::process::id();
    // a lock poisoned by a panic elsewhere still guards a valid pool
    let mut slot = POOL.lock().unwrap_or_else(|p| p.into_inner());
    match slot.as_ref() {
        Some((pid, p)) if *pid == me => p.clone(),
        _ => {
            if let Some((_, parents)) = slot.take() {
                // the parent's pool has no threads here: dropping it would signal threads
                // that do not exist, so it is left alone
                std::mem::forget(parents);
            }
            let p = Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .thread_name(|i| format!("sapwood-{i}"))
                    .build()
                    .expect("a thread pool of the default size"),
            );
            *slot = Some((me, p.clone()));
            p
        }
    }
}

/// Runs `work` in the extension's pool (its parallel iterators use that pool).
pub fn install<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    pool().install(work)
}
