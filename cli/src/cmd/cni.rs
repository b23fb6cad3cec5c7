//! `clusterctl cni …`: the overlay agent (not built yet).

use std::process::ExitCode;

/// Subcommands of `clusterctl cni`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Placeholder until the command is built.
    Help,
}

/// Runs the command. Errors: always, until it is built.
pub fn run(_cmd: Command) -> miette::Result<ExitCode> {
    Err(miette::miette!("`clusterctl cni` is not implemented yet"))
}

/// Entry point when the binary is invoked as `clusterctl-cni` (the CNI plugin). Never panics; errors
/// are CNI error JSON on stdout.
pub fn plugin_main() -> ExitCode {
    println!(r#"{{"cniVersion":"1.1.0","code":999,"msg":"clusterctl-cni is not implemented yet"}}"#);
    ExitCode::FAILURE
}
