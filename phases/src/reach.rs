//! The one way the commands reach a cluster's nodes: the cluster's provider ([`provider_for`]:
//! `exec`'s [`SshProvider`] with the file's SSH settings — key file or agent, `known_hosts` strict or
//! accept-new (the file's own `HostKeyPolicy`, which `exec` takes as it is), the file's connect
//! attempts, through the file's jump host (`spec.ssh.bastion`) when it names one — or its
//! [`DockerProvider`] with kind's run options and the file's `spec.docker` settings, the local
//! registry container and memory sizes as docker reads them, [`docker_options`]); every node's
//! transport is made by that provider through `exec`'s `Provider` trait ([`NodeProvider::transport`]);
//! reaching the nodes that exist ([`reach`]: SSH hosts in parallel, or the provider's labelled,
//! running node containers — never creating any). The cluster's API client is `crate::access::api`'s,
//! above this module; `node_containers` (creating the docker provider's containers) is above it too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clusterctl_exec::{
    Bastion, DockerNodeOptions, DockerProvider, ExecError, NodeSpec, SshAuth, SshProvider,
    Transport,
};
use clusterctl_spec::model::Provider;
use clusterctl_spec::{ValidCluster, ValidNode};

/// Why a node or the cluster's API could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ReachError {
    /// The Docker engine could not be used.
    #[error("docker: {0}")]
    Docker(#[source] Arc<ExecError>),
    /// The SSH connection failed (unreachable, refused host key, authentication).
    #[error(transparent)]
    Ssh(#[from] ExecError),
    /// The cluster file gives the node no address.
    #[error("no address in the cluster file")]
    NoAddress,
    /// The provider has no running node container for the node (`state`: `None` when there is none).
    #[error("{}", match state { Some(s) => format!("container {container} is {s}"), None => format!("no container {container} (labelled for cluster {cluster})") })]
    NoContainer {
        /// The container's name.
        container: String,
        /// The cluster's name.
        cluster: String,
        /// The container's state when it exists but is not running.
        state: Option<String>,
    },
    /// No kubeconfig context of the cluster and the first control plane could not be reached.
    #[error("no kubeconfig context `clusterctl-{cluster}` and the first control plane {node} cannot be reached: {source}")]
    FirstControlPlane {
        /// The cluster's name.
        cluster: String,
        /// The first control plane.
        node: String,
        /// Why it could not be reached.
        #[source]
        source: Box<ReachError>,
    },
    /// `admin.conf` could not be read on the first control plane.
    #[error("reading admin.conf on {node}: {source}")]
    AdminConf {
        /// The first control plane.
        node: String,
        /// The transport's error.
        #[source]
        source: ExecError,
    },
    /// Neither a kubeconfig context nor `admin.conf` on the first control plane.
    #[error("no context `clusterctl-{cluster}` in the kubeconfig and no {path} on {node}")]
    NoAdminConf {
        /// The cluster's name.
        cluster: String,
        /// `admin.conf`'s path.
        path: &'static str,
        /// The first control plane.
        node: String,
    },
    /// No local cache directory (no `HOME`).
    #[error("no cache directory: set HOME")]
    NoCache,
    /// Writing the cached `admin.conf` failed.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig does not give a usable API client.
    #[error(transparent)]
    Api(#[from] clusterctl_kubeapi::ApiError),
    /// `admin.conf` of a docker-provider node could not be pointed at the API port Docker publishes.
    #[error("admin.conf of {node}: {source}")]
    AdminKubeconfig {
        /// The first control plane.
        node: String,
        /// What is wrong with the file (its text, which holds credentials, is never in the message).
        #[source]
        source: crate::access::kubeconfig::AdminKubeconfigError,
    },
}

/// `~/x` with `$HOME` expanded.
pub(crate) fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(p),
    }
}

/// `node`'s address as the transports and scripts take it: the IP literal, empty when it has none
/// (a docker node before its container exists).
pub(crate) fn address_text(node: &ValidNode) -> String {
    node.address.map(|a| a.to_string()).unwrap_or_default()
}

