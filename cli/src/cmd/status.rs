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

/// The report as text: the cluster line, the node table, missing nodes, drift, stuck pods. What the
/// API returned is escaped ([`super::escape::printable`]): a node name or a pod message cannot move the
/// cursor, recolour the terminal or reorder the line.
fn print_text(cluster: &ValidCluster, r: &StatusReport) {
    print!("{}", text(cluster, r));
}

/// [`print_text`]'s text.
fn text(cluster: &ValidCluster, r: &StatusReport) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let d = &r.diagnosis;
    let ready = d.nodes.iter().filter(|n| n.ready).count();
    let _ = writeln!(
        o,
        "cluster {} (file: Kubernetes {}, {} node(s)); {} of {} registered node(s) Ready",
        r.cluster,
        cluster.version_info().tag(),
        cluster.nodes().len(),
        ready,
        d.nodes.len()
    );
    node_table(&mut o, r);
    load_balancer(&mut o, r);
    drift(&mut o, r);
    network_policy(&mut o, r);
    stuck_pods(&mut o, &d.stuck);
    o
}

/// The registered nodes (name, role, version, Ready, why not or cordoned) and the file's nodes not
/// registered, as a table.
fn node_table(o: &mut String, r: &StatusReport) {
    use std::fmt::Write;
    let d = &r.diagnosis;
    let rows: Vec<[String; 4]> = d
        .nodes
        .iter()
        .map(|n| {
            let mut reason = n.reason.clone().unwrap_or_default();
            if n.unschedulable {
                reason = if reason.is_empty() {
                    "cordoned".into()
                } else {
                    format!("cordoned; {reason}")
                };
            }
            [&n.name, &n.role, &n.version, &reason].map(|v| esc(v))
        })
        .collect();
    let w = rows
        .iter()
        .map(|r| r[0].chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let rw = rows
        .iter()
        .map(|r| r[1].chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        o,
        "\n{:w$}  {:rw$}  {:8}  {:5}  REASON",
        "NODE", "ROLE", "VERSION", "READY"
    );
    for (row, n) in rows.iter().zip(&d.nodes) {
        let [name, role, version, reason] = row;
        let _ = writeln!(
            o,
            "{name:w$}  {role:rw$}  {version:8}  {:5}  {reason}",
            if n.ready { "True" } else { "False" }
        );
    }
    for m in &r.missing_nodes {
        let _ = writeln!(
            o,
            "{m:w$}  (in the file, not registered: run `clusterctl up` or `clusterctl node join`)"
        );
    }
}

/// The docker lab's API load balancer: container, state, address and backends.
fn load_balancer(o: &mut String, r: &StatusReport) {
    use std::fmt::Write;
    if let Some(lb) = &r.load_balancer {
        let _ = writeln!(
            o,
            "\nAPI load balancer {} ({}{}), backends: {}",
            lb.container,
            lb.state,
            lb.address
                .as_deref()
                .map(|a| format!(", {a}"))
                .unwrap_or_default(),
            lb.backends.join(", ")
        );
    }
}

/// `s` as text output may print it ([`super::escape::printable`]).
fn esc(s: &str) -> String {
    super::escape::printable(s).into_owned()
}

/// The declared labels and taints the nodes do not carry.
fn drift(o: &mut String, r: &StatusReport) {
    use std::fmt::Write;
    if !r.label_drift.is_empty() {
        o.push_str("\nlabels declared in the file but missing on the node (`clusterctl up` restores them):\n");
        for l in &r.label_drift {
            let (node, label) = (esc(&l.node), esc(&l.label));
            let _ = match &l.actual {
                Some(a) => writeln!(o, "  {node}: {label} (has {})", esc(a)),
                None => writeln!(o, "  {node}: {label}"),
            };
        }
    }
    if !r.taint_drift.is_empty() {
        o.push_str("\ntaints declared in the file but missing on the node (`clusterctl up` restores them):\n");
        for t in &r.taint_drift {
            let _ = writeln!(o, "  {}: {}", esc(&t.node), esc(&t.taint));
        }
    }
}

/// Where the builtin CNI agent reports NetworkPolicy not enforced or enforced fail-closed.
fn network_policy(o: &mut String, r: &StatusReport) {
    use std::fmt::Write;
    if r.network_policy.is_empty() {
        return;
    }
    o.push_str("\nNetworkPolicy (the builtin CNI agent's Events):\n");
    for p in &r.network_policy {
        let _ = writeln!(
            o,
            "  {} on {}: {}: {}",
            esc(&p.object),
            esc(&p.node),
            esc(&p.reason),
            esc(&p.message)
        );
    }
}

/// Each stuck pod: where it is stuck, why, and what to look at next.
fn stuck_pods(o: &mut String, stuck: &[clusterctl_kubeapi::StuckPod]) {
    use std::fmt::Write;
    if stuck.is_empty() {
        o.push_str("\nno stuck pods\n");
        return;
    }
    let _ = writeln!(o, "\nstuck pods ({}):", stuck.len());
    for s in stuck {
        let _ = writeln!(
            o,
            "\n  {}/{}  stuck at {}: {}{}",
            esc(&s.namespace),
            esc(&s.name),
            s.layer.as_str(),
            esc(&s.reason),
            s.node
                .as_ref()
                .map(|n| format!(" (on {})", esc(n)))
                .unwrap_or_default()
        );
        if !s.message.is_empty() {
            let _ = writeln!(o, "    {}", esc(&s.message));
        }
        for m in &s.missing_labels {
            let _ = writeln!(o, "    no node has: {}", esc(m));
        }
        for t in &s.untolerated_taints {
            let _ = writeln!(o, "    untolerated taint: {}", esc(t));
        }
        if let Some(img) = &s.image {
            let on = match &s.nodes_with_image {
                Some(v) if v.is_empty() => "on no node".to_string(),
                Some(v) => format!(
                    "on {}",
                    v.iter().map(|n| esc(n)).collect::<Vec<_>>().join(", ")
                ),
                None => "unknown (node runtimes not reachable)".to_string(),
            };
            let _ = writeln!(o, "    image {}: {on}", esc(img));
        }
        if let Some(t) = &s.last_termination {
            let _ = writeln!(
                o,
                "    last termination: {} (exit code {}){}, {} restart(s)",
                esc(&t.reason),
                t.exit_code,
                t.message
                    .as_ref()
                    .map(|m| format!(": {}", esc(m)))
                    .unwrap_or_default(),
                s.restarts
            );
        }
        for n in &s.next {
            let _ = writeln!(o, "    next: {}", esc(n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clusterctl_kubeapi::NodeStatus;
    use clusterctl_phases::status::{Health, LabelDrift};

    /// Breaker finding C1: node names and reasons from the API were printed raw, ANSI and bidi
    /// control characters included.
    #[test]
    fn text_output_escapes_what_the_api_returned() {
        let loaded = clusterctl_spec::from_profile("lab").expect("lab");
        let cluster = clusterctl_spec::validate(&loaded).expect("valid").cluster;
        let evil = "c1\u{202e}\n\x1b[31mRED";
        let r = StatusReport {
            cluster: "lab".into(),
            result: Health::Degraded,
            diagnosis: clusterctl_kubeapi::Diagnosis {
                nodes: vec![NodeStatus {
                    name: evil.into(),
                    role: "control-plane".into(),
                    version: "v1.34.1\x07".into(),
                    ready: false,
                    reason: Some("\x1b]0;pwned\x07NotReady".into()),
                    unschedulable: false,
                    internal_ip: None,
                }],
                stuck: vec![],
            },
            missing_nodes: vec![],
            label_drift: vec![LabelDrift {
                node: evil.into(),
                label: "disktype=ssd".into(),
                actual: Some("\u{2066}hdd".into()),
            }],
            taint_drift: vec![],
            network_policy: vec![],
            load_balancer: None,
        };
        let t = text(&cluster, &r);
        assert!(
            !t.chars().any(|c| (c.is_control() && c != '\n')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
            "{t:?}"
        );
        assert!(
            t.contains("c1\\u{202e}\\u{a}\\u{1b}[31mRED  control-plane"),
            "{t}"
        );
        assert!(t.contains("\\u{1b}]0;pwned\\u{7}NotReady"), "{t}");
        assert!(t.contains("(has \\u{2066}hdd)"), "{t}");
    }
}
