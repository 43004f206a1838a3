//! One rank of a distributed job over TCP (a Dask worker's share of the rows), trained
//! with the GIL released. Every rank holds a contiguous range of the job's rows; the ranks
//! agree on the cuts and classes through the collective, so the model is the one
//! single-process training saves for all the rows in rank order, byte for byte.

use std::net::{IpAddr, TcpListener};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use sapwood::collective::tcp::{coordinator_listener, TcpConfig, TcpTransport};
use sapwood::collective::RingCollective;
use sapwood::{Booster, CheckedSettings, Dataset, Rows, TrainJob};

use crate::booster::NativeBooster;
use crate::data::NativeData;
use crate::errors::{guarded, Kind, OrRaise};
use crate::training::{interruptibly, Checkpointing, Observer, Outcome};

/// Where this rank's rows sit among the job's, and how it reaches the other ranks.
struct Rank<'a> {
    config: TcpConfig,
    /// rank 0's listener, bound before the coordinator's address was announced
    listener: Mutex<Option<TcpListener>>,
    row_offset: u64,
    n_total: u64,
    callback: Option<&'a Py<PyAny>>,
}

/// Joins the job, then trains this rank's rows.
fn train_rank(
    settings: &CheckedSettings,
    rank: &Rank<'_>,
    train: &Dataset<'_>,
    evals: &[(&str, &Dataset<'_>)],
    stop: &AtomicBool,
) -> Outcome {
    let checkpoints = Checkpointing::default();
    let mut observer = Observer {
        callback: rank.callback,
        stop,
        checkpoints: &checkpoints,
        objective: None,
        metric: None,
        error: None,
    };
    let listener = rank.listener.lock().map_or(None, |mut l| l.take());
    let transport = match listener {
        Some(l) => TcpTransport::connect_listening(&rank.config, l),
        None => TcpTransport::connect(&rank.config),
    };
    let booster = transport.and_then(|transport| {
        let mut collective = RingCollective::new(transport, settings.run.comm_codec)
            .with_overlap(settings.run.comm_overlap);
        let rows = Rows::Columns { train, evals };
        let job = TrainJob::new(&settings.params, &settings.run, rows).on_rank(
            &mut collective,
            rank.row_offset,
            rank.n_total,
        );
        Booster::fit(job, &mut observer)
    });
    (booster, observer.error)
}

/// Trains this rank with Ctrl-C heard (see [`interruptibly`]); only rank 0 decides to
/// stop.
fn train_rank_interruptibly(
    py: Python<'_>,
    settings: &CheckedSettings,
    rank: &Rank<'_>,
    train: &Dataset<'_>,
    evals: &[(&str, &Dataset<'_>)],
) -> PyResult<Booster> {
    interruptibly(py, |stop| train_rank(settings, rank, train, evals, stop))
}

/// The longest wait for a peer, from seconds.
fn timeout_from(seconds: f64) -> PyResult<Duration> {
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(Kind::Parameter.err(format!(
            "invalid parameter `timeout`: {seconds} seconds; give a finite number > 0"
        )));
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| {
        Kind::Parameter.err(format!(
            "invalid parameter `timeout`: {seconds} seconds: {e}"
        ))
    })
}

/// The listeners' address, from text.
fn bind_from(bind: Option<&str>) -> PyResult<Option<IpAddr>> {
    bind.map(|text| {
        text.trim().parse::<IpAddr>().map_err(|e| {
            Kind::Parameter.err(format!(
                "invalid parameter `bind`: `{text}` is not an IP address: {e}"
            ))
        })
    })
    .transpose()
}

/// Rank 0's listener, bound on a port the system chose before the coordinator's address
/// is announced to the other ranks, and handed to `train_tcp`.
#[pyclass(module = "sapwood._sapwood", frozen)]
pub struct NativeListener {
    listener: Mutex<Option<TcpListener>>,
    port: u16,
}

#[pymethods]
impl NativeListener {
    /// The port it listens on.
    #[getter]
    fn port(&self) -> u16 {
        self.port
    }

    /// Stops listening (when the job will not start).
    fn close(&self) {
        self.taken();
    }
}

impl NativeListener {
    fn taken(&self) -> Option<TcpListener> {
        self.listener.lock().map_or(None, |mut l| l.take())
    }
}

/// Binds rank 0's listener for a coordinator on `host`: where `train_tcp` would bind it
/// (`bind`, else loopback for a loopback host, else every interface), on a free port.
#[pyfunction]
#[pyo3(signature = (host, bind=None))]
pub fn listen(host: &str, bind: Option<String>) -> PyResult<NativeListener> {
    guarded(|| {
        let listener = coordinator_listener(host, bind_from(bind.as_deref())?).or_raise()?;
        let port = listener
            .local_addr()
            .map_err(|e| Kind::Backend.err(format!("rank 0: listener: {e}")))?
            .port();
        Ok(NativeListener {
            listener: Mutex::new(Some(listener)),
            port,
        })
    })
}

/// Trains one rank of a TCP job and returns the model (the same on every rank).
///
/// `train` holds the rows `row_offset..row_offset + train.n_rows` of the job's `n_total`,
/// the ranks' ranges following one another in rank order. Rank 0 listens on
/// `coordinator` (`host:port`); every rank presents `token`. `timeout` (seconds) bounds
/// every wait for a peer: a rank that dies or goes silent ends every other rank with an
/// error. `bind` is the IP address this rank's listener binds (default: loopback for a
/// loopback coordinator, else every interface). `evals` are named datasets reported each
/// round on rank 0 (only rank 0 needs them); `callback(round, num_rounds, metrics,
/// elapsed)` runs after every round and asks rank 0 to stop by returning True. `listener`
/// (rank 0 only, from `listen`) is the coordinator's socket, already bound.
#[pyfunction]
#[pyo3(signature = (
    params, train, row_offset, n_total, rank, world, coordinator, token, timeout, bind=None,
    evals=Vec::new(), callback=None, listener=None
))]
#[allow(clippy::too_many_arguments)]
pub fn train_tcp(
    py: Python<'_>,
    params: Vec<(String, String)>,
    train: Bound<'_, NativeData>,
    row_offset: u64,
    n_total: u64,
    rank: usize,
    world: usize,
    coordinator: String,
    token: String,
    timeout: f64,
    bind: Option<String>,
    evals: Vec<(String, Bound<'_, NativeData>)>,
    callback: Option<Py<PyAny>>,
    listener: Option<Bound<'_, NativeListener>>,
) -> PyResult<NativeBooster> {
    guarded(|| {
        let listener = match listener {
            Some(l) => Some(l.get().taken().ok_or_else(|| {
                Kind::Parameter
                    .err("invalid parameter `listener`: it was closed or already used by a job")
            })?),
            None => None,
        };
        let settings = crate::params::params_from(&params)?;
        if settings.run.workers != 1 {
            return Err(Kind::Parameter.err(format!(
                "invalid parameter `workers`: {} in-process workers per rank; a TCP rank \
                 trains as one worker (the ranks are the workers)",
                settings.run.workers
            )));
        }
        let config = TcpConfig {
            rank,
            world,
            coordinator,
            token,
            bind: bind_from(bind.as_deref())?,
            ports: None,
            timeout: timeout_from(timeout)?,
        };
        let train_data = train.get();
        let train_borrow = train_data.borrow(py)?;
        let train_set = train_data.dataset(&train_borrow)?;
        let eval_borrows = evals
            .iter()
            .map(|(_, d)| d.get().borrow(py))
            .collect::<PyResult<Vec<_>>>()?;
        let eval_sets = evals
            .iter()
            .zip(&eval_borrows)
            .map(|((name, d), b)| Ok((name.as_str(), d.get().dataset(b)?)))
            .collect::<PyResult<Vec<_>>>()?;
        let eval_refs: Vec<(&str, &Dataset<'_>)> = eval_sets.iter().map(|(n, d)| (*n, d)).collect();
        let rank = Rank {
            config,
            listener: Mutex::new(listener),
            row_offset,
            n_total,
            callback: callback.as_ref(),
        };
        let booster = train_rank_interruptibly(py, &settings, &rank, &train_set, &eval_refs)?;
        Ok(NativeBooster::new(booster))
    })
}
