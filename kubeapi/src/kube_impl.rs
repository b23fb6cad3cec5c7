//! [`KubeClusterApi`]: the [`ClusterApi`] over the `kube` client (rustls with ring), built from a
//! kubeconfig path and an optional context name. `kube` is async: the value owns a current-thread Tokio
//! runtime and blocks on each call, so callers stay synchronous like the rest of clusterctl.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Event, Node, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;

use crate::api::{ApiError, ClusterApi, EvictOutcome, TaintSpec};
use crate::paged::list_lean;

/// The field manager name sent with every patch.
pub(crate) const FIELD_MANAGER: &str = "clusterctl";

/// The resources found through discovery, by `apiVersion kind` (filled by the lookups of `apply.rs`,
/// which imports this module and not the other way round).
pub(crate) type Resources = std::sync::Mutex<
    std::collections::HashMap<String, (kube::core::ApiResource, kube::discovery::ApiCapabilities)>,
>;

/// A [`ClusterApi`] talking to a real API server through `kube`.
pub struct KubeClusterApi {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) client: Client,
    /// Resources found through discovery (`apply.rs`).
    pub(crate) resources: Resources,
    /// The cluster's server URL, named by errors ([`ApiError::Unreachable`]).
    pub(crate) server: String,
    /// The kubeconfig (and context) the client was built from, named by errors.
    pub(crate) origin: String,
}

impl std::fmt::Debug for KubeClusterApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClusterApi").finish_non_exhaustive()
    }
}

impl KubeClusterApi {
    /// The [`ApiError`] of a failed call: the server's status as [`ApiError::Status`], anything
    /// else (the server never answered with a status) as [`ApiError::Unreachable`] naming the server
    /// and the kubeconfig.
    pub(crate) fn map_err(&self, call: &str, e: kube::Error) -> ApiError {
        match e {
            kube::Error::Api(s) => ApiError::Status {
                call: call.to_string(),
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
            },
            source => ApiError::Unreachable {
                call: call.to_string(),
                server: self.server.clone(),
                origin: self.origin.clone(),
                source: Box::new(source),
            },
        }
    }
}

/// The first line of `e`'s message with whatever it quotes (`"…"`, `` `…` ``) left out and no
/// source snippet: kube's kubeconfig errors may show the lines around a fault or a value, and a
/// kubeconfig holds credentials.
fn unquoted(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    let mut out = String::new();
    let mut open: Option<char> = None;
    for c in first.chars() {
        match open {
            Some(q) if c == q => {
                out.push('…');
                open = None;
            }
            Some(_) => {}
            None if matches!(c, '"' | '`') => open = Some(c),
            None => out.push(c),
        }
    }
    out
}

