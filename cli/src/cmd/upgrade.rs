//! `clusterctl upgrade`: upgrade Kubernetes (not built yet).

use std::process::ExitCode;

/// Arguments of `clusterctl upgrade`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The cluster file.
    #[arg(short = 'f', long = "file", default_value = "cluster.yaml")]
    pub file: std::path::PathBuf,
}

/// Runs the command. Errors: always, until it is built.
pub fn run(_args: Args) -> miette::Result<ExitCode> {
    Err(miette::miette!("`clusterctl upgrade` is not implemented yet"))
}
