//! The device encoders of a GPU backend against the host codecs of sapwood-collective, byte
//! for byte: packed lanes (`codec::pack`) and the group encoding (`codec::encode_groups`) of
//! the histograms of a grown tree's nodes, and of uploaded values chosen to reach every
//! branch of the group encoding.
//!
//! Written once for every backend with device encoders: a backend crate's `tests/encode.rs`
//! implements [`Encoders`] on a type of its own (its device and backend) and calls each
//! check from a `#[test]`; checks of a backend's own batching knob build on [`Grown`].

use std::marker::PhantomData;
use std::ops::Range;
use std::time::Instant;

use sapwood_collective::codec::{encode_groups, lane_width, pack};
use sapwood_core::backend::{HistBackend, ShardData, TreeBackend, TreeSetup};
use sapwood_core::hash::SampleRate;
use sapwood_core::hist::HistBin;
use sapwood_core::params::Quantisation;
use sapwood_core::quantise::{GroupScales, Scale};
use sapwood_core::tree::NodeId;
use sapwood_core::Result;

use crate::conformance::Pair;
use crate::data::{random_bins, shard};
use crate::rng::Rng;
use crate::trees::random_splits;

/// What the checks need of a backend beyond [`HistBackend`]: the shard driver's
/// `build_group_encoded_histograms` and the device encoders on uploaded values
/// (`backend::device::encode_groups`, `pack_values`), implemented by a type of the backend's
/// test crate.
pub trait Encoders {
    /// The backend under test.
    type Backend: HistBackend;
    /// The backend in messages: "wgpu", "CUDA".
    const BACKEND: &'static str;
    /// The backend under test on `shard`.
    fn backend(&self, shard: ShardData) -> Result<Box<Self::Backend>>;
    /// The backend's `build_group_encoded_histograms`: one message a node.
    fn build_group_encoded_histograms(
        dev: &mut Self::Backend,
        nodes: &[NodeId],
    ) -> Result<Vec<Vec<u8>>>;
    /// The device's name.
    fn name(&self) -> &str;
    /// `encode_groups` of uploaded `values`, messages of `len` values each.
    fn encode_groups(&self, values: &[i64], len: usize) -> Result<Vec<Vec<u8>>>;
    /// `pack_values` of uploaded `values`, messages of `len` values each, one width a message.
    fn pack_values(&self, values: &[i64], len: usize, widths: &[u32]) -> Result<Vec<i64>>;
}

/// Lane widths that reach every case of the packing: one lane a bit, lanes that do not
/// divide 64, exactly two, one lane of 33..64 bits.
pub const WIDTHS: [u32; 9] = [1, 2, 7, 13, 21, 32, 33, 63, 64];

/// A tree grown three levels deep with random splits, every node's histogram built on the
/// device and checked against the CPU.
pub struct Grown<E: Encoders> {
    /// The backend under test and the CPU reference.
    pub p: Pair<E::Backend>,
    /// Every node of the tree, the root first.
    pub nodes: Vec<NodeId>,
    /// The nodes' histograms, node after node.
    pub hist: Vec<HistBin>,
    /// Bins a node.
    pub total_bins: usize,
    /// The width the grower proves for the reduced values (global rows × largest value).
    pub proven: u32,
    encoders: PhantomData<fn() -> E>,
}

