//! A seeded sequence of states for unit tests that want many varied inputs without a
//! dependency: the 64-bit linear congruential generator with Knuth's MMIX constants.

/// The states after `state`, one a call; callers keep the high bits, the better mixed.
pub(crate) fn lcg(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state
    }
}