/// The docker provider's node options for Kubernetes `tag` (e.g. `v1.34.1`): kind's run options for the version, with the file's node image and `spec.docker.runOptions`
/// (env, extra mounts, privileged, capabilities, tmpfs, cgroup namespace, memory and CPU limits), its network, the nodes' port mappings, the local registry
/// (`spec.registry.local`) and API load balancer (`spec.docker.loadBalancer`) containers. kind's read-only `/lib/modules` mount is left out when the host has no such directory (the engine refuses a missing bind source).
pub(crate) fn docker_options(cluster: &ValidCluster, tag: &str) -> DockerNodeOptions {
    let mut options = DockerNodeOptions::kind(tag);
    options.image = cluster.docker_node_image();
    let ro = &cluster.spec().docker.run_options;
    if !Path::new("/lib/modules").is_dir() {
        options.binds.retain(|b| !b.starts_with("/lib/modules:"));
    }
    options
        .env
        .extend(ro.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    for m in &ro.extra_mounts {
        options.binds.push(format!(
            "{}:{}:{}",
            m.host_path,
            m.container_path,
            if m.read_only { "ro" } else { "rw" }
        ));
    }
    if let Some(p) = ro.privileged {
        options.privileged = p;
    }
    options.cap_add.extend(ro.cap_add.iter().cloned());
    for t in &ro.tmpfs {
        let (path, opts) = t.split_once(':').unwrap_or((t.as_str(), ""));
        options.tmpfs.retain(|(p, _)| p != path);
        options.tmpfs.push((path.to_string(), opts.to_string()));
    }
    if let Some(c) = &ro.cgroupns {
        options.cgroupns = Some(c.clone());
    }
    options.network = cluster.spec().docker.network.clone();
    options.registry = registry(cluster);
    options.load_balancer = load_balancer(cluster, None);
    options.memory = ro.memory.as_deref().and_then(docker_bytes);
    options.nano_cpus = ro
        .cpus
        .as_deref()
        .and_then(|c| c.parse::<f64>().ok())
        .map(|c| (c * 1e9).round() as i64);
    for n in &cluster.spec().nodes {
        let maps =
            n.port_mappings
                .iter()
                .map(|m| clusterctl_exec::PortMapping {
                    container_port: m.container_port,
                    host_port: m.host_port,
                    listen_address: m.listen_address.clone().unwrap_or_else(|| {
                        clusterctl_spec::model::DEFAULT_PORT_LISTEN_ADDRESS.into()
                    }),
                    protocol: m.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase(),
                })
                .collect::<Vec<_>>();
        if !maps.is_empty() {
            options.port_mappings.insert(n.name.clone(), maps);
        }
    }
    options
}

/// The Docker provider of `cluster` with its node options (no container is created). Errors: the
/// engine cannot be used.
pub(crate) fn docker_provider(cluster: &ValidCluster) -> Result<DockerProvider, ReachError> {
    DockerProvider::new(
        cluster.name().to_string(),
        docker_options(cluster, &cluster.version_info().tag()),
    )
    .map_err(|e| ReachError::Docker(Arc::new(e)))
}

/// The cluster's way to its nodes: the SSH provider or the Docker provider. Every node transport is
/// made through `exec`'s `Provider` trait ([`NodeProvider::provider`], [`NodeProvider::transport`]);
/// the Docker provider's own steps (listing, creating, removing node containers) are on
/// [`DockerProvider`].
pub(crate) enum NodeProvider {
    /// Nodes listed in the file, reached over SSH ([`ssh_provider`]).
    Ssh(SshProvider),
    /// Node containers ([`docker_provider`]).
    Docker(Box<DockerProvider>),
}

impl NodeProvider {
    /// The provider as `exec` sees it.
    pub(crate) fn provider(&self) -> &dyn clusterctl_exec::Provider {
        match self {
            NodeProvider::Ssh(p) => p,
            NodeProvider::Docker(p) => p.as_ref(),
        }
    }

    /// A transport to `node` at `address` (its address; `up` may use another one; the Docker
    /// provider reaches the node's container whatever the address). SSH connects here, with the
    /// file's attempts, and checks the host key. Errors: as `SshTransport::connect`.
    pub(crate) fn transport(
        &self,
        node: &ValidNode,
        address: &str,
    ) -> Result<Arc<dyn Transport>, ExecError> {
        self.provider()
            .transport(&node_spec(node, address))
            .map(Arc::from)
    }
}

/// The provider of `cluster`: [`ssh_provider`] or [`docker_provider`]. Errors: the Docker engine
/// cannot be used.
pub(crate) fn provider_for(
    cluster: &ValidCluster,
    known_hosts: Option<&Path>,
) -> Result<NodeProvider, ReachError> {
    Ok(match cluster.provider() {
        Provider::Ssh => NodeProvider::Ssh(ssh_provider(cluster, known_hosts)),
        Provider::Docker => NodeProvider::Docker(Box::new(docker_provider(cluster)?)),
    })
}

/// The SSH provider of `cluster`: the file's user, the SSH agent when a node names no key, the file's
/// connect attempts and host-key policy, host keys checked against `known_hosts` (default
/// `~/.ssh/known_hosts`). Each node's own settings come with its [`node_spec`].
pub(crate) fn ssh_provider(cluster: &ValidCluster, known_hosts: Option<&Path>) -> SshProvider {
    let defaults = &cluster.spec().ssh;
    let mut provider = SshProvider::new(defaults.user.clone(), SshAuth::Agent)
        .with_connect_attempts(defaults.connect_attempts);
    provider.options.host_key_policy = defaults.host_key_policy;
    let known_hosts = known_hosts
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".ssh/known_hosts")));
    if let Some(k) = known_hosts {
        provider.options.known_hosts = k;
    }
    match &defaults.bastion {
        Some(b) => provider.with_bastion(bastion(defaults, b)),
        None => provider,
    }
}

