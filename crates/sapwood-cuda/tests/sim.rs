//! The CUDA kernels and the CUDA backend's host code on the simulator (feature `sim`),
//! against the CPU reference bit for bit: the conformance suite every backend runs, the
//! device encoders against the host codecs, the read-back probes, several logical devices
//! and workers, tile sizes from 8 bins to beyond the default shared memory, and device
//! prediction — each under two schedules, shuffled threads (seed 1) and one warp at a time
//! (seed 2), so that every kernel meets both the finest interleaving and the most skew
//! between warps.
//!
//! `cargo test --release -p sapwood-cuda --features sim --test sim`
#![cfg(feature = "sim")]

use sapwood_core::backend::device::{self, DeviceShard};
use sapwood_core::backend::ShardData;
use sapwood_core::params::Quantisation;
use sapwood_core::tree::NodeId;
use sapwood_core::Result;
use sapwood_cuda::sim::{Schedule, SimBackend, SimDevice, SimFactory};
use sapwood_testkit::conformance::{self, every_objective_and_mode};
use sapwood_testkit::encoders::{self, Encoders, Grown};
use sapwood_testkit::probe;
use sapwood_testkit::train::Job;

/// The device encoders of a simulated device, and backends each on a device of its own.
struct Sim(SimFactory);

impl Encoders for Sim {
    type Backend = SimBackend;
    const BACKEND: &'static str = "CUDA simulator";

    fn backend(&self, shard: ShardData) -> Result<Box<SimBackend>> {
        Ok(Box::new(DeviceShard::new(self.0.open_device(), shard)?))
    }

    fn build_group_encoded_histograms(
        dev: &mut SimBackend,
        nodes: &[NodeId],
    ) -> Result<Vec<Vec<u8>>> {
        dev.build_group_encoded_histograms(nodes)
    }

    fn name(&self) -> &str {
        "cuda simulator"
    }

    fn encode_groups(&self, values: &[i64], len: usize) -> Result<Vec<Vec<u8>>> {
        device::encode_groups(&self.0.open_device(), values, len)
    }

    fn pack_values(&self, values: &[i64], len: usize, widths: &[u32]) -> Result<Vec<i64>> {
        device::pack_values(&self.0.open_device(), values, len, widths)
    }
}

