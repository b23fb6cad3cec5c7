//! `clusterctl status -f FILE|--profile NAME [-o json|yaml] [--kubeconfig PATH]`: nodes (role, version, Ready, the reason
//! when not Ready), labels the file declares that a node has lost (e.g. after a re-create), and stuck
//! pods with the layer they are stuck at and what to look at next (see `clusterctl_kubeapi::diagnose`).
//! For pods that cannot pull their image, the node runtimes are asked which nodes hold it (`ctr -n
//! k8s.io images ls -q`, or `crictl images` for CRI-O) over the transports, since a Node's status lists at
//! most 50 images.
//!
//! Kubeconfig: `--kubeconfig PATH` (its context named after the cluster, else its current context);
//! else the context named after the cluster in `$KUBECONFIG`/`~/.kube/config`; else
//! `/etc/kubernetes/admin.conf` fetched from the first control plane (kept 0600 in the local cache).
//! Exit codes: 0 the report was printed, 1 the API could not be read, 2 invalid input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use clusterctl_exec::Cmd;
use clusterctl_kubeapi::{diagnose, image_matches, ClusterApi, Diagnosis, Node};
use clusterctl_spec::ValidCluster;

use super::flags::DocResult;
use super::lifecycle::{self, reach};

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

/// A label the cluster file declares on a node that the Node object does not carry (with that value).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct LabelDrift {
    /// Node name.
    pub node: String,
    /// `key=value` as declared.
    pub label: String,
    /// The value the node has instead, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
}

/// A taint the cluster file declares on a node that the Node object does not carry (same key, value
/// and effect).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct TaintDrift {
    /// Node name.
    pub node: String,
    /// `key[=value]:Effect` as declared.
    pub taint: String,
}

/// The whole report (`-o json` prints it).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Report {
    /// Cluster name.
    pub cluster: String,
    /// `ok` when every node is Ready, no pod is stuck, every node of the file is registered and
    /// carries its declared labels and taints; `degraded` otherwise.
    pub result: DocResult,
    /// Nodes and stuck pods.
    #[serde(flatten)]
    pub diagnosis: Diagnosis,
    /// Nodes in the file that are not registered in the cluster.
    pub missing_nodes: Vec<String>,
    /// Declared labels the nodes do not carry (`clusterctl up` restores them).
    pub label_drift: Vec<LabelDrift>,
    /// Declared taints the nodes do not carry (`clusterctl up` restores them).
    pub taint_drift: Vec<TaintDrift>,
}

/// Runs the command (exit codes in the module doc).
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    let cluster = match args.target.load(args.output) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let api = match lifecycle::cluster_api(
        &cluster,
        args.kubeconfig.as_ref(),
        args.known_hosts.as_ref(),
    ) {
        Ok(a) => a,
        Err(e) => {
            super::flags::print_error(args.output, cluster.name(), &format!("status: {e}"));
            return Ok(ExitCode::FAILURE);
        }
    };
    match report(&cluster, &api, args.known_hosts.as_ref()) {
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

/// Builds the report: nodes, stuck pods (asking the node runtimes for images), missing nodes, label
/// drift. Errors: the API could not list nodes or pods.
pub(crate) fn report(
    cluster: &ValidCluster,
    api: &dyn ClusterApi,
    known_hosts: Option<&PathBuf>,
) -> Result<Report, String> {
    let nodes = api.nodes().map_err(|e| e.to_string())?;
    let pods = api.pods().map_err(|e| e.to_string())?;
    let lister = ImageLister::new(cluster, known_hosts);
    let diagnosis = diagnose(
        &nodes,
        &pods,
        &mut |p| {
            api.events_for(
                p.metadata.namespace.as_deref().unwrap_or(""),
                "Pod",
                p.metadata.name.as_deref().unwrap_or(""),
            )
            .unwrap_or_default()
        },
        &mut |img| lister.nodes_with(img),
    );
    let registered: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let missing_nodes = cluster
        .nodes()
        .iter()
        .filter(|n| !registered.contains(&n.name))
        .map(|n| n.name.clone())
        .collect();
    let mut r = Report {
        cluster: cluster.name().to_string(),
        result: DocResult::Ok,
        diagnosis,
        missing_nodes,
        label_drift: label_drift(cluster, &nodes),
        taint_drift: taint_drift(cluster, &nodes),
    };
    let healthy = r.diagnosis.nodes.iter().all(|n| n.ready)
        && r.diagnosis.stuck.is_empty()
        && r.missing_nodes.is_empty()
        && r.label_drift.is_empty()
        && r.taint_drift.is_empty();
    if !healthy {
        r.result = DocResult::Degraded;
    }
    Ok(r)
}

fn label_drift(cluster: &ValidCluster, nodes: &[Node]) -> Vec<LabelDrift> {
    let mut out = Vec::new();
    for vn in cluster.nodes() {
        let Some(n) = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(vn.name.as_str()))
        else {
            continue;
        };
        let have = n.metadata.labels.clone().unwrap_or_default();
        for (k, v) in &vn.labels {
            if have.get(k) != Some(v) {
                out.push(LabelDrift {
                    node: vn.name.clone(),
                    label: format!("{k}={v}"),
                    actual: have.get(k).cloned(),
                });
            }
        }
    }
    out
}