impl<E: Encoders> Grown<E> {
    /// The tree grown on a backend of `e` over features of `features` bins.
    pub fn new(e: &E, features: &[u32], q: Quantisation, seed: u64) -> Self {
        let mut rng = Rng(seed);
        let n = 1000;
        let wide = features.iter().any(|&w| w > 256);
        let (binned, offsets) = random_bins(&mut rng, n, features, wide);
        let total_bins = *offsets.last().unwrap() as usize;
        let labels: Vec<f32> = (0..n).map(|_| (rng.unit() - 0.3) * 50.0).collect();
        let spec = shard(binned, offsets, labels);
        let make = |s: ShardData| e.backend(s);
        let mut p = Pair::with(&make, &spec);
        let max = p.compute_gradients("encoders")[0];
        let scales = GroupScales {
            grad: Scale::agree(max[0], n as u64, q),
            hess: Scale::agree(max[1], n as u64, q),
        };
        let setup = TreeSetup {
            tree_index: 0,
            group: 0,
            seed: 9,
            row_sample: SampleRate::new(1.0),
            scales,
        };
        p.start_tree(&setup, "encoders");
        let (mut open, mut nodes, mut next) = (vec![NodeId::ROOT], vec![NodeId::ROOT], 1);
        for _ in 0..3 {
            let splits = random_splits(&mut rng, &open, &mut next, features);
            p.apply_splits(&splits, "encoders");
            open = splits.iter().flat_map(|s| [s.left, s.right]).collect();
            nodes.extend(&open);
        }
        let hist = p.histograms(&nodes, total_bins, "encoders");
        Grown {
            p,
            nodes,
            hist,
            total_bins,
            proven: lane_width(scales.hist_bound(n as u64)),
            encoders: PhantomData,
        }
    }

    /// Node i's histogram as the codecs see it: g0, h0, g1, h1, ...
    pub fn values(&self, i: usize) -> Vec<i64> {
        let w = self.total_bins;
        self.hist[i * w..(i + 1) * w]
            .iter()
            .flatten()
            .copied()
            .collect()
    }

    /// Checks `build_packed_histograms` of every node at `widths` against `codec::pack`.
    pub fn check_packed(&mut self, widths: &[u32]) {
        let want: Vec<i64> = (0..self.nodes.len())
            .flat_map(|i| pack(&self.values(i), widths[i]))
            .collect();
        let got = self
            .p
            .dev
            .build_packed_histograms(&self.nodes, widths)
            .expect("packed histograms")
            .unwrap_or_else(|| panic!("the {} backend packs on the device", E::BACKEND));
        assert_eq!(got.len(), want.len(), "words at widths {widths:?}");
        if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
            panic!(
                "widths {widths:?}: word {i} is {:#x}, the codec's {:#x}",
                got[i], want[i]
            );
        }
    }

    /// [`Grown::check_packed`] at every width of [`WIDTHS`] and the proven one, mixed and
    /// clamped widths.
    pub fn check_packed_at_every_width(&mut self) {
        let n = self.nodes.len();
        for w in WIDTHS.into_iter().chain([self.proven]) {
            self.check_packed(&vec![w; n]);
        }
        // every node at its own width, and widths the codec clamps
        let mixed: Vec<u32> = (0..n).map(|i| WIDTHS[i % WIDTHS.len()]).collect();
        self.check_packed(&mixed);
        let clamped: Vec<u32> = (0..n).map(|i| [0, 65, 200][i % 3]).collect();
        self.check_packed(&clamped);
    }

    /// The values of bins `r` of the nodes at `idx`, node after node: the message a
    /// reduce-scatter sends the owner of block `r`, before its encoding.
    pub fn block_values(&self, idx: &[usize], r: &Range<usize>) -> Vec<i64> {
        let w = self.total_bins;
        idx.iter()
            .flat_map(|&i| self.hist[i * w + r.start..i * w + r.end].iter().flatten())
            .copied()
            .collect()
    }

    /// Checks `build_encoded_blocks` of the nodes at `idx` over `blocks`, `own` this
    /// worker's: every other block's message is `encode_groups` of its values, the own
    /// block's bins are the built ones; false where the backend left it to the host.
    pub fn check_encoded_blocks(
        &mut self,
        idx: &[usize],
        blocks: &[Range<usize>],
        own: usize,
    ) -> bool {
        let w = self.total_bins;
        let nodes: Vec<NodeId> = idx.iter().map(|&i| self.nodes[i]).collect();
        // in every bin at first: the own block must be overwritten, and the host path must
        // leave everything as it was (nothing built)
        const UNSET: HistBin = [i64::MIN, -7];
        let mut hists = vec![UNSET; nodes.len() * w];
        let what = format!("nodes {idx:?}, blocks {blocks:?}, own {own}");
        let got = self
            .p
            .dev
            .build_encoded_blocks(&nodes, blocks, own, &mut hists)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let Some(got) = got else {
            assert!(
                hists.iter().all(|&h| h == UNSET),
                "{what}: host path, bins written"
            );
            return false;
        };
        assert_eq!(got.len(), blocks.len(), "{what}");
        for (b, r) in blocks.iter().enumerate() {
            if b == own {
                assert!(got[b].is_empty(), "{what}: a message to itself");
            } else {
                let want = encode_groups(&self.block_values(idx, r));
                // the first difference, not two long byte lists
                let at = (0..got[b].len().min(want.len())).find(|&i| got[b][i] != want[i]);
                assert!(
                    got[b] == want,
                    "{what}: block {b} is {} bytes, the codec's {}, first differing at {at:?}",
                    got[b].len(),
                    want.len()
                );
            }
        }
        let mine = &blocks[own];
        for (k, &i) in idx.iter().enumerate() {
            assert_eq!(
                hists[k * w + mine.start..k * w + mine.end],
                self.hist[i * w + mine.start..i * w + mine.end],
                "{what}: own bins of node {:?}",
                self.nodes[i]
            );
        }
        true
    }

    /// [`Grown::check_encoded_blocks`] with every block in turn this worker's, for every
    /// layout of [`layouts`] and a lone node, every node and a few in no particular order;
    /// each on the device.
    pub fn check_every_layout(&mut self) {
        let all: Vec<usize> = (0..self.nodes.len()).collect();
        let some = [9, 2, 14, 5, 3];
        for idx in [&[0][..], &all, &some] {
            for blocks in layouts(self.total_bins) {
                for own in 0..blocks.len() {
                    assert!(
                        self.check_encoded_blocks(idx, &blocks, own),
                        "nodes {idx:?}, blocks {blocks:?}, own {own}: host path"
                    );
                }
            }
        }
    }

    /// Checks the backend's `build_group_encoded_histograms` of every node against
    /// `codec::encode_groups`.
    pub fn check_groups(&mut self) {
        let got = E::build_group_encoded_histograms(&mut self.p.dev, &self.nodes)
            .expect("group-encoded histograms");
        assert_eq!(got.len(), self.nodes.len());
        for (i, msg) in got.iter().enumerate() {
            let want = encode_groups(&self.values(i));
            assert_eq!(msg, &want, "node {:?}", self.nodes[i]);
        }
    }
}

