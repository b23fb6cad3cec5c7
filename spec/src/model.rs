//! The serde model of the cluster file (`apiVersion: clusterctl.io/v1alpha1`, `kind: Cluster`), exactly as
//! written by the user: camelCase keys, unknown fields rejected, defaults applied by serde where a default
//! is a constant. Values whose checking needs context (CIDRs, addresses, versions) stay strings here and are
//! parsed by validation, so that every bad value is reported with its position in one run; the parsed
//! forms live in [`crate::ValidCluster`]. Each field's doc names the upstream setting it becomes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The only accepted `apiVersion`.
pub const API_VERSION: &str = "clusterctl.io/v1alpha1";
/// The only accepted `kind`.
pub const KIND: &str = "Cluster";

/// The whole cluster file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterFile {
    /// Must be `clusterctl.io/v1alpha1` ([`API_VERSION`]).
    pub api_version: String,
    /// Must be `Cluster` ([`KIND`]).
    pub kind: String,
    /// The cluster's identity.
    pub metadata: Metadata,
    /// The desired cluster.
    pub spec: ClusterSpec,
}

/// `metadata`: the cluster's identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metadata {
    /// Cluster name, a DNS-1123 label. Becomes kubeadm `ClusterConfiguration.clusterName`, the kind
    /// `Cluster.name`, and the prefix of docker node container names.
    pub name: String,
}

/// `spec`: everything about the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Exact Kubernetes patch version, e.g. `v1.34.1` (the leading `v` optional). Must be in
    /// [`crate::versions::SUPPORTED`]. Becomes kubeadm `ClusterConfiguration.kubernetesVersion` and the
    /// kind node image tag.
    pub kubernetes_version: String,
    /// Where nodes come from: `ssh` (existing hosts) or `docker` (kind-style node containers).
    pub provider: Provider,
    /// Control-plane endpoint and kube-vip VIP.
    #[serde(default)]
    pub control_plane: ControlPlane,
    /// Pod and service networking, kube-proxy and the CNI.
    #[serde(default)]
    pub networking: Networking,
    /// The container runtime on every node.
    #[serde(default)]
    pub runtime: Runtime,
    /// What the nodes are: `host` (default: machines, VMs or privileged containers) or
    /// `unprivileged-container` (node containers without `--privileged`, whose kernel settings are the
    /// host's and read-only). See [`NodeEnvironment`] for what the second one changes.
    #[serde(default)]
    pub node_environment: NodeEnvironment,
    /// A registry mirror under which every image is stored (rewrite prefix), and the lab's local
    /// registry (`registry.local`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<Registry>,
    /// The default StorageClass (`storage.defaultClass`, [`crate::lab::Storage`]).
    #[serde(default, skip_serializing_if = "crate::lab::Storage::is_empty")]
    pub storage: crate::lab::Storage,
    /// kube-apiserver settings: certSANs, extra args, OIDC, audit.
    #[serde(default)]
    pub api_server: ApiServer,
    /// Kubelet settings (kubelet `KubeletConfiguration`, `kubelet.config.k8s.io/v1beta1`).
    #[serde(default)]
    pub kubelet: Kubelet,
    /// SSH defaults for the `ssh` provider; nodes may override them.
    #[serde(default)]
    pub ssh: SshDefaults,
    /// Settings of the `docker` provider.
    #[serde(default)]
    pub docker: DockerProvider,
    /// The HTTP(S) proxy of the nodes' downloads, runtime and kubelet (`crate::proxy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<crate::proxy::ProxySettings>,
    /// The nodes, in order; the first control plane runs `kubeadm init`.
    pub nodes: Vec<Node>,
    /// Images to make available on every node after creation.
    #[serde(default)]
    pub images: Images,
    /// Air-gap bundle settings (used by `clusterctl airgap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub airgap: Option<Airgap>,
    /// kubeadm settings that are kubeadm's own (its timeouts).
    #[serde(default, skip_serializing_if = "Kubeadm::is_empty")]
    pub kubeadm: Kubeadm,
    /// Where `up` gets kubeadm, kubelet, kubectl (with cri-tools and kubernetes-cni) and the container
    /// runtime for every node, and whether it may replace other versions (see [`Packages`]).
    #[serde(default, skip_serializing_if = "Packages::is_default")]
    pub packages: Packages,
}

/// `spec.packages`: where the Kubernetes packages and the container runtime come from. `up` brings
/// every node to exactly `kubernetesVersion` (kubeadm, kubelet, kubectl pinned, held afterwards) and
/// the runtime `runtime.kind` names, unless the source is `preinstalled`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Packages {
    /// `upstream` (pkgs.k8s.io and the runtime's upstream), `mirror` (a site mirror of those, see
    /// `mirror`), `bundle` (the air-gap bundle's `airgap.packages`) or `preinstalled` (only checked).
    /// Unset: `upstream` for SSH hosts, `preinstalled` for the docker provider and air-gapped files
    /// ([`ClusterSpec::package_source`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<PackageSource>,
    /// With `source: mirror`: the site mirror's URL prefix and CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<PackageMirror>,
    /// Replace Kubernetes packages or a runtime of other versions found on a node (default false: such
    /// a node is refused, naming what it has and what the file wants).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replace_installed: bool,
}

impl Packages {
    /// True when nothing is set (the default).
    pub fn is_default(&self) -> bool {
        *self == Packages::default()
    }
}

/// `spec.packages.source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PackageSource {
    /// The upstream repositories: `https://pkgs.k8s.io/core:/stable:/vX.Y/{deb,rpm}/`, CRI-O's
    /// repository of that minor, containerd and runc release archives.
    Upstream,
    /// The same paths under the site mirror's URL prefix (`packages.mirror.url`).
    Mirror,
    /// The air-gap bundle's packages (`airgap.packages`), installed from files.
    Bundle,
    /// Installed by someone else: only checked (present, and at `kubernetesVersion` where the
    /// programs say so).
    Preinstalled,
}

