//! `sapwood`: gradient-boosted trees from the command line.

mod cli;
mod commands;
mod input;
mod progress;
mod settings;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

/// How the process ends: 2 for anything wrong with the input, 1 for internal failures.
fn exit_code(e: &anyhow::Error) -> ExitCode {
    let user = e.chain().any(|c| {
        c.is::<sapwood::Error>() || c.is::<sapwood_io::IoError>() || c.is::<settings::Error>()
    });
    ExitCode::from(if user { 2 } else { 1 })
}

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match commands::run(args) {
        Ok(()) => ExitCode::SUCCESS,
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
            let _ = writeln!(std::io::stderr(), "error: {line}");
            exit_code(&e)
        }
    }
}