/// Block layouts of a reduce-scatter over `w` bins: one block, 2, 3 and 4 blocks of unequal
/// sizes (none a multiple of 16 bins, so that no node's part of a message ends on a group
/// boundary), and an empty block (a worker without features) first, inside and last.
pub fn layouts(w: usize) -> Vec<Vec<Range<usize>>> {
    let (a, b, c) = (w / 5, w / 2 + 3, w - 1);
    vec![
        vec![0..w],
        vec![0..a, a..w],
        vec![0..0, 0..w],
        vec![0..a, a..a, a..w],
        vec![0..1, 1..b, b..c, c..w],
        vec![0..a, a..b, b..w, w..w],
    ]
}

/// Blocks that reach every branch of the group encoding: all-zero groups, sparse groups
/// (bitmaps on byte boundaries of every phase), values needing all 64 bits, negative
/// values, shared shifts up to 63, and short last groups.
pub fn crafted() -> Vec<(&'static str, Vec<i64>)> {
    let mut rng = Rng(11);
    let mut sparse = vec![0i64; 32 * 9 + 5];
    for i in (0..sparse.len()).step_by(13) {
        sparse[i] = (rng.below(1 << 20) as i64 - (1 << 19)) << 7;
    }
    let dense: Vec<i64> = (0..1000)
        .map(|_| rng.below(1 << 12) as i64 - 2048)
        .collect();
    let mut mixed: Vec<i64> = (0..32 * 6 + 17)
        .map(|i| match (i / 32) % 4 {
            0 => 0,
            1 => (i as i64 - 100) << 20,
            2 if i % 7 == 0 => -(i as i64),
            3 => rng.next_u64() as i64,
            _ => 0,
        })
        .collect();
    mixed[5] = i64::MIN;
    vec![
        ("all zero", vec![0; 96]),
        ("all zero, short last group", vec![0; 40]),
        ("one value", vec![7]),
        ("short dense last group", vec![1; 7]),
        ("sparse", sparse),
        ("dense 12-bit", dense),
        ("mixed groups", mixed),
        (
            "64-bit extremes",
            vec![i64::MIN, i64::MAX, -1, 1, 0, i64::MIN + 1],
        ),
        ("i64::MIN alone (shift 63)", vec![i64::MIN; 33]),
        (
            "negative powers of two",
            (0..64).map(|s| -(1i64 << s)).collect(),
        ),
        ("shared shift 40", (1..70).map(|i| (i - 35) << 40).collect()),
        ("one nonzero value in 10000", {
            let mut v = vec![0i64; 10_000];
            v[4321] = -3 << 20;
            v
        }),
    ]
}

