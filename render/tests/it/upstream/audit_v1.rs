//! `audit.k8s.io/v1` Policy, transcribed from kubernetes/kubernetes
//! staging/src/k8s.io/apiserver/pkg/apis/audit/v1/types.go.

use super::meta::ObjectMeta;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Policy {
    pub api_version: String,
    pub kind: String,
    pub metadata: Option<ObjectMeta>,
    pub rules: Vec<PolicyRule>,
    pub omit_stages: Option<Vec<Stage>>,
    pub omit_managed_fields: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PolicyRule {
    pub level: Level,
    pub users: Option<Vec<String>>,
    pub user_groups: Option<Vec<String>>,
    pub verbs: Option<Vec<String>>,
    pub resources: Option<Vec<GroupResources>>,
    pub namespaces: Option<Vec<String>>,
    #[serde(rename = "nonResourceURLs")]
    pub non_resource_urls: Option<Vec<String>>,
    pub omit_stages: Option<Vec<Stage>>,
    pub omit_managed_fields: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct GroupResources {
    pub group: Option<String>,
    pub resources: Option<Vec<String>>,
    pub resource_names: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
pub(crate) enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

#[derive(Debug, Deserialize)]
pub(crate) enum Stage {
    RequestReceived,
    ResponseStarted,
    ResponseComplete,
    Panic,
}