/// `spec.packages.mirror`: a site mirror (or caching proxy) of the upstream package locations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PackageMirror {
    /// `https://` (or `http://`) URL prefix that replaces the scheme and host of every upstream
    /// location, its path kept: `https://repo.example.com/k8s` serves
    /// `https://repo.example.com/k8s/core:/stable:/v1.34/deb/` for `https://pkgs.k8s.io/core:/stable:/v1.34/deb/`.
    pub url: String,
    /// PEM CA of the mirror, relative to the cluster file; placed on every node and trusted for the
    /// mirror's host only (apt `Acquire::https::<host>::CaInfo`, yum `sslcacert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
}

impl ClusterSpec {
    /// The effective `packages.source`: the file's; else for SSH hosts `upstream` (`up` takes bare
    /// hosts to a cluster; a node that already has exactly the wanted versions, held, is left alone
    /// and nothing is downloaded) or, for a file naming an air-gap bundle, `bundle` when the bundle
    /// carries kubeadm (`airgap.packages`; the `packages` phase installs from it offline) and
    /// `preinstalled` otherwise (`airgap/packages` places the bundle's other files); `preinstalled` for
    /// the docker provider (its node image carries the programs).
    pub fn package_source(&self) -> PackageSource {
        self.packages
            .source
            .unwrap_or(match (&self.provider, &self.airgap) {
                (Provider::Ssh, None) => PackageSource::Upstream,
                (Provider::Ssh, Some(a)) if a.packages.iter().any(|p| p.name == "kubeadm") => {
                    PackageSource::Bundle
                }
                _ => PackageSource::Preinstalled,
            })
    }
}

/// `spec.kubeadm`: settings of kubeadm itself.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Kubeadm {
    /// How long kubeadm waits for each thing (kubeadm v1beta4 `Timeouts`); unset ones keep kubeadm's
    /// defaults.
    #[serde(default, skip_serializing_if = "KubeadmTimeouts::is_empty")]
    pub timeouts: KubeadmTimeouts,
    /// kubeadm preflight checks whose failure kubeadm reports as a warning instead of stopping, each
    /// with the reason the file gives (kubeadm's `ignorePreflightErrors`, written into the
    /// `nodeRegistration` of every Init and Join configuration and the `apply`, `node` and `plan` of
    /// the UpgradeConfiguration; `--ignore-preflight-errors` of `kubeadm upgrade apply` where the kubeadm
    /// API has no UpgradeConfiguration). The known case: kubeadm ≥ 1.35's `SystemVerification` refuses
    /// cgroup v1 hosts, and kubeadm documents that running there needs both kubelet `failCgroupV1:
    /// false` and skipping that check (KEP 5573).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_preflight_errors: Vec<IgnoredPreflightError>,
}

impl Kubeadm {
    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        self.timeouts.is_empty() && self.ignore_preflight_errors.is_empty()
    }

    /// The names of the ignored kubeadm preflight checks, in file order (kubeadm's
    /// `ignorePreflightErrors` list).
    pub fn ignored_checks(&self) -> Vec<String> {
        self.ignore_preflight_errors
            .iter()
            .map(|i| i.check.clone())
            .collect()
    }
}

/// One entry of `spec.kubeadm.ignorePreflightErrors`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IgnoredPreflightError {
    /// The kubeadm preflight check, as kubeadm names it in `[ERROR <check>]` (e.g.
    /// `SystemVerification`, `Swap`, `Port-6443`). `all` is refused: name the checks one by one.
    pub check: String,
    /// Why the check is ignored on this cluster (free text, required; shown when kubeadm runs).
    pub reason: String,
}

/// `spec.kubeadm.timeouts`: kubeadm v1beta4 `Timeouts` (cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go),
/// each a Go duration (`10m`, `4m0s`). Written into the `timeouts` of every Init, Join, Reset and
/// Upgrade configuration (v1beta4). kubeadm v1beta3 has only two of them: `controlPlaneComponentHealthCheck`
/// becomes `apiServer.timeoutForControlPlane` and `discovery` becomes `discovery.timeout`; the others
/// have no v1beta3 field.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubeadmTimeouts {
    /// How long kubeadm waits for the control-plane components (API server, controller manager,
    /// scheduler) to report healthy. kubeadm's default `4m0s`; slow hosts need more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_component_health_check: Option<String>,
    /// How long kubeadm waits for the kubelet to report healthy. kubeadm's default `4m0s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_health_check: Option<String>,
    /// Timeout of kubeadm's calls to the Kubernetes API. kubeadm's default `1m0s`.
    #[serde(
        default,
        rename = "kubernetesAPICall",
        skip_serializing_if = "Option::is_none"
    )]
    pub kubernetes_api_call: Option<String>,
    /// Timeout of kubeadm's calls to etcd. kubeadm's default `2m0s`.
    #[serde(
        default,
        rename = "etcdAPICall",
        skip_serializing_if = "Option::is_none"
    )]
    pub etcd_api_call: Option<String>,
    /// How long a joining kubelet may take for its TLS bootstrap. kubeadm's default `5m0s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_bootstrap: Option<String>,
    /// How long a joining node may take to discover and validate the cluster. kubeadm's default `5m0s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<String>,
    /// How long `kubeadm upgrade` waits for a static pod to be replaced. kubeadm's default `5m0s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_manifests: Option<String>,
}

impl KubeadmTimeouts {
    /// True when no timeout is set.
    pub fn is_empty(&self) -> bool {
        self.fields().iter().all(|(_, v)| v.is_none())
    }

    /// Every timeout with its field name in the file, in kubeadm's order.
    pub fn fields(&self) -> [(&'static str, &Option<String>); 7] {
        [
            (
                "controlPlaneComponentHealthCheck",
                &self.control_plane_component_health_check,
            ),
            ("kubeletHealthCheck", &self.kubelet_health_check),
            ("kubernetesAPICall", &self.kubernetes_api_call),
            ("etcdAPICall", &self.etcd_api_call),
            ("tlsBootstrap", &self.tls_bootstrap),
            ("discovery", &self.discovery),
            ("upgradeManifests", &self.upgrade_manifests),
        ]
    }
}

/// `spec.provider`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Existing hosts reached over SSH.
    Ssh,
    /// Node containers on the local Docker daemon (as kind does).
    Docker,
}