/// What kinds of group a group-encoded message of `len` values holds: (all zero, sparse,
/// dense, widest, largest shift), walked from the module doc of codec/groups.rs.
pub fn group_kinds(msg: &[u8], len: usize) -> [u32; 5] {
    let (mut at, mut kinds) = (0usize, [0u32; 5]);
    for g in 0..len.div_ceil(32) {
        let (head, n) = (msg[at] as usize, (len - 32 * g).min(32));
        let w = head & 0x7f;
        at += 1;
        if w == 0 {
            kinds[0] += 1;
            continue;
        }
        kinds[3] = kinds[3].max(w as u32);
        kinds[4] = kinds[4].max(msg[at] as u32);
        at += 1;
        let count = if head & 0x80 != 0 {
            kinds[1] += 1;
            let mask = u32::from_le_bytes(msg[at..at + 4].try_into().unwrap());
            at += 4;
            mask.count_ones() as usize
        } else {
            kinds[2] += 1;
            n
        };
        at += (count * w).div_ceil(8);
    }
    assert_eq!(at, msg.len(), "the walk ends with the message");
    kinds
}

/// `build_packed_histograms` at every width, of a lone node and of no node, equals
/// `codec::pack` of the built histograms.
pub fn packed_histograms_equal_the_codec_packing_of_built_histograms<E: Encoders>(enc: &E) {
    for (q, seed) in [(Quantisation::Exact, 1), (Quantisation::Bits(4), 2)] {
        let mut g = Grown::new(enc, &[5, 40, 3, 17, 2, 9, 12], q, seed);
        g.check_packed_at_every_width();
        // a lone node and no node at all
        let root = g.values(0);
        let one =
            g.p.dev
                .build_packed_histograms(&[NodeId::ROOT], &[g.proven]);
        assert_eq!(one.unwrap().unwrap(), pack(&root, g.proven));
        assert_eq!(
            g.p.dev.build_packed_histograms(&[], &[]).unwrap(),
            Some(vec![])
        );
    }
}

/// `build_group_encoded_histograms` equals `codec::encode_groups` of the built histograms.
pub fn group_encoded_histograms_equal_the_codec<E: Encoders>(enc: &E) {
    // exact values (wide, shifted), low-bit ones (narrow) and a feature of 1000 bins whose
    // deep nodes are mostly empty (sparse and all-zero groups)
    for (features, q, seed) in [
        (&[5u32, 40, 3, 17, 2, 9, 12][..], Quantisation::Exact, 3),
        (&[5, 40, 3, 17, 2, 9, 12], Quantisation::Bits(3), 4),
        (&[1000, 7], Quantisation::Exact, 5),
    ] {
        Grown::new(enc, features, q, seed).check_groups();
    }
}

