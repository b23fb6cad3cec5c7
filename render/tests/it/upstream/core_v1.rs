//! core/v1 `Pod` (the subset a static pod uses), core/v1 `ServiceAccount` and rbac.authorization.k8s.io/v1
//! `ClusterRole`/`ClusterRoleBinding`, transcribed from kubernetes/kubernetes
//! staging/src/k8s.io/api/{core,rbac}/v1/types.go. A field outside the subset fails, so the subset only
//! ever grows by transcribing more upstream fields.

use super::meta::{EnvVar, ObjectMeta, PullPolicy};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Pod {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
    pub status: Option<BTreeMap<String, serde_yaml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PodSpec {
    pub containers: Vec<Container>,
    pub host_network: Option<bool>,
    pub host_aliases: Option<Vec<HostAlias>>,
    pub volumes: Option<Vec<Volume>>,
    pub priority_class_name: Option<String>,
    pub priority: Option<i32>,
    pub dns_policy: Option<String>,
    pub restart_policy: Option<String>,
    pub security_context: Option<BTreeMap<String, serde_yaml::Value>>,
    pub service_account_name: Option<String>,
    pub node_name: Option<String>,
    pub tolerations: Option<Vec<serde_yaml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Container {
    pub name: String,
    pub image: Option<String>,
    pub image_pull_policy: Option<PullPolicy>,
    pub command: Option<Vec<String>>,
    pub args: Option<Vec<String>>,
    pub env: Option<Vec<EnvVar>>,
    pub resources: Option<ResourceRequirements>,
    pub security_context: Option<SecurityContext>,
    pub volume_mounts: Option<Vec<VolumeMount>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ResourceRequirements {
    pub limits: Option<BTreeMap<String, String>>,
    pub requests: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SecurityContext {
    pub capabilities: Option<Capabilities>,
    pub privileged: Option<bool>,
    pub run_as_user: Option<i64>,
    pub read_only_root_filesystem: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Capabilities {
    pub add: Option<Vec<String>>,
    pub drop: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct VolumeMount {
    pub name: String,
    pub mount_path: String,
    pub read_only: Option<bool>,
    pub sub_path: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct HostAlias {
    pub ip: String,
    pub hostnames: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Volume {
    pub name: String,
    pub host_path: Option<HostPathVolumeSource>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HostPathVolumeSource {
    pub path: String,
    #[serde(rename = "type")]
    pub type_: Option<super::kubeadm_v1beta4::HostPathType>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ServiceAccount {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub automount_service_account_token: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ClusterRole {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub rules: Option<Vec<PolicyRule>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PolicyRule {
    pub verbs: Vec<String>,
    pub api_groups: Option<Vec<String>>,
    pub resources: Option<Vec<String>>,
    pub resource_names: Option<Vec<String>>,
    #[serde(rename = "nonResourceURLs")]
    pub non_resource_urls: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ClusterRoleBinding {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub subjects: Option<Vec<Subject>>,
    pub role_ref: RoleRef,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Subject {
    pub kind: String,
    pub api_group: Option<String>,
    pub name: String,
    pub namespace: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RoleRef {
    pub api_group: String,
    pub kind: String,
    pub name: String,
}