/// `exec`'s jump host for the file's `spec.ssh.bastion`: its own port (22), user, key file and
/// host-key policy, each unset one taken from `spec.ssh` (no key file: the SSH agent).
fn bastion(
    defaults: &clusterctl_spec::model::SshDefaults,
    b: &clusterctl_spec::model::SshBastion,
) -> Bastion {
    let key = b.key_file.as_ref().or(defaults.key_file.as_ref());
    Bastion {
        host: b.address.trim().to_string(),
        port: b.port.unwrap_or(22),
        user: b.user.clone().unwrap_or_else(|| defaults.user.clone()),
        auth: match key {
            Some(k) => SshAuth::KeyFile {
                path: expand_home(k),
                passphrase: None,
            },
            None => SshAuth::Agent,
        },
        host_key_policy: b.host_key_policy.unwrap_or(defaults.host_key_policy),
    }
}

/// `node` as a provider sees it, at `address`: its role and its own SSH user, port, key file (`~`
/// expanded; none: the SSH agent) and host-key policy.
pub(crate) fn node_spec(node: &ValidNode, address: &str) -> NodeSpec {
    NodeSpec {
        ssh_user: Some(node.ssh.user.clone()),
        ssh_port: Some(node.ssh.port),
        ssh_key: node.ssh.key_file.as_deref().map(expand_home),
        ssh_host_key_policy: Some(node.ssh.host_key_policy),
        ..NodeSpec::new(node.name.clone(), node.role, address)
    }
}

/// Transports to nodes, and why the others could not be reached.
#[derive(Default)]
pub(crate) struct Reached {
    /// Node name → transport.
    pub transports: BTreeMap<String, Arc<dyn Transport>>,
    /// Node name → why it could not be reached.
    pub errors: BTreeMap<String, ReachError>,
}

