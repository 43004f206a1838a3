//! `sapwood`: gradient-boosted trees from the command line.

mod checkpoints;
mod cli;
mod commands;
mod input;
mod progress;
mod settings;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

/// Training stopped by Ctrl-C after saving what it had: exit code 130, like a shell.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// How the process ends: 2 for anything wrong with the input, 1 for internal failures.
fn exit_code(e: &anyhow::Error) -> ExitCode {
    let user = e.chain().any(|c| {
        c.is::<sapwood::Error>() || c.is::<sapwood_io::IoError>() || c.is::<settings::Error>()
    });
    ExitCode::from(if user { 2 } else { 1 })
}

/// Whether the error is a closed standard output (`sapwood inspect m.json | head`): the
/// reader has what it wanted, so this is not a failure.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match commands::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<Interrupted>() => ExitCode::from(130),
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
