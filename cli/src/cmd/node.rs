//! `clusterctl node join|remove`: adding nodes declared in the cluster file to a running cluster, and
//! taking one out. `join` runs the phases of `up` restricted to the named nodes
//! (`clusterctl_phases::node_join`); `remove` drains through the API, resets the node with the rendered
//! ResetConfiguration and deletes its Node object (`node/remove.rs`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clusterctl_phases::node_join::{self, JoinError, JoinOptions, Joined};
use clusterctl_phases::{Mode, PlainReporter, Reporter};

use super::flags::NodeRunArgs;

mod remove;

/// Subcommands of `clusterctl node`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Command {
    /// Join nodes that are in the cluster file but not yet in the cluster (control planes one at a
    /// time, workers in parallel), with their labels, taints and preloaded images.
    Join(JoinArgs),
    /// Drain a node through the API, reset it (`kubeadm reset` with the rendered ResetConfiguration)
    /// and delete its Node object.
    Remove(remove::Args),
}

/// Arguments of `clusterctl node join`.
#[derive(clap::Args, Debug)]
pub(crate) struct JoinArgs {
    /// The cluster file (it must already declare the nodes to join), or `--profile`.
    #[command(flatten)]
    pub target: super::flags::Target,
    /// The nodes to join (names from the file).
    #[arg(required = true)]
    pub nodes: Vec<String>,
    /// How nodes are reached and checked (as for `up`; fixes apply to the joining nodes).
    #[command(flatten)]
    pub run: NodeRunArgs,
    /// Change nothing: reach the nodes and the API read-only and print every check, command and
    /// file write the join would make, per node.
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: the plan as text or one document.
    #[command(flatten)]
    pub output: super::flags::PlanOutput,
}

/// Runs the command. Exit codes: 0 done (or planned, with `--dry-run`), 1 a phase or step failed, 2
/// invalid input or a refused node.
pub(crate) fn run(cmd: Command) -> miette::Result<ExitCode> {
    match cmd {
        Command::Join(a) => join(a),
        Command::Remove(a) => remove::run(a),
    }
}

fn join(args: JoinArgs) -> miette::Result<ExitCode> {
    let format = args.output.output;
    if let Some(code) = args.run.refuse_unknown_checks(format, &args.target.name()) {
        return Ok(code);
    }
    let cluster = match args.target.load(format) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let _lock = match super::flags::lock_cluster(format, &cluster, "node join", args.dry_run) {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    // Errors and refusals go out as the document `-o` asks for (and as text on stderr).
    let stopped = |e: JoinError| {
        let text = format!("node join: {e}");
        if e.is_refusal() {
            super::flags::print_refusal(format, cluster.name(), &text);
            ExitCode::from(crate::EXIT_INVALID)
        } else {
            super::flags::print_error(format, cluster.name(), &text);
            ExitCode::FAILURE
        }
    };
    let reporter = reporter(&args);
    let options = options(&args, reporter.clone());
    let prepared = match node_join::prepare(&cluster, options, &super::flags::connect_progress) {
        Ok(p) => p,
        Err(e) => return Ok(stopped(e)),
    };
    // The node containers a docker-provider join creates (a dry run's provider steps).
    let provider = if args.dry_run {
        super::plan::join_provider_plan(
            &cluster,
            prepared.cluster_name(),
            &args.nodes,
            &|n| prepared.reached(n),
            &prepared.provider_plan,
        )
    } else {
        Vec::new()
    };
    if args.dry_run && !format.is_structured() {
        println!(
            "clusterctl node join --dry-run: {} into cluster `{}`: nothing is changed (nodes and API read only)",
            args.nodes.join(", "),
            prepared.cluster_name()
        );
        super::plan::print_provider_plan(&provider);
    }
    let joined = match prepared.run() {
        Ok(j) => j,
        Err(e) => return Ok(stopped(e)),
    };
    report(&args, format, &provider, &joined, reporter.as_ref())
}

/// A dry run's plan per node (the engine's nodes: the first control plane, then the joining ones)
/// and its last line; the exit code.
fn print_dry_run(args: &JoinArgs, joined: &Joined) -> ExitCode {
    let summary = &joined.summary;
    let width = summary
        .plan
        .iter()
        .map(|e| e.phase.len())
        .max()
        .unwrap_or(10);
    super::plan::print_entries(
        &super::plan::groups(&joined.nodes),
        &summary.plan,
        width,
        args.run.verbose,
    );
    if let Err(e) = &joined.result {
        eprintln!("node join (dry run) stopped:\n{e}");
        return ExitCode::FAILURE;
    }
    println!(
        "{} change(s) planned; nothing was changed (dry run).",
        summary.total_changes()
    );
    ExitCode::SUCCESS
}

/// Where progress goes: a dry run prints its plan, not per-step progress (unless `--verbose`).
fn reporter(args: &JoinArgs) -> Arc<dyn Reporter> {
    if args.dry_run && !args.run.verbose {
        Arc::new(clusterctl_phases::QuietReporter)
    } else {
        Arc::new(PlainReporter::stderr(args.run.verbose))
    }
}

/// The join's options from the command line, progress to `reporter`.
fn options(args: &JoinArgs, reporter: Arc<dyn Reporter>) -> JoinOptions<'_> {
    JoinOptions {
        file: args.target.path().map(PathBuf::from),
        nodes: args.nodes.clone(),
        mode: Mode {
            dry_run: args.dry_run,
            probe: args.dry_run,
            fix: args.run.fix,
            verbose: args.run.verbose,
            diff: false,
        },
        parallel: args.run.parallel,
        ready_timeout: std::time::Duration::from_secs(args.run.ready_timeout),
        ignore_preflight: args.run.ignore_preflight.clone(),
        known_hosts: args.run.known_hosts.as_deref(),
        reporter,
    }
}

/// Prints what the join did (or, with `--dry-run`, planned, after the `provider` steps of a
/// docker-provider dry run); the exit code.
fn report(
    args: &JoinArgs,
    format: super::flags::Format,
    provider: &[String],
    joined: &Joined,
    reporter: &dyn Reporter,
) -> miette::Result<ExitCode> {
    let summary = &joined.summary;
    if format.is_structured() {
        let error = joined.result.as_ref().err().map(|e| e.to_string());
        return super::plan::print_document(
            format,
            &joined.cluster,
            provider,
            &summary.plan,
            summary.total_changes(),
            error,
        );
    }
    if args.dry_run {
        return Ok(print_dry_run(args, joined));
    }
    match &joined.result {
        Ok(()) => {
            reporter.note(&format!(
                "node join: {} joined cluster `{}` ({} change(s))",
                args.nodes.join(", "),
                joined.cluster,
                summary.total_changes()
            ));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("node join failed:\n{e}");
            eprintln!(
                "Fix the cause and run `clusterctl node join` again: finished phases are recorded and skipped."
            );
            Ok(ExitCode::FAILURE)
        }
    }
}
