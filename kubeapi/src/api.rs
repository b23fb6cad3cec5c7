//! The [`ClusterApi`] trait: every Kubernetes call clusterctl makes, blocking, on core/v1 objects.
//! Implemented over the `kube` client by [`crate::KubeClusterApi`]; tests may implement it over
//! recorded objects.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, Node, Pod};

/// Errors of the API layer. Messages never contain credentials.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The kubeconfig could not be read or has no usable context (path or context, reason).
    #[error("kubeconfig {what}: {reason}")]
    Config {
        /// The kubeconfig path and context.
        what: String,
        /// Why it is unusable.
        reason: String,
    },
    /// The API server answered with an error status (HTTP code, the server's reason and message).
    #[error("API server refused {call}: {code} {reason}: {message}")]
    Status {
        /// The call, e.g. `patch node w1`.
        call: String,
        /// HTTP status code.
        code: u16,
        /// The `Status.reason` (e.g. `NotFound`, `TooManyRequests`).
        reason: String,
        /// The `Status.message`.
        message: String,
    },
    /// The `kube` client failed before the API server answered with a status (connection refused,
    /// DNS, TLS, timeout, an unreadable answer): names the server URL tried and the kubeconfig (and
    /// context) it came from, with the client's error (also its [`std::error::Error::source`]).
    #[error(
        "{call}: the API server {server} (from {origin}) could not be reached or its answer read: {}",
        cause_text(source)
    )]
    Unreachable {
        /// The call, e.g. `list nodes`.
        call: String,
        /// The server URL of the kubeconfig's cluster, e.g. `https://127.0.0.1:40123/`.
        server: String,
        /// Where the client's configuration came from, e.g. `/root/.kube/config (context
        /// clusterctl-lab)` or `admin.conf of c1`.
        origin: String,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The answer could not be used (e.g. no token in a TokenRequest's status).
    #[error("{call}: {reason}")]
    Transport {
        /// The call.
        call: String,
        /// The client's message.
        reason: String,
    },
}

/// One taint (core/v1 `Taint`): `key`, optional `value`, `effect` (`NoSchedule`, `PreferNoSchedule`,
/// `NoExecute`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaintSpec {
    /// Taint key, e.g. `dedicated`.
    pub key: String,
    /// Taint value; `None` for a key-only taint.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// The result of one eviction (policy/v1 `Eviction` through `pods/<name>/eviction`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictOutcome {
    /// The eviction was accepted (HTTP 201), or the pod was already gone (404).
    Evicted,
    /// A PodDisruptionBudget does not allow it now (HTTP 429); retry later. Holds the server's message.
    Blocked(String),
}

/// What one server-side apply ([`ClusterApi::apply`]) did to the object, told by the object read
/// before the apply and the one the apply returns: the API server bumps `metadata.resourceVersion` on
/// every write, and a server-side apply that changes nothing writes nothing, so it keeps it. A write
/// that changed only the field-ownership bookkeeping (`metadata.managedFields`) or the `status` (a
/// controller's, between the read and the apply) is no change of the object either.
///
/// The words are those of client-side `kubectl apply` (`created`, `configured`, `unchanged`);
/// `kubectl apply --server-side` prints `serverside-applied` for every object, changed or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The object did not exist; the apply created it.
    Created,
    /// The object existed and the apply changed it (more than its `managedFields` and `status`); also
    /// when another writer changed it so between the read and the apply.
    Configured,
    /// The object existed and the apply left it as it was (same resourceVersion, or nothing but its
    /// `managedFields` and `status` written).
    Unchanged,
}