/// Reaches `nodes` of `cluster` that exist through its provider ([`provider_for`]): SSH hosts in
/// parallel (host keys checked against `known_hosts`, default `~/.ssh/known_hosts`); Docker provider:
/// the running node containers labelled with the cluster name. Never creates anything.
pub(crate) fn reach(
    cluster: &ValidCluster,
    nodes: &[&ValidNode],
    known_hosts: Option<&Path>,
) -> Reached {
    let mut out = Reached::default();
    let provider = match provider_for(cluster, known_hosts) {
        Ok(p) => p,
        Err(e) => {
            let e = match e {
                ReachError::Docker(e) => e,
                other => Arc::new(ExecError::Other(other.to_string())),
            };
            for n in nodes {
                out.errors
                    .insert(n.name.clone(), ReachError::Docker(e.clone()));
            }
            return out;
        }
    };
    let mut existing = Vec::with_capacity(nodes.len());
    match &provider {
        NodeProvider::Docker(docker) => {
            let listed = docker.list().unwrap_or_default();
            for n in nodes {
                match listed.iter().find(|d| d.name == n.name) {
                    Some(d) if d.state == "running" => existing.push(node_spec(n, "")),
                    found => {
                        out.errors.insert(
                            n.name.clone(),
                            ReachError::NoContainer {
                                container: found
                                    .map(|d| d.container.clone())
                                    .unwrap_or_else(|| docker.container_name(&n.name)),
                                cluster: cluster.name().to_string(),
                                state: found.map(|d| d.state.clone()),
                            },
                        );
                    }
                }
            }
        }
        NodeProvider::Ssh(_) => {
            for n in nodes {
                match n.address {
                    Some(a) => existing.push(node_spec(n, &a.to_string())),
                    None => {
                        out.errors.insert(n.name.clone(), ReachError::NoAddress);
                    }
                }
            }
        }
    }
    let results = provider.provider().transports(&existing);
    for (n, r) in existing.into_iter().zip(results) {
        match r {
            Ok(t) => {
                out.transports.insert(n.name, Arc::from(t));
            }
            Err(e) => {
                let e = match provider {
                    NodeProvider::Ssh(_) => ReachError::Ssh(e),
                    NodeProvider::Docker(_) => ReachError::Docker(Arc::new(e)),
                };
                out.errors.insert(n.name, e);
            }
        }
    }
    out
}

/// Runs `f` on every transport in parallel; results keyed by node name.
pub(crate) fn on_each<T: Send>(
    transports: &BTreeMap<String, Arc<dyn Transport>>,
    f: impl Fn(&str, &dyn Transport) -> T + Sync,
) -> BTreeMap<String, T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = transports
            .iter()
            .map(|(name, t)| {
                let f = &f;
                (name.clone(), s.spawn(move || f(name, t.as_ref())))
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|(n, h)| h.join().ok().map(|r| (n, r)))
            .collect()
    })
}

/// The local registry container of `spec.registry.local` as the provider creates it beside the
/// nodes; `None` without one.
pub(crate) fn registry(
    cluster: &ValidCluster,
) -> Option<clusterctl_exec::docker::RegistryContainer> {
    cluster
        .local_registry()
        .map(|r| clusterctl_exec::docker::RegistryContainer {
            name: r.container,
            image: r.image,
            host_port: r.port,
            container_port: clusterctl_spec::lab::LOCAL_REGISTRY_CONTAINER_PORT,
        })
}

/// The API load balancer container of `cluster` ([`ValidCluster::load_balancer`]) as the provider
/// creates it: every control plane of the file but `without` as a backend (`<cluster>-<node>:6443`,
/// checked with `GET /healthz`); `None` without one.
pub(crate) fn load_balancer(
    cluster: &ValidCluster,
    without: Option<&str>,
) -> Option<clusterctl_exec::docker::LoadBalancerContainer> {
    let lb = cluster.load_balancer()?;
    let port = clusterctl_spec::lab::LOAD_BALANCER_PORT;
    Some(clusterctl_exec::docker::LoadBalancerContainer {
        name: lb.container,
        image: lb.image,
        host_port: lb.port,
        port,
        backends: cluster
            .control_planes()
            .filter(|n| Some(n.name.as_str()) != without)
            .map(|n| {
                (
                    n.name.clone(),
                    format!("{}-{}:{port}", cluster.name(), n.name),
                )
            })
            .collect(),
        health_path: "/healthz".into(),
    })
}