/// The same tests under one schedule and seed.
macro_rules! on_the_simulator {
    ($schedule:expr, $seed:expr) => {
        use super::*;

        fn sim(tile_bins: Option<u32>) -> SimFactory {
            SimFactory::new($schedule, $seed, tile_bins)
        }

        fn backend(s: ShardData) -> Result<SimBackend> {
            DeviceShard::new(sim(Some(16)).open_device(), s)
        }

        sapwood_testkit::conformance!(factory: sim(None), small: sim(Some(8)));

        #[test]
        fn packed_histograms_equal_the_codec_packing_of_built_histograms() {
            encoders::packed_histograms_equal_the_codec_packing_of_built_histograms(&Sim(sim(
                Some(16),
            )));
        }

        #[test]
        fn group_encoded_histograms_equal_the_codec() {
            encoders::group_encoded_histograms_equal_the_codec(&Sim(sim(Some(16))));
        }

        #[test]
        fn wide_histograms_encode_as_the_codec_does() {
            encoders::wide_histograms_encode_as_the_codec_does(&Sim(sim(Some(16))));
        }

        #[test]
        fn a_width_per_node_is_required() {
            encoders::a_width_per_node_is_required(&Sim(sim(Some(16))));
        }

        #[test]
        fn encoded_blocks_equal_the_codec_on_concatenated_nodes() {
            encoders::encoded_blocks_equal_the_codec_on_concatenated_nodes(&Sim(sim(Some(16))));
        }

        #[test]
        fn encoded_blocks_gather_nodes_across_batches() {
            // 500 bins a node, 8000 bytes of histogram: batches of 24 KiB are 3 nodes
            let mut g = Grown::new(&Sim(sim(Some(16))), &[300, 150, 50], Quantisation::Exact, 11);
            g.p.dev.set_max_batch_bytes(24 * 1024);
            let all: Vec<usize> = (0..15).collect();
            for own in 0..3 {
                assert!(g.check_encoded_blocks(&all, &[0..90, 90..410, 410..500], own));
                assert!(g.check_encoded_blocks(&[12, 0, 7, 3], &[0..0, 0..7, 7..500], own));
            }
            g.p.dev.set_max_batch_bytes(1);
            assert!(g.check_encoded_blocks(&all, &[0..90, 90..410, 410..500], 1));
            g.check_every_layout();
        }

        #[test]
        fn encoded_blocks_refuse_bad_layouts_with_errors() {
            encoders::encoded_blocks_refuse_bad_layouts_with_errors(&Sim(sim(Some(16))));
        }

        #[test]
        fn uploaded_extreme_values_encode_as_the_codec_does() {
            encoders::uploaded_extreme_values_encode_as_the_codec_does(&Sim(sim(Some(16))));
        }

        #[test]
        fn gradients_read_back_match_the_objective_bit_for_bit() {
            probe::gradients_read_back_match_the_objective_bit_for_bit(
                backend,
                SimBackend::read_gradients,
            );
        }

        #[test]
        fn quantised_values_read_back_match_the_core_exactly() {
            probe::quantised_values_read_back_match_the_core_exactly(
                backend,
                SimBackend::read_hist_values,
                Some(SimBackend::read_exact_values),
            );
        }

        #[test]
        fn four_logical_devices_give_the_cpu_model() {
            for params in every_objective_and_mode().into_iter().step_by(3) {
                let job = Job::rows(2400).weighted();
                conformance::assert_workers_give_the_cpu_model(&params, &sim(None), job, &[4]);
            }
        }

        #[test]
        fn histograms_match_the_cpu_with_16_bin_and_8192_bin_tiles() {
            let small = sim(Some(16));
            conformance::histograms_partitions_and_sums_match_the_cpu_with_u8_bins(&small);
            conformance::histograms_partitions_and_sums_match_the_cpu_with_u16_bins(&small);
            // 8192 bins: beyond the 48 KiB default, a 5000-bin feature stays in shared memory
            let large = sim(Some(8192));
            for q in [Quantisation::Exact, Quantisation::Bits(8)] {
                conformance::grow_against_the_cpu(&large, &[5000, 300, 2000, 3], true, q, 0.8, 9);
            }
        }

        #[test]
        fn device_prediction_equals_model_prediction() {
            let dev = sim(None).open_device();
            probe::device_prediction_equals_model_prediction(&|model, binned, rounds| {
                device::predict_binned(&dev, model, binned, rounds)
            });
        }
    };
}

#[test]
fn the_sm75_encoder_ors_by_shuffles_as_the_codec_does() {
    // Turing has no redux.sync: groups.cu's warp ORs are butterfly shuffles there
    for schedule in [Schedule::Shuffled, Schedule::WarpAtATime] {
        let turing = Sim(SimFactory::new(schedule, 7, Some(16)).acting_as(75));
        encoders::uploaded_extreme_values_encode_as_the_codec_does(&turing);
        encoders::group_encoded_histograms_equal_the_codec(&turing);
    }
}

mod shuffled {
    on_the_simulator!(Schedule::Shuffled, 1);
}

mod warp_at_a_time {
    on_the_simulator!(Schedule::WarpAtATime, 2);
}

#[test]
fn more_than_65535_tiles_go_in_several_launches() {
    // the simulator enforces the grid's y limit of 65,535: the driver must split the tiles
    let make = |s: ShardData| -> Result<Box<SimBackend>> {
        let dev = SimDevice::new(Schedule::Shuffled, 3, 2, Some(2));
        Ok(Box::new(DeviceShard::new(dev, s)?))
    };
    probe::more_than_65535_tiles_go_in_several_launches(&make);
}
