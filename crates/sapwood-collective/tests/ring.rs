//! Ring algorithms over in-process workers: exact sums for any size and worker count, a
//! dead worker stops the others promptly, gather and broadcast, and the workers' agreement
//! on the bin cuts (computed on worker 0) with its errors.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use sapwood_collective::{in_process, RingCollective, Transport};
use sapwood_core::collective::{Collective, DeviceExchange, SingleWorker};
use sapwood_core::data::cuts::{CutSample, Cuts};
use sapwood_core::data::matrix::{Column, FeatureMatrix};
use sapwood_core::params::{CommCodec, Params};
use sapwood_core::train::agree_cuts;

/// Runs `f` on `n` workers (threads) and returns their results by rank.
fn on_workers<T: Send>(
    n: usize,
    codec: CommCodec,
    f: impl Fn(&mut dyn Collective) -> T + Sync,
) -> Vec<T> {
    let f = &f;
    std::thread::scope(|s| {
        let hs: Vec<_> = in_process(n, Duration::from_secs(30))
            .into_iter()
            .map(|t| s.spawn(move || f(&mut RingCollective::new(t, codec))))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]
    #[test]
    fn ring_allreduce_equals_the_sequential_sum(
        workers in 1usize..6,
        len in 0usize..400,
        bits in 1u32..60,
        seed in any::<u64>(),
        codec in prop_oneof![Just(CommCodec::None), Just(CommCodec::Packed), Just(CommCodec::Sparse), Just(CommCodec::Auto)],
    ) {
        let per = ((1u64 << bits) / workers as u64) as i64;
        let value = |w: usize, i: usize| -> i64 {
            let h = sapwood_core::hash::hash64(seed, sapwood_core::hash::Stream::RowSample, w as u32, i as u64);
            if h.is_multiple_of(3) { 0 } else { (h % (2 * per as u64 + 1)) as i64 - per }
        };
        let want: Vec<i64> = (0..len).map(|i| (0..workers).map(|w| value(w, i)).sum()).collect();
        let got = on_workers(workers, codec, |c| {
            let mut v: Vec<i64> = (0..len).map(|i| value(c.rank(), i)).collect();
            c.allreduce_sum(&mut v, 1u64 << bits).unwrap();
            v
        });
        for g in got {
            prop_assert_eq!(&g, &want);
        }
        // reduce-scatter: each worker's own block is the sum
        let blocks = sapwood_collective::ring::even_blocks(len, workers);
        let scattered = on_workers(workers, codec, |c| {
            let mut v: Vec<i64> = (0..len).map(|i| value(c.rank(), i)).collect();
            c.reduce_scatter(&mut v, &blocks, 1u64 << bits).unwrap();
            (c.rank(), v)
        });
        for (r, v) in scattered {
            prop_assert_eq!(&v[blocks[r].clone()], &want[blocks[r].clone()]);
        }
        // the same with every other block group-encoded beforehand, as a device does
        if codec == CommCodec::Auto {
            let lens: Vec<usize> = blocks.iter().map(|b| b.len()).collect();
            let encoded = on_workers(workers, codec, |c| {
                let r = c.rank();
                let v: Vec<i64> = (0..len).map(|i| value(r, i)).collect();
                let messages = blocks
                    .iter()
                    .enumerate()
                    .map(|(b, range)| {
                        if b == r { Vec::new() } else { sapwood_collective::codec::encode_groups(&v[range.clone()]) }
                    })
                    .collect();
                let mut own = v[blocks[r].clone()].to_vec();
                exchange(c).reduce_scatter_encoded(&mut own, &lens, messages).unwrap();
                (r, own, c.stats())
            });
            for (r, own, stats) in encoded {
                prop_assert_eq!(&own[..], &want[blocks[r].clone()]);
                let expected = if workers > 1 { workers as u64 - 1 } else { 0 };
                prop_assert_eq!(stats.device_encoded, expected);
                prop_assert_eq!(stats.blocks.groups, expected);
            }
        }
    }
}

/// The ring's exchange of device-encoded histograms, which it always has.
fn exchange(c: &mut dyn Collective) -> &mut dyn DeviceExchange {
    c.device_exchange()
        .expect("the ring collective takes device-encoded histograms")
}

#[test]
fn a_device_encoded_reduce_scatter_refuses_blocks_that_do_not_match() {
    let out = on_workers(2, CommCodec::Auto, |c| {
        assert!(exchange(c).takes_encoded_blocks());
        let mut own = vec![0i64; 3];
        // three blocks for two workers
        exchange(c)
            .reduce_scatter_encoded(&mut own, &[3, 3, 3], vec![Vec::new(); 3])
            .unwrap_err()
            .to_string()
    });
    for e in out {
        assert!(e.contains("3 blocks") && e.contains("2 workers"), "{e}");
    }
    // a codec other than auto, or one worker, takes no device-encoded blocks
    assert!(!on_workers(2, CommCodec::Packed, |c| exchange(c).takes_encoded_blocks())[0]);
    assert!(!on_workers(1, CommCodec::Auto, |c| exchange(c).takes_encoded_blocks())[0]);
}

#[test]
fn gather_max_and_broadcast_agree_on_every_worker() {
    let out = on_workers(4, CommCodec::Auto, |c| {
        let r = c.rank() as u64;
        let mut m = [r * 3, 10 - r];
        c.allreduce_max(&mut m).unwrap();
        let g = c.allgather(&[r as u8; 3]).unwrap();
        let mut b = if r == 2 {
            b"from two".to_vec()
        } else {
            Vec::new()
        };
        c.broadcast(&mut b, 2).unwrap();
        (m, g, b)
    });
    for (m, g, b) in out {
        assert_eq!(m, [9, 10]);
        assert_eq!(g, vec![vec![0; 3], vec![1; 3], vec![2; 3], vec![3; 3]]);
        assert_eq!(b, b"from two");
    }
}

#[test]
fn gather_hands_every_workers_bytes_to_the_root_only() {
    for root in [0, 2] {
        let out = on_workers(3, CommCodec::Auto, |c| {
            let r = c.rank() as u8;
            c.gather(&vec![r; r as usize + 1], root).unwrap()
        });
        for (rank, g) in out.into_iter().enumerate() {
            if rank == root {
                assert_eq!(g, Some(vec![vec![0], vec![1, 1], vec![2, 2, 2]]));
            } else {
                assert_eq!(g, None);
            }
        }
    }
    let e = on_workers(2, CommCodec::None, |c| {
        c.gather(b"x", 2).unwrap_err().to_string()
    });
    assert!(e[0].contains("worker 2 of a job of 2"), "{}", e[0]);
}

/// A numeric and a categorical column of `n` rows from `start`.
fn columns(start: usize, n: usize) -> FeatureMatrix<'static> {
    let x = (start..start + n)
        .map(|i| {
            if i % 7 == 0 {
                f32::NAN
            } else {
                ((i * 37) % 101) as f32 / 3.0
            }
        })
        .collect::<Vec<_>>();
    let codes = (start..start + n)
        .map(|i| ((i * 13) % 5) as u32)
        .collect::<Vec<_>>();
    let levels = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
    FeatureMatrix::new(
        vec!["x".into(), "colour".into()],
        vec![
            Column::Numeric(Cow::Owned(x)),
            Column::Categorical {
                codes: Cow::Owned(codes),
                levels,
            },
        ],
    )
    .unwrap()
}

