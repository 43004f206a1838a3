//! The device encoders against the host codecs of sapwood-collective, byte for byte: packed
//! lanes (`codec::pack`) and the group encoding (`codec::encode_groups`) of the histograms
//! of a grown tree's nodes, in batches split by the batch limit, and of uploaded values
//! chosen to reach every branch of the group encoding.
//!
//! The same checks as sapwood-wgpu's `tests/encode.rs` (sapwood-testkit's [`encoders`]), on
//! the CUDA kernels. Ignored unless the build script finds libcuda (`SAPWOOD_REQUIRE_CUDA=1`
//! forces them; the GPU kit builds them so).

use sapwood_core::backend::device;
use sapwood_core::backend::ShardData;
use sapwood_core::params::Quantisation;
use sapwood_core::tree::NodeId;
use sapwood_core::Result;
use sapwood_cuda::{CudaBackend, CudaDevice, CudaFactory, Gpu};
use sapwood_testkit::encoders::{self, Encoders, Grown};

/// The device encoders of a CUDA device, and backends each on a logical device of its own.
struct Cuda(Gpu);

impl Encoders for Cuda {
    type Backend = CudaBackend;
    const BACKEND: &'static str = "CUDA";

    fn backend(&self, shard: ShardData) -> Result<Box<CudaBackend>> {
        // 16-bin tiles: several shared tiles, wide features in global memory
        Ok(Box::new(CudaBackend::new(
            CudaDevice::new(gpu(), Some(16))?,
            shard,
        )?))
    }

    fn build_group_encoded_histograms(
        dev: &mut CudaBackend,
        nodes: &[NodeId],
    ) -> Result<Vec<Vec<u8>>> {
        dev.build_group_encoded_histograms(nodes)
    }

    fn name(&self) -> &str {
        self.0.name()
    }

    fn encode_groups(&self, values: &[i64], len: usize) -> Result<Vec<Vec<u8>>> {
        device::encode_groups(&CudaDevice::new(self.0.clone(), None)?, values, len)
    }

    fn pack_values(&self, values: &[i64], len: usize, widths: &[u32]) -> Result<Vec<i64>> {
        device::pack_values(&CudaDevice::new(self.0.clone(), None)?, values, len, widths)
    }
}

fn gpu() -> Gpu {
    CudaFactory::new()
        .open_device()
        .unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

fn cuda() -> Cuda {
    Cuda(gpu())
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn packed_histograms_equal_the_codec_packing_of_built_histograms() {
    encoders::packed_histograms_equal_the_codec_packing_of_built_histograms(&cuda());
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn group_encoded_histograms_equal_the_codec() {
    encoders::group_encoded_histograms_equal_the_codec(&cuda());
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn wide_histograms_encode_as_the_codec_does() {
    // 500 bins a node over three features (u16 bins), 15 nodes
    encoders::wide_histograms_encode_as_the_codec_does(&cuda());
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn a_width_per_node_is_required() {
    encoders::a_width_per_node_is_required(&cuda());
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn encoded_blocks_equal_the_codec_on_concatenated_nodes() {
    encoders::encoded_blocks_equal_the_codec_on_concatenated_nodes(&cuda());
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn encoded_blocks_gather_nodes_across_batches() {
    // 500 bins a node, 8000 bytes of histogram: batches of 24 KiB are 3 nodes, so 15 nodes
    // take 5 batches and 4 nodes 2 (the strided copies start mid-buffer)
    let mut g = Grown::new(&cuda(), &[300, 150, 50], Quantisation::Exact, 11);
    assert_eq!(g.total_bins, 500);
    g.p.dev.set_max_batch_bytes(24 * 1024);
    let all: Vec<usize> = (0..15).collect();
    let four = [12, 0, 7, 3];
    for blocks in [
        &[0..90, 90..410, 410..500][..],
        &[0..0, 0..7, 7..450, 450..500],
        &[0..33, 33..40, 40..481, 481..500],
    ] {
        for own in 0..blocks.len() {
            for idx in [&all[..], &four, &[5]] {
                assert!(g.check_encoded_blocks(idx, blocks, own), "own {own}");
            }
        }
    }
    // one node a batch
    g.p.dev.set_max_batch_bytes(1);
    assert!(g.check_encoded_blocks(&all, &[0..90, 90..410, 410..500], 1));
    g.check_every_layout();
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn encoded_blocks_refuse_bad_layouts_with_errors() {
    encoders::encoded_blocks_refuse_bad_layouts_with_errors(&cuda());
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn uploaded_extreme_values_encode_as_the_codec_does() {
    encoders::uploaded_extreme_values_encode_as_the_codec_does(&cuda());
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn device_encoder_throughput() {
    // the GPU kit's report reads the `device encoders` line; one message first, untimed
    encoders::device_encoder_throughput(&cuda(), 1 << 16, 256, true);
}
