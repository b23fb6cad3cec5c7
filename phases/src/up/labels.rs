//! `labels`: the node labels and taints of the cluster file, already set at registration through the
//! join configuration, reconciled through the Kubernetes API (for nodes that joined before the file
//! changed): each Node is read (`kubectl get node -o json`) and only the labels and taints that differ
//! are set (`kubectl label --overwrite`, `kubectl taint --overwrite`), from the first control plane.
//! Labels and taints not in the file are left alone.

use super::{UpData, KUBECTL};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::model::NodeInfo;
use crate::util::sh_quote;

/// Digest material: every node's labels and taints.
pub fn inputs(data: &UpData, _: &NodeInfo) -> String {
    data.spec
        .nodes
        .iter()
        .map(|n| format!("{} {:?} {:?}\n", n.name, n.labels, n.taints))
        .collect()
}

/// A label as (key, value).
pub type Label = (String, String);

/// A taint as (key, value, effect).
pub type Taint = (String, String, String);

/// A taint `key[=value]:Effect` split into (key, value, effect). `None` when malformed.
pub fn parse_taint(t: &str) -> Option<(String, String, String)> {
    let (kv, effect) = t.rsplit_once(':')?;
    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
    (!k.is_empty() && !effect.is_empty())
        .then(|| (k.to_string(), v.to_string(), effect.to_string()))
}

/// The labels and taints (as `key=value:Effect`) of a Node object (Kubernetes API `v1.Node` JSON).
pub fn node_labels_taints(json: &str) -> Option<(Vec<Label>, Vec<Taint>)> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let labels = v["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    let taints = v["spec"]["taints"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    let s = |f: &str| t[f].as_str().unwrap_or_default().to_string();
                    (s("key"), s("value"), s("effect"))
                })
                .collect()
        })
        .unwrap_or_default();
    Some((labels, taints))
}

/// The `labels` phase (first control plane).
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    for n in &data.spec.nodes {
        if n.labels.is_empty() && n.taints.is_empty() {
            continue;
        }
        let name = sh_quote(&n.name);
        let current = ctx.read(&format!("{KUBECTL} get node {name} -o json"))?;
        let (have_l, have_t) = match current.as_deref().map(node_labels_taints) {
            Some(Some(x)) => x,
            Some(None) => {
                return Err(ctx.local_error(format!(
                    "the API returned no valid Node object for {}",
                    n.name
                )))
            }
            None => (Vec::new(), Vec::new()),
        };
        let missing: Vec<String> = n
            .labels
            .iter()
            .filter(|(k, v)| !have_l.iter().any(|(hk, hv)| hk == *k && hv == *v))
            .map(|(k, v)| sh_quote(&format!("{k}={v}")))
            .collect();
        if !missing.is_empty() {
            ctx.run_script(&format!(
                "{KUBECTL} label node {name} --overwrite {}",
                missing.join(" ")
            ))?;
        }
        for t in &n.taints {
            let Some(want) = parse_taint(t) else {
                return Err(ctx.local_error(format!(
                    "taint `{t}` of node {} is not key[=value]:Effect",
                    n.name
                )));
            };
            if !have_t.contains(&want) {
                ctx.run_script(&format!(
                    "{KUBECTL} taint node {name} --overwrite {}",
                    sh_quote(t)
                ))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_labels_and_taints_of_a_node() {
        let json = r#"{"kind":"Node","metadata":{"name":"w1","labels":{"disktype":"ssd"}},"spec":{"taints":[{"key":"dedicated","value":"gpu","effect":"NoSchedule"}]}}"#;
        let (l, t) = node_labels_taints(json).expect("node");
        assert_eq!(l, vec![("disktype".into(), "ssd".into())]);
        assert_eq!(
            t,
            vec![("dedicated".into(), "gpu".into(), "NoSchedule".into())]
        );
        assert_eq!(
            parse_taint("dedicated=gpu:NoSchedule"),
            Some(("dedicated".into(), "gpu".into(), "NoSchedule".into()))
        );
        assert_eq!(
            parse_taint("x:NoExecute"),
            Some(("x".into(), "".into(), "NoExecute".into()))
        );
        assert_eq!(parse_taint("nothing"), None);
    }
}
