//! `kubelet.config.k8s.io/v1beta1` KubeletConfiguration, transcribed from kubernetes/kubernetes
//! staging/src/k8s.io/kubelet/config/v1beta1/types.go (fields through 1.35, incl. `failCgroupV1`,
//! `crashLoopBackOff`, `imageMaximumGCAge`). Durations are Go duration strings, quantities strings.

use super::meta::{Duration, Quantity, Taint};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct KubeletConfiguration {
    pub api_version: String,
    pub kind: String,
    pub enable_server: Option<bool>,
    pub static_pod_path: Option<String>,
    pub pod_logs_dir: Option<String>,
    pub sync_frequency: Option<Duration>,
    pub file_check_frequency: Option<Duration>,
    pub http_check_frequency: Option<Duration>,
    #[serde(rename = "staticPodURL")]
    pub static_pod_url: Option<String>,
    #[serde(rename = "staticPodURLHeader")]
    pub static_pod_url_header: Option<BTreeMap<String, Vec<String>>>,
    pub address: Option<String>,
    pub port: Option<i32>,
    pub read_only_port: Option<i32>,
    pub tls_cert_file: Option<String>,
    pub tls_private_key_file: Option<String>,
    pub tls_cipher_suites: Option<Vec<String>>,
    pub tls_min_version: Option<String>,
    pub rotate_certificates: Option<bool>,
    #[serde(rename = "serverTLSBootstrap")]
    pub server_tls_bootstrap: Option<bool>,
    pub authentication: Option<KubeletAuthentication>,
    pub authorization: Option<KubeletAuthorization>,
    #[serde(rename = "registryPullQPS")]
    pub registry_pull_qps: Option<i32>,
    pub registry_burst: Option<i32>,
    pub image_pull_credentials_verification_policy: Option<String>,
    pub preloaded_images_verification_allowlist: Option<Vec<String>>,
    #[serde(rename = "eventRecordQPS")]
    pub event_record_qps: Option<i32>,
    pub event_burst: Option<i32>,
    pub enable_debugging_handlers: Option<bool>,
    pub enable_contention_profiling: Option<bool>,
    pub healthz_port: Option<i32>,
    pub healthz_bind_address: Option<String>,
    pub oom_score_adj: Option<i32>,
    pub cluster_domain: Option<String>,
    #[serde(rename = "clusterDNS")]
    pub cluster_dns: Option<Vec<String>>,
    pub streaming_connection_idle_timeout: Option<Duration>,
    pub node_status_update_frequency: Option<Duration>,
    pub node_status_report_frequency: Option<Duration>,
    pub node_lease_duration_seconds: Option<i32>,
    #[serde(rename = "imageMinimumGCAge")]
    pub image_minimum_gc_age: Option<Duration>,
    #[serde(rename = "imageMaximumGCAge")]
    pub image_maximum_gc_age: Option<Duration>,
    #[serde(rename = "imageGCHighThresholdPercent")]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(rename = "imageGCLowThresholdPercent")]
    pub image_gc_low_threshold_percent: Option<i32>,
    pub volume_stats_agg_period: Option<Duration>,
    pub kubelet_cgroups: Option<String>,
    pub system_cgroups: Option<String>,
    pub cgroup_root: Option<String>,
    #[serde(rename = "cgroupsPerQOS")]
    pub cgroups_per_qos: Option<bool>,
    pub cgroup_driver: Option<CgroupDriver>,
    pub cpu_manager_policy: Option<String>,
    #[serde(rename = "singleProcessOOMKill")]
    pub single_process_oom_kill: Option<bool>,
    pub cpu_manager_policy_options: Option<BTreeMap<String, String>>,
    pub cpu_manager_reconcile_period: Option<Duration>,
    pub memory_manager_policy: Option<String>,
    pub topology_manager_policy: Option<String>,
    pub topology_manager_scope: Option<String>,
    pub topology_manager_policy_options: Option<BTreeMap<String, String>>,
    pub qos_reserved: Option<BTreeMap<String, String>>,
    pub runtime_request_timeout: Option<Duration>,
    pub hairpin_mode: Option<String>,
    pub max_pods: Option<i32>,
    #[serde(rename = "podCIDR")]
    pub pod_cidr: Option<String>,
    pub pod_pids_limit: Option<i64>,
    pub resolv_conf: Option<String>,
    pub run_once: Option<bool>,
    #[serde(rename = "cpuCFSQuota")]
    pub cpu_cfs_quota: Option<bool>,
    #[serde(rename = "cpuCFSQuotaPeriod")]
    pub cpu_cfs_quota_period: Option<Duration>,
    pub node_status_max_images: Option<i32>,
    pub max_open_files: Option<i64>,
    pub content_type: Option<String>,
    #[serde(rename = "kubeAPIQPS")]
    pub kube_api_qps: Option<i32>,
    #[serde(rename = "kubeAPIBurst")]
    pub kube_api_burst: Option<i32>,
    pub serialize_image_pulls: Option<bool>,
    pub max_parallel_image_pulls: Option<i32>,
    pub eviction_hard: Option<BTreeMap<String, String>>,
    pub eviction_soft: Option<BTreeMap<String, String>>,
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    pub eviction_pressure_transition_period: Option<Duration>,
    pub eviction_max_pod_grace_period: Option<i32>,
    pub eviction_minimum_reclaim: Option<BTreeMap<String, String>>,
    pub merge_default_eviction_settings: Option<bool>,
    pub pods_per_core: Option<i32>,
    pub enable_controller_attach_detach: Option<bool>,
    pub protect_kernel_defaults: Option<bool>,
    #[serde(rename = "makeIPTablesUtilChains")]
    pub make_ip_tables_util_chains: Option<bool>,
    pub iptables_masquerade_bit: Option<i32>,
    pub iptables_drop_bit: Option<i32>,
    pub feature_gates: Option<BTreeMap<String, bool>>,
    pub fail_swap_on: Option<bool>,
    pub memory_swap: Option<MemorySwap>,
    pub container_log_max_size: Option<String>,
    pub container_log_max_files: Option<i32>,
    pub container_log_max_workers: Option<i32>,
    pub container_log_monitor_interval: Option<Duration>,
    pub config_map_and_secret_change_detection_strategy: Option<String>,
    pub system_reserved: Option<BTreeMap<String, Quantity>>,
    pub kube_reserved: Option<BTreeMap<String, Quantity>>,
    #[serde(rename = "reservedSystemCPUs")]
    pub reserved_system_cpus: Option<String>,
    pub show_hidden_metrics_for_version: Option<String>,
    pub system_reserved_cgroup: Option<String>,
    pub kube_reserved_cgroup: Option<String>,
    pub enforce_node_allocatable: Option<Vec<String>>,
    pub allowed_unsafe_sysctls: Option<Vec<String>>,
    pub volume_plugin_dir: Option<String>,
    #[serde(rename = "providerID")]
    pub provider_id: Option<String>,
    pub kernel_memcg_notification: Option<bool>,
    pub logging: Option<serde_yaml::Value>,
    pub enable_system_log_handler: Option<bool>,
    pub enable_system_log_query: Option<bool>,
    pub shutdown_grace_period: Option<Duration>,
    pub shutdown_grace_period_critical_pods: Option<Duration>,
    pub shutdown_grace_period_by_pod_priority: Option<Vec<ShutdownGracePeriodByPodPriority>>,
    pub crash_loop_back_off: Option<CrashLoopBackOff>,
    pub reserved_memory: Option<Vec<serde_yaml::Value>>,
    pub enable_profiling_handler: Option<bool>,
    pub enable_debug_flags_handler: Option<bool>,
    pub seccomp_default: Option<bool>,
    pub memory_throttling_factor: Option<f64>,
    pub register_with_taints: Option<Vec<Taint>>,
    pub register_node: Option<bool>,
    pub tracing: Option<serde_yaml::Value>,
    pub local_storage_capacity_isolation: Option<bool>,
    pub container_runtime_endpoint: Option<String>,
    pub image_service_endpoint: Option<String>,
    pub fail_cgroup_v1: Option<bool>,
    pub user_namespaces: Option<UserNamespaces>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CgroupDriver {
    Systemd,
    Cgroupfs,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct KubeletAuthentication {
    pub x509: Option<KubeletX509Authentication>,
    pub webhook: Option<KubeletWebhookAuthentication>,
    pub anonymous: Option<KubeletAnonymousAuthentication>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct KubeletX509Authentication {
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct KubeletWebhookAuthentication {
    pub enabled: Option<bool>,
    #[serde(rename = "cacheTTL")]
    pub cache_ttl: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct KubeletAnonymousAuthentication {
    pub enabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct KubeletAuthorization {
    pub mode: Option<String>,
    pub webhook: Option<KubeletWebhookAuthorization>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct KubeletWebhookAuthorization {
    #[serde(rename = "cacheAuthorizedTTL")]
    pub cache_authorized_ttl: Option<Duration>,
    #[serde(rename = "cacheUnauthorizedTTL")]
    pub cache_unauthorized_ttl: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct MemorySwap {
    pub swap_behavior: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CrashLoopBackOff {
    pub max_container_restart_period: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ShutdownGracePeriodByPodPriority {
    pub priority: i32,
    pub shutdown_grace_period_seconds: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct UserNamespaces {
    pub ids_per_pod: Option<i64>,
}