/// 500 bins a node over three features (u16 bins), 15 nodes: packed at every width and
/// group-encoded as the codecs do (`enc` may split them into batches).
pub fn wide_histograms_encode_as_the_codec_does<E: Encoders>(enc: &E) {
    let mut g = Grown::new(enc, &[300, 150, 50], Quantisation::Exact, 6);
    assert_eq!(g.total_bins, 500);
    g.check_packed_at_every_width();
    g.check_groups();
}

/// Packing without a width for every node or message, or encoding values that are not whole
/// messages, is an error.
pub fn a_width_per_node_is_required<E: Encoders>(enc: &E) {
    let mut g = Grown::new(enc, &[5, 3], Quantisation::Exact, 7);
    let e =
        g.p.dev
            .build_packed_histograms(&g.nodes[..3], &[8, 8])
            .unwrap_err()
            .to_string();
    assert!(e.contains("2 lane widths for 3 nodes"), "{e}");
    let e = enc.pack_values(&[1, 2, 3, 4], 2, &[8]).unwrap_err();
    assert!(
        e.to_string().contains("1 lane widths for 2 messages"),
        "{e}"
    );
    assert!(enc.encode_groups(&[1, 2, 3], 2).is_err());
}

/// `build_encoded_blocks` over every layout of [`layouts`] encodes each block's message as
/// one concatenation of the nodes' values, as a reduce-scatter sends it.
pub fn encoded_blocks_equal_the_codec_on_concatenated_nodes<E: Encoders>(enc: &E) {
    for (features, q, seed) in [
        (&[5u32, 40, 3, 17, 2, 9, 12][..], Quantisation::Exact, 8),
        (&[5, 40, 3, 17, 2, 9, 12], Quantisation::Bits(3), 9),
        (&[1000, 7], Quantisation::Exact, 10),
    ] {
        let mut g = Grown::new(enc, features, q, seed);
        // the check tells a message of the concatenation from the concatenation of the
        // nodes' messages: a block of 17 bins is 34 values a node, off the 32-value groups
        let r = 0..17;
        let apart: Vec<u8> = [0, 1]
            .iter()
            .flat_map(|&i| encode_groups(&g.block_values(&[i], &r)))
            .collect();
        assert_ne!(encode_groups(&g.block_values(&[0, 1], &r)), apart);
        g.check_every_layout();
    }
}

/// `build_encoded_blocks` refuses an own block out of range, blocks that do not tile a
/// node's bins, a short histogram buffer and an unknown node with errors; no node gives
/// empty messages.
pub fn encoded_blocks_refuse_bad_layouts_with_errors<E: Encoders>(enc: &E) {
    let mut g = Grown::new(enc, &[5, 3], Quantisation::Exact, 12);
    let w = g.total_bins;
    let nodes = g.nodes[..3].to_vec();
    let mut hists = vec![[0i64; 2]; 3 * w];
    let mut fails = |blocks: &[Range<usize>], own: usize, hists: &mut [HistBin]| {
        g.p.dev
            .build_encoded_blocks(&nodes, blocks, own, hists)
            .unwrap_err()
            .to_string()
    };
    let e = fails(&[0..2, 2..w], 2, &mut hists);
    assert!(e.contains("own block 2 of 2 blocks"), "{e}");
    let e = fails(&[0..2, 2..w + 1], 0, &mut hists);
    assert!(e.contains("block 1 is bins 2..9"), "{e}");
    let backwards = Range { start: 5, end: 2 };
    let e = fails(&[0..2, backwards], 0, &mut hists);
    assert!(e.contains("not a range within a node's 8 bins"), "{e}");
    let e = fails(&[], 0, &mut hists);
    assert!(e.contains("own block 0 of 0 blocks"), "{e}");
    // one block: the whole histogram
    let whole = &layouts(w)[0];
    let e = fails(whole, 0, &mut hists[..w]);
    assert!(e.contains("histogram buffer of 8 bins for 3 nodes"), "{e}");
    let e =
        g.p.dev
            .build_encoded_blocks(&[NodeId(999)], whole, 0, &mut hists[..w])
            .unwrap_err();
    assert!(e.to_string().contains("999"), "{e}");
    // no node: every message encodes no value
    assert_eq!(encode_groups(&[]), Vec::<u8>::new());
    let none = g.p.dev.build_encoded_blocks(&[], &[0..3, 3..w], 1, &mut []);
    assert_eq!(none.unwrap(), Some(vec![vec![], vec![]]));
}

