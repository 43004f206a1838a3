//! Keeping a rayon pool's threads awake while a tree grows.
//!
//! A tree is a chain of short parallel steps (a partition, a histogram, two nodes' split
//! scans) separated by short serial ones. A rayon thread with nothing to do yields a few
//! dozen times and then sleeps, and waking it took about 60 µs on the 2-core machines this
//! project is measured on: longer than a leaf-wise step's whole work, so a loss-guided tree
//! ran its parallel steps serially (measured with a join of two 60 µs tasks after a 50 µs
//! serial gap: 178 µs a step asleep, 112 µs kept awake, 110 µs ideal). While a
//! [`WarmPool`] lives, every other thread of the pool spins on rayon's queues instead, as
//! OpenMP's threads spin between parallel regions in the peers: it takes work within
//! microseconds, at the cost of a busy core while the work is serial.
//!
//! A spinner that has found nothing for a while gives its core back to the operating system
//! between looks (`sched_yield`): on an idle machine the call returns at once, so work is
//! still taken within microseconds, but on a machine shared with other busy processes the
//! core goes to them instead of to a loop that waits, as the peers' OpenMP threads
//! throttle their spinning when the machine is oversubscribed.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long [`WarmPool::start`] waits for the pool's threads to pick their spinner up; a
/// pool busy with other work for longer is left to sleep as usual.
const START_WAIT: Duration = Duration::from_millis(20);

/// Looks for work a spinner makes with a pause hint before it yields its core between
/// looks: a few hundred µs, longer than the serial steps inside a tree. 256 (tens of µs)
/// measured 10-20% slower on a quiet 2-core machine; 4096 as fast as never yielding there,
/// and about a fifth faster beside two busy processes (`bench/compare_peers.py --load 2`).
const SPINS_BEFORE_YIELD: u32 = 4096;

/// While alive, the other threads of the current rayon pool spin for work instead of
/// sleeping; dropping it lets them sleep again.
#[derive(Debug)]
pub struct WarmPool {
    done: Arc<AtomicBool>,
}

impl WarmPool {
    /// Starts a spinner on every other thread of the current pool; `None` outside a pool
    /// or in a pool of one thread.
    ///
    /// Every spinner must be running on another thread before the caller's work starts: a
    /// spinner left in the caller's own queue could be run by the caller while it waits in
    /// a join, and would then spin under the work that is to stop it. So this waits until
    /// each has started, or gives up after `START_WAIT` (every spinner that starts later
    /// returns at once).
    pub fn start() -> Option<WarmPool> {
        rayon::current_thread_index()?;
        let others = rayon::current_num_threads().checked_sub(1)?;
        if others == 0 {
            return None;
        }
        let done = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicUsize::new(0));
        for _ in 0..others {
            let (done, started) = (done.clone(), started.clone());
            rayon::spawn(move || {
                started.fetch_add(1, Ordering::AcqRel);
                let mut idle = 0u32;
                while !done.load(Ordering::Acquire) {
                    // a job found is run here; none, and the loop spins
                    if rayon::yield_now() == Some(rayon::Yield::Executed) {
                        idle = 0;
                    } else if idle < SPINS_BEFORE_YIELD {
                        idle += 1;
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
            });
        }
        let begun = Instant::now();
        while started.load(Ordering::Acquire) < others {
            if begun.elapsed() > START_WAIT {
                done.store(true, Ordering::Release);
                return None;
            }
            std::hint::spin_loop();
        }
        Some(WarmPool { done })
    }
}

impl Drop for WarmPool {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    #[test]
    fn spinners_run_the_pools_work_and_stop_when_dropped() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        assert!(WarmPool::start().is_none(), "outside a pool there is none");
        pool.install(|| {
            let warm = WarmPool::start().expect("three threads: two spinners");
            // nested parallel work completes with the spinners taking part
            let sum: usize = (0..100_000usize)
                .into_par_iter()
                .with_min_len(1_000)
                .map(|i| i % 7)
                .sum();
            assert_eq!(sum, (0..100_000usize).map(|i| i % 7).sum::<usize>());
            let (a, b) = rayon::join(|| 1 + 1, || 2 + 2);
            assert_eq!((a, b), (2, 4));
            drop(warm);
        });
        // the spinners returned: the pool can be dropped (its threads end) and a new
        // one of one thread has nothing to warm
        drop(pool);
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        one.install(|| assert!(WarmPool::start().is_none()));
    }
}
