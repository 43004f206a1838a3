//! Encode and decode speed of every codec on histogram-like blocks (a benchmark, not a test).
//!
//!     cargo run --release -p sapwood-collective --example codec_bench [CODEC] [--blocks FILE]
//!
//! Blocks mimic histograms of the synthetic task: interleaved (Σg, Σh) bins with a
//! geometric row count per bin, each row's gradient quantised at 2^40 (exact mode: f32's 24
//! significant bits, so low bits are zero) or 2^7 (`grad_bits=8`), for several rows-per-bin
//! densities (deep nodes have fewer).
//!
//! With `--blocks FILE` it times real blocks instead: FILE holds blocks one after another,
//! each as its length (u64) and its values (i64), little-endian; the sums of a training run's
//! reduce-scatter, saved by whoever wants them measured (no such dump is built in).

use std::hint::black_box;
use std::time::Instant;

use sapwood_collective::codec::{decode_into, sizes, Encoder};
use sapwood_core::params::CommCodec;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// `bins` (Σg, Σh) pairs with `rows_per_bin` rows per bin on average.
fn block(rng: &mut Rng, bins: usize, rows_per_bin: f32, bits: u32) -> Vec<i64> {
    let scale = (1u64 << bits) as f32;
    let mut out = Vec::with_capacity(2 * bins);
    for _ in 0..bins {
        // a geometric-ish count with the given mean
        let mut rows = 0;
        while rng.unit() < rows_per_bin / (rows_per_bin + 1.0) {
            rows += 1;
        }
        let (mut g, mut h) = (0i64, 0i64);
        for _ in 0..rows {
            let p = rng.unit();
            g += ((p - 0.5) * scale) as i64;
            h += ((p * (1.0 - p)) * scale) as i64;
        }
        out.push(g);
        out.push(h);
    }
    out
}

/// The blocks of a file as `--blocks` reads it.
fn read_blocks(path: &str) -> Vec<Vec<i64>> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let word = |at: usize| {
        let b = bytes
            .get(at..at + 8)
            .unwrap_or_else(|| panic!("{path}: truncated at byte {at}"));
        u64::from_le_bytes(b.try_into().unwrap())
    };
    let (mut blocks, mut at) = (Vec::new(), 0);
    while at < bytes.len() {
        let n = word(at) as usize;
        if n > (bytes.len() - at - 8) / 8 {
            panic!("{path}: the block at byte {at} has {n} values, more than the file holds");
        }
        blocks.push((0..n).map(|i| word(at + 8 + 8 * i) as i64).collect());
        at += 8 + 8 * n;
    }
    blocks
}

/// Times every codec on the blocks of a file, each block encoded and then decoded onto a sum
/// as a worker does, in cache as in training (where a block was just built): the fastest of
/// a few runs of each block, summed over the blocks.
fn real_blocks(path: &str, only: Option<&String>) {
    let blocks = read_blocks(path);
    let n: usize = blocks.iter().map(Vec::len).sum();
    println!("{} blocks, {n} values", blocks.len());
    println!(
        "{:>8} {:>12} {:>12} {:>12}",
        "codec", "bytes/value", "encode ns/v", "decode ns/v"
    );
    let bound = 1u64 << 40;
    let longest = blocks.iter().map(Vec::len).max().unwrap_or(0);
    let mut sum = vec![0i64; longest];
    for codec in [CommCodec::None, CommCodec::Auto, CommCodec::Sparse]
        .into_iter()
        .filter(|c| only.is_none_or(|o| *o == format!("{c:?}").to_lowercase()))
    {
        let mut encoder = Encoder::new(codec);
        let (mut enc, mut dec, mut bytes) = (0.0, 0.0, 0);
        for b in &blocks {
            let (mut e, mut d) = (f64::INFINITY, f64::INFINITY);
            for _ in 0..4 {
                let t = Instant::now();
                let msg = black_box(encoder.encode(black_box(b), bound));
                e = e.min(t.elapsed().as_secs_f64());
                let t = Instant::now();
                decode_into(&msg, &mut sum[..b.len()], true).unwrap();
                d = d.min(t.elapsed().as_secs_f64());
                bytes += msg.len();
                encoder.recycle(msg);
            }
            enc += e;
            dec += d;
        }
        println!(
            "{:>8} {:>12.3} {:>12.3} {:>12.3}",
            format!("{codec:?}").to_lowercase(),
            bytes as f64 / (4 * n) as f64,
            enc * 1e9 / n as f64,
            dec * 1e9 / n as f64
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let blocks = args
        .iter()
        .position(|a| a == "--blocks")
        .map(|i| args.get(i + 1).expect("--blocks FILE").clone());
    // one codec only (none, packed, sparse or auto), e.g. to profile it
    let only = args
        .iter()
        .find(|a| !a.starts_with("--") && Some(*a) != blocks.as_ref())
        .cloned();
    if let Some(path) = blocks {
        return real_blocks(&path, only.as_ref());
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let bins = 64 * 7 * 256;
    let bound = 1u64 << 60;
    println!(
        "{:>6} {:>10} {:>8} {:>12} {:>12} {:>12}",
        "bits", "rows/bin", "codec", "bytes/value", "encode ns/v", "decode ns/v"
    );
    for (bits, rows_per_bin) in [40, 7]
        .into_iter()
        .flat_map(|b| [0.05f32, 0.5, 4.0, 32.0].map(|r| (b, r)))
    {
        let values = block(&mut rng, bins, rows_per_bin, bits);
        let n = values.len() as f64;
        let t = Instant::now();
        for _ in 0..20 {
            black_box(sizes(black_box(&values), bound));
        }
        // (an average: the stats pass is a reference point, not a codec)
        println!(
            "{bits:>6} {rows_per_bin:>10} {:>8} {:>12} {:>12.3}",
            "(sizes)",
            "",
            t.elapsed().as_secs_f64() * 1e9 / (20.0 * n)
        );
        for codec in [
            CommCodec::None,
            CommCodec::Packed,
            CommCodec::Sparse,
            CommCodec::Auto,
        ]
        .into_iter()
        .filter(|c| {
            only.as_ref()
                .is_none_or(|o| *o == format!("{c:?}").to_lowercase())
        }) {
            // the fastest of several runs: this machine is shared, and noise only adds time
            let reps = 30;
            let fastest = |f: &mut dyn FnMut()| {
                (0..reps)
                    .map(|_| {
                        let t = Instant::now();
                        f();
                        t.elapsed().as_secs_f64()
                    })
                    .fold(f64::INFINITY, f64::min)
                    * 1e9
                    / n
            };
            // one encoder for every run, given back each message, as a worker does
            let mut encoder = Encoder::new(codec);
            let mut msg = Vec::new();
            let enc = fastest(&mut || {
                encoder.recycle(std::mem::take(&mut msg));
                msg = black_box(encoder.encode(black_box(&values), bound));
            });
            let mut dst = vec![0i64; values.len()];
            let dec = fastest(&mut || decode_into(black_box(&msg), &mut dst, true).unwrap());
            assert_eq!(dst[7], values[7] * reps as i64);
            println!(
                "{bits:>6} {rows_per_bin:>10} {:>8} {:>12.3} {enc:>12.3} {dec:>12.3}",
                format!("{codec:?}").to_lowercase(),
                msg.len() as f64 / n
            );
        }
    }
}
