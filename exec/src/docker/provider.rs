//! The Docker provider, kind style: one user-defined bridge network per cluster and one container per
//! node, from a node image (`kindest/node:<version>` by default) with kind's run options (kind
//! `pkg/cluster/internal/providers/docker/create.go`: privileged, seccomp/apparmor unconfined, tmpfs
//! `/tmp` and `/run`, an anonymous `/var` volume, `/lib/modules` read-only, private cgroup namespace,
//! `container=docker`, restart `on-failure:1`, no init). Every option is settable, so unprivileged
//! nodes (an explicit capability list) work too. The API server port 6443 of the first control plane
//! is published on 127.0.0.1; a load balancer container in front of the control planes, when the
//! options ask for one, publishes its own (`lb.rs`). Containers and the network carry [`CLUSTER_LABEL`] so that `destroy`
//! finds them from the cluster name alone.

use std::collections::HashMap;
use std::sync::Arc;

use bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, HostConfigCgroupnsModeEnum,
    NetworkCreateRequest, NetworkingConfig, PortBinding, RestartPolicy, RestartPolicyNameEnum,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder,
    ListNetworksOptionsBuilder,
};
use futures_util::StreamExt;

mod lb;
mod lb_reload;
mod registry;
mod remove;
mod side;

pub use lb::{
    haproxy_config, LoadBalancerContainer, LoadBalancerState, HAPROXY_CONFIG_PATH,
    LOAD_BALANCER_LABEL,
};
pub use remove::Removed;

use registry::pull_parts;

use super::client::DockerClient;
use super::transport::DockerTransport;
use clusterctl_spec::model::Role;

use crate::provider::{NodeSpec, Provider};
use crate::transport::{ExecError, Transport};

/// Label holding the cluster name, on every container and on the network.
pub const CLUSTER_LABEL: &str = "io.clusterctl.cluster";
/// Label holding the node name, on every container.
pub const NODE_LABEL: &str = "io.clusterctl.node";
/// Label holding the node role (`control-plane` or `worker`), on every container.
pub const ROLE_LABEL: &str = "io.clusterctl.role";

/// Label holding the cluster name on the cluster's local registry container (not [`CLUSTER_LABEL`]:
/// the registry is no node).
pub const REGISTRY_LABEL: &str = "io.clusterctl.registry";

/// The API server's port inside a control-plane container.
pub(crate) const API_SERVER_PORT: u16 = 6443;

/// How node containers are run. [`DockerNodeOptions::kind`] gives kind's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerNodeOptions {
    /// Node image reference.
    pub image: String,
    /// Run privileged (kind's default). When false, `cap_add` lists the capabilities.
    pub privileged: bool,
    /// Capabilities added (e.g. `SYS_ADMIN`, `NET_ADMIN`).
    pub cap_add: Vec<String>,
    /// `--security-opt` values (e.g. `seccomp=unconfined`).
    pub security_opt: Vec<String>,
    /// tmpfs mounts: (container path, mount options such as `exec`; empty for defaults).
    pub tmpfs: Vec<(String, String)>,
    /// Bind mounts in `docker run -v` form: `HOST:CONTAINER[:ro|rw]`.
    pub binds: Vec<String>,
    /// Anonymous volumes (container paths), e.g. `/var`.
    pub volumes: Vec<String>,
    /// Cgroup namespace: `private` (kind) or `host`; `None` leaves the engine's default.
    pub cgroupns: Option<String>,
    /// Environment variables of the container.
    pub env: Vec<(String, String)>,
    /// Command to run instead of the image's (e.g. `["/sbin/init"]`).
    pub command: Option<Vec<String>>,
    /// Host port on 127.0.0.1 for the first control plane's 6443; `Some(0)` lets the engine choose,
    /// `None` publishes nothing.
    pub api_server_host_port: Option<u16>,
    /// The network of the node containers; `None`: `clusterctl-<cluster>`. A network that exists is
    /// joined as it is; a missing one is created (labelled with the cluster, removed by `remove`).
    pub network: Option<String>,
    /// Memory limit in bytes (`docker run --memory`); `None`: no limit.
    pub memory: Option<i64>,
    /// CPU limit in billionths of a CPU (`docker run --cpus`); `None`: no limit.
    pub nano_cpus: Option<i64>,
    /// Extra published ports per node name (kind `extraPortMappings`).
    pub port_mappings: HashMap<String, Vec<PortMapping>>,
    /// A registry container to run beside the nodes on their network (the lab's local registry).
    pub registry: Option<RegistryContainer>,
    /// A load balancer in front of the control planes' API servers, on their network.
    pub load_balancer: Option<LoadBalancerContainer>,
}

