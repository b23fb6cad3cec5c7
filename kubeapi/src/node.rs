//! [`NodeStatus`]: one Node as `clusterctl status` shows it — role, kubelet version, Ready, and when not
//! Ready the reason in words (e.g. `container runtime network not ready: NetworkPluginNotReady`, which
//! kubelet reports until a CNI is installed). Shapes: core/v1 `Node`, `NodeCondition`.

use k8s_openapi::api::core::v1::Node;

/// Label prefix of role labels (`node-role.kubernetes.io/control-plane`).
pub(crate) const ROLE_LABEL_PREFIX: &str = "node-role.kubernetes.io/";

/// One Node's summary (JSON: camelCase field names).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// Node name.
    pub name: String,
    /// Roles from `node-role.kubernetes.io/<role>` labels, comma-joined (`control-plane`), or `worker`
    /// when there is none.
    pub role: String,
    /// `status.nodeInfo.kubeletVersion` (e.g. `v1.34.1`), empty when not reported.
    pub version: String,
    /// The Ready condition is `True`.
    pub ready: bool,
    /// When not Ready: why, in words (condition reason and message, the network plugin named when it
    /// is the cause; `no Ready condition reported` when kubelet never posted one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// First `InternalIP` of `status.addresses`, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub internal_ip: Option<String>,
}

/// Summarises `node`. Never fails: missing fields give empty values.
pub fn node_status(node: &Node) -> NodeStatus {
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut roles: Vec<String> = node
        .metadata
        .labels
        .iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix(ROLE_LABEL_PREFIX))
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .collect();
    roles.sort();
    let role = if roles.is_empty() {
        "worker".to_string()
    } else {
        roles.join(",")
    };
    let status = node.status.as_ref();
    let version = status
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.kubelet_version.clone())
        .unwrap_or_default();
    let ready_cond = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    let ready = ready_cond.is_some_and(|c| c.status == "True");
    let reason = if ready {
        None
    } else {
        Some(match ready_cond {
            None => {
                "no Ready condition reported (kubelet has not registered its status)".to_string()
            }
            Some(c) => not_ready_reason(
                c.status.as_str(),
                c.reason.as_deref().unwrap_or(""),
                c.message.as_deref().unwrap_or(""),
            ),
        })
    };
    let internal_ip = status
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone());
    NodeStatus {
        name,
        role,
        version,
        ready,
        reason,
        unschedulable: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        internal_ip,
    }
}

/// The reason a Ready condition with `status`, `reason` and `message` gives, in words:
/// - kubelet's `container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady
///   message:…` becomes `container runtime network not ready: NetworkPluginNotReady (…message…)`;
/// - `Unknown` (kubelet stopped posting) says so;
/// - anything else is `reason: message`.
pub(crate) fn not_ready_reason(status: &str, reason: &str, message: &str) -> String {
    const NET: &str = "container runtime network not ready";
    if let Some(pos) = message.find(NET) {
        let rest = &message[pos + NET.len()..];
        let net_reason = rest
            .split_whitespace()
            .find_map(|w| w.strip_prefix("reason:"))
            .unwrap_or("");
        let net_message = rest
            .find("message:")
            .map(|i| rest[i + "message:".len()..].trim())
            .unwrap_or("");
        let mut out = NET.to_string();
        if !net_reason.is_empty() {
            out.push_str(": ");
            out.push_str(net_reason);
        }
        if !net_message.is_empty() {
            out.push_str(&format!(" ({net_message})"));
        }
        return out;
    }
    if status == "Unknown" {
        let base = "kubelet stopped posting node status";
        return if message.is_empty() {
            base.to_string()
        } else {
            format!("{base}: {message}")
        };
    }
    match (reason.is_empty(), message.is_empty()) {
        (true, true) => format!("Ready is {status}"),
        (false, true) => reason.to_string(),
        (true, false) => message.to_string(),
        (false, false) => format!("{reason}: {message}"),
    }
}
