//! `kubeadm.k8s.io/v1beta3`, transcribed from kubernetes/kubernetes
//! cmd/kubeadm/app/apis/kubeadm/v1beta3/types.go: extraArgs are maps, `apiServer.timeoutForControlPlane`
//! exists, `discovery.timeout` exists, there is no `proxy`, `timeouts`, Reset or Upgrade kind.

use super::kubeadm_v1beta4::{
    ApiEndpoint, BootstrapTokenDiscovery, ExternalEtcd, FileDiscovery, HostPathMount, Networking,
    Patches,
};
use super::meta::{Duration, PullPolicy, Taint};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct InitConfiguration {
    pub api_version: String,
    pub kind: String,
    pub bootstrap_tokens: Option<Vec<serde_yaml::Value>>,
    pub node_registration: Option<NodeRegistrationOptions>,
    #[serde(rename = "localAPIEndpoint")]
    pub local_api_endpoint: Option<ApiEndpoint>,
    pub certificate_key: Option<String>,
    pub skip_phases: Option<Vec<String>>,
    pub patches: Option<Patches>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ClusterConfiguration {
    pub api_version: String,
    pub kind: String,
    pub etcd: Option<Etcd>,
    pub networking: Option<Networking>,
    pub kubernetes_version: Option<String>,
    pub control_plane_endpoint: Option<String>,
    pub api_server: Option<ApiServer>,
    pub controller_manager: Option<ControlPlaneComponent>,
    pub scheduler: Option<ControlPlaneComponent>,
    #[serde(rename = "dns")]
    pub dns: Option<Dns>,
    pub certificates_dir: Option<String>,
    pub image_repository: Option<String>,
    pub feature_gates: Option<BTreeMap<String, bool>>,
    pub cluster_name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ControlPlaneComponent {
    pub extra_args: Option<BTreeMap<String, String>>,
    pub extra_volumes: Option<Vec<HostPathMount>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ApiServer {
    pub extra_args: Option<BTreeMap<String, String>>,
    pub extra_volumes: Option<Vec<HostPathMount>>,
    #[serde(rename = "certSANs")]
    pub cert_sans: Option<Vec<String>>,
    pub timeout_for_control_plane: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Dns {
    pub image_repository: Option<String>,
    pub image_tag: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NodeRegistrationOptions {
    pub name: Option<String>,
    #[serde(rename = "criSocket")]
    pub cri_socket: Option<String>,
    pub taints: Option<Vec<Taint>>,
    pub kubelet_extra_args: Option<BTreeMap<String, String>>,
    pub ignore_preflight_errors: Option<Vec<String>>,
    pub image_pull_policy: Option<PullPolicy>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Etcd {
    pub local: Option<LocalEtcd>,
    pub external: Option<ExternalEtcd>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct LocalEtcd {
    pub image_repository: Option<String>,
    pub image_tag: Option<String>,
    pub data_dir: String,
    pub extra_args: Option<BTreeMap<String, String>>,
    #[serde(rename = "serverCertSANs")]
    pub server_cert_sans: Option<Vec<String>>,
    #[serde(rename = "peerCertSANs")]
    pub peer_cert_sans: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct JoinConfiguration {
    pub api_version: String,
    pub kind: String,
    pub node_registration: Option<NodeRegistrationOptions>,
    pub ca_cert_path: Option<String>,
    pub discovery: Discovery,
    pub control_plane: Option<JoinControlPlane>,
    pub skip_phases: Option<Vec<String>>,
    pub patches: Option<Patches>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct JoinControlPlane {
    #[serde(rename = "localAPIEndpoint")]
    pub local_api_endpoint: Option<ApiEndpoint>,
    pub certificate_key: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Discovery {
    pub bootstrap_token: Option<BootstrapTokenDiscovery>,
    pub file: Option<FileDiscovery>,
    #[serde(rename = "tlsBootstrapToken")]
    pub tls_bootstrap_token: Option<String>,
    pub timeout: Option<Duration>,
}
