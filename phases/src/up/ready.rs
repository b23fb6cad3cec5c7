//! `wait-ready`: polls the Nodes (`kubectl get nodes -o json` on the first control plane, read-only)
//! until every node of the file reports the `Ready` condition `True`, or the timeout passes.

use super::{UpData, KUBECTL};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use std::time::{Duration, Instant};

/// Names of the Nodes whose `Ready` condition is `True` in a `v1.NodeList` JSON.
pub fn ready_nodes(json: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return Vec::new();
    };
    v["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|n| {
                    n["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
                })
                .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The `wait-ready` phase. Errors: [`PhaseError::Check`] naming the nodes not Ready at the timeout.
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let start = Instant::now();
    loop {
        let Some(json) = ctx.read(&format!("{KUBECTL} get nodes -o json"))? else {
            ctx.info(&format!(
                "wait until every node is Ready (timeout {}s)",
                data.spec.ready_timeout.as_secs()
            ));
            return Ok(());
        };
        let ready = ready_nodes(&json);
        let missing: Vec<&str> = data
            .spec
            .nodes
            .iter()
            .map(|n| n.name.as_str())
            .filter(|n| !ready.iter().any(|r| r == n))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if start.elapsed() >= data.spec.ready_timeout {
            return Err(ctx.check_error(vec![format!(
                "not Ready after {}s: {}",
                data.spec.ready_timeout.as_secs(),
                missing.join(", ")
            )]));
        }
        std::thread::sleep(Duration::from_secs(3).min(data.spec.ready_timeout));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn picks_ready_nodes() {
        let json = r#"{"items":[{"metadata":{"name":"c1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}},{"metadata":{"name":"w1"},"status":{"conditions":[{"type":"Ready","status":"False"}]}}]}"#;
        assert_eq!(super::ready_nodes(json), vec!["c1".to_string()]);
        assert!(super::ready_nodes("not json").is_empty());
    }
}
