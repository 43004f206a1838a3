//! Encode and decode speed of every codec on histogram-like blocks (a benchmark, not a test).
//!
//!     cargo run --release -p sapwood-collective --example codec_bench [CODEC]
//!
//! Blocks mimic histograms of the synthetic task: interleaved (Σg, Σh) bins with a
//! geometric row count per bin, each row's gradient quantised at 2^40 (exact mode: f32's 24
//! significant bits, so low bits are zero) or 2^7 (`grad_bits=8`), for several rows-per-bin
//! densities (deep nodes have fewer).

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

fn main() {
    // one codec only (none, packed, sparse or auto), e.g. to profile it
    let only = std::env::args().nth(1);
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
