//! `clusterctl status -f FILE|--profile NAME [-o json|yaml] [--kubeconfig PATH]`: nodes (role, version, Ready, the reason
//! when not Ready), labels the file declares that a node has lost (e.g. after a re-create), and stuck
//! pods with the layer they are stuck at and what to look at next (see `clusterctl_kubeapi::diagnose`).
//! For pods that cannot pull their image, the node runtimes are asked which nodes hold it (`ctr -n
//! k8s.io images ls -q`, or `crictl images` for CRI-O) over the transports, since a Node's status lists at
//! most 50 images. The report is `clusterctl_phases::status::run`'s; this module prints it.
//!
//! Kubeconfig: `--kubeconfig PATH` (its context named after the cluster, else its current context);
//! else the context named after the cluster in `$KUBECONFIG`/`~/.kube/config`; else
//! `/etc/kubernetes/admin.conf` fetched from the first control plane (kept 0600 in the local cache).
//! Exit codes: 0 the report was printed, 1 the API could not be read, 2 invalid input.

use std::path::PathBuf;
use std::process::ExitCode;

use clusterctl_phases::status::StatusReport;
use clusterctl_spec::ValidCluster;

/// Arguments of `clusterctl status`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file (or `--profile`).
    #[command(flatten)]
    pub target: super::flags::Target,
    /// Output format: `text`, or the report as one document (`json`, `yaml`: `result` `ok` or
    /// `degraded`; an error as `{cluster, result: failed, error}`, invalid input as `{cluster,
    /// result: invalid, error, diagnostics}`).
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: super::flags::Format,
    /// The kubeconfig to use (default: the cluster's context in `$KUBECONFIG`/`~/.kube/config`, else
    /// admin.conf from the first control plane).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
}

/// Runs the command (exit codes in the module doc).
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    let cluster = match args.target.load(args.output) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    match clusterctl_phases::status::run(
        &cluster,
        args.kubeconfig.as_deref(),
        args.known_hosts.as_deref(),
    ) {
        Ok(r) => {
            if !args.output.print(&r)? {
                print_text(&cluster, &r);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            super::flags::print_error(args.output, cluster.name(), &format!("status: {e}"));
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The report as text: the cluster line, the node table, missing nodes, drift, stuck pods.
fn print_text(cluster: &ValidCluster, r: &StatusReport) {
    let d = &r.diagnosis;
    let ready = d.nodes.iter().filter(|n| n.ready).count();
    println!(
        "cluster {} (file: Kubernetes {}, {} node(s)); {} of {} registered node(s) Ready",
        r.cluster,
        cluster.version_info().tag(),
        cluster.nodes().len(),
        ready,
        d.nodes.len()
    );
    let w = d
        .nodes
        .iter()
        .map(|n| n.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let rw = d
        .nodes
        .iter()
        .map(|n| n.role.len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "\n{:w$}  {:rw$}  {:8}  {:5}  REASON",
        "NODE", "ROLE", "VERSION", "READY"
    );
    for n in &d.nodes {
        let mut reason = n.reason.clone().unwrap_or_default();
        if n.unschedulable {
            reason = if reason.is_empty() {
                "cordoned".into()
            } else {
                format!("cordoned; {reason}")
            };
        }
        println!(
            "{:w$}  {:rw$}  {:8}  {:5}  {reason}",
            n.name,
            n.role,
            n.version,
            if n.ready { "True" } else { "False" }
        );
    }
    for m in &r.missing_nodes {
        println!(
            "{m:w$}  (in the file, not registered: run `clusterctl up` or `clusterctl node join`)"
        );
    }
    print_drift(r);
    print_stuck(&d.stuck);
}

/// The declared labels and taints the nodes do not carry.
fn print_drift(r: &StatusReport) {
    if !r.label_drift.is_empty() {
        println!("\nlabels declared in the file but missing on the node (`clusterctl up` restores them):");
        for l in &r.label_drift {
            match &l.actual {
                Some(a) => println!("  {}: {} (has {a})", l.node, l.label),
                None => println!("  {}: {}", l.node, l.label),
            }
        }
    }
    if !r.taint_drift.is_empty() {
        println!("\ntaints declared in the file but missing on the node (`clusterctl up` restores them):");
        for t in &r.taint_drift {
            println!("  {}: {}", t.node, t.taint);
        }
    }
}

/// Each stuck pod: where it is stuck, why, and what to look at next.
fn print_stuck(stuck: &[clusterctl_kubeapi::StuckPod]) {
    if stuck.is_empty() {
        println!("\nno stuck pods");
        return;
    }
    println!("\nstuck pods ({}):", stuck.len());
    for s in stuck {
        println!(
            "\n  {}/{}  stuck at {}: {}{}",
            s.namespace,
            s.name,
            s.layer.as_str(),
            s.reason,
            s.node
                .as_ref()
                .map(|n| format!(" (on {n})"))
                .unwrap_or_default()
        );
        if !s.message.is_empty() {
            println!("    {}", s.message);
        }
        for m in &s.missing_labels {
            println!("    no node has: {m}");
        }
        for t in &s.untolerated_taints {
            println!("    untolerated taint: {t}");
        }
        if let Some(img) = &s.image {
            let on = match &s.nodes_with_image {
                Some(v) if v.is_empty() => "on no node".to_string(),
                Some(v) => format!("on {}", v.join(", ")),
                None => "unknown (node runtimes not reachable)".to_string(),
            };
            println!("    image {img}: {on}");
        }
        if let Some(t) = &s.last_termination {
            println!(
                "    last termination: {} (exit code {}){}, {} restart(s)",
                t.reason,
                t.exit_code,
                t.message
                    .as_ref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default(),
                s.restarts
            );
        }
        for n in &s.next {
            println!("    next: {n}");
        }
    }
}