/// A registry container beside the node containers (kind's local-registry recipe): on the cluster's
/// network under `name`, its `container_port` published on `127.0.0.1:<host_port>`, restarted with the
/// engine, labelled [`REGISTRY_LABEL`] so that [`DockerProvider::remove_all`] removes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryContainer {
    /// Container name, which the nodes resolve on the cluster network.
    pub name: String,
    /// Image reference (pulled when missing).
    pub image: String,
    /// Port on 127.0.0.1.
    pub host_port: u16,
    /// Port the registry listens on inside the container.
    pub container_port: u16,
}

/// A port of a node container published on the host (kind `extraPortMappings`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    /// Port inside the node container.
    pub container_port: u16,
    /// Port on the host; 0 lets the engine choose.
    pub host_port: u16,
    /// Host address to listen on, e.g. `127.0.0.1` or `0.0.0.0`.
    pub listen_address: String,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
}

impl DockerNodeOptions {
    /// kind's node options for Kubernetes `version` (`v1.34.1`): image `kindest/node:<version>`.
    pub fn kind(version: &str) -> Self {
        DockerNodeOptions {
            image: format!("kindest/node:{version}"),
            privileged: true,
            cap_add: Vec::new(),
            security_opt: vec!["seccomp=unconfined".into(), "apparmor=unconfined".into()],
            tmpfs: vec![
                ("/tmp".into(), String::new()),
                ("/run".into(), String::new()),
            ],
            binds: vec!["/lib/modules:/lib/modules:ro".into()],
            volumes: vec!["/var".into()],
            cgroupns: Some("private".into()),
            env: vec![("container".into(), "docker".into())],
            command: None,
            api_server_host_port: Some(0),
            network: None,
            memory: None,
            nano_cpus: None,
            port_mappings: HashMap::new(),
            registry: None,
            load_balancer: None,
        }
    }
}

/// A node container as found on the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerNode {
    /// Node name (from [`NODE_LABEL`]).
    pub name: String,
    /// Container name.
    pub container: String,
    /// Role (from [`ROLE_LABEL`]).
    pub role: Role,
    /// IPv4 address on the cluster network, when running.
    pub address: Option<String>,
    /// Host port on 127.0.0.1 mapped to 6443, if published.
    pub api_server_port: Option<u16>,
    /// Engine state (`running`, `exited`, …).
    pub state: String,
}

/// Creates, lists and removes a cluster's node containers, and gives a [`DockerTransport`] per node.
#[derive(Debug, Clone)]
pub struct DockerProvider {
    client: Arc<DockerClient>,
    cluster: String,
    options: DockerNodeOptions,
}

impl DockerProvider {
    /// A provider for cluster `cluster` on the local engine (connects and negotiates the API version).
    pub fn new(cluster: impl Into<String>, options: DockerNodeOptions) -> Result<Self, ExecError> {
        Ok(DockerProvider {
            client: DockerClient::connect()?,
            cluster: cluster.into(),
            options,
        })
    }

    /// The same, on an existing client.
    pub fn with_client(
        client: Arc<DockerClient>,
        cluster: impl Into<String>,
        options: DockerNodeOptions,
    ) -> Self {
        DockerProvider {
            client,
            cluster: cluster.into(),
            options,
        }
    }

    /// The engine client.
    pub fn client(&self) -> &Arc<DockerClient> {
        &self.client
    }

    /// The cluster's network name: the options' `network`, else `clusterctl-<cluster>`.
    pub fn network_name(&self) -> String {
        self.options
            .network
            .clone()
            .unwrap_or_else(|| format!("clusterctl-{}", self.cluster))
    }

    /// A node's container name: `<cluster>-<node>` (kind's naming).
    pub fn container_name(&self, node: &str) -> String {
        format!("{}-{}", self.cluster, node)
    }

    fn err(&self, reason: String) -> ExecError {
        ExecError::Connect {
            node: format!("docker:{}", self.cluster),
            reason,
        }
    }

    fn labels(&self) -> HashMap<String, String> {
        HashMap::from([(CLUSTER_LABEL.to_string(), self.cluster.clone())])
    }

    /// Makes sure the node image is present, pulling it (`POST /images/create`) when it is not.
    /// Errors name the image and the engine's reason (no registry reachable, unknown tag).
    pub fn ensure_image(&self) -> Result<(), ExecError> {
        self.ensure(&self.options.image)
    }

    /// Makes sure `image` (`repo[:tag][@digest]`) is present, pulling it when it is not.
    fn ensure(&self, image: &str) -> Result<(), ExecError> {
        self.client.block_on(async {
            let d = self.client.docker();
            if d.inspect_image(image).await.is_ok() {
                return Ok(());
            }
            let (repo, tag) = pull_parts(image);
            let opts = CreateImageOptionsBuilder::default()
                .from_image(&repo)
                .tag(&tag)
                .build();
            let mut pull = d.create_image(Some(opts), None, None);
            while let Some(step) = pull.next().await {
                step.map_err(|e| {
                    self.err(format!(
                        "image {image} is not present and pulling it failed: {e}"
                    ))
                })?;
            }
            Ok(())
        })
    }

