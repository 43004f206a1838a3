//! The boundary with the parquet and arrow crates: a panic inside them (which corrupt
//! input can cause) becomes an error message instead of ending the process.
//!
//! The process-wide panic hook is wrapped once: while this thread runs a guarded call the
//! hook stays silent (the panic is reported as an error instead); every other panic, on
//! any thread, goes to the hook that was installed before, exactly as it would have.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// How many guarded calls this thread is inside.
    static GUARDED: Cell<u32> = const { Cell::new(0) };
}

static WRAP_HOOK: Once = Once::new();

/// Installs, once, a hook that stays silent inside guarded calls and delegates otherwise.
fn wrap_hook() {
    WRAP_HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if GUARDED.with(Cell::get) == 0 {
                previous(info);
            }
        }));
    });
}

/// Leaves the guarded state when dropped, also while unwinding.
struct Depth;

impl Depth {
    fn enter() -> Depth {
        GUARDED.with(|g| g.set(g.get() + 1));
        Depth
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        GUARDED.with(|g| g.set(g.get().saturating_sub(1)));
    }
}

/// Runs `f`; a panic inside it is returned, silently, as `Err` with the panic's message.
///
/// Whatever `f` touched may be left half-updated, so callers drop it after an `Err`.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    wrap_hook();
    let depth = Depth::enter();
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    drop(depth);
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown failure".to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_panics_become_errors_and_unguarded_ones_still_panic() {
        let e = guarded(|| -> u32 { panic!("slice must not be empty") }).unwrap_err();
        assert_eq!(e, "slice must not be empty");
        let e = guarded(|| -> u32 { panic!("offset {} out of bounds", 7) }).unwrap_err();
        assert_eq!(e, "offset 7 out of bounds");
        assert_eq!(guarded(|| 7).unwrap(), 7);
        assert_eq!(
            GUARDED.with(Cell::get),
            0,
            "the guard is left after a panic"
        );
        // a panic outside a guarded call still unwinds as usual
        let outside = std::panic::catch_unwind(|| panic!("not ours"));
        assert!(outside.is_err());
    }
}
