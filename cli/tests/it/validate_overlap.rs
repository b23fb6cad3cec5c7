//! `validate` reports an overlap of podSubnet or serviceSubnet with the nodes once, at the range the
//! user edits (issue 16, point 2), even when other parts of the networking section are wrong.

use std::process::Command;

use crate::validate_cli::{json_diagnostics, MANY_MISTAKES};

fn clusterctl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_clusterctl"))
}

#[test]
fn an_overlap_is_reported_once_at_the_range() {
    // Four nodes in the serviceSubnet: one error, at the serviceSubnet line, naming every node.
    let text = MANY_MISTAKES
        .replace("10.244.0.0/33", "10.244.0.0/16")
        .replace("      lables: {disk: ssd}\n", "")
        .replace("      taints: [{key: gpu, effect: Sometimes}]\n", "");
    let d = json_diagnostics(&text);
    let overlaps: Vec<_> = d
        .iter()
        .filter(|(c, _, _)| c == "spec::cidr-overlap")
        .collect();
    assert_eq!(overlaps.len(), 1, "{d:?}");
    assert_eq!(overlaps[0].1, "spec.networking.serviceSubnet");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cluster.yaml");
    std::fs::write(&path, &text).expect("write");
    let out = clusterctl()
        .args(["validate", "-f"])
        .arg(&path)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("serviceSubnet 10.0.0.0/16 overlaps the nodes' network: 10.0.0.0/24 of nodes cp1, cp2, w1, w2"),
        "{stderr}"
    );
}

#[test]
fn an_overlap_is_checked_when_the_other_range_is_wrong() {
    // podSubnet is not a CIDR: the serviceSubnet is still checked against the nodes.
    let d = json_diagnostics(MANY_MISTAKES);
    let line = MANY_MISTAKES
        .lines()
        .position(|l| l.contains("serviceSubnet"))
        .map(|i| i as u64 + 1)
        .expect("line");
    assert!(
        d.iter().any(|(c, p, l)| c == "spec::cidr-overlap"
            && p == "spec.networking.serviceSubnet"
            && *l == line),
        "{d:?}"
    );
    assert!(d.iter().any(|(c, _, _)| c == "spec::cidr"), "{d:?}");
}
