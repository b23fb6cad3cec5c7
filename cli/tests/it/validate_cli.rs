//! `clusterctl validate` end to end: exit codes (0 valid, 2 invalid), graphical diagnostics naming
//! file:line:column with a help line, the one-line summary, `--profile`, `--list-profiles` and `-o json`.

use std::process::Command;

fn clusterctl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_clusterctl"))
}

const VALID: &str = "\
apiVersion: clusterctl.io/v1alpha1
kind: Cluster
metadata:
  name: demo
spec:
  kubernetesVersion: v1.34.1
  provider: ssh
  nodes:
    - name: cp1
      role: control-plane
      address: 10.0.0.11/24
";

#[test]
fn valid_file_exits_zero() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cluster.yaml");
    std::fs::write(&path, VALID).expect("write");
    let out = clusterctl()
        .args(["validate", "-f"])
        .arg(&path)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("cluster.yaml: valid"), "{stdout}");
}

#[test]
fn invalid_file_exits_two_with_positions_and_help() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cluster.yaml");
    let text = VALID.replace("10.0.0.11/24", "10.0.0.300").replace(
        "  provider: ssh\n",
        "  provider: ssh\n  networking: {podSubnet: 10.244.0.0/33}\n",
    );
    std::fs::write(&path, &text).expect("write");
    let out = clusterctl()
        .args(["validate", "-f"])
        .arg(&path)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    // Both problems, each at the line and column of its value.
    let pod_line = text
        .lines()
        .position(|l| l.contains("10.244.0.0/33"))
        .map(|i| i + 1)
        .unwrap_or(0);
    let pod_col = text
        .lines()
        .nth(pod_line - 1)
        .and_then(|l| l.find("10.244.0.0/33"))
        .map(|c| c + 1)
        .unwrap_or(0);
    let addr_line = text
        .lines()
        .position(|l| l.contains("10.0.0.300"))
        .map(|i| i + 1)
        .unwrap_or(0);
    let addr_col = text
        .lines()
        .nth(addr_line - 1)
        .and_then(|l| l.find("10.0.0.300"))
        .map(|c| c + 1)
        .unwrap_or(0);
    assert!(
        stderr.contains(&format!("cluster.yaml:{pod_line}:{pod_col}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("cluster.yaml:{addr_line}:{addr_col}")),
        "{stderr}"
    );
    assert!(stderr.contains("is not a CIDR"), "{stderr}");
    assert!(stderr.contains("is not an IP address"), "{stderr}");
    assert!(stderr.contains("help:"), "{stderr}");
    assert!(stdout.contains("invalid (2 errors"), "{stdout}");
}

#[test]
fn unreadable_and_garbage_inputs_exit_two() {
    let out = clusterctl()
        .args(["validate", "-f", "/nonexistent/cluster.yaml"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("junk.yaml");
    std::fs::write(&path, [0xffu8, 0xfe, b'{', b'[', 0, 1, 2]).expect("write");
    let out = clusterctl()
        .args(["validate", "-f"])
        .arg(&path)
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn profiles_list_and_validate() {
    let out = clusterctl()
        .args(["validate", "--list-profiles"])
        .output()
        .expect("run");
    let listing = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0));
    for name in [
        "lab",
        "kind-calico",
        "kubeadm-cilium",
        "ha-airgap",
        "ha-containerd",
        "oidc-audit",
        "builtin",
    ] {
        assert!(
            listing.lines().any(|l| l.starts_with(name)),
            "{name} missing from {listing}"
        );
        let out = clusterctl()
            .args(["validate", "--profile", name])
            .output()
            .expect("run");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = clusterctl()
        .args(["validate", "--profile", "no-such"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn json_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cluster.yaml");
    std::fs::write(&path, VALID.replace("name: cp1", "name: CP1")).expect("write");
    let out = clusterctl()
        .args(["validate", "-o", "json", "-f"])
        .arg(&path)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"], 1);
    let d = &v["diagnostics"][0];
    assert_eq!(d["path"], "spec.nodes[0].name");
    assert_eq!(d["line"], 9);
    assert_eq!(d["column"], 13);
    assert!(d["help"].as_str().is_some_and(|h| !h.is_empty()));
}

#[test]
fn inline_secret_is_refused_and_never_printed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cluster.yaml");
    let text = VALID.replace(
        "  provider: ssh\n",
        "  provider: ssh\n  registry:\n    mirror: harbor.example.com/library\n    password: hunter2-secret\n",
    );
    std::fs::write(&path, text).expect("write");
    for format in ["text", "json"] {
        let out = clusterctl()
            .args(["validate", "-o", format, "-f"])
            .arg(&path)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2));
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!all.contains("hunter2"), "secret printed: {all}");
        assert!(all.contains("passwordEnv"), "{all}");
    }
}

/// The file of issue 16, point 1: an unknown field (`lables`), a bad enum value, `podSubnet: …/33`, a
/// `serviceSubnet` overlapping the nodes' network and two control planes.
pub(crate) const MANY_MISTAKES: &str = "\
apiVersion: clusterctl.io/v1alpha1
kind: Cluster
metadata:
  name: demo
spec:
  kubernetesVersion: v1.34.1
  provider: ssh
  networking:
    podSubnet: 10.244.0.0/33
    serviceSubnet: 10.0.0.0/16
  nodes:
    - name: cp1
      role: control-plane
      address: 10.0.0.11/24
      lables: {disk: ssd}
    - name: cp2
      role: control-plane
      address: 10.0.0.12/24
    - name: w1
      role: worker
      address: 10.0.0.21/24
      taints: [{key: gpu, effect: Sometimes}]
    - name: w2
      role: worker
      address: 10.0.0.22/24
";

/// The JSON diagnostics of `validate -o json` on `text`: (code, path, line) each.
pub(crate) fn json_diagnostics(text: &str) -> Vec<(String, String, u64)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cluster.yaml");
    std::fs::write(&path, text).expect("write");
    let out = clusterctl()
        .args(["validate", "-o", "json", "-f"])
        .arg(&path)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    v["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap_or_default().to_string(),
                d["path"].as_str().unwrap_or_default().to_string(),
                d["line"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn schema_errors_do_not_hide_semantic_checks() {
    let d = json_diagnostics(MANY_MISTAKES);
    let line_of = |needle: &str| {
        MANY_MISTAKES
            .lines()
            .position(|l| l.contains(needle))
            .map(|i| i as u64 + 1)
            .expect("needle")
    };
    let has = |code: &str, line: u64| d.iter().any(|(c, _, l)| c == code && *l == line);
    // The schema errors …
    assert!(has("spec::schema", line_of("lables")), "{d:?}");
    assert!(has("spec::schema", line_of("Sometimes")), "{d:?}");
    // … and, in the same run, the semantic ones on the rest of the file.
    assert!(has("spec::cidr", line_of("podSubnet")), "{d:?}");
    assert!(
        has("spec::even-control-planes", line_of("name: cp2") + 1),
        "{d:?}"
    );
    // Nothing about the entries the schema errors removed (w1's taints), and nothing twice.
    assert!(
        !d.iter()
            .any(|(c, p, _)| c != "spec::schema" && p.contains("taints")),
        "{d:?}"
    );
    let mut seen = std::collections::BTreeSet::new();
    assert!(
        d.iter().all(|x| seen.insert(x.clone())),
        "reported twice: {d:?}"
    );
}

#[test]
fn a_node_removed_by_a_schema_error_keeps_the_other_indexes() {
    // w1's role is not a role: w1 is left out of the semantic checks, whose findings about w2 must
    // still point at w2's lines (index 3 of the original list), and no "no control plane"-like count
    // follows from the removal.
    let text = MANY_MISTAKES
        .replace(
            "role: worker\n      address: 10.0.0.21/24",
            "role: minion\n      address: 10.0.0.21/24",
        )
        .replace("address: 10.0.0.22/24", "address: 10.0.0.300");
    let d = json_diagnostics(&text);
    let line = text
        .lines()
        .position(|l| l.contains("10.0.0.300"))
        .map(|i| i as u64 + 1)
        .expect("line");
    assert!(
        d.iter().any(|(c, p, l)| c == "spec::node-address"
            && p == "spec.nodes[3].address"
            && *l == line),
        "{d:?}"
    );
    assert!(
        d.iter()
            .any(|(c, p, _)| c == "spec::schema" && p == "spec.nodes[2].role"),
        "{d:?}"
    );
}
