//! `sapwood`: gradient-boosted trees from the command line.

mod checkpoints;
mod cli;
mod commands;
mod fifos;
mod input;
mod progress;
mod rows;
mod settings;
mod signals;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

/// A command stopped by SIGINT or SIGTERM (after training saved what it had): exit code
/// 130 or 143, as a shell reports it.
#[derive(Debug)]
pub struct Interrupted(pub Option<signals::Signal>);

impl Interrupted {
    /// Training that stopped for a signal: this process's, or another rank's (which ends
    /// this one as Ctrl-C would).
    pub fn training() -> Interrupted {
        Interrupted(signals::received())
    }

    /// The stop asked for by a signal received so far, if any, as an error to return.
    pub fn check() -> Result<(), Interrupted> {
        match signals::received() {
            Some(s) => Err(Interrupted(Some(s))),
            None => Ok(()),
        }
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(s) => write!(f, "interrupted by {}", s.name()),
            None => f.write_str(
                "interrupted: another rank of the job was stopped by a signal (Ctrl-C or \
                 SIGTERM there)",
            ),
        }
    }
}

impl std::error::Error for Interrupted {}

/// How the process ends: 2 for anything wrong with the input, 1 for internal failures and
/// for a distributed job that broke down (a rank that died, timed out or was started for
/// another job: the other ranks' inputs are not at fault).
fn exit_code(e: &anyhow::Error) -> ExitCode {
    let collective = e
        .chain()
        .any(|c| matches!(c.downcast_ref(), Some(sapwood::Error::Collective(_))));
    let user = e.chain().any(|c| {
        c.is::<sapwood::Error>() || c.is::<sapwood_io::IoError>() || c.is::<settings::Error>()
    });
    ExitCode::from(if user && !collective { 2 } else { 1 })
}

/// Whether the error is a closed standard output (`sapwood inspect m.json | head`): the
/// reader has what it wanted, so this is not a failure.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The signal that stopped the command, when the error (or one of its causes) says so.
fn interrupted_by(e: &anyhow::Error) -> Option<signals::Signal> {
    e.chain()
        .find_map(|c| c.downcast_ref::<Interrupted>())
        .map(|i| i.0.unwrap_or(signals::Signal::INTERRUPT))
}

fn main() -> ExitCode {
    signals::install();
    // `--version` also says which vector paths the kernels take (SAPWOOD_PORTABLE)
    let long_version = format!(
        "{}\nvector paths: {}",
        env!("CARGO_PKG_VERSION"),
        sapwood::simd::describe()
    );
    // clap takes a static string here (a String needs its `string` feature): the text
    // lives as long as the process anyway
    let matches = cli::Cli::command()
        .long_version(&*Box::leak(long_version.into_boxed_str()))
        .get_matches();
    let args = cli::Cli::from_arg_matches(&matches)
        .map_err(|e| e.format(&mut cli::Cli::command()))
        .unwrap_or_else(|e| e.exit());
    match commands::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if interrupted_by(&e).is_some() => {
            let signal = interrupted_by(&e).expect("checked");
            let _ = std::io::stderr().write_all(format!("{e:#}\n").as_bytes());

            ExitCode::from(signal.exit_code())
        }
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // one line, the causes joined: no backtrace
            let msg = e.chain().map(|c| c.to_string()).collect::<Vec<_>>();
            let mut line = msg[0].clone();
            for cause in &msg[1..] {
                if !line.contains(cause.as_str()) {
                    line.push_str(": ");
                    line.push_str(cause);
                }
            }
            // one write, so that MPI ranks failing together never interleave their lines
            let _ = std::io::stderr().write_all(format!("error: {line}\n").as_bytes());
            exit_code(&e)
        }
    }
}
