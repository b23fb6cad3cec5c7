//! `clusterctl cni …`: the overlay agent (`clusterctl cni agent`), and the CNI plugin entry point used
//! when the binary runs as `clusterctl-cni`.

use std::process::ExitCode;

/// Subcommands of `clusterctl cni`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Placeholder until the agent is built.
    Help,
}

/// Runs the command. Errors: always, until it is built.
pub fn run(_cmd: Command) -> miette::Result<ExitCode> {
    Err(miette::miette!("`clusterctl cni` is not implemented yet"))
}

/// Entry point when the binary is invoked as `clusterctl-cni` (the CNI plugin, CNI spec 1.1.0).
/// Never panics on input; errors are CNI error JSON on stdout with exit status 1; no async runtime.
pub fn plugin_main() -> ExitCode {
    match clusterctl_cni::plugin::main() {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