impl Provider {
    /// The provider as the cluster file spells it: `ssh` or `docker`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Ssh => "ssh",
            Provider::Docker => "docker",
        }
    }

    /// True for the docker provider: the nodes are node containers `up` makes (kind style).
    pub fn node_containers(self) -> bool {
        self == Provider::Docker
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `spec.controlPlane`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ControlPlane {
    /// `host:port` or `host` (port 6443). Default: the VIP address with port 6443, else the first control
    /// plane's address. Becomes kubeadm `ClusterConfiguration.controlPlaneEndpoint` and is added to the
    /// apiserver certSANs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The kube-vip virtual IP for the control plane (and optionally LoadBalancer services).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip: Option<Vip>,
}

/// `spec.controlPlane.vip`: kube-vip settings (the kube-vip static pod's env: `address`, `vip_interface`,
/// `vip_arp`/`bgp_enable`, `svc_enable`, `vip_subnet`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Vip {
    /// The VIP, an IPv4/IPv6 address (kube-vip `address`).
    pub address: String,
    /// Default network interface carrying the VIP (kube-vip `vip_interface`); nodes may override it with
    /// `vipInterface`. Required in ARP mode unless every control plane sets `vipInterface`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// `arp` (layer 2, default) or `bgp` (kube-vip `vip_arp` / `bgp_enable`).
    #[serde(default)]
    pub mode: VipMode,
    /// The control planes' subnet as a CIDR, e.g. `172.20.6.0/24`; used to check the VIP lies in it when
    /// node addresses carry no prefix length. (Not kube-vip's `vip_subnet`, which stays `/32`.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
    /// Also serve LoadBalancer Services (kube-vip `svc_enable`). Default false.
    #[serde(default)]
    pub load_balancer_services: bool,
    /// The addresses LoadBalancer Services get (kube-vip-cloud-provider's `kubevip` ConfigMap); with it,
    /// `up` installs kube-vip-cloud-provider. Needs `loadBalancerServices: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer_pool: Option<LoadBalancerPool>,
    /// kube-vip image. Default `ghcr.io/kube-vip/kube-vip:v1.0.1`; rewritten under the registry mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// BGP settings, required when `mode: bgp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bgp: Option<Bgp>,
}

/// `spec.controlPlane.vip.loadBalancerPool`: the global pool (`cidr-global`, `range-global` of
/// kube-vip-cloud-provider's `kubevip` ConfigMap), per-namespace pools (`cidr-<namespace>`,
/// `range-<namespace>`) and the allocator's image.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LoadBalancerPool {
    /// CIDRs, comma-separated (`cidr-global`), e.g. `172.20.6.240/29`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// Address ranges `first-last`, comma-separated (`range-global`), e.g. `172.20.6.200-172.20.6.202`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    /// Pools of one namespace each (`cidr-<namespace>`, `range-<namespace>`), used before the global one
    /// for that namespace's Services.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub namespaces: std::collections::BTreeMap<String, NamespacePool>,
    /// kube-vip-cloud-provider image. Default `ghcr.io/kube-vip/kube-vip-cloud-provider:v0.0.12`;
    /// rewritten under the registry mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// `spec.controlPlane.vip.loadBalancerPool.namespaces.<namespace>`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamespacePool {
    /// CIDRs, comma-separated (`cidr-<namespace>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// Address ranges `first-last`, comma-separated (`range-<namespace>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
}

/// `spec.controlPlane.vip.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VipMode {
    /// Gratuitous ARP on the elected leader (kube-vip `vip_arp: true`).
    #[default]
    Arp,
    /// BGP advertisement (kube-vip `bgp_enable: true`).
    Bgp,
}

/// `spec.controlPlane.vip.bgp`: kube-vip BGP settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Bgp {
    /// Local AS number (kube-vip `bgp_as`).
    #[serde(rename = "as")]
    pub local_as: u32,
    /// Router ID (kube-vip `bgp_routerid`); default: each node's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_id: Option<String>,
    /// Peers (kube-vip `bgp_peers` as `address:as`).
    #[serde(default)]
    pub peers: Vec<BgpPeer>,
}

/// One BGP peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BgpPeer {
    /// Peer address.
    pub address: String,
    /// Peer AS number.
    #[serde(rename = "as")]
    pub peer_as: u32,
}

/// `spec.networking`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Networking {
    /// Pod network CIDR. Default `10.244.0.0/16`. Becomes kubeadm `networking.podSubnet` (and the
    /// controller manager's `--cluster-cidr`), kind `networking.podSubnet`, and the CNI's pool (Calico
    /// `ipPools[].cidr`, Cilium `ipv4NativeRoutingCIDR`, flannel `Network`, builtin pool).
    #[serde(default = "default_pod_subnet")]
    pub pod_subnet: String,
    /// Service CIDR. Default `10.96.0.0/16`. Becomes kubeadm `networking.serviceSubnet`, kind
    /// `networking.serviceSubnet`.
    #[serde(default = "default_service_subnet")]
    pub service_subnet: String,
    /// Cluster DNS domain. Default `cluster.local`. Becomes kubeadm `networking.dnsDomain` and kubelet
    /// `clusterDomain`.
    #[serde(default = "default_dns_domain")]
    pub dns_domain: String,
    /// Size of each node's podCIDR. Default 24 for IPv4, 64 for IPv6. Becomes the controller manager's
    /// `--node-cidr-mask-size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_cidr_mask_size: Option<u8>,
    /// kube-proxy mode: `iptables` (default), `ipvs`, `nftables`, or `disabled` (no kube-proxy; needs a CNI
    /// that replaces it). Becomes `KubeProxyConfiguration.mode`, kubeadm `proxy.disabled` (v1beta4) or
    /// `--skip-phases=addon/kube-proxy` (v1beta3), kind `networking.kubeProxyMode: none`.
    #[serde(default)]
    pub kube_proxy: KubeProxyMode,
    /// The CNI.
    #[serde(default)]
    pub cni: Cni,
    /// The path MTU of the nodes' network when it is smaller than their interfaces' MTU (a tunnel or
    /// VPN between sites, a provider network with a smaller MTU than the NICs say), bytes. The overlay
    /// MTU is derived from the smallest of this and every node's interface MTU; `cni.mtu` must fit
    /// under it with the VXLAN overhead (50 bytes).
    #[serde(
        default,
        rename = "underlayMTU",
        skip_serializing_if = "Option::is_none"
    )]
    pub underlay_mtu: Option<u32>,
}

