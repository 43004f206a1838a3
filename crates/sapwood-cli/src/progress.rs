//! Progress of training: when the data is read, a bar with the metrics on a terminal
//! (plain lines otherwise), and Ctrl-C or SIGTERM ([`crate::signals`]) turned into a clean
//! stop between rounds.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use sapwood::{Control, RoundReport, TrainObserver};

/// Reports rounds and stops training when Ctrl-C was pressed.
pub struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
    every: usize,
    /// Said once the rows are read and binned, with their count (a rank's share).
    rows_note: Option<Box<dyn Fn(usize) -> String + Send>>,
    /// When the rows were read and binned, and the peak memory then.
    loaded: Option<Loaded>,
}

/// The end of reading and binning.
#[derive(Debug, Clone, Copy)]
pub struct Loaded {
    /// When it ended.
    pub at: Instant,
    /// Peak resident memory then, before training allocates.
    pub peak_mib: Option<f64>,
}

fn metrics_text(r: &RoundReport<'_>) -> String {
    r.metrics
        .iter()
        .map(|m| format!("{}-{}: {:.6}", m.dataset, m.metric, m.value))
        .collect::<Vec<_>>()
        .join("  ")
}

impl Progress {
    /// Progress for `rounds` rounds; silent when `quiet`.
    pub fn new(rounds: usize, quiet: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (!quiet && terminal).then(|| {
            let b = ProgressBar::new(rounds as u64);
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner} round {pos}/{len} [{elapsed_precise}] {wide_msg}",
                )
                .expect("a valid template"),
            );
            b
        });
        Progress {
            bar,
            plain: !quiet && !terminal,
            every: rounds.div_ceil(100).max(1),
            rows_note: None,
            loaded: None,
        }
    }

    /// Progress that also writes `note(rows)` to stderr once the rows are read and binned.
    pub fn with_rows_note(self, note: impl Fn(usize) -> String + Send + 'static) -> Self {
        Progress {
            rows_note: Some(Box::new(note)),
            ..self
        }
    }

    /// When reading and binning ended (None until the job has read its rows).
    pub fn loaded(&self) -> Option<Loaded> {
        self.loaded
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl TrainObserver for Progress {
    fn on_rows_binned(&mut self, n_rows: usize) {
        self.loaded = Some(Loaded {
            at: Instant::now(),
            peak_mib: crate::commands::peak_memory_mib(),
        });
        if let Some(note) = &self.rows_note {
            // one write, so the ranks' lines do not interleave in mpirun's output
            eprint!("{}", note(n_rows));
        }
    }

    fn on_round(&mut self, r: &RoundReport<'_>) -> Control {
        if let Some(b) = &self.bar {
            b.set_position(r.round as u64 + 1);
            b.set_message(metrics_text(r));
        } else if self.plain
            && !r.metrics.is_empty()
            && ((r.round + 1).is_multiple_of(self.every) || r.round + 1 == r.num_rounds)
        {
            eprintln!("[{}] {}", r.round, metrics_text(r));
        }
        if crate::signals::received().is_some() {
            Control::Stop
        } else {
            Control::Continue
        }
    }
}