/// The [`crafted`] blocks, uploaded, encode and pack as the codecs do, alone and three in
/// one dispatch.
pub fn uploaded_extreme_values_encode_as_the_codec_does<E: Encoders>(enc: &E) {
    // the crafted blocks reach every kind of group
    let mut seen = [0u32; 5];
    for (_, values) in crafted() {
        let k = group_kinds(&encode_groups(&values), values.len());
        for (s, k) in seen.iter_mut().zip(k).take(3) {
            *s += k;
        }
        seen[3] = seen[3].max(k[3]);
        seen[4] = seen[4].max(k[4]);
    }
    assert!(seen[0] > 0 && seen[1] > 0 && seen[2] > 0, "{seen:?}");
    assert_eq!(seen[3], 64, "a group of width 64");
    assert_eq!(seen[4], 63, "a group shifted by 63");
    for (what, values) in crafted() {
        let got = enc.encode_groups(&values, values.len()).unwrap();
        assert_eq!(got, vec![encode_groups(&values)], "{what}");
        for w in WIDTHS {
            let words = enc.pack_values(&values, values.len(), &[w]).unwrap();
            assert_eq!(words, pack(&values, w), "{what} at width {w}");
        }
        // several messages of one length in one dispatch: every one its own
        let three: Vec<i64> = values
            .iter()
            .chain(&values)
            .chain(&values)
            .copied()
            .collect();
        let got = enc.encode_groups(&three, values.len()).unwrap();
        assert_eq!(got, vec![encode_groups(&values); 3], "{what} three times");
        let words = enc.pack_values(&three, values.len(), &[13, 64, 1]).unwrap();
        let want: Vec<i64> = [13, 64, 1].iter().flat_map(|&w| pack(&values, w)).collect();
        assert_eq!(words, want, "{what} three times");
    }
}

/// Encodes and packs `count` uploaded messages of `len` values, checks the encoding, and
/// prints the throughput on one line starting `device encoders` (the GPU kit reads it);
/// `warm_up` first encodes and packs one message untimed.
pub fn device_encoder_throughput<E: Encoders>(enc: &E, len: usize, count: usize, warm_up: bool) {
    let mut rng = Rng(12);
    // quantised sums: a shared shift, mixed magnitudes, a quarter of the bins empty
    let values: Vec<i64> = (0..len * count)
        .map(|_| match rng.below(4) {
            0 => 0,
            _ => (rng.below(1 << 24) as i64 - (1 << 23)) << 10,
        })
        .collect();
    if warm_up {
        // the first launches load nothing new, but warm the allocator and the caches
        enc.encode_groups(&values[..len], len).unwrap();
        enc.pack_values(&values[..len], len, &[21]).unwrap();
    }
    let t = Instant::now();
    let got = enc.encode_groups(&values, len).unwrap();
    let groups_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let words = enc.pack_values(&values, len, &vec![21; count]).unwrap();
    let pack_s = t.elapsed().as_secs_f64();
    for (i, msg) in got.iter().enumerate() {
        assert_eq!(msg, &encode_groups(&values[i * len..(i + 1) * len]));
    }
    let n = values.len() as f64;
    let encoded: usize = got.iter().map(Vec::len).sum();
    println!(
        "device encoders on {}: {} values ({} messages of {len}), uploads included: \
         groups {:.2e} values/s ({encoded} bytes, {:.1}% of {} bytes of i64), \
         packed at 21 bits {:.2e} values/s ({} bytes)",
        enc.name(),
        values.len(),
        count,
        n / groups_s,
        100.0 * encoded as f64 / (8.0 * n),
        8 * values.len(),
        n / pack_s,
        8 * words.len(),
    );
}
