//! What each worker runs on: the backend of the run's device (noting every one built) and a
//! thread pool of the size asked for.

use sapwood_core::backend::{BackendFactory, CpuFactory, HistBackend, ShardData};
use sapwood_core::params::{Device, RunOptions};

use crate::{Error, Result};

/// A factory that notes the name of every backend it builds, for [`RunRecord::backends`].
pub(crate) struct Recording<'a> {
    inner: &'a dyn BackendFactory,
    names: std::sync::Mutex<Vec<String>>,
}

impl<'a> Recording<'a> {
    pub(crate) fn new(inner: &'a dyn BackendFactory) -> Self {
        Recording {
            inner,
            names: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn names(self) -> Vec<String> {
        let mut names = self.names.into_inner().unwrap_or_else(|e| e.into_inner());
        // workers build theirs concurrently: sort so the record does not depend on timing
        names.sort();
        names
    }
}

impl BackendFactory for Recording<'_> {
    fn create(&self, shard: ShardData) -> sapwood_core::Result<Box<dyn HistBackend>> {
        let backend = self.inner.create(shard)?;
        let name = backend.name();
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name);
        Ok(backend)
    }
}

/// The backend factory for the run's device, on the devices it names: every worker's
/// (in-process workers take them in turn) or, for rank `rank` of a distributed job of
/// `world`, the rank's own entry of the list.
pub(crate) fn factory(
    run: &RunOptions,
    rank: usize,
    world: usize,
) -> Result<Box<dyn BackendFactory>> {
    let chosen = run.devices_for_rank(rank, world)?;
    // unused in a build without GPU backends, hence the underscore
    let _indices = (!chosen.is_empty()).then_some(chosen);
    match run.device {
        Device::Cpu => Ok(Box::new(CpuFactory)),
        #[cfg(feature = "wgpu")]
        Device::Wgpu => Ok(Box::new(sapwood_wgpu::WgpuFactory::with_options(
            sapwood_wgpu::WgpuOptions {
                adapters: _indices,
                ..Default::default()
            },
        ))),
        #[cfg(feature = "cuda")]
        Device::Cuda => Ok(Box::new(sapwood_cuda::CudaFactory::with_options(
            sapwood_cuda::CudaOptions {
                devices: _indices,
                ..Default::default()
            },
        ))),
        #[allow(unreachable_patterns)]
        other => Err(Error::param(
            "device",
            format!("`{other}` is not compiled into this build of sapwood (enable the `{other}` feature)"),
        )),
    }
}

/// A pool of `threads` threads (0: rayon's default).
fn thread_pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::param("threads", e.to_string()))
}

/// Runs `work` in a pool of `threads` (0: rayon's default) and returns its result with the
/// pool size seen from inside, which is what the work actually had.
pub(crate) fn in_pool<T>(
    threads: usize,
    work: impl FnOnce() -> Result<T> + Send,
) -> Result<(T, usize)>
where
    T: Send,
{
    thread_pool(threads)?.install(|| {
        let size = rayon::current_num_threads();
        work().map(|t| (t, size))
    })
}