impl Default for Networking {
    fn default() -> Self {
        Networking {
            pod_subnet: default_pod_subnet(),
            service_subnet: default_service_subnet(),
            dns_domain: default_dns_domain(),
            node_cidr_mask_size: None,
            kube_proxy: KubeProxyMode::default(),
            cni: Cni::default(),
            underlay_mtu: None,
        }
    }
}

/// Bytes VXLAN adds to every packet (outer Ethernet 14, IPv4 20, UDP 8, VXLAN 8): an overlay MTU is the
/// underlay MTU minus this.
pub const VXLAN_OVERHEAD: u32 = 50;

/// Default `podSubnet`.
pub fn default_pod_subnet() -> String {
    "10.244.0.0/16".to_string()
}
/// Default `serviceSubnet`.
pub fn default_service_subnet() -> String {
    "10.96.0.0/16".to_string()
}
/// Default `dnsDomain`.
pub fn default_dns_domain() -> String {
    "cluster.local".to_string()
}

/// `spec.networking.kubeProxy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KubeProxyMode {
    /// iptables proxier (default).
    #[default]
    Iptables,
    /// IPVS proxier.
    Ipvs,
    /// nftables proxier (GA in Kubernetes 1.33).
    Nftables,
    /// No kube-proxy at all.
    Disabled,
}

/// `spec.networking.cni`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Cni {
    /// Which CNI: `builtin` (default, clusterctl's own), `calico`, `cilium`, `flannel`, `kindnet` (docker
    /// provider only: kind's default CNI, `disableDefaultCNI: false`) or `none` (install your own).
    #[serde(default)]
    pub plugin: CniPlugin,
    /// Version of the CNI (Helm chart / manifest version), e.g. `v3.29.1`; default per plugin in render.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Cilium only: replace kube-proxy (Cilium Helm value `kubeProxyReplacement: true`). Default false.
    #[serde(default)]
    pub kube_proxy_replacement: bool,
    /// Pod interface MTU. Default for the builtin CNI: one MTU for the whole cluster, the smallest
    /// underlay MTU among the nodes (and `networking.underlayMTU`) minus the VXLAN overhead (50);
    /// other CNIs derive their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Pass-through values merged into the CNI's own settings (Helm values for Calico/Cilium, net-conf for
    /// flannel). The pool CIDR is always taken from `podSubnet` and may not be set here.
    #[serde(default, skip_serializing_if = "serde_yaml::Mapping::is_empty")]
    pub values: serde_yaml::Mapping,
    /// Where the CNI's upstream files come from instead of their release addresses (e.g. a site mirror):
    /// calico `operator-crds.yaml`, `tigera-operator.yaml`; cilium `cilium.tgz` and
    /// `helm-linux-<arch>.tar.gz`; flannel `kube-flannel.yml`. A `sha256` given here is what the file
    /// must have; without one the version table's pinned digest applies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<CniSource>,
    /// Accept an upstream file that neither the version table nor `sources[].sha256` pins (e.g. a
    /// Cilium version outside the table). Its sha256 at the first download is recorded and required
    /// from then on. Default false: such a file is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_unverified: bool,
}

/// `spec.networking.cni.sources[]`: another address (and digest) for one upstream file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CniSource {
    /// The file's name, e.g. `tigera-operator.yaml` (see `docs/cni.md` for each CNI's files).
    pub name: String,
    /// `https://` (or, for a loopback mirror, `http://`) address of the file.
    pub url: String,
    /// sha256 (64 hex digits) the file must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl Default for Cni {
    fn default() -> Self {
        Cni {
            plugin: CniPlugin::Builtin,
            version: None,
            kube_proxy_replacement: false,
            mtu: None,
            values: serde_yaml::Mapping::new(),
            sources: Vec::new(),
            accept_unverified: false,
        }
    }
}

/// `spec.networking.cni.plugin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CniPlugin {
    /// clusterctl's embedded CNI (veth + VXLAN overlay); does not replace kube-proxy.
    #[default]
    Builtin,
    /// Project Calico (tigera-operator `Installation`).
    Calico,
    /// Cilium (Helm values).
    Cilium,
    /// flannel (`net-conf.json`).
    Flannel,
    /// kind's kindnet; docker provider only.
    Kindnet,
    /// No CNI installed by clusterctl.
    None,
}

impl CniPlugin {
    /// The plugin's name as written in the file (`builtin`, `calico`, …, `none`).
    pub fn name(self) -> &'static str {
        match self {
            CniPlugin::Builtin => "builtin",
            CniPlugin::Calico => "calico",
            CniPlugin::Cilium => "cilium",
            CniPlugin::Flannel => "flannel",
            CniPlugin::Kindnet => "kindnet",
            CniPlugin::None => "none",
        }
    }
}

/// `spec.runtime`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Runtime {
    /// `containerd` (default) or `crio`. Decides kubeadm `nodeRegistration.criSocket`
    /// (`unix:///run/containerd/containerd.sock` / `unix:///var/run/crio/crio.sock`).
    #[serde(default)]
    pub kind: RuntimeKind,
    /// cgroup driver: `systemd` (default) or `cgroupfs`. Becomes kubelet `cgroupDriver`, containerd
    /// `SystemdCgroup`, CRI-O `cgroup_manager`.
    #[serde(default)]
    pub cgroup_driver: CgroupDriver,
    /// The hosts' cgroup version (`v1` or `v2`) when known; used to warn about Kubernetes ≥ 1.35 on cgroup
    /// v1 (kubelet `failCgroupV1`). Unset: unknown (the docker provider inherits the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cgroup_version: Option<CgroupVersion>,
}

