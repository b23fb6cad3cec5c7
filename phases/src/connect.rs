//! One transport per node for `up` and `node join` ([`connect`]): the docker provider creates the node
//! containers first ([`crate::node_containers`]) — or, when only probing, uses those that exist — and
//! fills in their addresses; SSH nodes are connected `--parallel` at a time with their host keys
//! checked (at 100 nodes one by one took most of a no-change `up`: `cli/benches/converge.rs`), each
//! attempt reported through a callback so the command can say which node it is waiting for. Every
//! transport is made by the cluster's provider through `exec`'s `Provider` trait
//! ([`crate::reach::NodeProvider::transport`]). An offline dry run reaches nothing and only plans the provider's steps.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use clusterctl_exec::{ExecError, Transport};
use clusterctl_spec::model::Provider;
use clusterctl_spec::{ValidCluster, ValidNode};

use crate::node_containers::{self, CreateError};
use crate::reach::{address_text, NodeProvider, ReachError};
use crate::up::UpSpec;

/// How [`connect`] reaches the nodes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnectOptions<'a> {
    /// A dry run: nothing is created.
    pub dry_run: bool,
    /// With `dry_run`: reach what exists (read-only); without, reach nothing.
    pub probe: bool,
    /// The known_hosts file for SSH nodes (`None`: `~/.ssh/known_hosts`).
    pub known_hosts: Option<&'a Path>,
    /// The nodes to reach, by name (`node join`: the first control plane and the joining nodes, so
    /// that another node being down does not stop the join); `None`: every node of the file.
    pub only: Option<&'a [String]>,
    /// SSH nodes connected at once (`--parallel`; 0 counts as 1).
    pub parallel: usize,
}

impl ConnectOptions<'_> {
    /// Whether node `name` is to be reached.
    fn wants(&self, name: &str) -> bool {
        self.only.is_none_or(|o| o.iter().any(|n| n == name))
    }
}

/// What [`connect`] reports about an SSH node while it connects.
#[derive(Debug)]
pub enum Progress<'a> {
    /// Connecting starts (it may take minutes: the file's attempts with backoff).
    Connecting {
        /// The node's name.
        node: &'a str,
        /// The SSH user.
        user: &'a str,
        /// The address connected to.
        address: &'a str,
        /// The SSH port.
        port: u16,
        /// How many attempts are made at most.
        attempts: u32,
    },
    /// The node was reached after `seconds`.
    Connected {
        /// The node's name.
        node: &'a str,
        /// Seconds taken.
        seconds: f64,
    },
    /// The node could not be reached; it gave up after `seconds`.
    NotReached {
        /// The node's name.
        node: &'a str,
        /// Seconds taken.
        seconds: f64,
    },
}

/// The nodes reached, and the provider's steps for a dry run's plan.
#[derive(Default)]
pub struct Connected {
    /// Node name → transport (empty for an offline dry run).
    pub transports: BTreeMap<String, Arc<dyn Transport>>,
    /// The docker provider's steps (`create network …`, `create container …`); empty for SSH.
    pub provider_plan: Vec<String>,
}

