//! [`ValidCluster`]: a cluster file that passed validation, with defaults applied and the facts other
//! crates need already resolved (parsed CIDRs and addresses, the version's images, the endpoint, the
//! mirror, the referenced files' contents). Built only by [`crate::validate`]; immutable afterwards.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use semver::Version;

use crate::mirror;
use crate::model::{
    ClusterFile, ClusterSpec, HostKeyPolicy, PortMapping, Provider, Role, SshDefaults, Taint,
};
use crate::versions::{KubeadmApi, VersionInfo};

/// The kube-vip image used when `vip.image` is not set.
pub const DEFAULT_KUBE_VIP_IMAGE: &str = "ghcr.io/kube-vip/kube-vip:v1.0.1";
/// The kube-vip-cloud-provider image used when `vip.loadBalancerPool.image` is not set.
pub const DEFAULT_KUBE_VIP_CLOUD_PROVIDER_IMAGE: &str =
    "ghcr.io/kube-vip/kube-vip-cloud-provider:v0.0.12";

/// The control-plane endpoint: `host:port` (kubeadm `controlPlaneEndpoint`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// IP address or DNS name.
    pub host: String,
    /// TCP port, default 6443.
    pub port: u16,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// SSH settings of one node after applying `nodes[].ssh` over `spec.ssh`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// Login user.
    pub user: String,
    /// Private key file as written (`~` not expanded), if any.
    pub key_file: Option<String>,
    /// Port.
    pub port: u16,
    /// Host-key policy.
    pub host_key_policy: HostKeyPolicy,
    /// Connection set-up attempts (`spec.ssh.connectAttempts`, 1–20).
    pub connect_attempts: u32,
}

impl Default for SshTarget {
    /// The settings of a file without `spec.ssh` or `nodes[].ssh` (`root`, the agent's keys, port
    /// 22, `accept-new`, 4 attempts).
    fn default() -> Self {
        let d = SshDefaults::default();
        SshTarget {
            user: d.user,
            key_file: d.key_file,
            port: d.port,
            host_key_policy: d.host_key_policy,
            connect_attempts: d.connect_attempts,
        }
    }
}

/// One node, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidNode {
    /// Position in `spec.nodes` (file order).
    pub index: usize,
    /// Node name (DNS-1123 label).
    pub name: String,
    /// Role.
    pub role: Role,
    /// Address, if given (always given for the ssh provider). The phase engine's copy of a docker
    /// node without one gets its node container's address once the container exists
    /// (`clusterctl_phases::connect`).
    pub address: Option<IpAddr>,
    /// The node's subnet when the address was written with a prefix length (`172.20.6.111/24`).
    pub subnet: Option<IpNet>,
    /// SSH settings (meaningful for the ssh provider).
    pub ssh: SshTarget,
    /// Interface carrying the VIP on this node (control planes with a VIP only).
    pub vip_interface: Option<String>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Taints the file gives (empty when none).
    pub taints: Vec<Taint>,
    /// Whether the file gives `taints` at all (even `[]`): then they replace the role's default
    /// taints; unset, the role's default applies.
    pub taints_set: bool,
    /// Docker port mappings.
    pub port_mappings: Vec<PortMapping>,
}

impl ValidNode {
    /// A node as a file without further settings gives it: `name` with `role` at `address`, first in
    /// the file, with the default SSH settings ([`SshTarget::default`]) and no subnet, VIP interface,
    /// labels, taints or port mappings. For nodes that are not read from a file (the engine's local
    /// node, tests); validation builds every other one.
    pub fn new(name: impl Into<String>, role: Role, address: Option<IpAddr>) -> Self {
        ValidNode {
            index: 0,
            name: name.into(),
            role,
            address,
            subnet: None,
            ssh: SshTarget::default(),
            vip_interface: None,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            taints_set: false,
            port_mappings: Vec::new(),
        }
    }

    /// True for control planes.
    pub fn is_control_plane(&self) -> bool {
        self.role == Role::ControlPlane
    }
}

/// The registry mirror, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// The rewrite prefix, e.g. `harbor.example.com/library` (no trailing `/`).
    pub prefix: String,
    /// Its host (with port), e.g. `harbor.example.com`: the registry containerd/CRI-O talk to.
    pub host: String,
    /// Its path below the host, e.g. `library` (may be empty).
    pub path: String,
    /// PEM text of the mirror's CA, if `caFile` was given.
    pub ca_pem: Option<String>,
    /// `caFile` as written, if given.
    pub ca_file: Option<String>,
    /// Name of the environment variable with the user name, if given (never the value).
    pub username_env: Option<String>,
    /// Name of the environment variable with the password, if given (never the value).
    pub password_env: Option<String>,
}

impl Mirror {
    /// `image` rewritten under the prefix (see [`crate::mirror`]).
    pub fn rewrite(&self, image: &str) -> String {
        mirror::rewrite(&self.prefix, image)
    }
}