/// `spec.nodeEnvironment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeEnvironment {
    /// Machines, VMs or privileged containers: nothing special.
    #[default]
    Host,
    /// Unprivileged containers (no `--privileged`, no CAP_SYS_RESOURCE; kind's rootless mode is the
    /// model). containerd gets `restrict_oom_score_adj = true` and, on its runc runtime,
    /// `privileged_without_host_devices = true`; kube-proxy `conntrack.maxPerCore: 0` (nf_conntrack_max
    /// is host-wide and read-only); every node gets a `/dev/kmsg` link to `/dev/null` (systemd-tmpfiles)
    /// and a unit that shows the kubelet the kernel values it insists on (`vm.overcommit_memory`,
    /// `kernel.panic`, …) through read-only bind mounts instead of changing the host's. containerd only.
    UnprivilegedContainer,
}

/// `spec.runtime.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// containerd.
    #[default]
    Containerd,
    /// CRI-O.
    Crio,
}

impl RuntimeKind {
    /// The systemd unit that runs the runtime on a node: `containerd` or `crio`.
    pub fn unit(self) -> &'static str {
        match self {
            RuntimeKind::Containerd => "containerd",
            RuntimeKind::Crio => "crio",
        }
    }
}

/// `spec.runtime.cgroupDriver`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupDriver {
    /// systemd (kubeadm's default since 1.22).
    #[default]
    Systemd,
    /// cgroupfs.
    Cgroupfs,
}

/// `spec.runtime.hostCgroupVersion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// cgroup v1 (legacy hierarchy).
    V1,
    /// cgroup v2 (unified hierarchy).
    V2,
}

/// `spec.registry`: a registry mirror used as a rewrite prefix. An image `registry.k8s.io/kube-apiserver:v1.34.1`
/// is pulled as `<mirror>/kube-apiserver:v1.34.1`; `registry.k8s.io/coredns/coredns:v1.12.1` as
/// `<mirror>/coredns/coredns:v1.12.1` (the path minus the source host).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Registry {
    /// `host[:port]/path`, e.g. `harbor.example.com/library`. Becomes kubeadm `imageRepository`, containerd
    /// `hosts.toml` / CRI-O `registries.conf` mirror entries and the sandbox image. Optional when
    /// `local` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<String>,
    /// A registry container beside the docker provider's nodes (`localhost:<port>` on this machine and
    /// on every node), [`crate::lab::LocalRegistry`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<crate::lab::LocalRegistry>,
    /// PEM CA of the mirror, relative to the cluster file. Installed for containerd (`hosts.toml` `ca`) and
    /// CRI-O (`/etc/containers/certs.d/<host>/ca.crt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Name of the environment variable holding the registry user name (never the value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_env: Option<String>,
    /// Name of the environment variable holding the registry password (never the value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    /// Accepted only to reject it with a helpful error: credentials are never written inline.
    #[serde(default, skip_serializing)]
    pub username: Option<serde_yaml::Value>,
    /// Accepted only to reject it with a helpful error: credentials are never written inline.
    #[serde(default, skip_serializing)]
    pub password: Option<serde_yaml::Value>,
}

/// `spec.apiServer`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiServer {
    /// Extra SANs for the apiserver certificate (IPs or DNS names). The endpoint host and the VIP are
    /// added automatically. Becomes kubeadm `apiServer.certSANs`.
    #[serde(default, rename = "certSANs")]
    pub cert_sans: Vec<String>,
    /// Extra kube-apiserver flags without the leading `--`. Becomes kubeadm `apiServer.extraArgs`
    /// (v1beta4: list of name/value; v1beta3: map).
    #[serde(default)]
    pub extra_args: BTreeMap<String, String>,
    /// OpenID Connect authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<Oidc>,
    /// Audit logging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<Audit>,
    /// Encryption at rest of API resources in etcd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<Encryption>,
}

/// `spec.apiServer.encryption`: an `apiserver.config.k8s.io/v1` `EncryptionConfiguration` written 0600 on
/// every control plane (`/etc/kubernetes/enc/encryption.yaml`) with a 32-byte key generated once, passed
/// with `--encryption-provider-config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Encryption {
    /// The provider new writes use: `aescbc` (default) or `secretbox`.
    #[serde(default)]
    pub provider: EncryptionProvider,
    /// The resources to encrypt (`resource` or `resource.group`, e.g. `secrets`, `configmaps`,
    /// `deployments.apps`). Default `[secrets]`.
    #[serde(default = "default_encrypted_resources")]
    pub resources: Vec<String>,
}

/// Default `encryption.resources`: Secrets only.
pub fn default_encrypted_resources() -> Vec<String> {
    vec!["secrets".to_string()]
}

/// `spec.apiServer.encryption.provider`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncryptionProvider {
    /// AES-CBC with PKCS#7 padding (`k8s:enc:aescbc:v1:`).
    #[default]
    Aescbc,
    /// XSalsa20 and Poly1305 (`k8s:enc:secretbox:v1:`).
    Secretbox,
}

impl EncryptionProvider {
    /// The provider's name in the EncryptionConfiguration (`aescbc`, `secretbox`).
    pub fn as_str(self) -> &'static str {
        match self {
            EncryptionProvider::Aescbc => "aescbc",
            EncryptionProvider::Secretbox => "secretbox",
        }
    }
}

