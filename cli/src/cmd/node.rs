//! `clusterctl node join|remove`: adding nodes declared in the cluster file to a running cluster, and
//! taking one out. `join` runs the phases of `up` restricted to the named nodes
//! (`clusterctl_phases::node_join`); `remove` drains through the API, resets the node with the rendered
//! ResetConfiguration and deletes its Node object (`node/remove.rs`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clusterctl_phases::connect::{self, ConnectOptions};
use clusterctl_phases::up::api::ApiAccess;
use clusterctl_phases::up::from_file::{self, SpecOptions};
use clusterctl_phases::up::launch::{launch, Launch};
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
    if let Some(code) = args.run.refuse_unknown_checks() {
        return Ok(code);
    }
    let format = args.output.output;
    let cluster = match args.target.load(format) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    // Errors and refusals go out as the document `-o` asks for (and as text on stderr).
    let fail =
        |e: String| super::flags::print_error(format, cluster.name(), &format!("node join: {e}"));
    let refuse =
        |e: String| super::flags::print_refusal(format, cluster.name(), &format!("node join: {e}"));
    let options = SpecOptions {
        file: args.target.path().map(PathBuf::from),
        ready_timeout: std::time::Duration::from_secs(args.run.ready_timeout),
        ignore_preflight: args.run.ignore_preflight.clone(),
        ..SpecOptions::default()
    };
    let mut spec = from_file::spec(&cluster, &options);
    // Refuse names the file does not declare before contacting anything.
    if let Err(e) = clusterctl_phases::node_join::engine_nodes(&spec.nodes, &args.nodes, &[]) {
        if !matches!(
            e,
            clusterctl_phases::node_join::JoinRefused::AlreadyJoined(_)
        ) {
            refuse(e.to_string());
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    }
    // A dry run still reaches the nodes (read only): the join needs the running cluster's state.
    let reach = ConnectOptions {
        dry_run: args.dry_run,
        probe: args.dry_run,
        known_hosts: args.run.known_hosts.as_deref(),
    };
    let progress = super::flags::connect_progress;
    let (transports, provider_plan) = match connect::connect(&cluster, &mut spec, reach, &progress)
    {
        Ok(c) => (c.transports, c.provider_plan),
        Err(e) => {
            fail(e.to_string());
            return Ok(ExitCode::FAILURE);
        }
    };
    if args.dry_run && !format.is_structured() {
        println!(
            "clusterctl node join --dry-run: {} into cluster `{}`: nothing is changed (nodes and API read only)",
            args.nodes.join(", "),
            spec.cluster
        );
        super::plan::print_join_provider_plan(
            &cluster,
            &spec.cluster,
            &args.nodes,
            &|n| transports.contains_key(n),
            &provider_plan,
        );
    }
    let first_cp = cluster.first_control_plane().name.clone();
    let Some(cp) = transports.get(&first_cp).cloned() else {
        fail(format!(
            "the first control plane {first_cp} cannot be reached"
        ));
        return Ok(ExitCode::FAILURE);
    };
    let mode = Mode {
        dry_run: args.dry_run,
        probe: args.dry_run,
        fix: args.run.fix,
        verbose: args.run.verbose,
    };
    // A dry run prints its plan, not per-step progress (unless --verbose).
    let reporter: Arc<dyn Reporter> = if args.dry_run && !args.run.verbose {
        Arc::new(clusterctl_phases::QuietReporter)
    } else {
        Arc::new(PlainReporter::stderr(args.run.verbose))
    };
    // The Nodes registered now, through the API as the phases of `up` reach it (the first control
    // plane's admin.conf, kept in memory); the same client serves the phases below.
    let api = ApiAccess::kube_via(clusterctl_phases::node_containers::local_api(
        &cluster, false,
    ));
    let registered = {
        let Some(info) = spec.nodes.iter().find(|n| n.name == first_cp).cloned() else {
            refuse("the cluster file has no control plane".into());
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        };
        match clusterctl_phases::node_join::registered(&api, info, cp, mode, reporter.clone()) {
            Ok(names) => names,
            Err(e) => {
                fail(format!("cannot list the cluster's Nodes: {e}"));
                return Ok(ExitCode::FAILURE);
            }
        }
    };
    let nodes =
        match clusterctl_phases::node_join::engine_nodes(&spec.nodes, &args.nodes, &registered) {
            Ok(n) => n,
            Err(e) => {
                refuse(e.to_string());
                return Ok(ExitCode::from(crate::EXIT_INVALID));
            }
        };
    let how = Launch {
        mode,
        parallel: args.run.parallel,
        skip: Vec::new(),
        only: Vec::new(),
        reporter: reporter.clone(),
    };
    let phases = clusterctl_phases::node_join::phases(&spec);
    let (summary, result) = launch(
        &cluster,
        &spec,
        &phases,
        nodes.clone(),
        transports,
        api,
        &how,
    );
    if format.is_structured() {
        let error = result.as_ref().err().map(|e| e.to_string());
        return super::plan::print_document(
            format,
            &spec.cluster,
            &summary.plan,
            summary.total_changes(),
            error,
        );
    }
    if args.dry_run {
        let width = summary
            .plan
            .iter()
            .map(|e| e.phase.len())
            .max()
            .unwrap_or(10);
        let mut shown = nodes.clone();
        if !shown.iter().any(|n| n.name == first_cp) {
            if let Some(cp) = spec.nodes.iter().find(|n| n.name == first_cp) {
                shown.insert(0, cp.clone());
            }
        }
        super::plan::print_entries(&super::plan::groups(&shown), &summary.plan, width);
        if let Err(e) = result {
            eprintln!("node join (dry run) stopped:\n{e}");
            return Ok(ExitCode::FAILURE);
        }
        println!(
            "{} change(s) planned; nothing was changed (dry run).",
            summary.total_changes()
        );
        return Ok(ExitCode::SUCCESS);
    }
    match result {
        Ok(()) => {
            reporter.note(&format!(
                "node join: {} joined cluster `{}` ({} change(s))",
                args.nodes.join(", "),
                spec.cluster,
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