/// Why [`connect`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The Docker engine could not be used.
    #[error("docker: {0}")]
    Docker(#[source] crate::reach::ReachError),
    /// Listing the node containers (a probing dry run) failed.
    #[error("listing the node containers: {0}")]
    List(#[source] ExecError),
    /// Creating the node containers failed (what the attempt made is removed).
    #[error(transparent)]
    Create(#[from] Box<CreateError>),
    /// Some SSH nodes could not be reached (every one named with its error).
    #[error("cannot reach every node:{}", .0.iter().map(|u| format!("\n  {u}")).collect::<String>())]
    Unreached(Vec<Unreached>),
}

/// One SSH node that could not be reached.
#[derive(Debug, thiserror::Error)]
#[error("node {node}: {source}")]
pub struct Unreached {
    /// The node's name.
    pub node: String,
    /// The transport's error.
    #[source]
    pub source: ExecError,
}

/// One transport per node of `spec`. Offline dry run: none. Docker provider: creates the node
/// containers first (or, when probing, uses those that exist) and fills in their addresses in
/// `spec.nodes`. SSH: connects to every node of the file, `options.parallel` at a time, checking host
/// keys, reporting each attempt to `progress`. Errors: the engine, a failed creation (after its cleanup), or the nodes not reached.
pub fn connect(
    cluster: &ValidCluster,
    spec: &mut UpSpec,
    options: ConnectOptions<'_>,
    progress: &(dyn Fn(Progress<'_>) + Sync),
) -> Result<Connected, ConnectError> {
    // Connecting comes before the phases (no `NodeCtx` yet): an offline dry run reaches nothing, and
    // the docker provider's containers are planned in `provider_plan` instead of created.
    let offline = options.dry_run && !options.probe;
    match cluster.provider() {
        Provider::Docker => {
            let node_options = node_containers::options(cluster);
            let wanted: Vec<_> = spec
                .nodes
                .iter()
                .filter(|n| options.wants(&n.name))
                .cloned()
                .collect();
            let mut out = Connected {
                provider_plan: node_containers::plan(cluster, &wanted, &node_options),
                ..Connected::default()
            };
            if offline {
                return Ok(out);
            }
            let docker = crate::reach::docker_provider(cluster).map_err(ConnectError::Docker)?;
            // A probing dry run reads the containers that exist; only a real run creates them.
            let nodes = if options.dry_run {
                docker.list().map_err(ConnectError::List)?
            } else {
                node_containers::create(&docker, &wanted)?
            };
            let provider = NodeProvider::Docker(Box::new(docker));
            for n in spec.nodes.iter_mut().filter(|n| options.wants(&n.name)) {
                let dn = nodes.iter().find(|d| d.name == n.name);
                let vn = cluster.nodes().iter().find(|v| v.name == n.name);
                if let (Some(dn), Some(vn)) = (dn, vn) {
                    n.address = dn.address.as_deref().and_then(|a| a.parse().ok());
                    let t = provider
                        .transport(vn, &address_text(n))
                        .map_err(|e| ConnectError::Docker(ReachError::Docker(Arc::new(e))))?;
                    out.transports.insert(n.name.clone(), t);
                }
            }
            Ok(out)
        }
        Provider::Ssh => {
            if offline {
                return Ok(Connected::default());
            }
            connect_ssh(cluster, spec, options, progress)
        }
    }
}

/// The SSH arm of [`connect`]: the wanted nodes connected `options.parallel` at a time (each with the
/// file's attempts and backoff, so one slow or unreachable node holds up only its own worker), each
/// attempt reported to `progress`. Errors: every node not reached, in the file's order.
fn connect_ssh(
    cluster: &ValidCluster,
    spec: &UpSpec,
    options: ConnectOptions<'_>,
    progress: &(dyn Fn(Progress<'_>) + Sync),
) -> Result<Connected, ConnectError> {
    let provider = NodeProvider::Ssh(crate::reach::ssh_provider(cluster, options.known_hosts));
    let wanted: Vec<(&ValidNode, &ValidNode)> = cluster
        .nodes()
        .iter()
        .zip(spec.nodes.iter())
        .filter(|(_, n)| options.wants(&n.name))
        .collect();
    let reached = crate::util::in_parallel(&wanted, options.parallel, |&(vn, n)| {
        (n.name.clone(), connect_one(&provider, vn, n, progress))
    });
    let mut out = Connected::default();
    let mut unreached = Vec::new();
    for (node, r) in reached {
        match r {
            Ok(t) => {
                out.transports.insert(node, t);
            }
            Err(source) => unreached.push(Unreached { node, source }),
        }
    }
    if unreached.is_empty() {
        Ok(out)
    } else {
        Err(ConnectError::Unreached(unreached))
    }
}

/// Connects to SSH node `n` (declared as `vn`), reporting the attempt and its end to `progress`.
fn connect_one(
    provider: &NodeProvider,
    vn: &ValidNode,
    n: &ValidNode,
    progress: &(dyn Fn(Progress<'_>) + Sync),
) -> Result<Arc<dyn Transport>, ExecError> {
    let address = address_text(n);
    progress(Progress::Connecting {
        node: &n.name,
        user: &vn.ssh.user,
        address: &address,
        port: vn.ssh.port,
        attempts: vn.ssh.connect_attempts,
    });
    let started = Instant::now();
    let r = provider.transport(vn, &address);
    let seconds = started.elapsed().as_secs_f64();
    progress(match &r {
        Ok(_) => Progress::Connected {
            node: &n.name,
            seconds,
        },
        Err(_) => Progress::NotReached {
            node: &n.name,
            seconds,
        },
    });
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::up::from_file::{spec, test_cluster, SpecOptions};

    #[test]
    fn an_offline_dry_run_reaches_nothing_and_plans_the_containers() {
        let c = test_cluster("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {name: cn}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: docker\n  nodes:\n    - {name: cp1, role: control-plane}\n");
        let mut s = spec(&c, &SpecOptions::default());
        let options = ConnectOptions {
            dry_run: true,
            ..ConnectOptions::default()
        };
        let out = connect(&c, &mut s, options, &|_| panic!("no SSH")).expect("offline");
        assert!(out.transports.is_empty());
        assert_eq!(out.provider_plan.len(), 2, "{:?}", out.provider_plan);
        let c = test_cluster("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {name: cs}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  ssh: {user: ops}\n  nodes:\n    - {name: cp1, role: control-plane, address: 10.9.0.11}\n");
        let mut s = spec(&c, &SpecOptions::default());
        let out = connect(&c, &mut s, options, &|_| panic!("no SSH")).expect("offline");
        assert!(out.transports.is_empty() && out.provider_plan.is_empty());
    }

    #[test]
    fn an_unreached_ssh_node_is_named_with_its_error_and_reported() {
        // A non-loopback address of this machine (validate refuses loopback node addresses): the
        // source address of the route to a TEST-NET address (no packet is sent), and a port nothing
        // listens on there, so a real connection attempt is refused at once.
        let udp = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
        let addr = udp
            .connect("192.0.2.1:9")
            .and_then(|_| udp.local_addr())
            .expect("an IPv4 route")
            .ip();
        let port = std::net::TcpListener::bind((addr, 0))
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let c = test_cluster(&format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: cu}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  ssh: {{user: ops, port: {port}, connectAttempts: 1}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: {addr}}}\n"));
        let mut s = spec(&c, &SpecOptions::default());
        let seen = std::sync::Mutex::new(Vec::new());
        let err = connect(&c, &mut s, ConnectOptions::default(), &|p| {
            seen.lock().expect("lock").push(format!("{p:?}"))
        })
        .err()
        .expect("refused");
        let text = err.to_string();
        assert!(
            text.starts_with("cannot reach every node:\n  node cp1: "),
            "{text}"
        );
        assert!(matches!(&err, ConnectError::Unreached(u) if u.len() == 1));
        let seen = seen.into_inner().expect("lock");
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(
            seen[0].starts_with("Connecting { node: \"cp1\", user: \"ops\""),
            "{seen:?}"
        );
        assert!(
            seen[1].starts_with("NotReached { node: \"cp1\""),
            "{seen:?}"
        );
        // `only`: the other node (a TEST-NET address) is not contacted at all.
        let c = test_cluster(&format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: cu}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  ssh: {{user: ops, port: {port}, connectAttempts: 1}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: {addr}}}\n    - {{name: w1, role: worker, address: 192.0.2.5}}\n"));
        let mut s = spec(&c, &SpecOptions::default());
        let seen = std::sync::Mutex::new(Vec::new());
        let only = ["cp1".to_string()];
        let options = ConnectOptions {
            only: Some(&only),
            ..ConnectOptions::default()
        };
        let err = connect(&c, &mut s, options, &|p| {
            seen.lock().expect("lock").push(format!("{p:?}"))
        })
        .err()
        .expect("refused");
        assert!(matches!(&err, ConnectError::Unreached(u) if u.len() == 1 && u[0].node == "cp1"));
        let seen = seen.into_inner().expect("lock");
        assert!(seen.iter().all(|p| !p.contains("\"w1\"")), "{seen:?}");
    }
}