/// `spec.apiServer.oidc`: becomes the legacy `--oidc-*` flags or a structured `AuthenticationConfiguration`
/// (`apiserver.config.k8s.io/v1beta1` for 1.30–1.33, `v1` from 1.34) passed with `--authentication-config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Oidc {
    /// Issuer URL, must be `https://` (`--oidc-issuer-url` / `jwt[].issuer.url`).
    #[serde(rename = "issuerURL")]
    pub issuer_url: String,
    /// Client ID (`--oidc-client-id` / `jwt[].issuer.audiences`).
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// Claim used as user name. Default `sub` (`--oidc-username-claim` / `claimMappings.username.claim`).
    #[serde(default = "default_username_claim")]
    pub username_claim: String,
    /// Prefix for user names. Default: none given, i.e. the issuer URL followed by `#` for claims other
    /// than `email` — the same default in both modes (`--oidc-username-prefix` / `claimMappings.username.prefix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_prefix: Option<String>,
    /// Claim holding group names (`--oidc-groups-claim` / `claimMappings.groups.claim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
    /// Prefix for group names (`--oidc-groups-prefix` / `claimMappings.groups.prefix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_prefix: Option<String>,
    /// PEM CA that signed the issuer's certificate, relative to the cluster file (`--oidc-ca-file`, or
    /// inline `jwt[].issuer.certificateAuthority`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// `flags` (default, legacy `--oidc-*`) or `structured` (`--authentication-config`, Kubernetes ≥ 1.30).
    #[serde(default)]
    pub mode: OidcMode,
}

/// Default OIDC username claim.
pub fn default_username_claim() -> String {
    "sub".to_string()
}

/// `spec.apiServer.oidc.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OidcMode {
    /// Legacy `--oidc-*` apiserver flags.
    #[default]
    Flags,
    /// Structured `AuthenticationConfiguration` file.
    Structured,
}

/// `spec.apiServer.audit`: becomes `--audit-policy-file`, `--audit-log-path`, `--audit-log-maxage`,
/// `--audit-log-maxbackup`, `--audit-log-maxsize` and hostPath mounts for the policy and the log directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Audit {
    /// `default` (clusterctl's built-in policy) or a path, relative to the cluster file, of an
    /// `audit.k8s.io/v1` `Policy`. Installed as `/etc/kubernetes/audit/policy.yaml`.
    #[serde(default = "default_audit_policy")]
    pub policy: String,
    /// Absolute log path on control planes, or `-` for the API server's standard output (read by a
    /// log collector from the container's log; nothing is mounted and no rotation flag is set).
    /// Default `/var/log/kubernetes/audit/audit.log`.
    #[serde(default = "default_audit_log_path")]
    pub log_path: String,
    /// Days to keep old logs (`--audit-log-maxage`). Default 30.
    #[serde(default = "default_audit_max_age")]
    pub max_age: u32,
    /// Old log files to keep (`--audit-log-maxbackup`). Default 10.
    #[serde(default = "default_audit_max_backup")]
    pub max_backup: u32,
    /// Megabytes before rotation (`--audit-log-maxsize`). Default 100.
    #[serde(default = "default_audit_max_size")]
    pub max_size: u32,
}

impl Default for Audit {
    fn default() -> Self {
        Audit {
            policy: default_audit_policy(),
            log_path: default_audit_log_path(),
            max_age: default_audit_max_age(),
            max_backup: default_audit_max_backup(),
            max_size: default_audit_max_size(),
        }
    }
}

/// `audit.logPath` for the API server's standard output (kube-apiserver `--audit-log-path=-`).
pub const AUDIT_LOG_STDOUT: &str = "-";

/// Default audit policy selector: the built-in policy.
pub fn default_audit_policy() -> String {
    "default".to_string()
}
/// Default audit log path.
pub fn default_audit_log_path() -> String {
    "/var/log/kubernetes/audit/audit.log".to_string()
}
fn default_audit_max_age() -> u32 {
    30
}
fn default_audit_max_backup() -> u32 {
    10
}
fn default_audit_max_size() -> u32 {
    100
}

/// `spec.kubelet`: fields of the kubelet `KubeletConfiguration` (`kubelet.config.k8s.io/v1beta1`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Kubelet {
    /// `maxPods`. Default: kubelet's (110).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<u32>,
    /// `systemReserved`, e.g. `{cpu: 500m, memory: 1Gi}`.
    #[serde(default)]
    pub system_reserved: BTreeMap<String, String>,
    /// `kubeReserved`, e.g. `{cpu: 500m, memory: 2Gi}`.
    #[serde(default)]
    pub kube_reserved: BTreeMap<String, String>,
    /// `evictionHard`, e.g. `{memory.available: 500Mi}`.
    #[serde(default)]
    pub eviction_hard: BTreeMap<String, String>,
    /// `shutdownGracePeriod` as a Go duration (`30s`, `1m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_period: Option<String>,
    /// `shutdownGracePeriodCriticalPods` as a Go duration; must not exceed `shutdownGracePeriod`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_period_critical_pods: Option<String>,
    /// `imageMinimumGCAge` as a Go duration.
    #[serde(
        default,
        rename = "imageMinimumGCAge",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_minimum_gc_age: Option<String>,
    /// `imageMaximumGCAge` as a Go duration (0 = off).
    #[serde(
        default,
        rename = "imageMaximumGCAge",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_maximum_gc_age: Option<String>,
    /// `failCgroupV1`: set `false` to run Kubernetes ≥ 1.35 on cgroup v1 hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_cgroup_v1: Option<bool>,
    /// `resolvConf`: the resolver file the kubelet gives pods with `dnsPolicy: Default` (CoreDNS among
    /// them), an absolute path on every node. Default: the kubelet's (`/etc/resolv.conf`, or systemd-resolved's
    /// upstream file, which kubeadm picks). Set it when the nodes' `/etc/resolv.conf` names only a
    /// loopback resolver (Docker's embedded DNS `127.0.0.11`), which CoreDNS would forward to itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolv_conf: Option<String>,
}

