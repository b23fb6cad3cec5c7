//! The engine's view of a cluster: nodes with their role and address, and the files rendered for each
//! node, built from `clusterctl_spec::ValidCluster` and `clusterctl_render::Rendered`
//! (`up::from_file`). The role, the runtime and the taints are spec's own types.

use std::collections::BTreeMap;

pub use clusterctl_render::Purpose;
pub use clusterctl_spec::model::{Role, RuntimeKind};

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's name (`nodes[].name`); also its Kubernetes Node name.
    pub name: String,
    /// Control plane or worker.
    pub role: Role,
    /// The address the node is reached at and advertises (IPv4/IPv6 literal or host name).
    pub address: String,
    /// Labels to set on the Node object (`nodes[].labels`), reconciled through the API.
    pub labels: BTreeMap<String, String>,
    /// Taints (`nodes[].taints`), reconciled through the API.
    pub taints: Vec<clusterctl_spec::model::Taint>,
}

impl NodeInfo {
    /// A node with no labels or taints.
    pub fn new(name: impl Into<String>, role: Role, address: impl Into<String>) -> Self {
        NodeInfo {
            name: name.into(),
            role,
            address: address.into(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
        }
    }
    /// True for control-plane nodes.
    pub fn is_control_plane(&self) -> bool {
        self.role == Role::ControlPlane
    }
}

/// Which phase places a rendered file, as the render purposes ([`Purpose`]) it places
/// (`up::UpData::files_of`).
pub mod placed {
    use clusterctl_render::Purpose;

    /// Kernel modules, sysctls and the node environment of an unprivileged node container: placed by
    /// `preflight --fix` and by `files`.
    pub const HOST: &[Purpose] = &[
        Purpose::Sysctl,
        Purpose::KernelModules,
        Purpose::NodeEnvironment,
    ];
    /// Container runtime configuration (containerd `config.toml`, `certs.d/*/hosts.toml`, CRI-O
    /// drop-ins, `registries.conf`, registry CA files): placed by `runtime/*`, which restarts the
    /// runtime when one changed.
    pub const RUNTIME: &[Purpose] = &[
        Purpose::ContainerdConfig,
        Purpose::ContainerdHosts,
        Purpose::RegistryCa,
        Purpose::CrioConfig,
        Purpose::RegistriesConf,
    ];
    /// The kube-vip static pod manifest (`/etc/kubernetes/manifests/kube-vip.yaml`).
    pub const KUBE_VIP: &[Purpose] = &[Purpose::KubeVip];
    /// The kubeadm `InitConfiguration`/`ClusterConfiguration` (first control plane).
    pub const KUBEADM_INIT: &[Purpose] = &[Purpose::KubeadmInit];
    /// The kubeadm `JoinConfiguration` (other nodes); bootstrap token, CA cert hash and certificate
    /// key are filled in by the join phase, never by the renderer.
    pub const KUBEADM_JOIN: &[Purpose] = &[Purpose::KubeadmJoin];
    /// The kubeadm `ResetConfiguration` (v1beta4): placed by `init` only when it finds a `kubeadm
    /// init` that failed half-way and resets it before trying again.
    pub const KUBEADM_RESET: &[Purpose] = &[Purpose::KubeadmReset];
    /// CNI files: manifests and Helm values to apply (on the first control plane) or the builtin
    /// agent's unit and config.
    pub const CNI: &[Purpose] = &[
        Purpose::CniConfig,
        Purpose::CniAgentConfig,
        Purpose::CniAgentUnit,
        Purpose::ClusterManifest,
        Purpose::HelmValues,
    ];
    /// Anything else the control plane or kubelet reads (audit policy, authentication
    /// configuration, OIDC CA, crictl's configuration): placed by `files` before `init`/`join`.
    pub const OTHER: &[Purpose] = &[
        Purpose::AuditPolicy,
        Purpose::AuthenticationConfig,
        Purpose::OidcCa,
        Purpose::CrictlConfig,
    ];
}

/// One file rendered for one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFile {
    /// Absolute path on the node.
    pub path: String,
    /// Unix permission bits (`0o600` for anything holding credentials).
    pub mode: u32,
    /// The file's bytes.
    pub content: Vec<u8>,
    /// What it is for (render's purpose; [`placed`] says which phase places it).
    pub purpose: Purpose,
}

impl NodeFile {
    /// A file with `purpose`.
    pub fn new(
        path: impl Into<String>,
        mode: u32,
        content: impl Into<Vec<u8>>,
        purpose: Purpose,
    ) -> Self {
        NodeFile {
            path: path.into(),
            mode,
            content: content.into(),
            purpose,
        }
    }
    /// Lower-case hex sha256 of the content.
    pub fn sha256(&self) -> String {
        crate::util::sha256_hex(&self.content)
    }
}

/// The CNI choice (`spec.networking.cni.plugin`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CniChoice {
    /// clusterctl's own dataplane: binary at `/opt/cni/bin/clusterctl-cni`, agent unit on every node.
    Builtin,
    /// A third-party CNI (calico, cilium, flannel, kindnet) whose rendered manifests are applied.
    Manifests(String),
    /// No CNI installed by clusterctl.
    None,
}
