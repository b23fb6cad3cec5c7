//! `kubeproxy.config.k8s.io/v1alpha1` KubeProxyConfiguration, transcribed from kubernetes/kubernetes
//! staging/src/k8s.io/kube-proxy/config/v1alpha1/types.go.

use super::meta::Duration;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct KubeProxyConfiguration {
    pub api_version: String,
    pub kind: String,
    pub feature_gates: Option<BTreeMap<String, bool>>,
    pub client_connection: Option<ClientConnection>,
    pub logging: Option<serde_yaml::Value>,
    pub hostname_override: Option<String>,
    pub bind_address: Option<String>,
    pub healthz_bind_address: Option<String>,
    pub metrics_bind_address: Option<String>,
    pub bind_address_hard_fail: Option<bool>,
    pub enable_profiling: Option<bool>,
    pub show_hidden_metrics_for_version: Option<String>,
    pub mode: Option<ProxyMode>,
    pub iptables: Option<IpTables>,
    pub ipvs: Option<Ipvs>,
    pub nftables: Option<NfTables>,
    pub winkernel: Option<serde_yaml::Value>,
    pub detect_local_mode: Option<String>,
    pub detect_local: Option<DetectLocal>,
    #[serde(rename = "clusterCIDR")]
    pub cluster_cidr: Option<String>,
    pub node_port_addresses: Option<Vec<String>>,
    pub oom_score_adj: Option<i32>,
    pub conntrack: Option<Conntrack>,
    pub config_sync_period: Option<Duration>,
    pub port_range: Option<String>,
}

/// The modes kube-proxy accepts on Linux ("" = platform default).
#[derive(Debug, Deserialize)]
pub(crate) enum ProxyMode {
    #[serde(rename = "")]
    Default,
    #[serde(rename = "iptables")]
    Iptables,
    #[serde(rename = "ipvs")]
    Ipvs,
    #[serde(rename = "nftables")]
    Nftables,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ClientConnection {
    pub kubeconfig: Option<String>,
    pub accept_content_types: Option<String>,
    pub content_type: Option<String>,
    pub qps: Option<f32>,
    pub burst: Option<i32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct IpTables {
    pub masquerade_bit: Option<i32>,
    pub masquerade_all: Option<bool>,
    pub localhost_node_ports: Option<bool>,
    pub sync_period: Option<Duration>,
    pub min_sync_period: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Ipvs {
    pub sync_period: Option<Duration>,
    pub min_sync_period: Option<Duration>,
    pub scheduler: Option<String>,
    #[serde(rename = "excludeCIDRs")]
    pub exclude_cidrs: Option<Vec<String>>,
    #[serde(rename = "strictARP")]
    pub strict_arp: Option<bool>,
    pub tcp_timeout: Option<Duration>,
    pub tcp_fin_timeout: Option<Duration>,
    pub udp_timeout: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NfTables {
    pub masquerade_bit: Option<i32>,
    pub masquerade_all: Option<bool>,
    pub sync_period: Option<Duration>,
    pub min_sync_period: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DetectLocal {
    pub bridge_interface: Option<String>,
    pub interface_name_prefix: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Conntrack {
    pub max_per_core: Option<i32>,
    pub min: Option<i32>,
    pub tcp_established_timeout: Option<Duration>,
    pub tcp_close_wait_timeout: Option<Duration>,
    pub tcp_be_liberal: Option<bool>,
    pub udp_timeout: Option<Duration>,
    pub udp_stream_timeout: Option<Duration>,
}