impl KubeClusterApi {
    /// A client for the kubeconfig at `path`, using `context` (or the file's `current-context`).
    /// Errors: [`ApiError::Config`] when the file cannot be read, the context is missing, or its
    /// credentials cannot be loaded. No request is made here.
    pub fn from_kubeconfig(path: &Path, context: Option<&str>) -> Result<Self, ApiError> {
        let named = |ctx: &str| format!("{} (context {ctx})", path.display());
        let what = match context {
            Some(c) => named(c),
            None => format!("{} (its current context)", path.display()),
        };
        let cfg_err = |reason: String| ApiError::Config {
            what: what.clone(),
            reason,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| cfg_err(format!("cannot start the async runtime: {e}")))?;
        // Checked first by our own reading, whose errors name a line and column but never the text
        // (a kubeconfig holds credentials); kube's own errors are shown without what they quote.
        let text = std::fs::read_to_string(path).map_err(|e| cfg_err(e.to_string()))?;
        crate::kubeconfig::parse(&text).map_err(|e| cfg_err(e.to_string()))?;
        let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|e| cfg_err(unquoted(&e)))?;
        // Errors after this point name the context actually used.
        let origin = named(
            context
                .or(kubeconfig.current_context.as_deref())
                .unwrap_or("current-context"),
        );
        let options = KubeConfigOptions {
            context: context.map(str::to_string),
            ..Default::default()
        };
        let mut config = rt
            .block_on(Config::from_custom_kubeconfig(kubeconfig, &options))
            .map_err(|e| cfg_err(unquoted(&e)))?;
        // A 429 must reach the caller: an eviction refused by a PodDisruptionBudget is retried
        // by the drain (with its own interval and deadline), not for minutes inside the client.
        config.default_retry = false;
        Self::with_config(rt, config, origin).map_err(|e| cfg_err(e.to_string()))
    }

    /// A client for the kubeconfig `text` (YAML, e.g. kubeadm's `admin.conf` read from a control
    /// plane), using its `current-context`. The text is parsed in memory, never written to disk (it
    /// holds the admin credentials). Errors: [`ApiError::Config`] naming `what` (e.g.
    /// `admin.conf of c1`) when the text is not a kubeconfig or its credentials cannot be loaded; the
    /// message never quotes the text. No request is made here.
    pub fn from_kubeconfig_text(text: &str, what: &str) -> Result<Self, ApiError> {
        let cfg_err = |reason: String| ApiError::Config {
            what: what.to_string(),
            reason,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| cfg_err(format!("cannot start the async runtime: {e}")))?;
        let kubeconfig = Kubeconfig::from_yaml(text)
            .map_err(|_| cfg_err("is not a kubeconfig (v1 Config YAML)".to_string()))?;
        let config = rt
            .block_on(Config::from_custom_kubeconfig(
                kubeconfig,
                &KubeConfigOptions::default(),
            ))
            .map_err(|e| cfg_err(e.to_string()))?;
        Self::with_config(rt, config, what.to_string()).map_err(|e| cfg_err(e.to_string()))
    }

    /// The API of `config`, naming its server URL and `origin` (where the configuration came from)
    /// in [`ApiError::Unreachable`]. The client is built inside `rt`, where its request buffer's
    /// task runs. Errors: the client cannot be built from `config` (e.g. its TLS settings).
    fn with_config(
        rt: tokio::runtime::Runtime,
        config: Config,
        origin: String,
    ) -> Result<Self, kube::Error> {
        let server = config.cluster_url.to_string();
        let client = rt.block_on(async { Client::try_from(config) })?;
        Ok(KubeClusterApi {
            rt,
            client,
            resources: Default::default(),
            server,
            origin,
        })
    }

    fn node_api(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    fn patch_node(
        &self,
        call: &str,
        node: &str,
        patch: Patch<serde_json::Value>,
    ) -> Result<(), ApiError> {
        let api = self.node_api();
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..Default::default()
        };
        self.rt
            .block_on(async { api.patch(node, &pp, &patch).await })
            .map(|_| ())
            .map_err(|e| self.map_err(call, e))
    }
}

/// The time an event last happened, for ordering: `lastTimestamp`, else `eventTime`, else
/// `firstTimestamp`, as seconds since the Unix epoch (0 when none is set).
pub(crate) fn event_time(e: &Event) -> i64 {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .or_else(|| e.event_time.as_ref().map(|t| t.0.as_second()))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0.as_second()))
        .unwrap_or(0)
}

impl ClusterApi for KubeClusterApi {
    fn nodes(&self) -> Result<Vec<Node>, ApiError> {
        let api = self.node_api();
        self.rt
            .block_on(list_lean(&api, &ListParams::default()))
            .map_err(|e| self.map_err("list nodes", e))
    }

    fn pods(&self) -> Result<Vec<Pod>, ApiError> {
        let api: Api<Pod> = Api::all(self.client.clone());
        self.rt
            .block_on(list_lean(&api, &ListParams::default()))
            .map_err(|e| self.map_err("list pods", e))
    }

