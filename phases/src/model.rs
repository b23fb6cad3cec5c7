//! The engine's view of a cluster: nodes with their role and address, and the files rendered for each
//! node, built from `clusterctl_spec::ValidCluster` and `clusterctl_render::Rendered`
//! (`up::from_file`). The role, the runtime and the taints are spec's own types.

use std::collections::BTreeMap;

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

/// What a rendered file is for; decides which phase places it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FilePurpose {
    /// Kernel modules and sysctls (`/etc/modules-load.d`, `/etc/sysctl.d`): placed by `preflight --fix`
    /// and by `files`.
    Host,
    /// Container runtime configuration (containerd `config.toml`, `certs.d/*/hosts.toml`, CRI-O drop-ins,
    /// `registries.conf`, registry CA files): placed by `runtime/*`, which restarts the runtime when one
    /// changed.
    Runtime,
    /// The kube-vip static pod manifest (`/etc/kubernetes/manifests/kube-vip.yaml`).
    KubeVip,
    /// The kubeadm `InitConfiguration`/`ClusterConfiguration` (first control plane).
    KubeadmInit,
    /// The kubeadm `JoinConfiguration` (other nodes); bootstrap token, CA cert hash and certificate key
    /// are filled in by the join phase, never by the renderer.
    KubeadmJoin,
    /// CNI files: manifests to apply (`*.yaml`) or the builtin agent's unit and config.
    Cni,
    /// The kubeadm `ResetConfiguration` (v1beta4): placed by `init` only when it finds a `kubeadm init`
    /// that failed half-way and resets it (`kubeadm reset --config …`, the file saying `force: true`)
    /// before trying again.
    KubeadmReset,
    /// Anything else the control plane or kubelet reads (audit policy, authentication configuration,
    /// OIDC CA, kubelet drop-ins): placed by `files` before `init`/`join`.
    Other,
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
    /// Which phase places it.
    pub purpose: FilePurpose,
}

impl NodeFile {
    /// A file whose purpose is guessed from its path with [`purpose_of`].
    pub fn new(path: impl Into<String>, mode: u32, content: impl Into<Vec<u8>>) -> Self {
        let path = path.into();
        let purpose = purpose_of(&path);
        NodeFile {
            path,
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

/// The purpose of a rendered file from its path: the paths the renderer writes (kubeadm's, kube-vip's,
/// containerd's and CRI-O's well-known locations). Unknown paths are [`FilePurpose::Other`].
pub fn purpose_of(path: &str) -> FilePurpose {
    let name = path.rsplit('/').next().unwrap_or(path);
    if path.starts_with("/etc/modules-load.d/") || path.starts_with("/etc/sysctl.d/") {
        FilePurpose::Host
    } else if path.starts_with("/etc/containerd/")
        || path.starts_with("/etc/crio/")
        || path.starts_with("/etc/containers/")
    {
        FilePurpose::Runtime
    } else if path.ends_with("/manifests/kube-vip.yaml") {
        FilePurpose::KubeVip
    } else if name.contains("kubeadm") && name.contains("init") {
        FilePurpose::KubeadmInit
    } else if name.contains("kubeadm") && name.contains("join") {
        FilePurpose::KubeadmJoin
    } else if path.contains("/cni/") || name.starts_with("clusterctl-cni") {
        FilePurpose::Cni
    } else {
        FilePurpose::Other
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
