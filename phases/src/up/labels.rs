//! `labels`: the node labels and taints of the cluster file, already set at registration through the
//! join configuration (kubelet `node-labels`, `nodeRegistration.taints`), reconciled through the
//! Kubernetes API from this machine (for nodes that joined before the file changed): the Nodes are
//! listed once (`GET /api/v1/nodes`), and only what differs is patched — labels with a JSON merge patch
//! of `metadata.labels` (RFC 7386), taints by a strategic merge patch replacing `spec.taints` with the
//! current list where the file's taints replace those with the same key and effect (as
//! `kubectl taint --overwrite` does). Labels and taints not in the file are left alone.

use super::api::api_error;
use super::UpData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use clusterctl_kubeapi::{Node, TaintSpec};
use clusterctl_spec::model::Taint;
use clusterctl_spec::ValidNode;
use std::collections::BTreeMap;

/// Digest material: every node's labels and taints (each taint as `key[=value]:Effect`).
pub fn inputs(data: &UpData, _: &ValidNode) -> String {
    data.spec
        .nodes
        .iter()
        .map(|n| {
            let taints: Vec<String> = n.taints.iter().map(ToString::to_string).collect();
            format!("{} {:?} {:?}\n", n.name, n.labels, taints)
        })
        .collect()
}

/// The cluster file's taint as the API's core/v1 `Taint` (`value` `None` when unset or empty).
pub fn taint_spec(t: &Taint) -> TaintSpec {
    TaintSpec {
        key: t.key.clone(),
        value: t.value.clone().filter(|v| !v.is_empty()),
        effect: t.effect.as_str().to_string(),
    }
}

/// The labels of `want` that `node` lacks or has with another value, as a merge-patch map.
pub fn label_patch(
    node: Option<&Node>,
    want: &BTreeMap<String, String>,
) -> BTreeMap<String, Option<String>> {
    let have = node.and_then(|n| n.metadata.labels.as_ref());
    want.iter()
        .filter(|(k, v)| have.and_then(|h| h.get(*k)) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect()
}

/// The Node's taints (core/v1 `spec.taints`) as [`TaintSpec`]s.
pub fn node_taints(node: Option<&Node>) -> Vec<TaintSpec> {
    node.and_then(|n| n.spec.as_ref())
        .and_then(|s| s.taints.as_ref())
        .map(|ts| {
            ts.iter()
                .map(|t| TaintSpec {
                    key: t.key.clone(),
                    value: t.value.clone().filter(|v| !v.is_empty()),
                    effect: t.effect.clone(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The Node's new taint list when some of `want` are missing: `have` with every taint of the same key
/// and effect as a wanted one replaced by it, the others appended. `None` when nothing differs.
pub fn taint_update(have: &[TaintSpec], want: &[TaintSpec]) -> Option<Vec<TaintSpec>> {
    if want.iter().all(|w| have.contains(w)) {
        return None;
    }
    let mut out: Vec<TaintSpec> = have
        .iter()
        .filter(|h| !want.iter().any(|w| w.key == h.key && w.effect == h.effect))
        .cloned()
        .collect();
    out.extend(want.iter().cloned());
    Some(out)
}

fn show_taint(t: &TaintSpec) -> String {
    match &t.value {
        Some(v) => format!("{}={v}:{}", t.key, t.effect),
        None => format!("{}:{}", t.key, t.effect),
    }
}

/// The `labels` phase (first control plane; API calls from this machine).
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let wanted: Vec<&ValidNode> = data
        .spec
        .nodes
        .iter()
        .filter(|n| !n.labels.is_empty() || !n.taints.is_empty())
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let api = data.api.get(ctx)?;
    let nodes: Vec<Node> = match &api {
        Some(api) => {
            ctx.api_query("list nodes (GET /api/v1/nodes)");
            api.nodes().map_err(|e| api_error(ctx, e))?
        }
        None => Vec::new(),
    };
    for n in wanted {
        let node = nodes
            .iter()
            .find(|o| o.metadata.name.as_deref() == Some(n.name.as_str()));
        // A dry run plans the labels of a node that is still to join (`node join --dry-run`).
        if api.is_some() && node.is_none() && !ctx.mode.dry_run {
            return Err(ctx.check_error(vec![format!(
                "Node {} is not registered with the API server (its kubelet has not joined)",
                n.name
            )]));
        }
        let want_taints: Vec<TaintSpec> = n.taints.iter().map(taint_spec).collect();
        let labels = label_patch(node, &n.labels);
        if !labels.is_empty() {
            let shown: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or_default()))
                .collect();
            let what = format!(
                "node {}: set labels {} (merge patch of metadata.labels)",
                n.name,
                shown.join(",")
            );
            let api = api.clone();
            let name = n.name.clone();
            ctx.api_change(&what, move || match api {
                Some(a) => a.patch_node_labels(&name, &labels),
                None => Ok(()),
            })?;
        }
        if let Some(all) = taint_update(&node_taints(node), &want_taints) {
            let shown: Vec<String> = want_taints.iter().map(show_taint).collect();
            let what = format!(
                "node {}: set taints {} (strategic merge patch of spec.taints)",
                n.name,
                shown.join(",")
            );
            let api = api.clone();
            let name = n.name.clone();
            ctx.api_change(&what, move || match api {
                Some(a) => a.set_node_taints(&name, &all),
                None => Ok(()),
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clusterctl_spec::model::TaintEffect;

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect,
        }
    }

    fn node(json: &str) -> Node {
        serde_json::from_str(json).expect("node")
    }

    #[test]
    fn patches_only_what_differs() {
        let n = node(
            r#"{"metadata":{"name":"w1","labels":{"disktype":"hdd","zone":"a"}},"spec":{"taints":[{"key":"dedicated","value":"web","effect":"NoSchedule"},{"key":"other","effect":"NoExecute"}]}}"#,
        );
        let want: BTreeMap<String, String> = [("disktype", "ssd"), ("zone", "a")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let patch = label_patch(Some(&n), &want);
        assert_eq!(
            patch,
            [("disktype".to_string(), Some("ssd".to_string()))]
                .into_iter()
                .collect()
        );
        let want_t = vec![taint_spec(&taint(
            "dedicated",
            "db",
            TaintEffect::NoSchedule,
        ))];
        let all = taint_update(&node_taints(Some(&n)), &want_t).expect("differs");
        assert_eq!(
            all.iter().map(show_taint).collect::<Vec<_>>(),
            vec!["other:NoExecute", "dedicated=db:NoSchedule"]
        );
        assert_eq!(taint_update(&all, &want_t), None);
        assert_eq!(
            taint_spec(&taint("x", "", TaintEffect::NoExecute)).value,
            None
        );
    }
}