#[test]
fn workers_agree_on_the_cuts_of_all_their_rows() {
    let (n, params) = (3000usize, Params::default());
    let sample = |start: usize, rows: usize| {
        CutSample::collect(&columns(start, rows), None, start as u64, n as u64, 1, 1000)
    };
    let one = agree_cuts(&sample(0, n), &params, &mut SingleWorker).unwrap();
    let shards = [0, 500, 1800, 2600, n];
    let out = on_workers(4, CommCodec::Auto, |c| {
        let r = c.rank();
        agree_cuts(&sample(shards[r], shards[r + 1] - shards[r]), &params, c).unwrap()
    });
    for cuts in out {
        assert_eq!(cuts, one);
    }
    assert_eq!(Cuts::from_bytes(&one.to_bytes()).unwrap(), one);
}

#[test]
fn a_worker_that_cannot_compute_the_cuts_fails_the_others_with_its_reason() {
    let params = Params {
        max_cat_bin: 2,
        ..Params::default()
    };
    let out = on_workers(3, CommCodec::Auto, |c| {
        let r = c.rank();
        let sample = CutSample::collect(&columns(100 * r, 100), None, 100 * r as u64, 300, 1, 300);
        agree_cuts(&sample, &params, c).unwrap_err().to_string()
    });
    // the same error, of the same kind, on every worker
    assert!(
        out[0].starts_with("invalid parameter `max_cat_bin`"),
        "{}",
        out[0]
    );
    for e in &out[1..] {
        assert_eq!(e, &out[0]);
    }
    // an error of another kind reaches the others as worker 0's
    let out = on_workers(3, CommCodec::Auto, |c| {
        let r = c.rank();
        let m = if r == 1 {
            let x = Column::Numeric(Cow::Owned(vec![1.0; 100]));
            FeatureMatrix::new(vec!["x".into()], vec![x]).unwrap()
        } else {
            columns(100 * r, 100)
        };
        let sample = CutSample::collect(&m, None, 100 * r as u64, 300, 1, 300);
        agree_cuts(&sample, &Params::default(), c)
            .unwrap_err()
            .to_string()
    });
    assert_eq!(
        out[0],
        "collective: workers disagree on the number of features"
    );
    for e in &out[1..] {
        assert_eq!(
            e,
            "collective: worker 0 could not compute the bin cuts: \
             workers disagree on the number of features"
        );
    }
}

#[test]
fn a_worker_that_stops_makes_the_others_fail_promptly() {
    let start = Instant::now();
    let results = std::thread::scope(|s| {
        let hs: Vec<_> = in_process(3, Duration::from_secs(120))
            .into_iter()
            .map(|t| {
                s.spawn(move || {
                    let rank = t.rank();
                    let mut c = RingCollective::new(t, CommCodec::Auto);
                    for round in 0..50 {
                        if rank == 1 && round == 7 {
                            return Err(sapwood_core::Error::Backend("worker 1 failed".into()));
                        }
                        let mut v = vec![1i64; 1000];
                        c.allreduce_sum(&mut v, 10)?;
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert!(start.elapsed() < Duration::from_secs(10), "no hang");
    assert!(results[1]
        .as_ref()
        .unwrap_err()
        .to_string()
        .contains("worker 1 failed"));
    for r in [0, 2] {
        let e = results[r].as_ref().unwrap_err().to_string();
        assert!(e.contains("has stopped"), "{e}");
    }
}