/// `spec.ssh`: defaults for every node of the `ssh` provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SshDefaults {
    /// Login user. Default `root`.
    #[serde(default = "default_ssh_user")]
    pub user: String,
    /// Private key file (`~` expanded by the transport). Default: the SSH agent, then `~/.ssh/id_ed25519`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
    /// Port. Default 22.
    #[serde(default = "default_ssh_port")]
    pub port: u16,
    /// Host-key policy: `strict` (known_hosts must match), `accept-new` (default, as OpenSSH
    /// `StrictHostKeyChecking=accept-new`); `insecure` is read only to be refused by validation
    /// (clusterctl always checks host keys).
    #[serde(default)]
    pub host_key_policy: HostKeyPolicy,
    /// How many times connection set-up to a node (TCP connect, handshake, authentication) is tried
    /// before the node counts as unreachable, 1–20: for nodes that are still booting. Default 4 (waits
    /// of 1, 2 and 4 s between them). A refused host key is never retried, nor any command.
    #[serde(default = "default_connect_attempts")]
    pub connect_attempts: u32,
    /// A jump host every node connection goes through (OpenSSH's `ProxyJump`), for nodes the
    /// machine running clusterctl cannot reach directly. Unset: nodes are reached directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bastion: Option<SshBastion>,
}

/// `spec.ssh.bastion`: the jump host. Its host key is checked (against the same known_hosts file as
/// the nodes') under its own `hostKeyPolicy`; the nodes' host keys are checked end to end through it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SshBastion {
    /// Host name or IP address of the bastion, as the machine running clusterctl reaches it. Required.
    #[serde(default)]
    pub address: String,
    /// SSH port. Default 22.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Login user on the bastion. Default: `spec.ssh.user`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Private key file for the bastion (`~` expanded). Default: `spec.ssh.keyFile`, else the SSH agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
    /// Host-key policy for the bastion (`strict` or `accept-new`). Default: `spec.ssh.hostKeyPolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_key_policy: Option<HostKeyPolicy>,
}

impl Default for SshDefaults {
    fn default() -> Self {
        SshDefaults {
            user: default_ssh_user(),
            key_file: None,
            port: default_ssh_port(),
            host_key_policy: HostKeyPolicy::default(),
            connect_attempts: default_connect_attempts(),
            bastion: None,
        }
    }
}

fn default_connect_attempts() -> u32 {
    4
}
fn default_ssh_user() -> String {
    "root".to_string()
}
fn default_ssh_port() -> u16 {
    22
}

/// `spec.ssh.hostKeyPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostKeyPolicy {
    /// The key must already be in known_hosts.
    Strict,
    /// Unknown hosts are added; changed keys are refused.
    #[default]
    AcceptNew,
    /// Refused by validation: clusterctl always checks host keys (kept so that the file decodes and
    /// the error points at the field and says what to use instead).
    Insecure,
}

/// Per-node SSH overrides (`nodes[].ssh`): each unset field falls back to `spec.ssh`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SshOverride {
    /// Login user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Private key file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
    /// Port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Host-key policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_key_policy: Option<HostKeyPolicy>,
}

/// `spec.docker`: the docker provider (kind-style node containers).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DockerProvider {
    /// Node image. Default `kindest/node:<kubernetesVersion>`. Becomes kind `nodes[].image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_image: Option<String>,
    /// Docker network for the node containers, joined if it exists, else created. Default
    /// `clusterctl-<metadata.name>` (one network per cluster; kind's default is `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// Extra `docker run` options for every node container.
    #[serde(default)]
    pub run_options: DockerRunOptions,
    /// The API server load balancer in front of the control planes ([`crate::lab::LoadBalancer`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<crate::lab::LoadBalancer>,
}

/// `spec.docker.runOptions`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DockerRunOptions {
    /// Memory limit (`docker run --memory`), e.g. `4g`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// CPU limit (`docker run --cpus`), e.g. `2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// Bind mounts (kind `nodes[].extraMounts`).
    #[serde(default)]
    pub extra_mounts: Vec<Mount>,
    /// Extra environment variables of the node containers.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Run the node containers privileged (`docker run --privileged`). Default true (kind's run
    /// options). With `false`, `capAdd` lists the capabilities the nodes get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privileged: Option<bool>,
    /// Capabilities added (`docker run --cap-add`), e.g. `SYS_ADMIN`, `NET_ADMIN`.
    #[serde(default)]
    pub cap_add: Vec<String>,
    /// tmpfs mounts added to kind's `/tmp` and `/run` (`docker run --tmpfs PATH[:OPTIONS]`), e.g.
    /// `/var/lib/containerd:exec`; an entry for `/tmp` or `/run` replaces kind's.
    #[serde(default)]
    pub tmpfs: Vec<String>,
    /// Cgroup namespace (`docker run --cgroupns`): `private` (default, kind) or `host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroupns: Option<String>,
}

/// A bind mount (kind `Mount`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Mount {
    /// Path on the host.
    pub host_path: String,
    /// Path in the node container.
    pub container_path: String,
    /// Read-only. Default false.
    #[serde(default)]
    pub read_only: bool,
}

/// The host address a docker node's port mapping listens on when `listenAddress` is unset: loopback
/// only, like the API server's port (kind's own default is `0.0.0.0`; the rendered kind config writes
/// this address explicitly, so both providers publish the same).
pub const DEFAULT_PORT_LISTEN_ADDRESS: &str = "127.0.0.1";

