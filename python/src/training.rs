//! Training with the GIL released: a worker thread trains while the calling thread
//! waits and polls for signals, so Ctrl-C stops training between rounds.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use std::path::PathBuf;

use sapwood::{
    Booster, CheckedSettings, Checkpoint, Control, CustomEval, Dataset, EvalMargins, RoundReport,
    RowSource, Rows, TrainJob, TrainObserver,
};

use crate::batches::NativeBatches;
use crate::booster::NativeBooster;
use crate::data::NativeData;
use crate::errors::{guarded, panic_message, Kind, OrRaise};

/// How often the waiting thread looks for Ctrl-C. Short enough to feel immediate, long
/// enough to cost nothing next to a boosting round.
pub(crate) const SIGNAL_POLL: Duration = Duration::from_millis(20);

/// Where checkpoints go and how often.
#[derive(Debug, Clone, Default)]
pub(crate) struct Checkpointing {
    path: Option<PathBuf>,
    every: usize,
}

/// A custom metric computed in Python from the evaluation sets' margins after each round.
/// The engine hands the margins to [`TrainObserver::custom_metrics`] before the round's
/// [`TrainObserver::on_round`]; the metric runs there, after the callback has seen the
/// built-in metrics, and a stop it asks ends training at that round.
pub(crate) struct CustomMetric<'a> {
    /// `metric(round, [(name, margins)]) -> stop`.
    callable: &'a Py<PyAny>,
    /// The sets' margins of the round being reported.
    sets: Vec<(String, Vec<f32>)>,
}

impl CustomMetric<'_> {
    /// Calls the Python metric with every set's margins; true asks to stop.
    fn report(&self, round: usize) -> PyResult<bool> {
        Python::attach(|py| {
            let sets: Vec<(String, Bound<'_, PyArray1<f32>>)> = self
                .sets
                .iter()
                .map(|(name, m)| (name.clone(), PyArray1::from_slice(py, m)))
                .collect();
            self.callable.call1(py, (round, sets))?.is_truthy(py)
        })
    }
}

/// Calls the Python callback after each round, honours the stop flag set on Ctrl-C, keeps
/// checkpoints, and asks Python for a custom objective's gradients and a custom metric.
pub(crate) struct Observer<'a> {
    pub(crate) callback: Option<&'a Py<PyAny>>,
    pub(crate) stop: &'a AtomicBool,
    pub(crate) checkpoints: &'a Checkpointing,
    /// `objective(margins, groups) -> (grad, hess)`, float32 arrays of the margins' length.
    pub(crate) objective: Option<&'a Py<PyAny>>,
    pub(crate) metric: Option<CustomMetric<'a>>,
    /// An exception raised by Python code; training stops and it is re-raised.
    pub(crate) error: Option<PyErr>,
}

impl Observer<'_> {
    /// Keeps a Python exception and turns it into the engine error that stops training.
    fn fail(&mut self, e: PyErr, what: &'static str) -> sapwood::Error {
        let message = Python::attach(|py| e.value(py).to_string());
        self.error = Some(e);
        sapwood::Error::param(what, message)
    }

    fn custom_gradients(&self, margins: &[f32], groups: usize) -> PyResult<Vec<[f32; 2]>> {
        let objective = self.objective.expect("asked only with a custom objective");
        Python::attach(|py| {
            let preds = PyArray1::from_slice(py, margins);
            let answer = objective.call1(py, (preds, groups))?;
            let (grad, hess): (PyReadonlyArray1<'_, f32>, PyReadonlyArray1<'_, f32>) =
                answer.extract(py)?;
            let (grad, hess) = (grad.as_array(), hess.as_array());
            if grad.len() != margins.len() || hess.len() != margins.len() {
                return Err(Kind::Parameter.err(format!(
                    "invalid parameter `obj`: {} gradients and {} hessians for {} margins",
                    grad.len(),
                    hess.len(),
                    margins.len()
                )));
            }
            Ok(grad
                .iter()
                .zip(hess.iter())
                .map(|(&g, &h)| [g, h])
                .collect())
        })
    }

    /// Calls the Python callback with the round's built-in metrics; Stop when it asks.
    fn report_round(&mut self, report: &RoundReport<'_>) -> Control {
        let Some(callback) = self.callback else {
            return Control::Continue;
        };
        // `Display` keeps a metric's cut-off (`ndcg@10`), as the peers name it
        let metrics: Vec<(String, String, f64)> = report
            .metrics
            .iter()
            .map(|m| (m.dataset.clone(), m.metric.to_string(), m.value))
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
}

