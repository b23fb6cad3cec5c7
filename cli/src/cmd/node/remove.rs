//! `clusterctl node remove -f FILE NODE`: takes one node out of the cluster, in this order:
//! 1. drain through the API (`clusterctl_kubeapi::drain`: cordon, policy/v1 evictions of every pod but
//!    mirror and DaemonSet pods, an eviction refused with 429 by a PodDisruptionBudget retried every
//!    `--retry-interval` until `--timeout`, then wait until the evicted pods are gone). A drain that
//!    times out stops here with the node left cordoned and says why;
//! 2. on the node, the same reset as `destroy` (`kubeadm reset -f --config` with the rendered v1beta4
//!    ResetConfiguration, CNI agent, VXLAN device, masquerade table, clusterctl's files);
//!    on a control plane `kubeadm reset` also removes the node's etcd member (its `remove-etcd-member`
//!    phase); this is verified afterwards on the first control plane by listing the members
//!    (`etcdctl member list` in its etcd static pod), and a member still listed under the node's
//!    name is removed there;
//! 3. the Node object deleted (`DELETE /api/v1/nodes/NODE`) and the node's local state cache removed.
//!
//! The first control plane is refused (joins and credentials go through it: put another control plane
//! first in the file before removing it). Exit codes: 0 removed, 1 a step failed (named), 2 invalid
//! input or a refused node.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clusterctl_exec::{Cmd, Transport};
use clusterctl_kubeapi::{ApiError, ClusterApi, Event, EvictOutcome, Node, Pod, TaintSpec};
use clusterctl_spec::ValidCluster;

use super::super::{destroy, lifecycle};

/// Arguments of `clusterctl node remove`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file (it must still declare the node, for its address).
    #[arg(short = 'f', long = "file", default_value = "cluster.yaml")]
    pub file: PathBuf,
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
}

/// The etcd static pod's `etcdctl` with kubeadm's certificate paths, run in the pod of the control
/// plane `cp` (`kubectl exec`, admin.conf).
pub(super) fn etcdctl(cp: &str, args: &str) -> String {
    format!(
        "{} -n kube-system exec etcd-{} -- etcdctl --endpoints=https://127.0.0.1:2379 \
         --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt \
         --key=/etc/kubernetes/pki/etcd/server.key {args}",
        clusterctl_phases::up::KUBECTL,
        lifecycle::sh_quote(cp)
    )
}

/// The hex member ID of the etcd member named `node` in `etcdctl member list` output (simple format:
/// `ID, STATUS, NAME, PEER ADDRS, CLIENT ADDRS, IS LEARNER` per line). `None` when not listed.
pub(super) fn member_id(list: &str, node: &str) -> Option<String> {
    list.lines().find_map(|l| {
        let cols: Vec<&str> = l.split(',').map(str::trim).collect();
        (cols.len() >= 3 && cols[2] == node && !cols[0].is_empty()).then(|| cols[0].to_string())
    })
}

