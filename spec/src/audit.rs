//! The audit policy: the `audit.k8s.io/v1` `Policy` type, transcribed from upstream
//! `k8s.io/apiserver/pkg/apis/audit/v1/types.go` (Policy, PolicyRule, GroupResources, Level, Stage), used to
//! check a user's policy file strictly, and clusterctl's built-in default policy.

use serde::Deserialize;

/// The built-in policy (`audit.policy: default`): no logging of read-only health and discovery noise,
/// Metadata for Secrets/ConfigMaps/TokenReviews (never their bodies), Request bodies for changes, Metadata
/// for everything else. Never logs the RequestReceived stage.
pub const DEFAULT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages:
  - RequestReceived
rules:
  - level: None
    nonResourceURLs:
      - /healthz*
      - /livez*
      - /readyz*
      - /version
      - /openapi*
      - /api
      - /apis
  - level: None
    users:
      - system:kube-proxy
    verbs:
      - watch
  - level: None
    userGroups:
      - system:nodes
    verbs:
      - get
    resources:
      - group: ""
        resources:
          - nodes
          - nodes/status
  - level: None
    resources:
      - group: coordination.k8s.io
        resources:
          - leases
  - level: Metadata
    resources:
      - group: ""
        resources:
          - secrets
          - configmaps
          - serviceaccounts/token
      - group: authentication.k8s.io
        resources:
          - tokenreviews
  - level: Request
    verbs:
      - create
      - update
      - patch
      - delete
      - deletecollection
  - level: Metadata
"#;

/// `audit.k8s.io/v1` `Policy`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Policy {
    /// Must be `audit.k8s.io/v1`.
    pub api_version: String,
    /// Must be `Policy`.
    pub kind: String,
    /// ObjectMeta, not checked (kubectl-generated files carry `creationTimestamp: null`).
    #[serde(default)]
    pub metadata: Option<serde_yaml::Value>,
    /// Rules, first match wins.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
    /// Stages never logged.
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    /// Drop managedFields from logged objects.
    #[serde(default)]
    pub omit_managed_fields: bool,
}

/// `PolicyRule`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyRule {
    /// Level of events matched by this rule.
    pub level: Level,
    /// Users matched (empty: all).
    #[serde(default)]
    pub users: Vec<String>,
    /// User groups matched.
    #[serde(default)]
    pub user_groups: Vec<String>,
    /// Verbs matched.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Resources matched.
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    /// Namespaces matched (`""` = non-namespaced).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Non-resource URL paths matched (`*` suffix allowed).
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    /// Stages omitted for this rule.
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    /// Overrides the policy's omitManagedFields.
    #[serde(default)]
    pub omit_managed_fields: Option<bool>,
}

/// `GroupResources`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GroupResources {
    /// API group (`""` = core).
    #[serde(default)]
    pub group: String,
    /// Resources (`pods`, `pods/log`, `*/status`).
    #[serde(default)]
    pub resources: Vec<String>,
    /// Object names.
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// `Level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Level {
    /// Do not log.
    None,
    /// Request metadata only.
    Metadata,
    /// Metadata and request body.
    Request,
    /// Metadata, request and response bodies.
    RequestResponse,
}

/// `Stage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Stage {
    /// As soon as the handler receives the request.
    RequestReceived,
    /// Response headers sent (long-running requests).
    ResponseStarted,
    /// Response complete.
    ResponseComplete,
    /// A panic occurred.
    Panic,
}

/// Parses and checks a policy text. Errors: a human reason (with line/column within the policy file when
/// the YAML decoder gives one).
pub fn check_policy(text: &str) -> Result<Policy, String> {
    let p: Policy = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    if p.api_version != "audit.k8s.io/v1" {
        return Err(format!(
            "apiVersion is {:?}, expected audit.k8s.io/v1",
            p.api_version
        ));
    }
    if p.kind != "Policy" {
        return Err(format!("kind is {:?}, expected Policy", p.kind));
    }
    if p.rules.is_empty() {
        return Err("the policy has no rules, so nothing would be logged".to_string());
    }
    for (i, r) in p.rules.iter().enumerate() {
        if !r.non_resource_urls.is_empty() && (!r.resources.is_empty() || !r.namespaces.is_empty())
        {
            return Err(format!("rules[{i}] mixes nonResourceURLs with resources or namespaces (upstream refuses this)"));
        }
        for u in &r.non_resource_urls {
            if !u.starts_with('/') && u != "*" {
                return Err(format!(
                    "rules[{i}]: nonResourceURL {u:?} must start with '/'"
                ));
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_policy_is_valid() {
        let p = check_policy(DEFAULT_POLICY).expect("valid");
        assert_eq!(p.omit_stages, vec![Stage::RequestReceived]);
        assert_eq!(p.rules.last().map(|r| r.level), Some(Level::Metadata));
    }

    #[test]
    fn bad_policies() {
        assert!(check_policy(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n"
        )
        .is_err());
        assert!(check_policy(
            "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules:\n- level: None\n"
        )
        .is_err());
        assert!(check_policy(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  foo: 1\n"
        )
        .is_err());
        assert!(check_policy("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n").is_err());
        assert!(check_policy("{").is_err());
    }
}