/// One `spec.airgap.sourceRegistries[]` entry, resolved: how `airgap bundle` reaches that registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceAuth {
    /// `host[:port]` as written (no scheme, no path).
    pub registry: String,
    /// Names of the environment variables holding the user name and password (never the values);
    /// both or neither.
    pub credentials_env: Option<(String, String)>,
    /// PEM text of the registry's CA, if `caFile` was given (read and checked at validation).
    pub ca_pem: Option<String>,
}

/// A validated, defaulted cluster. See the accessors.
#[derive(Debug, Clone)]
pub struct ValidCluster {
    pub(crate) file: ClusterFile,
    pub(crate) version: VersionInfo,
    pub(crate) endpoint: Endpoint,
    pub(crate) nodes: Vec<ValidNode>,
    pub(crate) pod_subnet: IpNet,
    pub(crate) service_subnet: IpNet,
    pub(crate) node_cidr_mask_size: u8,
    pub(crate) vip: Option<IpAddr>,
    pub(crate) mirror: Option<Mirror>,
    pub(crate) oidc_ca_pem: Option<String>,
    pub(crate) audit_policy: Option<String>,
    pub(crate) extra_versions: Vec<VersionInfo>,
    pub(crate) source_auth: Vec<SourceAuth>,
    pub(crate) packages_mirror_ca_pem: Option<String>,
}

impl ValidCluster {
    /// The whole defaulted file (every serde default applied).
    pub fn file(&self) -> &ClusterFile {
        &self.file
    }

    /// `spec` of the defaulted file.
    pub fn spec(&self) -> &ClusterSpec {
        &self.file.spec
    }

    /// Cluster name (`metadata.name`).
    pub fn name(&self) -> &str {
        &self.file.metadata.name
    }

    /// The provider.
    pub fn provider(&self) -> Provider {
        self.file.spec.provider
    }

    /// Kubernetes version (semver, no `v`).
    pub fn kubernetes_version(&self) -> &Version {
        &self.version.version
    }

    /// The version's facts: etcd, CoreDNS and pause tags, kubeadm API.
    pub fn version_info(&self) -> &VersionInfo {
        &self.version
    }

    /// kubeadm config API (v1beta4 for ≥ 1.31, else v1beta3).
    pub fn kubeadm_api(&self) -> KubeadmApi {
        self.version.kubeadm_api
    }

    /// `spec.airgap.sourceRegistries`, resolved, in file order (empty without any).
    pub fn source_auth(&self) -> &[SourceAuth] {
        &self.source_auth
    }

    /// Facts of `spec.airgap.extraVersions`, in file order (empty without air-gap settings).
    pub fn extra_versions(&self) -> &[VersionInfo] {
        &self.extra_versions
    }

    /// Control-plane endpoint: `controlPlane.endpoint`, else VIP:6443, else (docker, with the load
    /// balancer of [`ValidCluster::load_balancer`]) `<cluster>-external-load-balancer:6443`, else first
    /// control plane:6443 (for docker without addresses: the first control plane's name).
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The VIP address, if a VIP is configured.
    pub fn vip(&self) -> Option<IpAddr> {
        self.vip
    }

    /// All nodes in file order.
    pub fn nodes(&self) -> &[ValidNode] {
        &self.nodes
    }

    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&ValidNode> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The first control plane (runs `kubeadm init`). Validation guarantees one exists.
    pub fn first_control_plane(&self) -> &ValidNode {
        // Validation refuses files without a control plane, so the find always succeeds; fall back to the
        // first node rather than panic.
        self.nodes
            .iter()
            .find(|n| n.is_control_plane())
            .unwrap_or(&self.nodes[0])
    }

    /// Control planes in file order.
    pub fn control_planes(&self) -> impl Iterator<Item = &ValidNode> {
        self.nodes.iter().filter(|n| n.is_control_plane())
    }

    /// Workers in file order.
    pub fn workers(&self) -> impl Iterator<Item = &ValidNode> {
        self.nodes.iter().filter(|n| !n.is_control_plane())
    }

    /// podSubnet.
    pub fn pod_subnet(&self) -> IpNet {
        self.pod_subnet
    }

    /// serviceSubnet.
    pub fn service_subnet(&self) -> IpNet {
        self.service_subnet
    }

    /// Prefix length of each node's podCIDR (controller manager `--node-cidr-mask-size`).
    pub fn node_cidr_mask_size(&self) -> u8 {
        self.node_cidr_mask_size
    }

    /// The in-cluster `kubernetes` Service IP: the first address of serviceSubnet (a certSAN).
    pub fn api_service_ip(&self) -> IpAddr {
        nth_addr(&self.service_subnet, 1)
    }

    /// The cluster DNS Service IP: the 10th address of serviceSubnet (kubeadm `GetDNSIP`), kubelet
    /// `clusterDNS`.
    pub fn dns_service_ip(&self) -> IpAddr {
        nth_addr(&self.service_subnet, 10)
    }

    /// The registry mirror, if any.
    pub fn mirror(&self) -> Option<&Mirror> {
        self.mirror.as_ref()
    }

