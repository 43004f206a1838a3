//! The device encoders against the host codecs of sapwood-collective, byte for byte: packed
//! lanes (`codec::pack`) and the group encoding (`codec::encode_groups`) of the histograms
//! of a grown tree's nodes, in batches split by the binding limit, and of uploaded values
//! chosen to reach every branch of the group encoding. The checks are sapwood-testkit's
//! [`encoders`], shared with sapwood-cuda; the binding limit's are this crate's own.
//!
//! Compiled `#[ignore]` where the build script finds no Vulkan driver (reported as ignored,
//! never as passed); `SAPWOOD_REQUIRE_ADAPTER=1` makes them run regardless.

use std::sync::Arc;

use sapwood_core::backend::device;
use sapwood_core::backend::ShardData;
use sapwood_core::params::Quantisation;
use sapwood_core::tree::NodeId;
use sapwood_core::Result;
use sapwood_testkit::encoders::{self, Encoders, Grown};
use sapwood_wgpu::{Gpu, WgpuBackend, WgpuDevice, WgpuFactory, WgpuOptions};

/// The device encoders of a wgpu device, and backends on it.
struct Wgpu(Arc<Gpu>);

impl Encoders for Wgpu {
    type Backend = WgpuBackend;
    const BACKEND: &'static str = "wgpu";

    fn backend(&self, shard: ShardData) -> Result<Box<WgpuBackend>> {
        Ok(Box::new(WgpuBackend::new(
            WgpuDevice::new(self.0.clone()),
            shard,
        )?))
    }

    fn build_group_encoded_histograms(
        dev: &mut WgpuBackend,
        nodes: &[NodeId],
    ) -> Result<Vec<Vec<u8>>> {
        dev.build_group_encoded_histograms(nodes)
    }

    fn name(&self) -> &str {
        self.0.name()
    }

    fn encode_groups(&self, values: &[i64], len: usize) -> Result<Vec<Vec<u8>>> {
        device::encode_groups(&WgpuDevice::new(self.0.clone()), values, len)
    }

    fn pack_values(&self, values: &[i64], len: usize, widths: &[u32]) -> Result<Vec<i64>> {
        device::pack_values(&WgpuDevice::new(self.0.clone()), values, len, widths)
    }
}

fn gpu(options: WgpuOptions) -> Wgpu {
    Wgpu(
        WgpuFactory::with_options(options)
            .open_device()
            .expect("a wgpu adapter (run crates/sapwood-wgpu/install-lavapipe.sh)"),
    )
}

/// A device whose bindings hold 24 KiB.
fn binding_of_24_kib() -> Wgpu {
    gpu(WgpuOptions {
        max_binding_bytes: Some(24 * 1024),
        ..WgpuOptions::default()
    })
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn packed_histograms_equal_the_codec_packing_of_built_histograms() {
    encoders::packed_histograms_equal_the_codec_packing_of_built_histograms(&gpu(
        WgpuOptions::default(),
    ));
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn group_encoded_histograms_equal_the_codec() {
    encoders::group_encoded_histograms_equal_the_codec(&gpu(WgpuOptions::default()));
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn encoders_split_batches_at_the_binding_limit() {
    // 500 bins: 8000 bytes of histogram and at most 8384 of groups a node, so a binding of
    // 24 KiB holds 3 nodes' histograms and 2 nodes' encodings: 15 nodes take 5 and 8 batches
    encoders::wide_histograms_encode_as_the_codec_does(&binding_of_24_kib());
    // too narrow for one node: an error, not a panic
    let tiny = gpu(WgpuOptions {
        max_binding_bytes: Some(4096),
        ..WgpuOptions::default()
    });
    let e = tiny
        .encode_groups(&[1; 1000], 1000)
        .unwrap_err()
        .to_string();
    assert!(e.contains("binding limit"), "{e}");
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn a_width_per_node_is_required() {
    encoders::a_width_per_node_is_required(&gpu(WgpuOptions::default()));
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn encoded_blocks_equal_the_codec_on_concatenated_nodes() {
    encoders::encoded_blocks_equal_the_codec_on_concatenated_nodes(&gpu(WgpuOptions::default()));
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn encoded_blocks_gather_nodes_across_batches() {
    // 500 bins a node, 8000 bytes of histogram: a binding of 24 KiB builds 3 nodes a batch,
    // so 15 nodes take 5 batches and 4 nodes 2
    let mut g = Grown::new(
        &binding_of_24_kib(),
        &[300, 150, 50],
        Quantisation::Exact,
        11,
    );
    assert_eq!(g.total_bins, 500);
    let all: Vec<usize> = (0..15).collect();
    let four = [12, 0, 7, 3];
    // 15 nodes' block fits a binding up to 99 bins (its worst-case encoding too), 4 nodes'
    // up to 372: a wider block sent elsewhere leaves the call to the host, before building
    let three = [0..90, 90..410, 410..500];
    for (own, device) in [(0, false), (1, true), (2, false)] {
        assert_eq!(
            g.check_encoded_blocks(&all, &three, own),
            device,
            "own {own}"
        );
        assert!(g.check_encoded_blocks(&four, &three, own), "own {own}");
    }
    let with_empty = [0..0, 0..7, 7..450, 450..500];
    assert!(g.check_encoded_blocks(&all, &with_empty, 2));
    let unequal = [0..33, 33..40, 40..481, 481..500];
    assert!(g.check_encoded_blocks(&all, &unequal, 2));
    for own in 0..4 {
        // 4 nodes of the 441-bin block do not fit; one node's do
        let device = own == 2;
        assert_eq!(
            g.check_encoded_blocks(&four, &unequal, own),
            device,
            "own {own}"
        );
        assert!(g.check_encoded_blocks(&[5], &unequal, own), "own {own}");
    }
    // every message as wide as a binding allows: 99 bins of 15 nodes
    let widest = [0..401, 401..500];
    assert!(g.check_encoded_blocks(&all, &widest, 0));
    let wider = [0..400, 400..500];
    assert!(!g.check_encoded_blocks(&all, &wider, 0));
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn encoded_blocks_refuse_bad_layouts_with_errors() {
    encoders::encoded_blocks_refuse_bad_layouts_with_errors(&gpu(WgpuOptions::default()));
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn uploaded_extreme_values_encode_as_the_codec_does() {
    encoders::uploaded_extreme_values_encode_as_the_codec_does(&gpu(WgpuOptions::default()));
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn device_encoder_throughput() {
    // correctness only on lavapipe (a CPU); the figure is printed for the record
    encoders::device_encoder_throughput(&gpu(WgpuOptions::default()), 1 << 14, 64, false);
}
