//! `clusterctl etcd snapshot save|restore`: etcd backup and restore of the cluster's stacked etcd,
//! through `clusterctl_phases::etcd::{save, restore}::run` (this file parses the arguments and prints
//! the result).
//!
//! `save -f FILE snap.db [--overwrite]`: a snapshot from the first control plane whose etcd
//! gives one, written 0600 and reported with `etcdutl snapshot status` (hash, revision, keys, size)
//! and its sha256; its content is never printed. An existing output is refused (exit 2) unless
//! `--overwrite`. `restore -f FILE snap.db`: the snapshot's integrity checked here first (a damaged
//! file is refused, exit 2, nothing contacted), then kubeadm's restore on every control plane. Both
//! take `--dry-run` (contacts nothing, prints the plan) and `-o json|yaml` (one document: `result`
//! `ok`, `failed` or `invalid`). `restore` takes the cluster's lock first (as `up`; not with
//! `--dry-run`); `save` only reads the cluster and never waits for it. Exit codes: 0 done, 1 a step
//! failed, 2 refused input, 3 (restore) another clusterctl is changing the cluster.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clusterctl_phases::etcd::{restore, save};
use clusterctl_phases::{PlainReporter, QuietReporter, Reporter};

use super::flags::{DocResult, Format};

/// Subcommands of `clusterctl etcd`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Command {
    /// etcd snapshots: save one from the cluster, restore the cluster from one.
    #[command(subcommand)]
    Snapshot(Snapshot),
}

/// Subcommands of `clusterctl etcd snapshot`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Snapshot {
    /// Save a snapshot of the cluster's etcd from a healthy member (written 0600).
    Save(SaveArgs),
    /// Restore every control plane's etcd member from a snapshot (kubeadm's procedure).
    Restore(RestoreArgs),
}

/// What both subcommands share.
#[derive(clap::Args, Debug)]
pub(crate) struct Common {
    /// The cluster file, or `--profile`.
    #[command(flatten)]
    pub target: super::flags::Target,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Print every check and the output of every command.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Change nothing: contact no node, print every step the command would take.
    #[arg(long)]
    pub dry_run: bool,
    /// The result as text, or as one document (`json`, `yaml`).
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: Format,
}

/// Arguments of `clusterctl etcd snapshot save`.
#[derive(clap::Args, Debug)]
pub(crate) struct SaveArgs {
    #[command(flatten)]
    pub common: Common,
    /// Where to write the snapshot (mode 0600; `-o/--output` is the output format, as everywhere).
    #[arg(value_name = "SNAPSHOT")]
    pub snapshot: PathBuf,
    /// Replace the output when it exists (refused otherwise).
    #[arg(long)]
    pub overwrite: bool,
}

/// Arguments of `clusterctl etcd snapshot restore`.
#[derive(clap::Args, Debug)]
pub(crate) struct RestoreArgs {
    #[command(flatten)]
    pub common: Common,
    /// The snapshot (from `clusterctl etcd snapshot save` or `etcdctl snapshot save`).
    pub snapshot: PathBuf,
    /// How long each wait may take (control planes stopped, etcd healthy, API ready, Nodes Ready):
    /// seconds (`300`) or with a unit (`5m`).
    #[arg(long, default_value = "300", value_parser = super::flags::seconds)]
    pub timeout: u64,
}

/// Runs the command (see the module documentation for exit codes).
pub(crate) fn run(cmd: Command) -> miette::Result<ExitCode> {
    match cmd {
        Command::Snapshot(Snapshot::Save(a)) => save_cmd(a),
        Command::Snapshot(Snapshot::Restore(a)) => restore_cmd(a),
    }
}

/// Progress on stderr, except in a quiet dry run.
fn reporter(c: &Common) -> Arc<dyn Reporter> {
    if c.dry_run && !c.verbose {
        Arc::new(QuietReporter)
    } else {
        Arc::new(PlainReporter::stderr(c.verbose))
    }
}

