//! What the agent holds of the API: NetworkPolicies, Pods and Namespaces keyed by `namespace/name`,
//! filled by `watch` and read by `apply` (its own module, so neither of the two imports the other).

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use std::collections::BTreeMap;

/// The three kinds, as the agent holds them (keyed by `namespace/name`).
#[derive(Debug, Default)]
pub(crate) struct Cache {
    pub(crate) policies: BTreeMap<String, NetworkPolicy>,
    pub(crate) pods: BTreeMap<String, Pod>,
    pub(crate) namespaces: BTreeMap<String, Namespace>,
}
