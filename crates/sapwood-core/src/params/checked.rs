//! Values checked once, where they enter (a command line, Python's keywords, a Rust
//! caller): training takes only [`Checked`] parameters and run options, so nothing
//! downstream checks them again and no path can forget to.

use std::ops::Deref;

use crate::error::Result;

/// What can be checked before training: every value in range, none contradicting another.
pub trait Check {
    /// Checks every value and their combinations; the error names the parameter.
    fn check(&self) -> Result<()>;
}

/// A value that passed its [`Check`]. Made at the edge by [`Checked::new`]; read through
/// `Deref`; never changed afterwards except by training's own derivations, which keep it
/// valid (the class count the labels give, the binning a continued model keeps).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Checked<T>(T);

impl<T: Check> Checked<T> {
    /// Checks `value`.
    pub fn new(value: T) -> Result<Self> {
        value.check()?;
        Ok(Checked(value))
    }
}

impl<T> Checked<T> {
    /// Wraps a value training derived from checked ones (see the type's doc): checking it
    /// again would only repeat what its sources passed.
    pub(crate) fn derived(value: T) -> Self {
        Checked(value)
    }

    /// The value, no longer marked checked (to change it and check it again).
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> Deref for Checked<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{Params, RunOptions};

    /// Out-of-range values and contradicting pairs are refused when checked, naming the
    /// parameter; what passes reads back unchanged.
    #[test]
    fn checking_refuses_what_training_would_refuse() {
        let bad_depth = Params {
            max_depth: 64,
            ..Params::default()
        };
        let e = Checked::new(bad_depth).unwrap_err().to_string();
        assert!(e.contains("max_depth"), "{e}");
        let num_class_for_binary = Params {
            num_class: Some(3),
            ..Params::default()
        };
        let e = Checked::new(num_class_for_binary).unwrap_err().to_string();
        assert!(e.contains("num_class") && e.contains("one output"), "{e}");
        let no_workers = RunOptions {
            workers: 0,
            ..RunOptions::default()
        };
        assert!(Checked::new(no_workers).is_err());
        let p = Params {
            max_depth: 9,
            ..Params::default()
        };
        assert_eq!(Checked::new(p.clone()).unwrap().into_inner(), p);
    }
}
