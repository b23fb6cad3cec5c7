//! `clusterctl node remove -f FILE NODE [--dry-run [-o json|yaml]]`: takes one node out of the cluster through
//! `clusterctl_phases::node_remove` (drain through the API, the node reset as `destroy` resets one,
//! the etcd member of a control plane checked on the first control plane, the Node object deleted),
//! printing each step's line as it ends. `--dry-run` prints the plan and contacts neither the nodes
//! nor the API. The first control plane is refused (joins and credentials go through it: put another
//! control plane first in the file before removing it). Exit codes: 0 removed (or planned), 1 a step
//! failed (named), 2 invalid input or a refused node.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clusterctl_phases::node_remove::{self, Options, Refused};
use clusterctl_phases::steps::StepLine;

/// Arguments of `clusterctl node remove`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file (it must still declare the node, for its address), or `--profile`.
    #[command(flatten)]
    pub target: crate::cmd::flags::Target,
    /// The node to remove.
    pub node: String,
    /// Seconds the drain may take (evictions blocked by a PodDisruptionBudget are retried until then).
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Seconds between retries of a blocked eviction (and between checks that evicted pods are gone).
    #[arg(long, default_value_t = 5)]
    pub retry_interval: u64,
    /// The kubeconfig to use (default: the cluster's context in `$KUBECONFIG`/`~/.kube/config`, else
    /// admin.conf from the first control plane).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Change nothing: print every API call, command and file write the removal would make (neither
    /// the nodes nor the API are contacted).
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: the plan as text or one document.
    #[command(flatten)]
    pub output: crate::cmd::flags::PlanOutput,
}

/// Prints why `node remove` stopped before any step and gives the exit code: 1 when the API could
/// not be read, 2 for a refused request.
fn refused(format: crate::cmd::flags::Format, name: &str, e: &Refused) -> ExitCode {
    let text = format!("node remove: {e}");
    match e {
        Refused::Api(_) => {
            crate::cmd::flags::print_error(format, name, &text);
            ExitCode::FAILURE
        }
        _ => {
            crate::cmd::flags::print_refusal(format, name, &text);
            ExitCode::from(crate::EXIT_INVALID)
        }
    }
}

/// Runs the command (exit codes in the module doc).
pub(super) fn run(args: Args) -> miette::Result<ExitCode> {
    let format = args.output.output;
    let cluster = match args.target.load(format) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let _lock =
        match super::super::flags::lock_cluster(format, &cluster, "node remove", args.dry_run) {
            Ok(l) => l,
            Err(code) => return Ok(code),
        };
    let opts = Options {
        node: args.node.clone(),
        timeout: Duration::from_secs(args.timeout),
        retry_interval: Duration::from_secs(args.retry_interval.max(1)),
        kubeconfig: args.kubeconfig,
        known_hosts: args.known_hosts,
        dry_run: args.dry_run,
    };
    let dry_run = opts.dry_run;
    let sink = move |l: &StepLine| {
        if format.is_structured() && l.failed() {
            eprintln!("{l}");
        } else if !dry_run || l.failed() {
            println!("{l}");
        }
    };
    let report = match node_remove::run(&cluster, &opts, &sink) {
        Ok(r) => r,
        Err(e) => return Ok(refused(format, cluster.name(), &e)),
    };
    let name = &args.node;
    if format.is_structured() {
        return super::super::plan::print_report_document(format, cluster.name(), &report);
    }
    if let Some(why) = &report.stopped {
        println!("{why}");
        return Ok(ExitCode::FAILURE);
    }
    let failures = report.failures();
    if dry_run {
        let header = format!(
            "clusterctl node remove --dry-run: {name} from cluster `{}`: nothing is changed (neither the nodes nor the API are contacted)",
            cluster.name()
        );
        super::super::plan::print_dry_run(&header, &report.nodes, &report.plan, report.changes);
    } else if failures == 0 {
        println!(
            "node remove: {name} removed from cluster {}; delete it from the cluster file",
            cluster.name()
        );
    } else {
        println!("node remove: {name}: {failures} step(s) failed (see above); run it again after fixing them");
    }
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
