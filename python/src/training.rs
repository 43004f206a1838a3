//! Training with the GIL released: a worker thread trains while the calling thread
//! waits and polls for signals, so Ctrl-C stops training between rounds.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use pyo3::prelude::*;
use std::path::PathBuf;

use sapwood::{Booster, Checkpoint, Control, Dataset, RoundReport, Settings, TrainObserver};

use crate::booster::NativeBooster;
use crate::data::NativeData;
use crate::errors::{guarded, panic_message, Kind, OrRaise};

/// How often the waiting thread looks for Ctrl-C. Short enough to feel immediate, long
/// enough to cost nothing next to a boosting round.
const SIGNAL_POLL: Duration = Duration::from_millis(20);

/// Where checkpoints go and which one training continues from.
#[derive(Debug, Clone, Default)]
struct Checkpointing {
    path: Option<PathBuf>,
    every: usize,
    resume: Option<PathBuf>,
}

/// Calls the Python callback after each round, honours the stop flag set on Ctrl-C, and
/// keeps checkpoints.
struct Observer<'a> {
    callback: Option<&'a Py<PyAny>>,
    stop: &'a AtomicBool,
    checkpoints: &'a Checkpointing,
    /// An exception raised by the callback; training stops and it is re-raised.
    error: Option<PyErr>,
}

impl TrainObserver for Observer<'_> {
    fn on_round(&mut self, report: &RoundReport<'_>) -> Control {
        if self.stop.load(Ordering::Relaxed) {
            return Control::Stop;
        }
        let Some(callback) = self.callback else {
            return Control::Continue;
        };
        let metrics: Vec<(String, &'static str, f64)> = report
            .metrics
            .iter()
            .map(|m| (m.dataset.clone(), m.metric.name(), m.value))
            .collect();
        let answer = Python::attach(|py| -> PyResult<bool> {
            callback
                .call1(
                    py,
                    (report.round, report.num_rounds, metrics, report.elapsed),
                )?
                .is_truthy(py)
        });
        match answer {
            Ok(true) => Control::Stop,
            Ok(false) => Control::Continue,
            Err(e) => {
                self.error = Some(e);
                Control::Stop
            }
        }
    }

    fn checkpoint_every(&self) -> usize {
        if self.checkpoints.path.is_some() {
            self.checkpoints.every
        } else {
            0
        }
    }

    fn on_checkpoint(&mut self, checkpoint: &Checkpoint) -> sapwood::Result<()> {
        match &self.checkpoints.path {
            Some(p) => checkpoint.save(p),
            None => Ok(()),
        }
    }

    fn resume_from(&mut self) -> sapwood::Result<Option<Checkpoint>> {
        self.checkpoints
            .resume
            .as_deref()
            .map(Checkpoint::load)
            .transpose()
    }
}

type Outcome = (sapwood::Result<Booster>, Option<PyErr>);

/// Trains on a worker thread; this thread waits with the GIL released and checks for
/// signals every [`SIGNAL_POLL`]. A signal (Ctrl-C) sets the stop flag, so training ends
/// after the current round, and its exception (`KeyboardInterrupt`) is raised.
fn train_interruptibly(
    py: Python<'_>,
    settings: &Settings,
    train: &Dataset<'_>,
    evals: &[(&str, &Dataset<'_>)],
    callback: Option<&Py<PyAny>>,
    checkpoints: &Checkpointing,
) -> PyResult<Booster> {
    let stop = AtomicBool::new(false);
    let (result, interrupt) = py.detach(|| {
        let (sender, receiver) = mpsc::channel::<std::thread::Result<Outcome>>();
        std::thread::scope(|scope| {
            let stop = &stop;
            scope.spawn(move || {
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    let mut observer = Observer {
                        callback,
                        stop,
                        checkpoints,
                        error: None,
                    };
                    let booster = Booster::train_with(
                        &settings.params,
                        &settings.run,
                        train,
                        evals,
                        &mut observer,
                    );
                    (booster, observer.error)
                }));
                // The receiver only goes away after this thread is joined.
                let _ = sender.send(outcome);
            });
            let mut interrupt: Option<PyErr> = None;
            loop {
                match receiver.recv_timeout(SIGNAL_POLL) {
                    Ok(outcome) => return (outcome, interrupt),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if interrupt.is_none() {
                            if let Err(e) = Python::attach(|py| py.check_signals()) {
                                stop.store(true, Ordering::Relaxed);
                                interrupt = Some(e);
                            }
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        let lost: Box<dyn std::any::Any + Send> =
                            Box::new("the training thread vanished");
                        return (Err(lost), interrupt);
                    }
                }
            }
        })
    });
    if let Some(e) = interrupt {
        return Err(e);
    }
    match result {
        Ok((_, Some(callback_error))) => Err(callback_error),
        Ok((booster, None)) => booster.or_raise(),
        Err(payload) => Err(Kind::Internal.err(format!(
            "internal error (please report it): {}",
            panic_message(payload.as_ref())
        ))),
    }
}

/// Trains a booster. `params` are `(name, value)` text pairs; `evals` are named
/// datasets whose metrics are reported each round (early stopping watches the last
/// one); `callback(round, num_rounds, metrics, elapsed)` runs after every round and
/// stops training by returning True. `checkpoint` is `(path, every)`: a checkpoint written
/// there every `every` rounds; `resume` continues from a checkpoint of the same job.
#[pyfunction]
#[pyo3(signature = (params, train, evals=Vec::new(), callback=None, checkpoint=None, resume=None))]
pub fn train(
    py: Python<'_>,
    params: Vec<(String, String)>,
    train: Bound<'_, NativeData>,
    evals: Vec<(String, Bound<'_, NativeData>)>,
    callback: Option<Py<PyAny>>,
    checkpoint: Option<(PathBuf, usize)>,
    resume: Option<PathBuf>,
) -> PyResult<NativeBooster> {
    guarded(|| {
        let params = crate::params::params_from(&params)?;
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
        if checkpoint.as_ref().is_some_and(|c| c.1 == 0) {
            return Err(Kind::Parameter
                .err("invalid parameter `checkpoint_every`: use at least 1 round".to_string()));
        }
        let (path, every) = checkpoint.unzip();
        let checkpoints = Checkpointing {
            path,
            every: every.unwrap_or(0),
            resume,
        };
        let booster = train_interruptibly(
            py,
            &params,
            &train_set,
            &eval_refs,
            callback.as_ref(),
            &checkpoints,
        )?;
        Ok(NativeBooster::new(booster))
    })
}
