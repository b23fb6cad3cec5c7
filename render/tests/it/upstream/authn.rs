//! `apiserver.config.k8s.io` AuthenticationConfiguration (v1beta1 from 1.30, v1 from 1.34 — the same
//! JWT shapes), transcribed from kubernetes/kubernetes
//! staging/src/k8s.io/apiserver/pkg/apis/apiserver/{v1beta1,v1}/types.go.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AuthenticationConfiguration {
    pub api_version: String,
    pub kind: String,
    pub jwt: Option<Vec<JwtAuthenticator>>,
    pub anonymous: Option<AnonymousAuthConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct JwtAuthenticator {
    pub issuer: Issuer,
    pub claim_validation_rules: Option<Vec<ClaimValidationRule>>,
    pub claim_mappings: ClaimMappings,
    pub user_validation_rules: Option<Vec<UserValidationRule>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Issuer {
    pub url: String,
    #[serde(rename = "discoveryURL")]
    pub discovery_url: Option<String>,
    pub certificate_authority: Option<String>,
    pub audiences: Vec<String>,
    pub audience_match_policy: Option<String>,
    pub egress_selector_type: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ClaimValidationRule {
    pub claim: Option<String>,
    pub required_value: Option<String>,
    pub expression: Option<String>,
    pub message: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ClaimMappings {
    pub username: PrefixedClaimOrExpression,
    pub groups: Option<PrefixedClaimOrExpression>,
    pub uid: Option<ClaimOrExpression>,
    pub extra: Option<Vec<ExtraMapping>>,
}

/// `prefix` is a pointer upstream: when `claim` is set it must be present (it may be "").
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PrefixedClaimOrExpression {
    pub claim: Option<String>,
    pub prefix: Option<String>,
    pub expression: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ClaimOrExpression {
    pub claim: Option<String>,
    pub expression: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ExtraMapping {
    pub key: String,
    pub value_expression: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct UserValidationRule {
    pub expression: String,
    pub message: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AnonymousAuthConfig {
    pub enabled: bool,
    pub conditions: Option<Vec<serde_yaml::Value>>,
}