fn taint_drift(cluster: &ValidCluster, nodes: &[Node]) -> Vec<TaintDrift> {
    let mut out = Vec::new();
    for vn in cluster.nodes() {
        let Some(n) = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(vn.name.as_str()))
        else {
            continue;
        };
        let have = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        for t in &vn.taints {
            let value = t.value.clone().filter(|v| !v.is_empty());
            let effect = format!("{:?}", t.effect);
            let carried = have.iter().any(|h| {
                h.key == t.key
                    && h.value.clone().filter(|v| !v.is_empty()) == value
                    && h.effect == effect
            });
            if !carried {
                let shown = match &value {
                    Some(v) => format!("{}={v}:{effect}", t.key),
                    None => format!("{}:{effect}", t.key),
                };
                out.push(TaintDrift {
                    node: vn.name.clone(),
                    taint: shown,
                });
            }
        }
    }
    out
}

/// Node name → the image references its runtime holds.
type ImagesByNode = BTreeMap<String, Vec<String>>;

/// Asks every node's runtime for its images once (lazily, on the first image asked about).
struct ImageLister<'a> {
    cluster: &'a ValidCluster,
    known_hosts: Option<&'a PathBuf>,
    listed: Mutex<Option<Option<ImagesByNode>>>,
}

/// Lists the runtime's images, one reference per line (`clusterctl_phases::image_load::LIST_IMAGES`).
use clusterctl_phases::image_load::LIST_IMAGES;

impl<'a> ImageLister<'a> {
    fn new(cluster: &'a ValidCluster, known_hosts: Option<&'a PathBuf>) -> Self {
        ImageLister {
            cluster,
            known_hosts,
            listed: Mutex::new(None),
        }
    }

    fn nodes_with(&self, image: &str) -> Option<Vec<String>> {
        let Ok(mut guard) = self.listed.lock() else {
            return None;
        };
        if guard.is_none() {
            let all: Vec<_> = self.cluster.nodes().iter().collect();
            let reached = reach(self.cluster, &all, self.known_hosts);
            let lists = lifecycle::on_each(&reached.transports, |_, t| {
                t.run(&Cmd::new(LIST_IMAGES).sudo())
                    .ok()
                    .filter(|o| o.success())
                    .map(|o| {
                        o.stdout_str()
                            .lines()
                            .map(str::to_string)
                            .collect::<Vec<_>>()
                    })
            });
            let ok: BTreeMap<String, Vec<String>> = lists
                .into_iter()
                .filter_map(|(n, l)| l.map(|l| (n, l)))
                .collect();
            *guard = Some((!ok.is_empty()).then_some(ok));
        }
        let lists = guard.as_ref().and_then(|l| l.as_ref())?;
        Some(
            lists
                .iter()
                .filter(|(_, imgs)| imgs.iter().any(|i| image_matches(image, i)))
                .map(|(n, _)| n.clone())
                .collect(),
        )
    }
}

fn print_text(cluster: &ValidCluster, r: &Report) {
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
    if d.stuck.is_empty() {
        println!("\nno stuck pods");
        return;
    }
    println!("\nstuck pods ({}):", d.stuck.len());
    for s in &d.stuck {
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
