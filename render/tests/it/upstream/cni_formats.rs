//! Add-on formats: Calico `operator.tigera.io/v1` Installation (subset of
//! projectcalico/api / tigera/operator api/v1/installation_types.go), the CNI network configuration list
//! (containernetworking/cni SPEC.md 1.1.0, section "Configuration format"), flannel's `net-conf.json`
//! (flannel-io/flannel pkg/subnet/config.go `Config`), and the Cilium Helm values subset we write
//! (keys of cilium/cilium install/kubernetes/cilium/values.yaml).

use super::meta::ObjectMeta;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Installation {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: InstallationSpec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct InstallationSpec {
    pub variant: Option<String>,
    pub registry: Option<String>,
    pub image_path: Option<String>,
    pub image_prefix: Option<String>,
    pub image_pull_secrets: Option<Vec<serde_yaml::Value>>,
    pub calico_network: Option<CalicoNetwork>,
    pub cni: Option<CniSpec>,
    pub kubernetes_provider: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CalicoNetwork {
    pub bgp: Option<String>,
    #[serde(rename = "ipPools")]
    pub ip_pools: Option<Vec<IpPool>>,
    pub mtu: Option<i32>,
    pub linux_dataplane: Option<String>,
    pub host_ports: Option<String>,
    pub node_address_autodetection_v4: Option<BTreeMap<String, serde_yaml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct IpPool {
    pub name: Option<String>,
    pub cidr: String,
    pub encapsulation: Option<Encapsulation>,
    #[serde(rename = "natOutgoing")]
    pub nat_outgoing: Option<String>,
    pub node_selector: Option<String>,
    pub block_size: Option<i32>,
    pub disable_bgp_export: Option<bool>,
    pub allowed_uses: Option<Vec<String>>,
}

/// Variant names are the upstream values verbatim.
#[allow(clippy::upper_case_acronyms)]
#[derive(Debug, Deserialize)]
pub(crate) enum Encapsulation {
    IPIPCrossSubnet,
    IPIP,
    VXLAN,
    VXLANCrossSubnet,
    None,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CniSpec {
    #[serde(rename = "type")]
    pub type_: String,
    pub ipam: Option<BTreeMap<String, String>>,
}

/// CNI network configuration list. Plugin objects are free-form beyond `type` per the spec.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NetConfList {
    pub cni_version: String,
    pub cni_versions: Option<Vec<String>>,
    pub name: String,
    pub disable_check: Option<bool>,
    #[serde(rename = "disableGC")]
    pub disable_gc: Option<bool>,
    pub load_only_inlined_plugins: Option<bool>,
    pub plugins: Vec<BTreeMap<String, serde_json::Value>>,
}

/// flannel `net-conf.json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FlannelNetConf {
    #[serde(rename = "EnableIPv4")]
    pub enable_ipv4: Option<bool>,
    #[serde(rename = "EnableIPv6")]
    pub enable_ipv6: Option<bool>,
    #[serde(rename = "Network")]
    pub network: Option<String>,
    #[serde(rename = "IPv6Network")]
    pub ipv6_network: Option<String>,
    #[serde(rename = "SubnetLen")]
    pub subnet_len: Option<u32>,
    #[serde(rename = "Backend")]
    pub backend: Option<BTreeMap<String, serde_json::Value>>,
}

/// The Cilium Helm values we write (each key exists in the chart's values.yaml).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CiliumValues {
    pub k8s_service_host: String,
    pub k8s_service_port: serde_yaml::Value,
    pub kube_proxy_replacement: serde_yaml::Value,
    pub ipam: CiliumIpam,
    #[serde(rename = "ipv4NativeRoutingCIDR")]
    pub ipv4_native_routing_cidr: Option<String>,
    #[serde(rename = "ipv6NativeRoutingCIDR")]
    pub ipv6_native_routing_cidr: Option<String>,
    pub routing_mode: Option<String>,
    pub auto_direct_node_routes: Option<bool>,
    pub bpf: Option<BTreeMap<String, serde_yaml::Value>>,
    pub image: Option<CiliumImage>,
    pub operator: Option<CiliumOperator>,
    pub envoy: Option<CiliumEnvoy>,
    pub mtu: Option<u32>,
    pub hubble: Option<serde_yaml::Value>,
    pub ingress_controller: Option<serde_yaml::Value>,
    pub cluster: Option<BTreeMap<String, serde_yaml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CiliumIpam {
    pub mode: String,
    pub operator: Option<BTreeMap<String, serde_yaml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CiliumImage {
    pub repository: Option<String>,
    pub tag: Option<String>,
    pub use_digest: Option<bool>,
    pub digest: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CiliumOperator {
    pub image: Option<CiliumOperatorImage>,
    pub replicas: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CiliumOperatorImage {
    pub repository: Option<String>,
    pub tag: Option<String>,
    pub use_digest: Option<bool>,
    pub suffix: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CiliumEnvoy {
    pub enabled: Option<bool>,
    pub image: Option<CiliumImage>,
}