/// A port mapping of a docker node (kind `nodes[].extraPortMappings`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PortMapping {
    /// Port inside the node container.
    pub container_port: u16,
    /// Port on the host.
    pub host_port: u16,
    /// Host address to listen on. Default [`DEFAULT_PORT_LISTEN_ADDRESS`] (`127.0.0.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_address: Option<String>,
    /// `TCP` (default), `UDP` or `SCTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// `spec.nodes[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Node {
    /// Node name, a DNS-1123 label, unique. Becomes kubeadm `nodeRegistration.name` (the Node object's
    /// name) and, for docker, the container name suffix.
    pub name: String,
    /// `control-plane` or `worker`.
    pub role: Role,
    /// IP address, optionally with a prefix length (`172.20.6.111/24`) giving the node's subnet. Required
    /// for `ssh`; for `docker` assigned by Docker when unset. Becomes kubeadm
    /// `localAPIEndpoint.advertiseAddress` and kubelet `--node-ip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// SSH overrides for this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<SshOverride>,
    /// This control plane's interface for the VIP (kube-vip `vip_interface`), overriding `vip.interface`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip_interface: Option<String>,
    /// Node labels (Kubernetes label syntax). Those the kubelet may set itself become its `node-labels`
    /// at registration (kubeadm `nodeRegistration.kubeletExtraArgs`); all are reconciled through the API
    /// after join (NodeRestriction keeps e.g. `node-role.kubernetes.io/*` out of the flag); kind `nodes[].labels`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Node taints. Becomes kubeadm `nodeRegistration.taints`. Unset: the role's default (kubeadm's
    /// `node-role.kubernetes.io/control-plane:NoSchedule` on control planes, none on workers; none on
    /// the control plane of a cluster without workers, as kind). `taints: []`: no taint at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<Taint>>,
    /// Docker provider: host port mappings (kind `extraPortMappings`).
    #[serde(default)]
    pub port_mappings: Vec<PortMapping>,
}

/// `spec.nodes[].role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Runs the control plane (stacked etcd).
    ControlPlane,
    /// Runs workloads only.
    Worker,
}

impl Role {
    /// The cluster file's spelling: `control-plane` or `worker` (as serde writes it).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ControlPlane => "control-plane",
            Role::Worker => "worker",
        }
    }
}

/// A node taint (Kubernetes `core/v1` `Taint`). `Display` writes it as `kubectl taint` takes it:
/// `key=value:Effect`, or `key:Effect` when the value is unset or empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Taint {
    /// Key, label-key syntax.
    pub key: String,
    /// Value, label-value syntax; may be empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: TaintEffect,
}

/// `core/v1` `TaintEffect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaintEffect {
    /// Do not schedule new pods.
    NoSchedule,
    /// Avoid scheduling new pods.
    PreferNoSchedule,
    /// Evict running pods.
    NoExecute,
}

impl TaintEffect {
    /// The effect as core/v1 spells it: `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.value.as_deref().filter(|v| !v.is_empty()) {
            Some(v) => write!(f, "{}={v}:{}", self.key, self.effect.as_str()),
            None => write!(f, "{}:{}", self.key, self.effect.as_str()),
        }
    }
}

/// `spec.images`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Images {
    /// Image references to load onto every node after creation (as `kind load docker-image`); the tag must
    /// match what the workloads ask for exactly.
    #[serde(default)]
    pub preload: Vec<String>,
}

/// `spec.airgap`: what `clusterctl airgap bundle` puts in a bundle and `import` expects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Airgap {
    /// Bundle path, relative to the cluster file (written by `bundle`, read by `import`).
    pub bundle: String,
    /// OCI platforms to include, `os/arch[/variant]`. Default `[linux/amd64]`.
    #[serde(default = "default_platforms")]
    pub platforms: Vec<String>,
    /// OS packages and binaries to carry.
    #[serde(default)]
    pub packages: Vec<AirgapPackage>,
    /// Further Kubernetes versions whose images to include (e.g. the upgrade target).
    #[serde(default)]
    pub extra_versions: Vec<String>,
    /// Registries `airgap bundle` pulls from that need credentials or a private CA (an internal
    /// Harbor holding preload images, a vendor registry with a robot account). Registries not listed
    /// are pulled anonymously (or with a bearer token they hand out) trusting the system roots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_registries: Vec<SourceRegistry>,
}

/// `spec.airgap.sourceRegistries[]`: how `airgap bundle` reaches one source registry. Credentials are
/// only ever the *names* of environment variables; their values are read when the bundle is made and
/// never printed, logged or stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SourceRegistry {
    /// `host[:port]` as written in image references (or the `TO` of `--source-registry-override`),
    /// e.g. `harbor.corp.example:8443`; no scheme, no path.
    pub registry: String,
    /// Name of the environment variable holding the user name (with `passwordEnv`), e.g. `SRC_USER`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_env: Option<String>,
    /// Name of the environment variable holding the password or token (with `usernameEnv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    /// PEM CA of this registry, relative to the cluster file; trusted for this registry only (besides
    /// the system roots), and the registry is spoken to over HTTPS even on a loopback address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Accepted only to reject it with a helpful error: credentials are never written inline.
    #[serde(default, skip_serializing)]
    pub username: Option<serde_yaml::Value>,
    /// Accepted only to reject it with a helpful error: credentials are never written inline.
    #[serde(default, skip_serializing)]
    pub password: Option<serde_yaml::Value>,
}

/// Default air-gap platforms.
pub fn default_platforms() -> Vec<String> {
    vec!["linux/amd64".to_string()]
}

/// `spec.airgap.packages[]`: a local file (`path`) or a download (`url` + `sha256`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AirgapPackage {
    /// Package name, e.g. `kubeadm`.
    pub name: String,
    /// OS family it installs on: `debian`, `rhel` or `any` (static binaries).
    pub os_family: String,
    /// Architecture, e.g. `amd64`, `arm64`.
    pub arch: String,
    /// Local file, relative to the cluster file. Exclusive with `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Download URL. Requires `sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Lower-case hex SHA-256 of the download.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Directory on the node into which the archive is unpacked (GNU tar, `--no-same-owner`), e.g.
    /// `/opt/cni/bin` for the CNI reference plugins' `.tgz`. Only for `.tgz`, `.tar.gz` and `.tar`
    /// files; an absolute, normalized path (no `.`, `..` or empty components). Without it an archive
    /// is only carried to the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract_to: Option<String>,
    /// The Kubernetes version this package belongs to, `vX.Y.Z` (e.g. the kubeadm, kubelet and kubectl
    /// packages of `spec.kubernetesVersion` or of one `airgap.extraVersions` entry). `up` installs only
    /// packages without it or tagged with `spec.kubernetesVersion`; `upgrade --to V` installs those
    /// tagged `V` (and untagged ones). Must be `spec.kubernetesVersion` or one of `extraVersions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
}
