//! Teams of threads growing a round's trees at once.
//!
//! With k output groups a round grows k trees, and given the round's gradients they are
//! independent. A tree is a chain of short parallel steps, and on 2 threads about 7% of a
//! 50-class training went to the threads waiting for each other between them (one thread
//! took 1.87× two threads' time). Teams share the pool's threads out instead: each team is
//! a pool of its own (one thread, where there are no more threads than teams) and grows
//! one tree after another, taking the round's trees a few at a time in order. A tree's
//! integers do not depend on the threads that built it, so the trees are those a single
//! team would grow.

use std::any::Any;
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// Fewest trees a round gives each team: a team idle while another grows the round's last
/// tree loses up to that tree's time, a small share of a round of many trees a team.
pub const MIN_TREES_A_TEAM: usize = 8;

/// Most memory the teams beyond the first may hold for their trees' states (each its own
/// quantised gradients, partition and histograms).
pub const TEAM_MEMORY: usize = 512 << 20;

/// How many teams grow a round of `trees` trees on `threads` threads, when each team's tree
/// state takes `state_bytes`: one (no teams) with one thread or too few trees for two.
pub fn count(trees: usize, threads: usize, state_bytes: usize) -> usize {
    let by_memory = 1 + TEAM_MEMORY / state_bytes.max(1);
    threads.min(trees / MIN_TREES_A_TEAM).min(by_memory).max(1)
}

/// Threads of team `t` of `teams` sharing `threads`: as equal as they can be, the first
/// teams taking one more.
fn threads_of(t: usize, teams: usize, threads: usize) -> usize {
    threads / teams + usize::from(t < threads % teams)
}

/// Trees a team takes at once when `remaining` are left to `teams` teams: up to `most`
/// (trees that share a pass over the bins), fewer near the end of the round so that the
/// teams end together.
fn batch(remaining: usize, teams: usize, most: usize) -> usize {
    (remaining / (2 * teams)).clamp(1, most.max(1))
}

/// The pools of teams and the tree states of every team but the first (which uses the
/// backend's own), kept from round to round: a pool's threads and a state's buffers are
/// made once.
pub struct Teams<S> {
    pools: Vec<rayon::ThreadPool>,
    states: Vec<S>,
}

impl<S> Default for Teams<S> {
    fn default() -> Self {
        Teams {
            pools: Vec::new(),
            states: Vec::new(),
        }
    }
}

impl<S: Send + Default> Teams<S> {
    /// Pools for `teams` teams sharing `threads` threads (remade where they differ).
    fn pools(&mut self, teams: usize, threads: usize) -> Result<&[rayon::ThreadPool]> {
        let sizes: Vec<usize> = (0..teams).map(|t| threads_of(t, teams, threads)).collect();
        let current: Vec<usize> = self
            .pools
            .iter()
            .map(rayon::ThreadPool::current_num_threads)
            .collect();
        if current != sizes {
            self.pools = sizes
                .iter()
                .map(|&n| {
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(n)
                        .thread_name(|i| format!("sapwood-team-{i}"))
                        .build()
                        .map_err(|e| Error::Backend(format!("starting a team's threads: {e}")))
                })
                .collect::<Result<_>>()?;
        }
        Ok(&self.pools)
    }

    /// Runs `grow` over the items `0..items` on `teams` teams sharing `threads` threads: team
    /// 0 with `first`, the others with states kept from earlier rounds.
    /// Each team takes consecutive items (up to `most` at once) in order and calls `grow`
    /// with its state, its index and the items; after an error no team takes more, and the
    /// error of the earliest items is returned (every item before them was grown). A panic
    /// in `grow` stops the teams alike and is raised again here. At most `threads` teams.
    pub fn run(
        &mut self,
        teams: usize,
        threads: usize,
        first: &mut S,
        items: usize,
        most: usize,
        grow: impl Fn(&mut S, usize, Range<usize>) -> Result<()> + Sync,
    ) -> Result<()> {
        // every team a thread at least
        let teams = teams.clamp(1, threads.max(1));
        while self.states.len() + 1 < teams {
            self.states.push(S::default());
        }
        self.pools(teams, threads)?;
        let Teams { pools, states } = self;
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let errors: Mutex<Vec<(usize, Error)>> = Mutex::new(Vec::new());
        let panicked: Mutex<Option<Box<dyn Any + Send>>> = Mutex::new(None);
        let claim = || {
            next.fetch_update(Ordering::AcqRel, Ordering::Acquire, |at| {
                (at < items && !failed.load(Ordering::Acquire))
                    .then(|| at + batch(items - at, teams, most))
            })
            .ok()
            .map(|at| at..(at + batch(items - at, teams, most)).min(items))
        };
        let team = |t: usize, state: &mut S| {
            while let Some(range) = claim() {
                let start = range.start;
                // a panic stops the other teams as an error does, and is raised again
                // once they have stopped
                match panic::catch_unwind(AssertUnwindSafe(|| grow(state, t, range))) {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        failed.store(true, Ordering::Release);
                        errors
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((start, e));
                    }
                    Err(payload) => {
                        failed.store(true, Ordering::Release);
                        panicked
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(payload);
                        return;
                    }
                }
            }
        };
        let mut mine: Vec<&mut S> = std::iter::once(first)
            .chain(states.iter_mut())
            .take(teams)
            .collect();
        std::thread::scope(|scope| {
            for (t, (state, pool)) in mine.iter_mut().zip(pools.iter()).enumerate() {
                let team = &team;
                scope.spawn(move || pool.install(|| team(t, state)));
            }
        });
        if let Some(payload) = panicked.into_inner().unwrap_or_else(|p| p.into_inner()) {
            panic::resume_unwind(payload);
        }
        let mut errors = errors.into_inner().unwrap_or_else(|p| p.into_inner());
        errors.sort_by_key(|(start, _)| *start);
        match errors.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn teams_need_threads_trees_and_memory() {
        assert_eq!(count(50, 1, 1), 1);
        assert_eq!(count(50, 2, 1), 2);
        assert_eq!(count(15, 2, 1), 1);
        assert_eq!(count(16, 2, 1), 2);
        assert_eq!(count(50, 16, 1), 6);
        assert_eq!(count(1000, 16, 1), 16);
        // each team's state a third of the budget: the first and three more
        assert_eq!(count(1000, 16, TEAM_MEMORY / 3), 4);
        assert_eq!(count(1000, 16, TEAM_MEMORY * 2), 1);
        assert_eq!(count(0, 4, 1), 1);
    }