impl TrainObserver for Observer<'_> {
    fn on_round(&mut self, report: &RoundReport<'_>) -> Control {
        if self.stop.load(Ordering::Relaxed) {
            return Control::Stop;
        }
        let control = self.report_round(report);
        if control == Control::Continue {
            if let Some(metric) = &self.metric {
                match metric.report(report.round) {
                    Ok(true) => return Control::Stop,
                    Ok(false) => {}
                    Err(e) => {
                        self.error = Some(e);
                        return Control::Stop;
                    }
                }
            }
        }
        control
    }

    fn custom_metrics(
        &mut self,
        _round: usize,
        sets: &[EvalMargins<'_>],
    ) -> sapwood::Result<Vec<CustomEval>> {
        if let Some(metric) = self.metric.as_mut() {
            metric.sets = sets
                .iter()
                .map(|s| (s.name.to_string(), s.margins.to_vec()))
                .collect();
        }
        // the Python side keeps its own history and decides its stop (see on_round)
        Ok(Vec::new())
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

    fn has_custom_objective(&self) -> bool {
        self.objective.is_some()
    }

    fn gradients(
        &mut self,
        margins: &[f32],
        groups: usize,
    ) -> Option<sapwood::Result<Vec<[f32; 2]>>> {
        self.objective?;
        Some(
            self.custom_gradients(margins, groups)
                .map_err(|e| self.fail(e, "obj")),
        )
    }
}

/// What the training thread hands back: the booster, and an exception a Python callback
/// raised.
pub(crate) type Outcome = (sapwood::Result<Booster>, Option<PyErr>);

/// Runs `work` (which trains, stopping after the round where its flag is set) on a worker
/// thread; this thread waits with the GIL released and checks for signals every
/// [`SIGNAL_POLL`]. A signal (Ctrl-C) sets the flag, so training ends after the current
/// round, and its exception (`KeyboardInterrupt`) is raised; so is a callback's exception,
/// in place of the booster.
pub(crate) fn interruptibly<F>(py: Python<'_>, work: F) -> PyResult<Booster>
where
    F: FnOnce(&AtomicBool) -> Outcome + Send,
{
    let stop = AtomicBool::new(false);
    let (result, interrupt) = py.detach(|| {
        let (sender, receiver) = mpsc::channel::<std::thread::Result<Outcome>>();
        std::thread::scope(|scope| {
            let stop = &stop;
            scope.spawn(move || {
                let outcome = catch_unwind(AssertUnwindSafe(|| work(stop)));
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

/// The Python side of a run: callbacks, the model to continue, the checkpoint to resume,
/// custom objective and metric.
struct Hooks<'a> {
    callback: Option<&'a Py<PyAny>>,
    checkpoints: &'a Checkpointing,
    init: Option<&'a Booster>,
    resume: Option<&'a Checkpoint>,
    objective: Option<&'a Py<PyAny>>,
    metric: Option<&'a Py<PyAny>>,
}

/// Trains in this process on `rows` (see [`interruptibly`]).
fn train_interruptibly(
    py: Python<'_>,
    settings: &CheckedSettings,
    rows: Rows<'_>,
    hooks: &Hooks<'_>,
) -> PyResult<Booster> {
    interruptibly(py, |stop| {
        let mut observer = Observer {
            callback: hooks.callback,
            stop,
            checkpoints: hooks.checkpoints,
            objective: hooks.objective,
            metric: hooks.metric.map(|callable| CustomMetric {
                callable,
                sets: Vec::new(),
            }),
            error: None,
        };
        let job = TrainJob::new(&settings.params, &settings.run, rows)
            .continuing(hooks.init)
            .resuming(hooks.resume);
        (Booster::fit(job, &mut observer), observer.error)
    })
}

/// Trains a booster. `params` are `(name, value)` text pairs; `evals` are named
/// datasets whose metrics are reported each round (early stopping watches the last
/// one); `callback(round, num_rounds, metrics, elapsed)` runs after every round and
/// stops training by returning True. `checkpoint` is `(path, every)`: a checkpoint written
/// there every `every` rounds; `resume` continues from a checkpoint of the same job.
/// `init` is a model to continue (`params` rounds more). `objective(margins, groups)`
/// returns `(grad, hess)` float32 arrays of the margins' length (a custom objective; one
/// worker); `metric(round, [(name, margins)])` runs after every round with each
/// evaluation set's margins (float32, groups per row) and asks to stop by returning True
/// (the stop comes one round later: the caller drops that round).
#[pyfunction]
#[pyo3(signature = (
    params, train, evals=Vec::new(), callback=None, checkpoint=None, resume=None, init=None,
    objective=None, metric=None
))]
#[allow(clippy::too_many_arguments)]
pub fn train(
    py: Python<'_>,
    params: Vec<(String, String)>,
    train: Bound<'_, PyAny>,
    evals: Vec<(String, Bound<'_, PyAny>)>,
    callback: Option<Py<PyAny>>,
    checkpoint: Option<(PathBuf, usize)>,
    resume: Option<PathBuf>,
    init: Option<Bound<'_, NativeBooster>>,
    objective: Option<Py<PyAny>>,
    metric: Option<Py<PyAny>>,
) -> PyResult<NativeBooster> {
    guarded(|| {
        let params = crate::params::params_from(&params)?;
        if checkpoint.as_ref().is_some_and(|c| c.1 == 0) {
            return Err(Kind::Parameter
                .err("invalid parameter `checkpoint_every`: use at least 1 round".to_string()));
        }
        let (path, every) = checkpoint.unzip();
        let checkpoints = Checkpointing {
            path,
            every: every.unwrap_or(0),
        };
        let resume = resume
            .as_deref()
            .map(Checkpoint::load)
            .transpose()
            .or_raise()?;
        let init = init.as_ref().map(|b| b.get());
        let hooks = Hooks {
            callback: callback.as_ref(),
            checkpoints: &checkpoints,
            init: init.map(NativeBooster::engine),
            resume: resume.as_ref(),
            objective: objective.as_ref(),
            metric: metric.as_ref(),
        };
        let inputs: Vec<&Bound<'_, PyAny>> = std::iter::once(&train)
            .chain(evals.iter().map(|(_, d)| d))
            .collect();
        let streams = streams_of(&inputs, &evals)?;
        let natives: Vec<Option<Bound<'_, NativeData>>> = inputs
            .iter()
            .map(|d| d.cast::<NativeData>().ok().cloned())
            .collect();
        let borrows = natives
            .iter()
            .map(|n| n.as_ref().map(|n| n.get().borrow(py)).transpose())
            .collect::<PyResult<Vec<_>>>()?;
        let datasets = natives
            .iter()
            .zip(&borrows)
            .map(|(n, b)| match (n, b) {
                (Some(n), Some(b)) => n.get().dataset(b).map(Some),
                _ => Ok(None),
            })
            .collect::<PyResult<Vec<_>>>()?;
        let names = evals.iter().map(|(n, _)| n.as_str());
        let booster = match &streams[0] {
            Some(stream) => {
                let sources: Vec<(&str, &dyn RowSource)> = names
                    .zip(datasets[1..].iter().zip(&streams[1..]))
                    .map(|(n, (d, s))| {
                        let source: &dyn RowSource = match (d, s) {
                            (Some(d), _) => d,
                            (None, Some(s)) => s.get(),
                            (None, None) => unreachable!("checked by streams_of"),
                        };
                        (n, source)
                    })
                    .collect();
                let rows = Rows::Stream {
                    train: stream.get(),
                    evals: &sources,
                };
                let trained = train_interruptibly(py, &params, rows, &hooks);
                // an exception raised while reading comes back as it was raised
                let raised = streams.iter().flatten().find_map(|s| s.get().take_error());
                raised.map_or(trained, Err)?
            }
            None => {
                let sets: Vec<(&str, &Dataset<'_>)> = names
                    .zip(&datasets[1..])
                    .filter_map(|(n, d)| Some((n, d.as_ref()?)))
                    .collect();
                let train = datasets[0].as_ref().expect("checked by streams_of");
                let rows = Rows::Columns {
                    train,
                    evals: &sets,
                };
                train_interruptibly(py, &params, rows, &hooks)?
            }
        };
        Ok(NativeBooster::new(booster))
    })
}

/// Which inputs (the training data, then the evaluation sets) are read in batches; each is
/// a `NativeData` or a `NativeBatches`, and evaluation sets are read in batches only when
/// the training data is.
fn streams_of<'py>(
    inputs: &[&Bound<'py, PyAny>],
    evals: &[(String, Bound<'py, PyAny>)],
) -> PyResult<Vec<Option<Bound<'py, NativeBatches>>>> {
    let streams: Vec<Option<Bound<'py, NativeBatches>>> = inputs
        .iter()
        .map(|d| d.cast::<NativeBatches>().ok().cloned())
        .collect();
    for (i, d) in inputs.iter().enumerate() {
        let what = match i {
            0 => "the training data".to_string(),
            i => format!("evaluation set `{}`", evals[i - 1].0),
        };
        if streams[i].is_none() && d.cast::<NativeData>().is_err() {
            return Err(Kind::Internal.err(format!(
                "internal error (please report it): {what} is neither NativeData nor NativeBatches"
            )));
        }
        if i > 0 && streams[i].is_some() && streams[0].is_none() {
            return Err(Kind::Data.err(format!(
                "{what} is read in batches (a DataIter) but the training data is in memory: \
                 give it as a Dataset"
            )));
        }
    }
    Ok(streams)
}
