//! `apiserver.config.k8s.io/v1` EncryptionConfiguration, transcribed from kubernetes/kubernetes
//! staging/src/k8s.io/apiserver/pkg/apis/apiserver/v1/types_encryption.go.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct EncryptionConfiguration {
    pub api_version: String,
    pub kind: String,
    pub resources: Vec<ResourceConfiguration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResourceConfiguration {
    pub resources: Vec<String>,
    pub providers: Vec<ProviderConfiguration>,
}

/// Exactly one member is set per entry upstream (validation's "more than one provider specified").
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProviderConfiguration {
    pub aesgcm: Option<AesConfiguration>,
    pub aescbc: Option<AesConfiguration>,
    pub secretbox: Option<SecretboxConfiguration>,
    pub identity: Option<IdentityConfiguration>,
    pub kms: Option<KmsConfiguration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AesConfiguration {
    pub keys: Vec<Key>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SecretboxConfiguration {
    pub keys: Vec<Key>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Key {
    pub name: String,
    pub secret: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IdentityConfiguration {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct KmsConfiguration {
    pub api_version: Option<String>,
    pub name: String,
    pub cachesize: Option<i32>,
    pub endpoint: String,
    pub timeout: Option<String>,
}

impl ProviderConfiguration {
    /// How many members are set (upstream requires exactly one).
    pub(crate) fn count(&self) -> usize {
        [
            self.aesgcm.is_some(),
            self.aescbc.is_some(),
            self.secretbox.is_some(),
            self.identity.is_some(),
            self.kms.is_some(),
        ]
        .into_iter()
        .filter(|b| *b)
        .count()
    }
}