    #[test]
    fn threads_are_shared_out_and_batches_shrink_near_the_end() {
        assert_eq!((0..3).map(|t| threads_of(t, 3, 8)).sum::<usize>(), 8);
        assert_eq!(
            (0..3).map(|t| threads_of(t, 3, 8)).collect::<Vec<_>>(),
            [3, 3, 2]
        );
        assert_eq!(batch(50, 2, 4), 4);
        assert_eq!(batch(10, 2, 4), 2);
        assert_eq!(batch(3, 2, 4), 1);
        assert_eq!(batch(1, 2, 4), 1);
        assert_eq!(batch(100, 2, 1), 1);
    }

    #[test]
    fn every_item_is_grown_once_by_some_team_on_its_own_threads() {
        for (teams, threads, items) in [(2, 2, 50), (3, 7, 40), (2, 2, 1), (4, 4, 0), (1, 3, 9)] {
            let mut t: Teams<Vec<usize>> = Teams::default();
            let mut first = Vec::new();
            let seen: Vec<Mutex<Vec<(usize, usize)>>> =
                (0..items).map(|_| Mutex::new(Vec::new())).collect();
            t.run(teams, threads, &mut first, items, 4, |s, team, range| {
                assert!(range.len() <= 4 && !range.is_empty());
                assert_eq!(
                    rayon::current_num_threads(),
                    threads_of(team, teams, threads)
                );
                for i in range {
                    s.push(i);
                    seen[i].lock().unwrap().push((team, i));
                    // long enough that no team takes every item before another starts
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Ok(())
            })
            .unwrap();
            for (i, s) in seen.iter().enumerate() {
                assert_eq!(s.lock().unwrap().len(), 1, "item {i} grown once");
            }
            // each team took its items in order, and the states are kept for the next round
            let mut all: Vec<usize> = first.clone();
            assert!(first.windows(2).all(|w| w[0] < w[1]));
            for s in &t.states {
                assert!(s.windows(2).all(|w| w[0] < w[1]));
                all.extend(s);
            }
            all.sort_unstable();
            assert_eq!(all, (0..items).collect::<Vec<_>>());
            assert_eq!(t.states.len(), teams.max(1) - 1);
            // with two teams and many items, both took some
            if teams == 2 && items == 50 {
                assert!(
                    !first.is_empty() && !t.states[0].is_empty(),
                    "{first:?} {:?}",
                    t.states
                );
            }
        }
    }

    #[test]
    fn the_earliest_error_is_returned_and_no_team_starts_after_one() {
        let mut t: Teams<()> = Teams::default();
        let grown = Mutex::new(Vec::new());
        let err = t
            .run(2, 2, &mut (), 40, 1, |_, _, range| {
                grown.lock().unwrap().push(range.start);
                match range.start {
                    5 | 9 => Err(Error::Backend(format!("tree {}", range.start))),
                    // the others take a while: the failing team cannot be far behind
                    _ => {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        Ok(())
                    }
                }
            })
            .unwrap_err();
        assert_eq!(err.to_string(), "backend: tree 5");
        // every item before the failure was grown, and at most the other team's item in
        // hand and the one it may have claimed as the failure came after it
        let mut grown = grown.into_inner().unwrap();
        grown.sort_unstable();
        assert_eq!(grown[..6], [0, 1, 2, 3, 4, 5]);
        assert!(grown.len() <= 8, "{grown:?}");
    }

    #[test]
    fn a_panic_in_a_team_stops_the_others_and_is_raised_again() {
        let mut t: Teams<()> = Teams::default();
        let grown = AtomicUsize::new(0);
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            t.run(2, 2, &mut (), 400, 1, |_, _, range| {
                grown.fetch_add(1, Ordering::Relaxed);
                if range.start == 3 {
                    panic!("tree three");
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
                Ok(())
            })
        }))
        .unwrap_err();
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"tree three"));
        // the other team stops once the panic reaches its catch, after the panic hook has
        // printed: with the harness's other tests on every core that has taken over 200 ms,
        // while the other team grows an item every 10 ms, so the bound is only far from
        // every item
        assert!(grown.load(Ordering::Relaxed) < 200);
    }

    #[test]
    fn no_more_teams_than_threads() {
        let mut t: Teams<usize> = Teams::default();
        let mut first = 0;
        t.run(4, 2, &mut first, 10, 1, |_, team, _| {
            assert!(team < 2);
            assert_eq!(rayon::current_num_threads(), 1);
            Ok(())
        })
        .unwrap();
        assert_eq!(t.states.len(), 1);
    }
}
