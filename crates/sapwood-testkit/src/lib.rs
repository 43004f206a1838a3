//! Sapwood's test kit (dev-only, never published): the fixtures every backend's tests share
//! and the backend conformance suite.
//!
//! - [`rng`]: the seeded generator behind every random input;
//! - [`data`]: mixed feature matrices (numeric, missing, categorical), labels per
//!   objective, random binned shards;
//! - [`trees`]: random trees and splits that drive a backend without the grower;
//! - [`train`]: whole trainings with any factory on one or several workers (in-process
//!   collective), and the byte comparison of saved models;
//! - [`conformance`](mod@conformance): every check a histogram backend must pass against brute force and the
//!   CPU reference, bit for bit; [`conformance!`] makes them the tests of a backend crate;
//! - [`encoders`]: a GPU backend's device encoders (packed lanes, group encoding) against
//!   the host codecs of sapwood-collective, byte for byte;
//! - [`probe`]: kernel-level checks through a GPU backend's own read-backs, and device
//!   prediction.
//!
//! # Instantiating the suite
//!
//! One line in a backend crate's `tests/conformance.rs`:
//!
//! ```text
//! sapwood_testkit::conformance!(
//!     factory: WgpuFactory::new(),
//!     small: tiny_tiles_and_chunks(), // 8-bin tiles, 1 KiB chunks
//!     #[cfg_attr(sapwood_no_adapter, ignore = "no wgpu adapter: run install-lavapipe.sh")]
//! );
//! ```
//!
//! Attributes after the factories go on every generated test: a backend whose build script
//! finds no device passes `cfg_attr(…, ignore = …)` so its tests show as ignored, never as
//! passed.
#![deny(missing_docs)]

pub mod conformance;
pub mod data;
pub mod encoders;
pub mod probe;
pub mod rng;
pub mod train;
pub mod trees;

pub use rng::Rng;

/// Expands into one `#[test]` per check of [`conformance`](mod@crate::conformance), each
/// calling the check with a reference to a factory built by the test itself.
///
/// - `factory`: the backend as users get it (model-level checks);
/// - `small`: the same backend configured so that its rarely taken paths run on small data
///   (tiny shared-memory tiles, small chunks), for backend-level checks and the fallback
///   model check; the CPU passes its one factory twice;
/// - then any attributes for every test, e.g. a `cfg_attr(…, ignore = "…")` set by the
///   crate's build script when no device is present.
///
/// The factory expressions are evaluated inside each test, so they may call a helper that
/// fails the test with a clear message when the device vanished at run time.
#[macro_export]
macro_rules! conformance {
    (factory: $factory:expr, small: $small:expr $(, #[$attr:meta])* $(,)?) => {
        $crate::conformance_test!(
            histograms_match_brute_force_and_subtraction_equals_direct_build, $small $(, #[$attr])*
        );
        $crate::conformance_test!(categorical_splits_route_by_bin_set, $small $(, #[$attr])*);
        $crate::conformance_test!(
            gradients_and_margins_match_the_objective_bit_for_bit, $small $(, #[$attr])*
        );
        $crate::conformance_test!(
            quantised_values_match_the_core_row_by_row, $small $(, #[$attr])*
        );
        $crate::conformance_test!(
            histograms_partitions_and_sums_match_the_cpu_with_u8_bins, $small $(, #[$attr])*
        );
        $crate::conformance_test!(
            histograms_partitions_and_sums_match_the_cpu_with_u16_bins, $small $(, #[$attr])*
        );
        $crate::conformance_test!(histogram_sums_carry_into_the_high_word, $small $(, #[$attr])*);
        $crate::conformance_test!(sparse_shards_match_the_cpu, $small $(, #[$attr])*);
        $crate::conformance_test!(
            non_finite_and_huge_values_quantise_as_on_the_cpu, $small $(, #[$attr])*
        );
        $crate::conformance_test!(
            softmax_labels_outside_the_classes_match_the_cpu, $small $(, #[$attr])*
        );
        $crate::conformance_test!(skewed_features_build_the_cpu_histograms, $small $(, #[$attr])*);
        $crate::conformance_test!(
            training_margins_equal_model_predictions, $factory $(, #[$attr])*
        );
        $crate::conformance_test!(
            models_are_byte_identical_to_the_cpu_for_every_objective_and_mode,
            $factory $(, #[$attr])*
        );
        $crate::conformance_test!(
            models_are_byte_identical_with_tiles_global_fallback_and_chunks,
            $small $(, #[$attr])*
        );
        $crate::conformance_test!(
            models_are_byte_identical_with_sampling_and_weights, $factory $(, #[$attr])*
        );
        $crate::conformance_test!(
            several_logical_devices_give_the_cpu_model, $factory $(, #[$attr])*
        );
    };
}

/// One test of [`conformance!`]: `#[test]` `fn $check` calling
/// `sapwood_testkit::conformance::$check(&$factory)`, with the given attributes.
#[doc(hidden)]
#[macro_export]
macro_rules! conformance_test {
    ($check:ident, $factory:expr $(, #[$attr:meta])*) => {
        #[test]
        $(#[$attr])*
        fn $check() {
            $crate::conformance::$check(&$factory);
        }
    };
}