    /// The mirror prefix, if any (e.g. `harbor.example.com/library`).
    pub fn mirror_prefix(&self) -> Option<&str> {
        self.mirror.as_ref().map(|m| m.prefix.as_str())
    }

    /// Where nodes pull `image` from: rewritten under the mirror, else unchanged.
    pub fn image(&self, image: &str) -> String {
        match &self.mirror {
            Some(m) => m.rewrite(image),
            None => image.to_string(),
        }
    }

    /// Whether `up` installs local-path-provisioner as the default StorageClass
    /// (`spec.storage.defaultClass`; by default on for the docker provider, off for SSH).
    pub fn local_path(&self) -> bool {
        crate::lab::local_path_enabled(&self.file.spec.storage, self.provider().node_containers())
    }

    /// The lab's local registry (`spec.registry.local`) with its defaults applied, when the file asks
    /// for one.
    pub fn local_registry(&self) -> Option<crate::lab::LabRegistry> {
        let local = self.file.spec.registry.as_ref()?.local.as_ref()?;
        Some(crate::lab::LabRegistry {
            // Validation refused ports above 65535.
            port: local
                .port
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(crate::lab::DEFAULT_LOCAL_REGISTRY_PORT),
            image: local
                .image
                .clone()
                .unwrap_or_else(|| crate::lab::DEFAULT_LOCAL_REGISTRY_IMAGE.to_string()),
            container: format!("{}-{}", self.name(), crate::lab::LOCAL_REGISTRY_NAME),
        })
    }

    /// The API server load balancer (`spec.docker.loadBalancer`, [`crate::lab::load_balancer_enabled`])
    /// with its defaults applied, when the cluster gets one; its container is then the endpoint's host.
    pub fn load_balancer(&self) -> Option<crate::lab::LabLoadBalancer> {
        let spec = &self.file.spec;
        let written = spec.docker.load_balancer.as_ref();
        if !crate::lab::load_balancer_enabled(
            self.provider().node_containers(),
            spec.control_plane.vip.is_some() || spec.control_plane.endpoint.is_some(),
            self.control_planes().count(),
            written.is_some(),
        ) {
            return None;
        }
        Some(crate::lab::LabLoadBalancer {
            // Validation refused ports above 65535.
            port: written
                .and_then(|l| l.port)
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(0),
            image: written
                .and_then(|l| l.image.clone())
                .unwrap_or_else(|| crate::lab::DEFAULT_LOAD_BALANCER_IMAGE.to_string()),
            container: format!("{}-{}", self.name(), crate::lab::LOAD_BALANCER_NAME),
        })
    }

    /// The mirror's CA PEM, if given.
    pub fn registry_ca_pem(&self) -> Option<&str> {
        self.mirror.as_ref().and_then(|m| m.ca_pem.as_deref())
    }

    /// The package mirror's CA (PEM certificates only), when `packages.mirror.caFile` is given.
    pub fn packages_mirror_ca_pem(&self) -> Option<&str> {
        self.packages_mirror_ca_pem.as_deref()
    }

    /// The OIDC issuer CA PEM, if OIDC with `caFile` is configured.
    pub fn oidc_ca_pem(&self) -> Option<&str> {
        self.oidc_ca_pem.as_deref()
    }

    /// The audit policy text (`audit.k8s.io/v1` Policy): the file's text, or the built-in default policy
    /// when `policy: default`; `None` without audit.
    pub fn audit_policy(&self) -> Option<&str> {
        self.audit_policy.as_deref()
    }

    /// The kube-vip image as written or defaulted (upstream reference, not mirrored).
    pub fn kube_vip_image(&self) -> &str {
        self.file
            .spec
            .control_plane
            .vip
            .as_ref()
            .and_then(|v| v.image.as_deref())
            .unwrap_or(DEFAULT_KUBE_VIP_IMAGE)
    }

    /// The kube-vip-cloud-provider image as written or defaulted (upstream reference, not mirrored),
    /// when the VIP has a `loadBalancerPool` (`up` installs the allocator only then).
    pub fn kube_vip_cloud_provider_image(&self) -> Option<&str> {
        let pool = self
            .file
            .spec
            .control_plane
            .vip
            .as_ref()?
            .load_balancer_pool
            .as_ref()?;
        Some(
            pool.image
                .as_deref()
                .unwrap_or(DEFAULT_KUBE_VIP_CLOUD_PROVIDER_IMAGE),
        )
    }

    /// The docker node image: `spec.docker.nodeImage`, else `kindest/node:v<version>`.
    pub fn docker_node_image(&self) -> String {
        match &self.file.spec.docker.node_image {
            Some(i) => i.clone(),
            None => format!("kindest/node:{}", self.version.tag()),
        }
    }
}

fn nth_addr(net: &IpNet, n: u32) -> IpAddr {
    match net {
        IpNet::V4(v4) => IpAddr::V4(std::net::Ipv4Addr::from(
            u32::from(v4.network()).wrapping_add(n),
        )),
        IpNet::V6(v6) => IpAddr::V6(std::net::Ipv6Addr::from(
            u128::from(v6.network()).wrapping_add(u128::from(n)),
        )),
    }
}
