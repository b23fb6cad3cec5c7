//! `clusterctl airgap …`: image lists, bundles and import (not built yet).

use std::process::ExitCode;

/// Subcommands of `clusterctl airgap`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Placeholder until the command is built.
    Help,
}

/// Runs the command. Errors: always, until it is built.
pub fn run(_cmd: Command) -> miette::Result<ExitCode> {
    Err(miette::miette!("`clusterctl airgap` is not implemented yet"))
}
