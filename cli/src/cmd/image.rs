//! `clusterctl image load -f FILE [--archive FILE.tar] [--nodes A,B] [--dry-run [-o json|yaml]] IMAGE…`: puts local
//! images into every node's runtime, like `kind load docker-image`, through
//! `clusterctl_phases::image_load` (the images saved from the local Docker engine or the archive
//! given, streamed to each node, imported, checked); every node gets a result line. `--dry-run`
//! prints the plan and contacts no node. Exit codes: 0 loaded everywhere (or planned), 1 some node
//! failed, 2 invalid input.

use std::path::PathBuf;
use std::process::ExitCode;

use clusterctl_phases::image_load::{self, Options};
use clusterctl_phases::steps::{RunReport, StepLine};
use clusterctl_spec::ValidCluster;

/// Subcommands of `clusterctl image`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Command {
    /// Load local images (from Docker or an archive) into every node's runtime.
    Load(LoadArgs),
}

/// Arguments of `clusterctl image load`.
#[derive(clap::Args, Debug)]
pub(crate) struct LoadArgs {
    /// The cluster file (or `--profile`).
    #[command(flatten)]
    pub target: super::flags::Target,
    /// Load this archive (`docker save` tarball or OCI archive) instead of asking the local Docker engine.
    #[arg(long)]
    pub archive: Option<PathBuf>,
    /// Only these nodes (names from the cluster file), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Change nothing: print every upload, import and check per node (no node is contacted, no
    /// archive is saved; the local Docker engine is asked whether it has the images).
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: the plan as text or one document.
    #[command(flatten)]
    pub output: super::flags::PlanOutput,
    /// Images, exactly as the pod specs name them (e.g. `cka-api:v4`). With `--archive`, the images
    /// to check for after the import (optional).
    pub images: Vec<String>,
}

/// Runs the command (exit codes in the module doc).
pub(crate) fn run(cmd: Command) -> miette::Result<ExitCode> {
    match cmd {
        Command::Load(a) => load(a),
    }
}

fn load(args: LoadArgs) -> miette::Result<ExitCode> {
    let format = args.output.output;
    if let Some(code) = refuse_nothing(&args) {
        return Ok(code);
    }
    let cluster = match args.target.load(format) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let _lock = match super::flags::lock_cluster(format, &cluster, "image load", args.dry_run) {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    let opts = Options {
        images: args.images,
        archive: args.archive,
        nodes: args.nodes,
        known_hosts: args.known_hosts,
        dry_run: args.dry_run,
    };
    let sink = |l: &StepLine| {
        if format.is_structured() && l.failed() {
            eprintln!("{l}");
        } else if !opts.dry_run || l.failed() {
            println!("{l}");
        }
    };
    let report = match image_load::run(&cluster, &opts, &sink) {
        Ok(r) => r,
        Err(e) => {
            super::flags::print_refusal(format, cluster.name(), &format!("image load: {e}"));
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    print_outcome(format, &cluster, opts.dry_run, &report)
}

/// No image and no archive: refused before the file is read, as before the phases existed (the
/// document names the cluster as given: the profile or the file). `Some(2)` then.
fn refuse_nothing(args: &LoadArgs) -> Option<ExitCode> {
    if args.archive.is_some() || !args.images.is_empty() {
        return None;
    }
    let named = args
        .target
        .profile
        .clone()
        .unwrap_or_else(|| args.target.file.display().to_string());
    let text = format!("image load: {}", image_load::Refused::Nothing);
    super::flags::print_refusal(args.output.output, &named, &text);
    Some(ExitCode::from(crate::EXIT_INVALID))
}

/// Prints the report (one document with `-o json|yaml`, the plan of a dry run, why it stopped or
/// how many nodes failed) and gives the exit code: 1 when it stopped or a node failed.
fn print_outcome(
    format: super::flags::Format,
    cluster: &ValidCluster,
    dry_run: bool,
    report: &RunReport,
) -> miette::Result<ExitCode> {
    if format.is_structured() {
        return super::plan::print_report_document(format, cluster.name(), report);
    }
    if let Some(why) = &report.stopped {
        eprintln!("image load: {why}");
        return Ok(ExitCode::FAILURE);
    }
    if dry_run {
        let header = format!(
            "clusterctl image load --dry-run: cluster `{}`: nothing is changed (no node is contacted)",
            cluster.name()
        );
        super::plan::print_dry_run(&header, &report.nodes, &report.plan, report.changes);
    }
    let failed = report.failures();
    if failed > 0 {
        eprintln!(
            "image load: {failed} of {} node(s) failed",
            report.nodes.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
