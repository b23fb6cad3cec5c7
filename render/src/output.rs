//! What [`crate::render`] returns: files per node and for the cluster, each with its path, mode, bytes
//! and purpose; and the errors it can return.

use std::collections::BTreeMap;

/// The result of rendering one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// Files per node name (every node of the cluster is a key), each list sorted by path; paths are
    /// absolute paths on the node.
    pub per_node: BTreeMap<String, Vec<RenderedFile>>,
    /// Cluster-wide files (add-on manifests/values applied once, the kind config), sorted by path; paths
    /// are relative (e.g. `cni/calico-installation.yaml`).
    pub cluster: Vec<RenderedFile>,
}

impl Rendered {
    /// The file at `path` of node `node`, if rendered.
    pub fn node_file(&self, node: &str, path: &str) -> Option<&RenderedFile> {
        self.per_node.get(node)?.iter().find(|f| f.path == path)
    }

    /// The cluster-wide file at `path`, if rendered.
    pub fn cluster_file(&self, path: &str) -> Option<&RenderedFile> {
        self.cluster.iter().find(|f| f.path == path)
    }

    /// Every file: `(Some(node), file)` for per-node files, `(None, file)` for cluster files.
    pub fn all(&self) -> impl Iterator<Item = (Option<&str>, &RenderedFile)> {
        self.per_node
            .iter()
            .flat_map(|(n, fs)| fs.iter().map(move |f| (Some(n.as_str()), f)))
            .chain(self.cluster.iter().map(|f| (None, f)))
    }
}

/// One rendered file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedFile {
    /// Absolute path on the node (per-node files) or relative path (cluster files).
    pub path: String,
    /// Unix permission bits, e.g. `0o644`; `0o600` for files a secret will be substituted into.
    pub mode: u32,
    /// The content, UTF-8 text for every file rendered today.
    pub content: Vec<u8>,
    /// What the file is for.
    pub purpose: Purpose,
}

impl RenderedFile {
    /// A file from text.
    pub fn text(path: impl Into<String>, mode: u32, content: String, purpose: Purpose) -> Self {
        RenderedFile {
            path: path.into(),
            mode,
            content: content.into_bytes(),
            purpose,
        }
    }

    /// The content as text (lossy for non-UTF-8, which render never produces).
    pub fn as_text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.content)
    }
}

/// What a rendered file is for; phases pick files by purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Purpose {
    /// `kubeadm init --config` (Init + Cluster + Kubelet [+ KubeProxy] configuration).
    KubeadmInit,
    /// `kubeadm join --config` (JoinConfiguration), with join placeholders.
    KubeadmJoin,
    /// `kubeadm reset --config` (v1beta4 ResetConfiguration).
    KubeadmReset,
    /// `kubeadm upgrade apply|node --config` (v1beta4 UpgradeConfiguration).
    KubeadmUpgrade,
    /// The kind `Cluster` config for the docker provider.
    KindConfig,
    /// The kube-vip static pod manifest.
    KubeVip,
    /// The audit policy file.
    AuditPolicy,
    /// The structured AuthenticationConfiguration file.
    AuthenticationConfig,
    /// The OIDC issuer CA for the legacy `--oidc-ca-file` flag.
    OidcCa,
    /// The API server's EncryptionConfiguration (`--encryption-provider-config`), with the key as a
    /// placeholder ([`crate::placeholders::ENCRYPTION_KEY`]).
    EncryptionConfig,
    /// containerd's `config.toml`.
    ContainerdConfig,
    /// A containerd `hosts.toml` under `config_path`.
    ContainerdHosts,
    /// The registry mirror's CA certificate.
    RegistryCa,
    /// A CRI-O `crio.conf.d` drop-in.
    CrioConfig,
    /// A containers-registries.conf v2 drop-in (CRI-O).
    RegistriesConf,
    /// `/etc/sysctl.d` file.
    Sysctl,
    /// `/etc/modules-load.d` file.
    KernelModules,
    /// `/etc/crictl.yaml`: `crictl` on the node talks to the file's runtime.
    CrictlConfig,
    /// A file an unprivileged node container needs before the kubelet starts (`nodeEnvironment:
    /// unprivileged-container`): the `/dev/kmsg` tmpfiles entry, the node environment unit and its script.
    NodeEnvironment,
    /// CNI network configuration (conflist or its template).
    CniConfig,
    /// Settings of the builtin CNI's agent.
    CniAgentConfig,
    /// The systemd unit of the builtin CNI's agent.
    CniAgentUnit,
    /// A Kubernetes manifest applied once to the cluster (CNI resources, RBAC).
    ClusterManifest,
    /// Helm values for a chart installed once (Cilium).
    HelmValues,
    /// The container runtime's systemd drop-in with the proxy environment (`spec.proxy`).
    RuntimeProxy,
    /// The kubelet's systemd drop-in with the proxy environment (`spec.proxy`).
    KubeletProxy,
}

