//! `kubeadm.k8s.io/v1beta4`, transcribed from kubernetes/kubernetes
//! cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go (and bootstraptoken/v1). Every struct rejects unknown
//! fields, as kubeadm's strict decoding does ("strict decoding error: unknown field ...").

use super::meta::{Duration, EnvVar, PullPolicy, Taint};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct InitConfiguration {
    pub api_version: String,
    pub kind: String,
    pub bootstrap_tokens: Option<Vec<serde_yaml::Value>>,
    pub dry_run: Option<bool>,
    pub node_registration: Option<NodeRegistrationOptions>,
    #[serde(rename = "localAPIEndpoint")]
    pub local_api_endpoint: Option<ApiEndpoint>,
    pub certificate_key: Option<String>,
    pub skip_phases: Option<Vec<String>>,
    pub patches: Option<Patches>,
    pub timeouts: Option<Timeouts>,
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
    pub proxy: Option<Proxy>,
    pub certificates_dir: Option<String>,
    pub image_repository: Option<String>,
    pub feature_gates: Option<BTreeMap<String, bool>>,
    pub cluster_name: Option<String>,
    pub encryption_algorithm: Option<EncryptionAlgorithm>,
    pub certificate_validity_period: Option<Duration>,
    pub ca_certificate_validity_period: Option<Duration>,
}

