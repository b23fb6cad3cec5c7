//! `kind.x-k8s.io/v1alpha4` Cluster, transcribed from kubernetes-sigs/kind
//! pkg/apis/config/v1alpha4/types.go (kind decodes it strictly too).

use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Cluster {
    pub api_version: String,
    pub kind: String,
    pub name: Option<String>,
    pub feature_gates: Option<BTreeMap<String, bool>>,
    pub runtime_config: Option<BTreeMap<String, String>>,
    pub nodes: Option<Vec<Node>>,
    pub networking: Option<Networking>,
    pub kubeadm_config_patches: Option<Vec<String>>,
    #[serde(rename = "kubeadmConfigPatchesJSON6902")]
    pub kubeadm_config_patches_json6902: Option<Vec<serde_yaml::Value>>,
    pub containerd_config_patches: Option<Vec<String>>,
    #[serde(rename = "containerdConfigPatchesJSON6902")]
    pub containerd_config_patches_json6902: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Node {
    pub role: Option<NodeRole>,
    pub image: Option<String>,
    pub labels: Option<BTreeMap<String, String>>,
    pub extra_mounts: Option<Vec<Mount>>,
    pub extra_port_mappings: Option<Vec<PortMapping>>,
    pub kubeadm_config_patches: Option<Vec<String>>,
    #[serde(rename = "kubeadmConfigPatchesJSON6902")]
    pub kubeadm_config_patches_json6902: Option<Vec<serde_yaml::Value>>,
}

#[derive(Debug, Deserialize)]
pub(crate) enum NodeRole {
    #[serde(rename = "control-plane")]
    ControlPlane,
    #[serde(rename = "worker")]
    Worker,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Networking {
    pub ip_family: Option<String>,
    pub api_server_port: Option<i32>,
    pub api_server_address: Option<String>,
    pub pod_subnet: Option<String>,
    pub service_subnet: Option<String>,
    #[serde(rename = "disableDefaultCNI")]
    pub disable_default_cni: Option<bool>,
    pub kube_proxy_mode: Option<KubeProxyMode>,
    pub dns_search: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
pub(crate) enum KubeProxyMode {
    #[serde(rename = "iptables")]
    Iptables,
    #[serde(rename = "ipvs")]
    Ipvs,
    #[serde(rename = "nftables")]
    Nftables,
    #[serde(rename = "none")]
    None,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Mount {
    pub container_path: Option<String>,
    pub host_path: Option<String>,
    pub read_only: Option<bool>,
    #[serde(rename = "selinuxRelabel")]
    pub selinux_relabel: Option<bool>,
    pub propagation: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PortMapping {
    pub container_port: Option<i32>,
    pub host_port: Option<i32>,
    pub listen_address: Option<String>,
    pub protocol: Option<String>,
}