    /// Waits until every listed running node's systemd reports `running` or `degraded`
    /// (`systemctl is-system-running`), or `timeout` passes. Nodes without systemctl count as ready.
    pub fn wait_ready(&self, timeout: std::time::Duration) -> Result<(), ExecError> {
        let deadline = std::time::Instant::now() + timeout;
        for n in self.list()? {
            let t = self.docker_transport(&n.name);
            loop {
                let out = t.run(&crate::transport::Cmd::new(
                    "command -v systemctl >/dev/null || { echo running; exit 0; }; systemctl is-system-running 2>/dev/null || true",
                ))?;
                let state = out.stdout_str();
                if state == "running" || state == "degraded" {
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    return Err(self.err(format!(
                        "node {} not ready after {timeout:?} (systemd: {state:?})",
                        n.name
                    )));
                }
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
        }
        Ok(())
    }

    /// Creates the network (if missing) and one started container per node (those that exist are
    /// left as they are; the image is pulled first if missing), then returns the cluster's nodes as
    /// [`DockerProvider::list`] does. The first control plane gets the API server port published on
    /// 127.0.0.1. Containers are started, not waited for: see [`DockerProvider::wait_ready`].
    pub fn create(&self, nodes: &[NodeSpec]) -> Result<Vec<DockerNode>, ExecError> {
        let network = self.network_name();
        let existing = self.list()?;
        if nodes
            .iter()
            .any(|n| !existing.iter().any(|e| e.name == n.name))
        {
            self.ensure_image()?;
        }
        let first_cp = nodes
            .iter()
            .find(|n| n.role == Role::ControlPlane)
            .map(|n| n.name.clone());
        self.client.block_on(async {
            let d = self.client.docker();
            // Any network of that name is joined as it is (e.g. kind's `kind`); only a created one
            // carries the cluster label.
            let nets = d
                .list_networks(Some(
                    ListNetworksOptionsBuilder::default()
                        .filters(&HashMap::from([("name", vec![network.clone()])]))
                        .build(),
                ))
                .await
                .map_err(|e| self.err(format!("listing networks: {e}")))?;
            if !nets
                .iter()
                .any(|n| n.name.as_deref() == Some(network.as_str()))
            {
                d.create_network(NetworkCreateRequest {
                    name: network.clone(),
                    driver: Some("bridge".into()),
                    labels: Some(self.labels()),
                    ..Default::default()
                })
                .await
                .map_err(|e| self.err(format!("creating network {network}: {e}")))?;
            }
            for n in nodes {
                if existing.iter().any(|e| e.name == n.name) {
                    continue;
                }
                let name = self.container_name(&n.name);
                let mut labels = self.labels();
                labels.insert(NODE_LABEL.into(), n.name.clone());
                labels.insert(ROLE_LABEL.into(), n.role.as_str().into());
                let o = &self.options;
                let publish = first_cp.as_deref() == Some(n.name.as_str());
                let port_key = format!("{API_SERVER_PORT}/tcp");
                let mut bindings: HashMap<String, Option<Vec<PortBinding>>> = HashMap::new();
                let binding = |ip: &str, p: u16| PortBinding {
                    host_ip: Some(ip.into()),
                    host_port: Some(if p == 0 { String::new() } else { p.to_string() }),
                };
                if let (true, Some(p)) = (publish, o.api_server_host_port) {
                    bindings.insert(port_key.clone(), Some(vec![binding("127.0.0.1", p)]));
                }
                for m in o.port_mappings.get(&n.name).into_iter().flatten() {
                    bindings
                        .entry(format!("{}/{}", m.container_port, m.protocol))
                        .or_default()
                        .get_or_insert_with(Vec::new)
                        .push(binding(&m.listen_address, m.host_port));
                }
                let exposed: Vec<String> = bindings.keys().cloned().collect();
                let port_bindings = (!bindings.is_empty()).then_some(bindings);
                let host = HostConfig {
                    privileged: Some(o.privileged),
                    cap_add: (!o.cap_add.is_empty()).then(|| o.cap_add.clone()),
                    security_opt: (!o.security_opt.is_empty()).then(|| o.security_opt.clone()),
                    tmpfs: (!o.tmpfs.is_empty()).then(|| o.tmpfs.iter().cloned().collect()),
                    binds: (!o.binds.is_empty()).then(|| o.binds.clone()),
                    cgroupns_mode: match o.cgroupns.as_deref() {
                        Some("private") => Some(HostConfigCgroupnsModeEnum::PRIVATE),
                        Some("host") => Some(HostConfigCgroupnsModeEnum::HOST),
                        _ => None,
                    },
                    network_mode: Some(network.clone()),
                    port_bindings,
                    restart_policy: Some(RestartPolicy {
                        name: Some(RestartPolicyNameEnum::ON_FAILURE),
                        maximum_retry_count: Some(1),
                    }),
                    init: Some(false),
                    memory: o.memory,
                    nano_cpus: o.nano_cpus,
                    ..Default::default()
                };
                let body = ContainerCreateBody {
                    image: Some(o.image.clone()),
                    hostname: Some(n.name.clone()),
                    labels: Some(labels),
                    env: Some(o.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
                    cmd: o.command.clone(),
                    tty: Some(true),
                    volumes: (!o.volumes.is_empty()).then(|| o.volumes.clone()),
                    exposed_ports: (!exposed.is_empty()).then_some(exposed),
                    host_config: Some(host),
                    networking_config: Some(NetworkingConfig {
                        endpoints_config: Some(HashMap::from([(
                            network.clone(),
                            EndpointSettings::default(),
                        )])),
                    }),
                    ..Default::default()
                };
                d.create_container(
                    Some(CreateContainerOptionsBuilder::default().name(&name).build()),
                    body,
                )
                .await
                .map_err(|e| self.err(format!("creating container {name}: {e}")))?;
                d.start_container(
                    &name,
                    None::<bollard::query_parameters::StartContainerOptions>,
                )
                .await
                .map_err(|e| self.err(format!("starting container {name}: {e}")))?;
            }
            Ok::<(), ExecError>(())
        })?;
        self.ensure_registry(&network)?;
        self.ensure_load_balancer(&network)?;
        self.list()
    }

    /// The cluster's node containers (found by [`CLUSTER_LABEL`]), sorted by node name.
    pub fn list(&self) -> Result<Vec<DockerNode>, ExecError> {
        let network = self.network_name();
        let summaries = self.labelled(CLUSTER_LABEL)?;
        let mut nodes: Vec<DockerNode> = summaries
            .into_iter()
            .map(|c| {
                let labels = c.labels.unwrap_or_default();
                let container = c
                    .names
                    .and_then(|n| n.first().map(|s| s.trim_start_matches('/').to_string()))
                    .unwrap_or_default();
                let address = c.network_settings.and_then(|s| s.networks).and_then(|m| {
                    m.get(&network)
                        .and_then(|e| e.ip_address.clone())
                        .filter(|a| !a.is_empty())
                        .or_else(|| {
                            // Listed by a provider without the file's network (`destroy`,
                            // `status`): the container's one network.
                            m.values()
                                .filter_map(|e| e.ip_address.clone())
                                .find(|a| !a.is_empty())
                        })
                });
                let api_server_port = c.ports.unwrap_or_default().iter().find_map(|p| {
                    (p.private_port == API_SERVER_PORT)
                        .then_some(p.public_port)
                        .flatten()
                });
                DockerNode {
                    name: labels
                        .get(NODE_LABEL)
                        .cloned()
                        .unwrap_or_else(|| container.clone()),
                    role: match labels.get(ROLE_LABEL).map(String::as_str) {
                        Some("control-plane" | "controlplane" | "master") => Role::ControlPlane,
                        _ => Role::Worker,
                    },
                    container,
                    address,
                    api_server_port,
                    state: c.state.map(|s| s.to_string()).unwrap_or_default(),
                }
            })
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(nodes)
    }

    /// Every cluster with node containers on the engine of `client`: (cluster name, container count),
    /// sorted by name (`clusterctl get clusters`).
    pub fn clusters(client: &DockerClient) -> Result<Vec<(String, usize)>, ExecError> {
        let summaries = client.block_on(async {
            client
                .docker()
                .list_containers(Some(
                    ListContainersOptionsBuilder::default()
                        .all(true)
                        .filters(&HashMap::from([("label", vec![CLUSTER_LABEL.to_string()])]))
                        .build(),
                ))
                .await
                .map_err(|e| ExecError::Connect {
                    node: "docker".into(),
                    reason: format!("listing containers: {e}"),
                })
        })?;
        let mut count: std::collections::BTreeMap<String, usize> = Default::default();
        for c in summaries {
            if let Some(name) = c.labels.as_ref().and_then(|l| l.get(CLUSTER_LABEL)) {
                *count.entry(name.clone()).or_default() += 1;
            }
        }
        Ok(count.into_iter().collect())
    }

    /// A transport into `node`'s container (no engine call is made).
    pub fn docker_transport(&self, node: &str) -> DockerTransport {
        DockerTransport::new(self.client.clone(), self.container_name(node), node)
    }
}

impl Provider for DockerProvider {
    fn kind(&self) -> &'static str {
        "docker"
    }

    fn transport(&self, node: &NodeSpec) -> Result<Box<dyn Transport>, ExecError> {
        Ok(Box::new(self.docker_transport(&node.name)))
    }
}