#[derive(Debug, Deserialize)]
pub(crate) enum EncryptionAlgorithm {
    #[serde(rename = "ECDSA-P256")]
    EcdsaP256,
    #[serde(rename = "RSA-2048")]
    Rsa2048,
    #[serde(rename = "RSA-3072")]
    Rsa3072,
    #[serde(rename = "RSA-4096")]
    Rsa4096,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ControlPlaneComponent {
    pub extra_args: Option<Vec<Arg>>,
    pub extra_volumes: Option<Vec<HostPathMount>>,
    pub extra_envs: Option<Vec<EnvVar>>,
}

/// APIServer: ControlPlaneComponent inline plus certSANs (no timeoutForControlPlane in v1beta4).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ApiServer {
    pub extra_args: Option<Vec<Arg>>,
    pub extra_volumes: Option<Vec<HostPathMount>>,
    pub extra_envs: Option<Vec<EnvVar>>,
    #[serde(rename = "certSANs")]
    pub cert_sans: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Dns {
    pub image_repository: Option<String>,
    pub image_tag: Option<String>,
    pub disabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Proxy {
    pub disabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ApiEndpoint {
    pub advertise_address: Option<String>,
    pub bind_port: Option<i32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NodeRegistrationOptions {
    pub name: Option<String>,
    #[serde(rename = "criSocket")]
    pub cri_socket: Option<String>,
    pub taints: Option<Vec<Taint>>,
    pub kubelet_extra_args: Option<Vec<Arg>>,
    pub ignore_preflight_errors: Option<Vec<String>>,
    pub image_pull_policy: Option<PullPolicy>,
    pub image_pull_serial: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Networking {
    pub service_subnet: Option<String>,
    pub pod_subnet: Option<String>,
    pub dns_domain: Option<String>,
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
    pub extra_args: Option<Vec<Arg>>,
    pub extra_envs: Option<Vec<EnvVar>>,
    #[serde(rename = "serverCertSANs")]
    pub server_cert_sans: Option<Vec<String>>,
    #[serde(rename = "peerCertSANs")]
    pub peer_cert_sans: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ExternalEtcd {
    pub endpoints: Vec<String>,
    pub ca_file: String,
    pub cert_file: String,
    pub key_file: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct JoinConfiguration {
    pub api_version: String,
    pub kind: String,
    pub dry_run: Option<bool>,
    pub node_registration: Option<NodeRegistrationOptions>,
    pub ca_cert_path: Option<String>,
    pub discovery: Discovery,
    pub control_plane: Option<JoinControlPlane>,
    pub skip_phases: Option<Vec<String>>,
    pub patches: Option<Patches>,
    pub timeouts: Option<Timeouts>,
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
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct BootstrapTokenDiscovery {
    pub token: String,
    #[serde(rename = "apiServerEndpoint")]
    pub api_server_endpoint: Option<String>,
    pub ca_cert_hashes: Option<Vec<String>>,
    pub unsafe_skip_ca_verification: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FileDiscovery {
    pub kube_config_path: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct HostPathMount {
    pub name: String,
    pub host_path: String,
    pub mount_path: String,
    pub read_only: Option<bool>,
    pub path_type: Option<HostPathType>,
}

/// core/v1 `HostPathType`.
#[derive(Debug, Deserialize)]
pub(crate) enum HostPathType {
    #[serde(rename = "")]
    Unset,
    DirectoryOrCreate,
    Directory,
    FileOrCreate,
    File,
    Socket,
    CharDevice,
    BlockDevice,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Patches {
    pub directory: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ResetConfiguration {
    pub api_version: String,
    pub kind: String,
    pub cleanup_tmp_dir: Option<bool>,
    pub certificates_dir: Option<String>,
    #[serde(rename = "criSocket")]
    pub cri_socket: Option<String>,
    pub dry_run: Option<bool>,
    pub force: Option<bool>,
    pub ignore_preflight_errors: Option<Vec<String>>,
    pub skip_phases: Option<Vec<String>>,
    pub unmount_flags: Option<Vec<String>>,
    pub timeouts: Option<Timeouts>,
}

/// Arg: `{name, value}` — v1beta4's extraArgs shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Arg {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Timeouts {
    pub control_plane_component_health_check: Option<Duration>,
    pub kubelet_health_check: Option<Duration>,
    #[serde(rename = "kubernetesAPICall")]
    pub kubernetes_api_call: Option<Duration>,
    #[serde(rename = "etcdAPICall")]
    pub etcd_api_call: Option<Duration>,
    #[serde(rename = "tlsBootstrap")]
    pub tls_bootstrap: Option<Duration>,
    pub discovery: Option<Duration>,
    pub upgrade_manifests: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct UpgradeApplyConfiguration {
    pub kubernetes_version: Option<String>,
    pub allow_experimental_upgrades: Option<bool>,
    #[serde(rename = "allowRCUpgrades")]
    pub allow_rc_upgrades: Option<bool>,
    pub certificate_renewal: Option<bool>,
    pub dry_run: Option<bool>,
    pub etcd_upgrade: Option<bool>,
    pub force_upgrade: Option<bool>,
    pub ignore_preflight_errors: Option<Vec<String>>,
    pub patches: Option<Patches>,
    pub print_config: Option<bool>,
    /// Upstream has no JSON tag here, so the key is the Go field name.
    #[serde(rename = "SkipPhases")]
    pub skip_phases: Option<Vec<String>>,
    pub image_pull_policy: Option<PullPolicy>,
    pub image_pull_serial: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct UpgradeDiffConfiguration {
    pub kubernetes_version: Option<String>,
    #[serde(rename = "contextLines")]
    pub diff_context_lines: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct UpgradeNodeConfiguration {
    pub certificate_renewal: Option<bool>,
    pub dry_run: Option<bool>,
    pub etcd_upgrade: Option<bool>,
    pub ignore_preflight_errors: Option<Vec<String>>,
    pub skip_phases: Option<Vec<String>>,
    pub patches: Option<Patches>,
    pub image_pull_policy: Option<PullPolicy>,
    pub image_pull_serial: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct UpgradePlanConfiguration {
    pub kubernetes_version: Option<String>,
    pub allow_experimental_upgrades: Option<bool>,
    #[serde(rename = "allowRCUpgrades")]
    pub allow_rc_upgrades: Option<bool>,
    pub dry_run: Option<bool>,
    pub ignore_preflight_errors: Option<Vec<String>>,
    pub print_config: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct UpgradeConfiguration {
    pub api_version: String,
    pub kind: String,
    pub apply: Option<UpgradeApplyConfiguration>,
    pub diff: Option<UpgradeDiffConfiguration>,
    pub node: Option<UpgradeNodeConfiguration>,
    pub plan: Option<UpgradePlanConfiguration>,
    pub timeouts: Option<Timeouts>,
}