fn save_cmd(a: SaveArgs) -> miette::Result<ExitCode> {
    let c = &a.common;
    let cluster = match c.target.load(c.output) {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    let name = cluster.name();
    let opts = save::Options {
        output: a.snapshot.clone(),
        overwrite: a.overwrite,
        known_hosts: c.known_hosts.clone(),
        verbose: c.verbose,
        dry_run: c.dry_run,
    };
    let report = match save::run(&cluster, &opts, reporter(c)) {
        Ok(r) => r,
        Err(e) if e.refused() => {
            super::flags::print_refusal(c.output, name, &format!("etcd snapshot save: {e}"));
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
        Err(e) => {
            super::flags::print_error(c.output, name, &format!("etcd snapshot save: {e}"));
            return Ok(ExitCode::FAILURE);
        }
    };
    if c.dry_run {
        return dry_run(c, name, "save", &report.nodes, &report.plan, report.changes);
    }
    let Some(s) = &report.saved else {
        return Ok(ExitCode::FAILURE);
    };
    let doc = serde_json::json!({
        "cluster": name,
        "result": DocResult::Ok,
        "node": s.node,
        "output": s.output,
        "bytes": s.bytes,
        "sha256": s.sha256,
        "status": s.status,
        "tried": report.tried.iter().map(|(n, w)| serde_json::json!({"node": n, "error": w})).collect::<Vec<_>>(),
    });
    if !c.output.print(&doc)? {
        println!(
            "etcd snapshot of cluster `{name}` saved from {} to {} (mode 0600, {} bytes, sha256 {})",
            s.node,
            s.output.display(),
            s.bytes,
            s.sha256
        );
        println!("etcdutl snapshot status: {}", s.status);
    }
    Ok(ExitCode::SUCCESS)
}

fn restore_cmd(a: RestoreArgs) -> miette::Result<ExitCode> {
    let c = &a.common;
    let cluster = match c.target.load(c.output) {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    // A restore stops and rewrites every control plane: one writer at a time (not for a dry run).
    let _lock =
        match super::flags::lock_cluster(c.output, &cluster, "etcd snapshot restore", c.dry_run) {
            Ok(l) => l,
            Err(code) => return Ok(code),
        };
    let name = cluster.name();
    let opts = restore::Options {
        snapshot: a.snapshot.clone(),
        known_hosts: c.known_hosts.clone(),
        timeout: Duration::from_secs(a.timeout),
        verbose: c.verbose,
        dry_run: c.dry_run,
    };
    let report = match restore::run(&cluster, &opts, reporter(c)) {
        Ok(r) => r,
        Err(e) if e.refused() => {
            super::flags::print_refusal(c.output, name, &format!("etcd snapshot restore: {e}"));
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
        Err(e) => {
            super::flags::print_error(c.output, name, &format!("etcd snapshot restore: {e}"));
            return Ok(ExitCode::FAILURE);
        }
    };
    print_restore(c, name, &a.snapshot, &report)
}

/// Prints how the restore went: the failure and how to resume, the dry run's plan, or the result
/// (text, or one document with `-o`).
fn print_restore(
    c: &Common,
    name: &str,
    snapshot: &std::path::Path,
    report: &restore::Report,
) -> miette::Result<ExitCode> {
    if let Some((error, hint)) = &report.stopped {
        return print_stopped(c, name, report, error, hint);
    }
    if c.dry_run {
        return dry_run(
            c,
            name,
            "restore",
            &report.nodes,
            &report.plan,
            report.changes,
        );
    }
    let members: Vec<String> = report
        .members
        .iter()
        .map(|(n, u)| format!("{n}={u}"))
        .collect();
    let doc = serde_json::json!({
        "cluster": name,
        "result": DocResult::Ok,
        "snapshot": snapshot,
        "sha256": report.sha256,
        "changes": report.changes,
        "members": members,
        "previousData": format!("<data-dir>/clusterctl-restore/{}/old-member", report.id),
    });
    if !c.output.print(&doc)? {
        if report.changes == 0 {
            println!(
                "etcd of cluster `{name}` was already restored from {} (sha256 {}): nothing changed",
                snapshot.display(),
                report.sha256
            );
        } else {
            println!(
                "etcd of cluster `{name}` restored from {} (sha256 {}); members: {}",
                snapshot.display(),
                report.sha256,
                members.join(", ")
            );
            println!(
                "each member's previous data is kept in <data-dir>/clusterctl-restore/{}/old-member",
                report.id
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A restore that stopped: the error, how to resume, and the plan document with `-o`.
fn print_stopped(
    c: &Common,
    name: &str,
    report: &restore::Report,
    error: &clusterctl_phases::RunError,
    hint: &str,
) -> miette::Result<ExitCode> {
    let text = format!("etcd snapshot restore failed:\n{error}");
    if c.output.is_structured() {
        eprintln!("{hint}");
        return super::plan::print_document(
            c.output,
            name,
            &[],
            &report.plan,
            report.changes,
            Some(text),
        );
    }
    super::flags::print_error(c.output, name, &text);
    eprintln!("{hint}");
    Ok(ExitCode::FAILURE)
}

/// Prints a dry run's plan as text or as the plan document.
fn dry_run(
    c: &Common,
    name: &str,
    what: &str,
    nodes: &[clusterctl_spec::ValidNode],
    plan: &[clusterctl_phases::PlanEntry],
    changes: usize,
) -> miette::Result<ExitCode> {
    if c.output.is_structured() {
        return super::plan::print_document(c.output, name, &[], plan, changes, None);
    }
    let header = format!(
        "clusterctl etcd snapshot {what} --dry-run: cluster `{name}`: nothing is changed (no node is contacted)"
    );
    super::plan::print_dry_run(&header, nodes, plan, changes);
    Ok(ExitCode::SUCCESS)
}
