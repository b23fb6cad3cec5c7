//! `clusterctl node …`: join or remove nodes (not built yet).

use std::process::ExitCode;

/// Subcommands of `clusterctl node`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Placeholder until the command is built.
    Help,
}

/// Runs the command. Errors: always, until it is built.
pub fn run(_cmd: Command) -> miette::Result<ExitCode> {
    Err(miette::miette!("`clusterctl node` is not implemented yet"))
}
