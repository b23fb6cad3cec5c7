//! `spec.proxy` as the file writes it: the HTTP(S) proxy the nodes use for what they download —
//! packages (apt/dnf and the release archives), the container runtime's image pulls and the kubelet's
//! environment. The effective environment, with `noProxy` completed by the cluster's own addresses,
//! is [`crate::ProxyEnv`] (`proxy_env`).

use serde::{Deserialize, Serialize};

/// `spec.proxy` as the file writes it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProxySettings {
    /// Proxy for `http://` URLs (`HTTP_PROXY`), e.g. `http://proxy.example.com:3128`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// Proxy for `https://` URLs (`HTTPS_PROXY`), e.g. `http://proxy.example.com:3128`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https: Option<String>,
    /// Hosts, domains (`.example.com`), IP addresses and CIDRs reached directly (`NO_PROXY`), in
    /// addition to the cluster's own ([`crate::ProxyEnv::of`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_proxy: Vec<String>,
}
