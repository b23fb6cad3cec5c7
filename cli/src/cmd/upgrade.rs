//! `clusterctl upgrade -f FILE --to VERSION`: upgrades the cluster's Kubernetes by one step (a higher
//! patch, or the next minor), the way the kubeadm upgrade guide does it, through
//! `clusterctl_phases::upgrade::run` (this file parses the arguments and prints the report): kubeadm on every node first, an etcd snapshot on the first control
//! plane, then one node at a time — drain through the API, `kubeadm upgrade apply` (first control plane)
//! or `kubeadm upgrade node`, kubelet and kubectl, uncordon, wait Ready.
//!
//! `--to` must be an exact version equal to the file's `spec.kubernetesVersion` (edit the file first:
//! the file stays the description of the cluster). The running versions — the control plane's from
//! the kube-apiserver static pod on the first control plane, each node's kubelet from the API — must be
//! at most one minor below and never above it. Kubeconfig: `--kubeconfig PATH` (its context named after
//! the cluster, else its current context), else `/etc/kubernetes/admin.conf` read from the first control
//! plane (kept 0600 in the local cache). Exit codes: 0 upgraded (or already at the version), 1 a step
//! failed (the node it failed on stays cordoned; running the same command again resumes) or the
//! air-gap bundle is refused, 2 invalid input or a refused version.
//!
//! `--dry-run` changes nothing: the same checks run (nodes and API read only), and every command,
//! file write and API change each step would make is printed per node, in upgrade order.
//!
//! When the file names an air-gap bundle (`airgap.bundle`), it is verified completely before any node
//! is reached, and it must be this cluster's and carry the images of `--to` (made with `--to` in
//! `airgap.extraVersions`, or for `--to` itself); otherwise nothing is touched. Without a registry
//! mirror each node then gets the images of `--to` its role needs from the bundle (`upgrade/images`,
//! before any node is drained); with a mirror the bundle is pushed to it first (`upgrade/mirror`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clusterctl_phases::upgrade::version::Version;
use clusterctl_phases::upgrade::{self, version, ClusterSource, Report, UpgradeError};
use clusterctl_phases::{PlainReporter, QuietReporter, Reporter};
use clusterctl_spec::ValidCluster;

/// Arguments of `clusterctl upgrade`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file (its `spec.kubernetesVersion` must already say `--to`), or `--profile`.
    #[command(flatten)]
    pub target: super::flags::Target,
    /// The exact target version, e.g. `1.35.0`: a higher patch, or a patch of the next minor.
    #[arg(long = "to")]
    pub to: String,
    /// The kubeconfig to reach the API with (default: admin.conf of the first control plane).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// How long to wait for a node's pods to be evicted: seconds (`300`) or with a unit (`5m`).
    #[arg(long, default_value = "300", value_parser = super::flags::seconds)]
    pub drain_timeout: u64,
    /// How long to wait for a node to be Ready with the new kubelet: seconds (`600`) or with a unit
    /// (`10m`).
    #[arg(long, default_value = "600", value_parser = super::flags::seconds)]
    pub ready_timeout: u64,
    /// Print every check and the output of every command.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Change nothing: reach the nodes and the API read-only (the version checks, the bundle check,
    /// each step's own checks) and print, per node in upgrade order, every command, file write and
    /// API change the upgrade would make.
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: the plan as text or one document.
    #[command(flatten)]
    pub output: super::flags::PlanOutput,
}

/// Runs the command (see the module documentation for exit codes).
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    let out = args.output.output;
    let cluster = match args.target.load(out) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let to = match version::parse(&args.to) {
        Ok(v) => v,
        Err(e) => {
            let error = format!("upgrade: --to {e}");
            super::flags::print_refusal(out, cluster.name(), &error);
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    let _lock = match super::flags::lock_cluster(out, &cluster, "upgrade", args.dry_run) {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    // A dry run prints its plan, not per-step progress (unless --verbose).
    let reporter: Arc<dyn Reporter> = if args.dry_run && !args.verbose {
        Arc::new(QuietReporter)
    } else {
        Arc::new(PlainReporter::stderr(args.verbose))
    };
    match upgrade::run(&cluster, &options(&args, to.clone()), reporter.clone()) {
        Ok(report) => finish(&args, &cluster, &to, &report, reporter.as_ref()),
        Err(e) => Ok(refused_or_failed(out, cluster.name(), &e)),
    }
}

/// The library's options from the arguments.
fn options(args: &Args, to: Version) -> upgrade::Options {
    upgrade::Options {
        to,
        named: match &args.target.profile {
            Some(p) => ClusterSource::Profile(p.clone()),
            None => ClusterSource::File(args.target.file.clone()),
        },
        kubeconfig: args.kubeconfig.clone(),
        known_hosts: args.known_hosts.clone(),
        drain_timeout: Duration::from_secs(args.drain_timeout),
        ready_timeout: Duration::from_secs(args.ready_timeout),
        verbose: args.verbose,
        dry_run: args.dry_run,
    }
}

/// Prints an error from before the phases ran: a refusal (exit 2) or a failure (exit 1).
fn refused_or_failed(out: super::flags::Format, cluster: &str, e: &UpgradeError) -> ExitCode {
    if e.refused() {
        super::flags::print_refusal(out, cluster, &e.to_string());
        ExitCode::from(crate::EXIT_INVALID)
    } else {
        super::flags::print_error(out, cluster, &e.to_string());
        ExitCode::FAILURE
    }
}

/// Prints what the phases did: the failure and how to resume, the document `-o json|yaml` asks
/// for, the dry run's plan, or the closing note.
fn finish(
    args: &Args,
    cluster: &ValidCluster,
    to: &Version,
    report: &Report,
    reporter: &dyn Reporter,
) -> miette::Result<ExitCode> {
    let (out, name) = (args.output.output, cluster.name());
    let plan = &report.plan;
    if let Some(stopped) = &report.stopped {
        if out.is_structured() {
            let error = Some(format!("upgrade failed: {}", stopped.error));
            return super::plan::print_document(out, name, &[], plan, report.changes, error);
        }
        super::flags::print_error(out, name, &format!("upgrade failed:\n{}", stopped.error));
        eprintln!("{}", stopped.hint);
        return Ok(ExitCode::FAILURE);
    }
    if out.is_structured() {
        return super::plan::print_document(out, name, &[], plan, report.changes, None);
    }
    if args.dry_run {
        let header = format!(
            "clusterctl upgrade --dry-run: cluster `{name}` to v{to}: nothing is changed (nodes and API read only)"
        );
        super::plan::print_dry_run(&header, &report.order, plan, report.changes);
    } else if report.changes == 0 {
        reporter.note(&format!(
            "upgrade: cluster `{name}` is already at v{to}; nothing changed"
        ));
    } else {
        reporter.note(&format!(
            "upgrade: cluster `{name}` upgraded to v{to} ({} node(s), {} change(s))",
            report.order.len(),
            report.changes
        ));
    }
    Ok(ExitCode::SUCCESS)
}
