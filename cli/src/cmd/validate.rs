//! `clusterctl validate`: check a cluster file (not built yet).

use std::process::ExitCode;

/// Arguments of `clusterctl validate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The cluster file.
    #[arg(short = 'f', long = "file", default_value = "cluster.yaml")]
    pub file: std::path::PathBuf,
}

/// Runs the command. Errors: always, until it is built.
pub fn run(_args: Args) -> miette::Result<ExitCode> {
    Err(miette::miette!("`clusterctl validate` is not implemented yet"))
}
