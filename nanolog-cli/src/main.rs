//! The `nanolog` command.
//!
//! Exit status: 0 on success (including output cut short by a closed pipe),
//! 1 on any error (unreadable or invalid log, bad arguments), 2 on a usage
//! error reported by clap.

mod cli;
mod commands;
mod follow;
mod grep;
mod inputs;
mod live;
mod output;
mod read_plan;
mod time_args;
mod window;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            let mut msg = format!("nanolog: {e}");
            for cause in e.chain().skip(1) {
                // An error whose text already holds its cause's says it once.
                let cause = cause.to_string();
                if !msg.contains(&cause) {
                    msg.push_str(&format!(": {cause}"));
                }
            }
            let _ = writeln!(io::stderr(), "{msg}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: cli::Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        cli::Command::Decode(a) => commands::decode::run(&a),
        cli::Command::Stats(a) => commands::stats::run(&a),
        cli::Command::Info(a) => commands::info::run(&a),
        cli::Command::Export(a) => commands::export::run(&a),
        cli::Command::Recover(a) => commands::recover::run(&a),
        #[cfg(feature = "ship")]
        cli::Command::Ship(a) => commands::ship::run(&a),
        #[cfg(not(feature = "ship"))]
        cli::Command::Ship(_) => Err(anyhow::anyhow!(
            "this nanolog was built without `ship` (the `ship` feature, on by default)"
        )),
    }?;
    Ok(ExitCode::SUCCESS)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