/// Why rendering failed.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A CNI version for which no image table is pinned.
    #[error("no pinned images for {plugin} version {version}; supported: {supported}")]
    UnknownCniVersion {
        /// The CNI plugin name.
        plugin: &'static str,
        /// The requested version.
        version: String,
        /// The versions render knows.
        supported: String,
    },
    /// Serializing a document failed (a bug: every rendered type serializes).
    #[error("could not serialize {what}: {source}")]
    Serialize {
        /// The document.
        what: String,
        /// The serializer's error.
        #[source]
        source: SerializeError,
    },
    /// `cni.mtu` plus the VXLAN overhead does not fit through a node's underlay interface.
    #[error("node {node}: its interface {interface} has MTU {nic}, too small for cni.mtu {mtu} plus the 50-byte VXLAN overhead: packets to and from its pods would be dropped; set `spec.networking.cni.mtu: {fits}` or less, or raise the interface's MTU")]
    MtuTooLarge {
        /// The node.
        node: String,
        /// Its underlay interface.
        interface: String,
        /// That interface's MTU.
        nic: u32,
        /// The file's `cni.mtu`.
        mtu: u32,
        /// The largest overlay MTU the interface carries.
        fits: u32,
    },
    /// A node's underlay interface would lower the overlay MTU the running cluster uses (a node
    /// joining with a smaller NIC): only the file may lower it, for every node at once.
    #[error("node {node}: its interface {interface} has MTU {nic}, so the overlay MTU would drop to {lowered}, below the {running} the running cluster's nodes use: they would send this node packets it drops. Set `spec.networking.cni.mtu: {lowered}` in the cluster file and run `clusterctl up` (every node's overlay then uses {lowered}; pods created before keep their interface MTU until they are recreated), then add the node; or give the node an interface MTU of at least {needed}")]
    MtuWouldLower {
        /// The node.
        node: String,
        /// Its underlay interface.
        interface: String,
        /// That interface's MTU.
        nic: u32,
        /// The overlay MTU it allows (`nic` − 50).
        lowered: u32,
        /// The overlay MTU installed on the cluster's nodes.
        running: u32,
        /// The interface MTU that would keep `running` (`running` + 50).
        needed: u32,
    },
    /// A template failed to render (a bug in an embedded template).
    #[error("template {name} failed: {source}")]
    Template {
        /// Template name.
        name: &'static str,
        /// The template engine's error.
        #[source]
        source: minijinja::Error,
    },
    /// An embedded template failed to load (a bug: it does not parse). The one template environment
    /// is built once per process, so every later render reports the same shared error.
    #[error("template (loading) failed: {name}: {source}")]
    TemplateLoad {
        /// The template that does not parse.
        name: &'static str,
        /// The template engine's error, shared by every render of this process.
        #[source]
        source: std::sync::Arc<minijinja::Error>,
    },
}

/// The serializer's error behind [`RenderError::Serialize`].
#[derive(Debug, thiserror::Error)]
pub enum SerializeError {
    /// From the YAML serializer.
    #[error(transparent)]
    Yaml(#[from] serde_yaml::Error),
    /// From the JSON serializer.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}
