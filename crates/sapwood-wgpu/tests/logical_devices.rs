//! Three workers, each with its own logical device (all on one adapter when there is only
//! one), train one model through a minimal in-process collective written here; the model
//! must be the bytes the CPU backend gives, on one worker and on three, and the same for one
//! device and three.
//!
//! The collective below only exists because sapwood-collective's in-process collective has
//! not landed yet; it reduces in rank order, which is all the core's contract needs.

mod common;

use std::sync::{Arc, Barrier, Mutex};

use common::mixed_features;
use sapwood_core::collective::{Collective, SingleWorker};
use sapwood_core::error::Result;
use sapwood_core::params::{GrowPolicy, ObjectiveKind, Params, Quantisation};
use sapwood_core::train::{self, BackendFactory, CpuFactory, Quiet, Shard};
use sapwood_wgpu::WgpuFactory;

struct Shared {
    barrier: Barrier,
    slots: Mutex<Vec<Vec<u8>>>,
}

struct Threads {
    rank: usize,
    size: usize,
    shared: Arc<Shared>,
}

impl Threads {
    fn group(size: usize) -> Vec<Threads> {
        let shared = Arc::new(Shared {
            barrier: Barrier::new(size),
            slots: Mutex::new(vec![Vec::new(); size]),
        });
        (0..size)
            .map(|rank| Threads {
                rank,
                size,
                shared: shared.clone(),
            })
            .collect()
    }
}

impl Collective for Threads {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.size
    }
    fn allreduce_sum(&mut self, data: &mut [i64], _bound: u64) -> Result<()> {
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        let all = self.allgather(&bytes)?;
        for (i, v) in data.iter_mut().enumerate() {
            *v = all
                .iter()
                .map(|b| i64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap()))
                .sum();
        }
        Ok(())
    }
    fn allreduce_max(&mut self, data: &mut [u64]) -> Result<()> {
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        let all = self.allgather(&bytes)?;
        for (i, v) in data.iter_mut().enumerate() {
            *v = all
                .iter()
                .map(|b| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap()))
                .max()
                .unwrap_or(0);
        }
        Ok(())
    }
    fn allgather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.shared.slots.lock().unwrap()[self.rank] = data.to_vec();
        self.shared.barrier.wait();
        let all = self.shared.slots.lock().unwrap().clone();
        // nobody overwrites a slot before everyone has read it
        self.shared.barrier.wait();
        Ok(all)
    }
    fn broadcast(&mut self, data: &mut Vec<u8>, root: usize) -> Result<()> {
        *data = self.allgather(data)?.swap_remove(root);
        Ok(())
    }
}

fn labels(kind: ObjectiveKind, signal: &[f32]) -> Vec<f32> {
    match kind {
        ObjectiveKind::SquaredError => signal.to_vec(),
        ObjectiveKind::Logistic => signal.iter().map(|&s| (s > 0.4) as u8 as f32).collect(),
        ObjectiveKind::Softprob => signal
            .iter()
            .map(|&s| {
                (if s < 0.0 {
                    0
                } else if s < 1.0 {
                    1
                } else {
                    2
                }) as f32
            })
            .collect(),
    }
}

fn train_workers(params: &Params, factory: &dyn BackendFactory, workers: usize) -> String {
    let n = 2400;
    let (features, signal, weights) = mixed_features(n, 23);
    let y = labels(params.objective, &signal);
    if workers == 1 {
        let shard = Shard {
            features: features.slice_rows(0..n),
            labels: y,
            weights: Some(weights),
            row_offset: 0,
        };
        return train::train(
            params,
            shard,
            vec![],
            &mut SingleWorker,
            factory,
            &mut Quiet,
        )
        .unwrap()
        .model
        .to_json();
    }
    let bounds: Vec<usize> = (0..=workers).map(|w| w * n / workers).collect();
    let models: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = Threads::group(workers)
            .into_iter()
            .map(|mut c| {
                let (lo, hi) = (bounds[c.rank], bounds[c.rank + 1]);
                let shard = Shard {
                    features: features.slice_rows(lo..hi),
                    labels: y[lo..hi].to_vec(),
                    weights: Some(weights[lo..hi].to_vec()),
                    row_offset: lo as u64,
                };
                s.spawn(move || {
                    train::train(params, shard, vec![], &mut c, factory, &mut Quiet)
                        .unwrap()
                        .model
                        .to_json()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(models.windows(2).all(|w| w[0] == w[1]), "workers disagree");
    models.into_iter().next().unwrap()
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn three_logical_devices_give_the_cpu_model() {
    let factory = WgpuFactory::new();
    for objective in [ObjectiveKind::Logistic, ObjectiveKind::Softprob] {
        for (quantisation, grow_policy) in [
            (Quantisation::Exact, GrowPolicy::Depthwise),
            (Quantisation::Bits(8), GrowPolicy::Lossguide),
        ] {
            let params = Params {
                objective,
                quantisation,
                grow_policy,
                num_rounds: 5,
                max_depth: if grow_policy == GrowPolicy::Depthwise {
                    5
                } else {
                    0
                },
                max_leaves: 10,
                subsample: 0.8,
                ..Default::default()
            };
            let what = format!("{objective:?} {quantisation:?} {grow_policy:?}");
            let cpu3 = train_workers(&params, &CpuFactory, 3);
            let dev3 = train_workers(&params, &factory, 3);
            assert!(cpu3 == dev3, "{what}: 3 devices differ from 3 CPU workers");
            let dev1 = train_workers(&params, &factory, 1);
            let cpu1 = train_workers(&params, &CpuFactory, 1);
            assert!(cpu1 == dev1, "{what}: 1 device differs from the CPU");
            assert!(dev1 == dev3, "{what}: 1 and 3 devices differ");
        }
    }
}