/// Runs the command (exit codes in the module doc).
pub(super) fn run(args: Args) -> miette::Result<ExitCode> {
    let cluster = match lifecycle::load_cluster(&args.file) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let name = args.node.as_str();
    let Some(node) = cluster.nodes().iter().find(|n| n.name == name) else {
        let all: Vec<&str> = cluster.nodes().iter().map(|n| n.name.as_str()).collect();
        eprintln!(
            "node remove: node {name} is not in the cluster file (it declares: {})",
            all.join(", ")
        );
        return Ok(ExitCode::from(crate::EXIT_INVALID));
    };
    let first = cluster.first_control_plane();
    if first.name == name {
        eprintln!(
            "node remove: {name} is the first control plane: joins and credentials go through it; \
             put another control plane first in the file (and run `clusterctl up`) before removing it"
        );
        return Ok(ExitCode::from(crate::EXIT_INVALID));
    }
    let api = match lifecycle::cluster_api(
        &cluster,
        args.kubeconfig.as_ref(),
        args.known_hosts.as_ref(),
    ) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("node remove: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };

    // 1. Drain.
    println!(
        "{name}: draining (cordon, then evictions; timeout {}s)",
        args.timeout
    );
    let reporting = Reporting {
        api: &api,
        node: name,
        interval: args.retry_interval.max(1),
    };
    match clusterctl_kubeapi::drain::drain(
        &reporting,
        name,
        Duration::from_secs(args.timeout),
        Duration::from_secs(args.retry_interval.max(1)),
    ) {
        Ok(r) => {
            for p in &r.evicted {
                println!("{name}: evicted {p}");
            }
            if !r.kept.is_empty() {
                println!(
                    "{name}: left in place (mirror or DaemonSet pods): {}",
                    r.kept.join(", ")
                );
            }
            println!("{name}: drained");
        }
        Err(e) => {
            println!("{name}: drain: FAILED: {e}");
            println!(
                "{name} stays cordoned and in the cluster. A PodDisruptionBudget refusing an eviction \
                 (HTTP 429) means the workload has no replica to spare: scale it up or wait, then run \
                 `clusterctl node remove` again (or `kubectl uncordon {name}` to keep the node)."
            );
            return Ok(ExitCode::FAILURE);
        }
    }

    // 2. Reset on the node (and the etcd member of a control plane).
    let mut failures = 0usize;
    let reached = lifecycle::reach(&cluster, &[node, first], args.known_hosts.as_ref());
    match reached.transports.get(name) {
        Some(t) => {
            let rendered =
                clusterctl_render::render(&cluster, &clusterctl_render::Facts::assumed(&cluster))
                    .ok();
            let files: Vec<&clusterctl_render::RenderedFile> = rendered
                .as_ref()
                .and_then(|r| r.per_node.get(name))
                .map(|v| v.iter().collect())
                .unwrap_or_default();
            for (step, result) in destroy::reset_node(
                cluster.name(),
                name,
                t.as_ref(),
                &files,
                &destroy::Teardown::of(&cluster, node, false),
            ) {
                match result {
                    Ok(done) => println!("{name}: {step}: {done}"),
                    Err(e) => {
                        failures += 1;
                        println!("{name}: {step}: FAILED: {e}");
                    }
                }
            }
        }
        None => {
            failures += 1;
            println!(
                "{name}: reset: FAILED: cannot reach: {}",
                reached.errors.get(name).cloned().unwrap_or_default()
            );
        }
    }
    if node.is_control_plane() {
        match reached.transports.get(&first.name) {
            Some(t) => match etcd_member_gone(&cluster, name, t.as_ref()) {
                Ok(done) => println!("{name}: etcd: {done}"),
                Err(e) => {
                    failures += 1;
                    println!("{name}: etcd: FAILED: {e}");
                }
            },
            None => {
                failures += 1;
                println!(
                    "{name}: etcd: FAILED: cannot reach the first control plane {} to check the member list",
                    first.name
                );
            }
        }
    }

    // 3. The Node object and the local state cache.
    match api.delete_node(name) {
        Ok(()) => println!("{name}: Node object deleted"),
        Err(e) => {
            failures += 1;
            println!("{name}: Node object: FAILED: {e}");
        }
    }
    if let Some(dir) = clusterctl_phases::local::cache_dir(cluster.name()) {
        let f = dir.join(format!("{name}.json"));
        if f.exists() && std::fs::remove_file(&f).is_err() {
            failures += 1;
            println!("{name}: cache: FAILED: removing {}", f.display());
        }
    }
    if failures == 0 {
        println!(
            "node remove: {name} removed from cluster {}; delete it from the cluster file",
            cluster.name()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!("node remove: {name}: {failures} step(s) failed (see above); run it again after fixing them");
        Ok(ExitCode::FAILURE)
    }
}

/// The cluster API with every refused eviction reported as it happens (the drain retries it).
struct Reporting<'a> {
    api: &'a dyn ClusterApi,
    node: &'a str,
    interval: u64,
}

impl ClusterApi for Reporting<'_> {
    fn nodes(&self) -> Result<Vec<Node>, ApiError> {
        self.api.nodes()
    }
    fn pods(&self) -> Result<Vec<Pod>, ApiError> {
        self.api.pods()
    }
    fn events_for(&self, namespace: &str, kind: &str, name: &str) -> Result<Vec<Event>, ApiError> {
        self.api.events_for(namespace, kind, name)
    }
    fn patch_node_labels(
        &self,
        node: &str,
        labels: &BTreeMap<String, Option<String>>,
    ) -> Result<(), ApiError> {
        self.api.patch_node_labels(node, labels)
    }
    fn set_node_taints(&self, node: &str, taints: &[TaintSpec]) -> Result<(), ApiError> {
        self.api.set_node_taints(node, taints)
    }
    fn set_unschedulable(&self, node: &str, unschedulable: bool) -> Result<(), ApiError> {
        let r = self.api.set_unschedulable(node, unschedulable);
        if r.is_ok() && unschedulable {
            println!("{node}: cordoned");
        }
        r
    }
    fn evict(&self, namespace: &str, pod: &str) -> Result<EvictOutcome, ApiError> {
        let r = self.api.evict(namespace, pod);
        if let Ok(EvictOutcome::Blocked(msg)) = &r {
            println!(
                "{}: eviction of {namespace}/{pod} refused (HTTP 429: a PodDisruptionBudget allows no \
                 disruption now): {msg}; retrying every {}s",
                self.node, self.interval
            );
        }
        r
    }
    fn delete_node(&self, node: &str) -> Result<(), ApiError> {
        self.api.delete_node(node)
    }
}

/// Checks on the first control plane that `node` is no longer an etcd member; removes the member when
/// `kubeadm reset` could not (e.g. etcd was unreachable from the node). Errors: the member list could
/// not be read, or the removal failed.
fn etcd_member_gone(
    cluster: &ValidCluster,
    node: &str,
    cp: &dyn Transport,
) -> Result<String, String> {
    let first = cluster.first_control_plane().name.clone();
    let run = |args: &str| -> Result<String, String> {
        let out = cp
            .run(&Cmd::new(etcdctl(&first, args)).sudo())
            .map_err(|e| e.to_string())?;
        if out.success() {
            Ok(out.stdout_str())
        } else {
            Err(format!(
                "`etcdctl {args}` on {first} exited {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    let list = run("member list")?;
    match member_id(&list, node) {
        None => Ok(format!(
            "member {node} not in the member list (checked on {first})"
        )),
        Some(id) => {
            run(&format!("member remove {id}"))?;
            Ok(format!(
                "member {node} ({id}) was still listed: removed on {first}"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_member_id_by_name() {
        let list = "8e9e05c52164694d, started, c1, https://10.0.0.1:2380, https://10.0.0.1:2379, false\n\
                    91bc3c398fb3c146, started, c2, https://10.0.0.2:2380, https://10.0.0.2:2379, false\n";
        assert_eq!(
            super::member_id(list, "c2").as_deref(),
            Some("91bc3c398fb3c146")
        );
        assert_eq!(super::member_id(list, "c3"), None);
        assert_eq!(super::member_id("garbage", "c2"), None);
    }
}