    fn pods_on_node(&self, node: &str) -> Result<Vec<Pod>, ApiError> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        self.rt
            .block_on(list_lean(&api, &lp))
            .map_err(|e| self.map_err("list pods", e))
    }

    fn events_for(&self, namespace: &str, kind: &str, name: &str) -> Result<Vec<Event>, ApiError> {
        let api: Api<Event> = if namespace.is_empty() {
            Api::namespaced(self.client.clone(), "default")
        } else {
            Api::namespaced(self.client.clone(), namespace)
        };
        let mut fields = format!("involvedObject.kind={kind},involvedObject.name={name}");
        if !namespace.is_empty() {
            fields.push_str(&format!(",involvedObject.namespace={namespace}"));
        }
        let lp = ListParams::default().fields(&fields);
        let mut items = self
            .rt
            .block_on(async { api.list(&lp).await })
            .map(|l| l.items)
            .map_err(|e| self.map_err(&format!("list events of {kind} {name}"), e))?;
        items.sort_by_key(event_time);
        Ok(items)
    }

    fn events_with_reason(&self, reason: &str) -> Result<Vec<Event>, ApiError> {
        let api: Api<Event> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(&format!("reason={reason}"));
        let mut items = self
            .rt
            .block_on(async { api.list(&lp).await })
            .map(|l| l.items)
            .map_err(|e| self.map_err(&format!("list events with reason {reason}"), e))?;
        items.sort_by_key(event_time);
        Ok(items)
    }

    fn patch_node_labels(
        &self,
        node: &str,
        labels: &BTreeMap<String, Option<String>>,
    ) -> Result<(), ApiError> {
        let patch = json!({ "metadata": { "labels": labels } });
        self.patch_node(&format!("label node {node}"), node, Patch::Merge(patch))
    }

    fn set_node_taints(&self, node: &str, taints: &[TaintSpec]) -> Result<(), ApiError> {
        let patch = json!({ "spec": { "taints": taints } });
        self.patch_node(&format!("taint node {node}"), node, Patch::Strategic(patch))
    }

    fn set_unschedulable(&self, node: &str, unschedulable: bool) -> Result<(), ApiError> {
        let patch = json!({ "spec": { "unschedulable": unschedulable } });
        let call = if unschedulable { "cordon" } else { "uncordon" };
        self.patch_node(
            &format!("{call} node {node}"),
            node,
            Patch::Strategic(patch),
        )
    }

    fn evict(&self, namespace: &str, pod: &str) -> Result<EvictOutcome, ApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let call = format!("evict pod {namespace}/{pod}");
        // The body `kubectl drain` sends (policy/v1 Eviction with its type and namespace).
        let eviction = json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": { "name": pod, "namespace": namespace },
        });
        match self.rt.block_on(async {
            api.create_subresource::<_, serde_json::Value>(
                "eviction",
                pod,
                &PostParams::default(),
                &eviction,
            )
            .await
        }) {
            Ok(_) => Ok(EvictOutcome::Evicted),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(EvictOutcome::Evicted),
            Err(kube::Error::Api(s)) if s.code == 429 => {
                Ok(EvictOutcome::Blocked(s.message.clone()))
            }
            Err(e) => Err(self.map_err(&call, e)),
        }
    }

    fn delete_node(&self, node: &str) -> Result<(), ApiError> {
        let api = self.node_api();
        match self
            .rt
            .block_on(async { api.delete(node, &DeleteParams::default()).await })
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(self.map_err(&format!("delete node {node}"), e)),
        }
    }

    fn apply(&self, object: &serde_json::Value) -> Result<crate::Applied, ApiError> {
        self.apply_object(object)
    }

    fn get_object(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<serde_json::Value>, ApiError> {
        KubeClusterApi::get_object(self, api_version, kind, namespace, name)
    }

    fn list_objects(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Vec<serde_json::Value>, ApiError> {
        KubeClusterApi::list_objects(self, api_version, kind)
    }

    fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        expiration_seconds: i64,
    ) -> Result<String, ApiError> {
        let call = format!("create token for serviceaccount {namespace}/{name}");
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(expiration_seconds),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = self
            .rt
            .block_on(async {
                api.create_token_request(name, &PostParams::default(), &request)
                    .await
            })
            .map_err(|e| self.map_err(&call, e))?;
        match answer.status.map(|s| s.token) {
            Some(token) if !token.is_empty() => Ok(token),
            _ => Err(ApiError::Transport {
                call,
                reason: "the answer holds no status.token".to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_errors_are_shown_without_what_they_quote_or_a_snippet() {
        let e = "invalid type: string \"SECRET-TOKEN\", expected a `map` here\n 14 |   token: SECRET-TOKEN";
        let shown = unquoted(&e);
        assert_eq!(shown, "invalid type: string …, expected a … here");
        assert!(!shown.contains("SECRET"));
        assert_eq!(unquoted(&"can't load"), "can't load");
    }

    #[test]
    fn an_unreadable_kubeconfig_is_refused_without_its_text() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("config");
        std::fs::write(
            &p,
            "apiVersion: v1\nusers:\n- name: prod\n  user:\n    token: PROD-SECRET\n    password: [x]\ncontexts: []\n",
        )
        .expect("write");
        let e = match KubeClusterApi::from_kubeconfig(&p, None) {
            Ok(_) => panic!("a kubeconfig that does not parse was taken"),
            Err(e) => e.to_string(),
        };
        assert!(!e.contains("PROD-SECRET"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