impl Applied {
    /// `created`, `configured` or `unchanged`.
    pub fn as_str(self) -> &'static str {
        match self {
            Applied::Created => "created",
            Applied::Configured => "configured",
            Applied::Unchanged => "unchanged",
        }
    }
    /// True when the apply wrote the object (created or configured).
    pub fn changed(self) -> bool {
        self != Applied::Unchanged
    }
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every Kubernetes call clusterctl makes. Blocking; one value per cluster.
pub trait ClusterApi: Send + Sync {
    /// All Nodes (`GET /api/v1/nodes`).
    fn nodes(&self) -> Result<Vec<Node>, ApiError>;
    /// All Pods in all namespaces (`GET /api/v1/pods`).
    fn pods(&self) -> Result<Vec<Pod>, ApiError>;
    /// The Pods bound to `node` (`GET /api/v1/pods?fieldSelector=spec.nodeName=<node>`): what a drain
    /// reads, without listing every pod of the cluster. The default implementation filters [`Self::pods`].
    fn pods_on_node(&self, node: &str) -> Result<Vec<Pod>, ApiError> {
        Ok(self
            .pods()?
            .into_iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .collect())
    }
    /// core/v1 Events whose `involvedObject` is the object `kind`/`name` in `namespace` (`""` for
    /// cluster-scoped objects such as Nodes), oldest first (by `lastTimestamp`/`eventTime`).
    fn events_for(&self, namespace: &str, kind: &str, name: &str) -> Result<Vec<Event>, ApiError>;
    /// core/v1 Events of every namespace whose `reason` is `reason` (a field selector), oldest first.
    /// The default implementation errs.
    fn events_with_reason(&self, reason: &str) -> Result<Vec<Event>, ApiError> {
        Err(ApiError::Transport {
            call: format!("list events with reason {reason}"),
            reason: "this client cannot list events by reason".to_string(),
        })
    }
    /// Sets (`Some`) or removes (`None`) labels of a Node with a JSON merge patch (RFC 7386,
    /// `application/merge-patch+json`) on `metadata.labels`; other labels are kept.
    fn patch_node_labels(
        &self,
        node: &str,
        labels: &BTreeMap<String, Option<String>>,
    ) -> Result<(), ApiError>;
    /// Replaces a Node's `spec.taints` with `taints` with a strategic merge patch
    /// (`application/strategic-merge-patch+json`), as `kubectl taint` does.
    fn set_node_taints(&self, node: &str, taints: &[TaintSpec]) -> Result<(), ApiError>;
    /// Cordons (`true`) or uncordons (`false`) a Node: strategic merge patch of `spec.unschedulable`.
    fn set_unschedulable(&self, node: &str, unschedulable: bool) -> Result<(), ApiError>;
    /// Evicts one pod (`POST .../pods/<name>/eviction`, policy/v1 Eviction), for drain.
    fn evict(&self, namespace: &str, pod: &str) -> Result<EvictOutcome, ApiError>;
    /// Deletes a Node object (`DELETE /api/v1/nodes/<name>`); a missing Node is not an error.
    fn delete_node(&self, node: &str) -> Result<(), ApiError>;
    /// Server-side applies one whole object (`apiVersion`, `kind`, `metadata.name`, and
    /// `metadata.namespace` for namespaced kinds) with field manager `clusterctl`, conflicts forced
    /// (`kubectl apply --server-side --force-conflicts`): created when missing, converged when
    /// changed, untouched when equal; returns which of the three ([`Applied`]). Errors name the object
    /// and carry the server's message (e.g. a custom resource its CRD's schema refuses: 422
    /// `Invalid`). The default implementation errs.
    fn apply(&self, object: &serde_json::Value) -> Result<Applied, ApiError> {
        Err(ApiError::Transport {
            call: format!(
                "apply {} {}",
                object["kind"].as_str().unwrap_or("?"),
                object["metadata"]["name"].as_str().unwrap_or("?")
            ),
            reason: "this client cannot apply objects".to_string(),
        })
    }
    /// The object of `kind` in `api_version` named `name` (in `namespace` for namespaced kinds), as
    /// JSON; `Ok(None)` when it, or its kind, does not exist. The default implementation errs.
    fn get_object(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<serde_json::Value>, ApiError> {
        let _ = (api_version, namespace);
        Err(ApiError::Transport {
            call: format!("get {kind} {name}"),
            reason: "this client cannot read objects by kind".to_string(),
        })
    }
    /// Every object of `kind` in `api_version` (all namespaces); empty when the kind does not exist.
    /// The default implementation errs.
    fn list_objects(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Vec<serde_json::Value>, ApiError> {
        let _ = api_version;
        Err(ApiError::Transport {
            call: format!("list {kind}"),
            reason: "this client cannot list objects by kind".to_string(),
        })
    }
    /// A bearer token for the ServiceAccount `namespace`/`name` through the TokenRequest API
    /// (authentication.k8s.io/v1 `TokenRequest`, `POST
    /// /api/v1/namespaces/<namespace>/serviceaccounts/<name>/token`), valid for `expiration_seconds`
    /// seconds (the API server may shorten it, `--service-account-max-token-expiration`), for the API
    /// server's default audience and bound to no object. The token is a credential: callers must
    /// register it for redaction and never print or store it outside a 0600 file. Errors: the
    /// server's refusal (e.g. 404 when the ServiceAccount does not exist) or an answer without
    /// `status.token`. The default implementation (clients that cannot do it) always errs.
    fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        expiration_seconds: i64,
    ) -> Result<String, ApiError> {
        let _ = expiration_seconds;
        Err(ApiError::Transport {
            call: format!("create token for serviceaccount {namespace}/{name}"),
            reason: "this client cannot request tokens".to_string(),
        })
    }
}

/// `e` and every cause under it, joined by `: ` (the `kube` client's own message names only the
/// layer, e.g. `client error (Connect)`; the causes say why, e.g. `Connection refused`). A cause
/// whose text the previous level already contains is left out.
fn cause_text(e: &kube::Error) -> String {
    let mut out = e.to_string();
    let mut next = std::error::Error::source(e);
    while let Some(c) = next {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = c.source();
    }
    out
}