/// A docker memory size (`512m`, `4g`, `1073741824`; suffixes b, k, m, g in powers of 1024, as
/// `docker run --memory` reads them) in bytes; `None` when it is not one (validate refuses it).
pub(crate) fn docker_bytes(size: &str) -> Option<i64> {
    let lower = size.to_ascii_lowercase();
    let (digits, unit) = match lower.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&lower[..i], c),
        _ => (lower.as_str(), 'b'),
    };
    let shift = match unit {
        'b' => 0,
        'k' => 10,
        'm' => 20,
        'g' => 30,
        _ => return None,
    };
    digits.parse::<i64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::{docker_bytes, node_spec, ssh_provider};
    use std::path::{Path, PathBuf};

    #[test]
    fn the_files_ssh_settings_make_the_provider_and_each_nodes_spec() {
        let c = crate::up::from_file::test_cluster("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {name: sp}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  ssh: {user: ops, port: 2222, hostKeyPolicy: strict, connectAttempts: 3}\n  nodes:\n    - {name: cp1, role: control-plane, address: 10.9.0.11}\n    - {name: w1, role: worker, address: 10.9.0.12, ssh: {user: root, keyFile: /k/id, hostKeyPolicy: accept-new}}\n");
        let p = ssh_provider(&c, Some(Path::new("/kh")));
        assert_eq!(p.default_user, "ops");
        assert_eq!(p.options.auth, clusterctl_exec::SshAuth::Agent);
        assert_eq!(p.options.connect_retry.attempts, 3);
        assert_eq!(p.options.known_hosts, PathBuf::from("/kh"));
        assert_eq!(
            p.options.host_key_policy,
            clusterctl_spec::model::HostKeyPolicy::Strict
        );
        let (target, options) = p.target(&node_spec(&c.nodes()[0], "10.9.0.11"));
        assert_eq!(
            (target.user.as_str(), target.port, target.host.as_str()),
            ("ops", 2222, "10.9.0.11")
        );
        assert_eq!(options.auth, clusterctl_exec::SshAuth::Agent);
        assert_eq!(
            options.host_key_policy,
            clusterctl_spec::model::HostKeyPolicy::Strict
        );
        let (target, options) = p.target(&node_spec(&c.nodes()[1], "192.0.2.7"));
        assert_eq!(
            (target.user.as_str(), target.port, target.host.as_str()),
            ("root", 2222, "192.0.2.7")
        );
        assert_eq!(
            options.auth,
            clusterctl_exec::SshAuth::KeyFile {
                path: PathBuf::from("/k/id"),
                passphrase: None
            }
        );
        assert_eq!(
            options.host_key_policy,
            clusterctl_spec::model::HostKeyPolicy::AcceptNew
        );
        assert_eq!(options.connect_retry.attempts, 3);
    }

    #[test]
    fn the_files_bastion_reaches_every_node_with_its_own_or_the_files_defaults() {
        let file = |bastion: &str| {
            crate::up::from_file::test_cluster(&format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: sb}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  ssh: {{user: ops, keyFile: /k/nodes, hostKeyPolicy: strict{bastion}}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: 10.9.0.11}}\n"))
        };
        let p = ssh_provider(&file(""), None);
        assert_eq!(p.options.bastion, None);
        let p = ssh_provider(&file(", bastion: {address: jump.example.com}"), None);
        let b = p.options.bastion.clone().expect("bastion");
        assert_eq!(
            (b.host.as_str(), b.port, b.user.as_str()),
            ("jump.example.com", 22, "ops")
        );
        assert_eq!(
            b.auth,
            clusterctl_exec::SshAuth::KeyFile {
                path: PathBuf::from("/k/nodes"),
                passphrase: None
            }
        );
        assert_eq!(
            b.host_key_policy,
            clusterctl_spec::model::HostKeyPolicy::Strict
        );
        let own = ", bastion: {address: 192.0.2.1, port: 2200, user: jump, keyFile: /k/jump, hostKeyPolicy: accept-new}";
        let p = ssh_provider(&file(own), None);
        let (_, options) = p.target(&node_spec(&file(own).nodes()[0], "10.9.0.11"));
        let b = options
            .bastion
            .expect("every node's options carry the bastion");
        assert_eq!(
            (b.host.as_str(), b.port, b.user.as_str()),
            ("192.0.2.1", 2200, "jump")
        );
        assert_eq!(
            b.auth,
            clusterctl_exec::SshAuth::KeyFile {
                path: PathBuf::from("/k/jump"),
                passphrase: None
            }
        );
        assert_eq!(
            b.host_key_policy,
            clusterctl_spec::model::HostKeyPolicy::AcceptNew
        );
    }

    #[test]
    fn docker_sizes_are_read_as_docker_run_reads_them() {
        assert_eq!(docker_bytes("512m"), Some(512 << 20));
        assert_eq!(docker_bytes("4G"), Some(4 << 30));
        assert_eq!(docker_bytes("1073741824"), Some(1 << 30));
        assert_eq!(docker_bytes("12x"), None);
    }
}
