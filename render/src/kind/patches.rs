//! The kubeadm settings of the cluster file as kind `kubeadmConfigPatches`, which kind merges into the
//! kubeadm config it generates for each node (kind pkg/internal/patch: a JSON merge patch per document
//! whose `kind` matches and whose `apiVersion` matches or is absent; from v0.32.0 `certSANs` are
//! appended to kind's own and `extraArgs` merged by flag name).
//!
//! Fields with one shape in every kubeadm API (`apiServer.certSANs`, `apiServer.extraVolumes`,
//! `nodeRegistration.taints`) go into unversioned patches; fields whose shape differs (`extraArgs`: a map
//! in v1beta3, a `{name, value}` list in v1beta4; the timeouts: `apiServer.timeoutForControlPlane` and
//! `discovery.timeout` in v1beta3, `timeouts` on Init/Join in v1beta4) into patches for exactly the API
//! kind generates for the node image's version ([`super::kubeadm_api`]). Cluster-wide settings are
//! ClusterConfiguration patches; per node, the first control plane gets InitConfiguration patches and
//! every other node JoinConfiguration patches. Only what the file sets is patched (kind keeps its own
//! defaults otherwise); v1beta3 has no field for the other timeouts (`kubeletHealthCheck`,
//! `tlsBootstrap`, …), so below Kubernetes 1.36 kind's kubeadm uses its defaults for those.

use crate::apiserver;
use crate::ctx::Ctx;
use crate::kubeadm::common;
use crate::output::RenderError;
use crate::yaml;
use clusterctl_spec::{KubeadmApi, ValidNode};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The cluster-level patches (ClusterConfiguration): certSANs and extraVolumes unversioned, the API
/// server's flags (and v1beta3's control-plane timeout) for `api`.
pub(crate) fn cluster(cx: &Ctx, api: KubeadmApi) -> Result<Vec<String>, RenderError> {
    let x = apiserver::extras(cx);
    let spec = cx.c.spec();
    let mut out = Vec::new();
    let mut shared = Map::new();
    if !spec.api_server.cert_sans.is_empty() {
        shared.insert("certSANs".into(), json!(spec.api_server.cert_sans));
    }
    if !x.mounts.is_empty() {
        let vols: Vec<Value> = x
            .mounts
            .iter()
            .map(|m| {
                json!({"name": m.name, "hostPath": m.host_path, "mountPath": m.mount_path,
                       "readOnly": m.read_only, "pathType": m.path_type})
            })
            .collect();
        shared.insert("extraVolumes".into(), Value::Array(vols));
    }
    if !shared.is_empty() {
        out.push(patch(
            None,
            "ClusterConfiguration",
            json!({ "apiServer": shared }),
        )?);
    }
    let mut versioned = Map::new();
    if !x.args.is_empty() {
        versioned.insert("extraArgs".into(), args(api, &x.args));
    }
    if api == KubeadmApi::V1beta3 {
        if let Some(t) = set_timeout(cx, "controlPlaneComponentHealthCheck") {
            versioned.insert("timeoutForControlPlane".into(), json!(t));
        }
    }
    if !versioned.is_empty() {
        out.push(patch(
            Some(api),
            "ClusterConfiguration",
            json!({ "apiServer": versioned }),
        )?);
    }
    Ok(out)
}

/// The patches of one node: InitConfiguration for the first control plane, JoinConfiguration for the
/// others — its taints (unversioned) and the file's kubeadm timeouts (for `api`).
pub(crate) fn node(
    cx: &Ctx,
    node: &ValidNode,
    api: KubeadmApi,
) -> Result<Vec<String>, RenderError> {
    let kind = if cx.is_first(node) {
        "InitConfiguration"
    } else {
        "JoinConfiguration"
    };
    let mut out = Vec::new();
    if let Some(t) = common::taints(cx, node) {
        out.push(patch(
            None,
            kind,
            json!({"nodeRegistration": {"taints": t}}),
        )?);
    }
    let timeouts: Vec<(&str, String)> =
        cx.c.spec()
            .kubeadm
            .timeouts
            .fields()
            .iter()
            .filter_map(|(n, v)| v.as_ref().map(|v| (*n, v.clone())))
            .collect();
    let body = match api {
        KubeadmApi::V1beta4 if !timeouts.is_empty() => {
            let m: Map<String, Value> = timeouts
                .into_iter()
                .map(|(n, v)| (n.to_string(), Value::String(v)))
                .collect();
            Some(json!({ "timeouts": m }))
        }
        KubeadmApi::V1beta3 if kind == "JoinConfiguration" => {
            set_timeout(cx, "discovery").map(|t| json!({"discovery": {"timeout": t}}))
        }
        _ => None,
    };
    if let Some(b) = body {
        out.push(patch(Some(api), kind, b)?);
    }
    Ok(out)
}

/// The file's value of one `kubeadm.timeouts` field, when it sets it (kind keeps kubeadm's defaults).
fn set_timeout(cx: &Ctx, field: &str) -> Option<String> {
    cx.c.spec()
        .kubeadm
        .timeouts
        .fields()
        .iter()
        .find(|(n, _)| *n == field)
        .and_then(|(_, v)| (*v).clone())
}

/// Flags as `api` writes them: a map (v1beta3) or a `{name, value}` list (v1beta4).
fn args(api: KubeadmApi, flags: &BTreeMap<String, String>) -> Value {
    match api {
        KubeadmApi::V1beta3 => json!(flags),
        KubeadmApi::V1beta4 => Value::Array(
            flags
                .iter()
                .map(|(k, v)| json!({"name": k, "value": v}))
                .collect(),
        ),
    }
}

/// One patch document: `kind` and, when versioned, `apiVersion`, then `body`'s fields.
fn patch(api: Option<KubeadmApi>, kind: &str, body: Value) -> Result<String, RenderError> {
    let mut m = Map::new();
    if let Some(a) = api {
        m.insert("apiVersion".into(), json!(a.api_version()));
    }
    m.insert("kind".into(), json!(kind));
    if let Value::Object(b) = body {
        m.extend(b);
    }
    yaml::doc("kind kubeadmConfigPatch", &Value::Object(m))
}
