//! `up --dry-run --diff` (issue 27 item 7) against a real node container reached over SSH: the node's
//! files are edited by hand first — the sysctl file `up` writes holds `net.ipv4.ip_forward = 0`, and an
//! EncryptionConfiguration with a secretbox key is there while the cluster file asks for aescbc. The
//! plan (text and `-o json`) carries, under each write, the unified diff of the node's content against
//! the new one: the sysctl line changed, the encryption file's new aescbc provider with its key masked
//! and the node's old key masked too (neither key in the output); a file the node lacks is diffed
//! against `/dev/null`; the node's files are unchanged afterwards.

use clusterctl_testbed::cli::{install_standins, ssh_cluster_yaml, Clusterctl, FileNode};
use clusterctl_testbed::docker::{docker_available, TestCluster, TestNode};
use clusterctl_testbed::{is_root, require};

const SYSCTL: &str = "/etc/sysctl.d/99-kubernetes.conf";
const ENC: &str = "/etc/kubernetes/enc/encryption.yaml";

fn exec(n: &TestNode, script: &str, input: &str) -> String {
    let (st, out, err) = n.exec(script, input.as_bytes()).expect("exec");
    assert_eq!(st, 0, "{script} on {}: {err}", n.name);
    out
}

#[test]
fn dry_run_diff_shows_the_nodes_files_against_the_new_ones_with_secrets_masked() {
    if !require(
        "docker and root for node containers",
        docker_available() && is_root(),
    ) {
        return;
    }
    let tc = TestCluster::start("updiff", 1).expect("node container");
    let n = &tc.nodes[0];
    install_standins(n).expect("stand-ins");
    let old_key = exec(n, "head -c 32 /dev/urandom | base64", "")
        .trim()
        .to_string();
    let old_enc = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - secretbox:\n      keys:\n      - {{name: key1, secret: {old_key}}}\n  - identity: {{}}\n"
    );
    exec(
        n,
        &format!("mkdir -p /etc/sysctl.d /etc/kubernetes/enc && printf 'net.ipv4.ip_forward = 0\\n' > {SYSCTL} && cat > {ENC} && chmod 600 {ENC}"),
        &old_enc,
    );
    let before = exec(n, &format!("sha256sum {SYSCTL} {ENC}"), "");
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = "  apiServer:\n    encryption: {provider: aescbc}\n";
    let file = ssh_cluster_yaml(
        "updiff",
        &n.key_file,
        "builtin",
        None,
        extra,
        &[FileNode::control_plane(n)],
    );
    std::fs::write(dir.path().join("cluster.yaml"), &file).expect("cluster file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), dir.path());
    let kh = n.known_hosts.to_string_lossy().into_owned();
    let args = [
        "up",
        "-f",
        "cluster.yaml",
        "--known-hosts",
        &kh,
        "--dry-run",
        "--diff",
        "--only",
        "files",
    ];
    let json = cli.run(&[&args[..], &["-o", "json"]].concat()).expect("up");
    let doc: serde_json::Value =
        serde_json::from_str(&json.stdout).unwrap_or_else(|e| panic!("{e}: {}", json.all()));
    let diff_of = |path: &str| -> String {
        doc["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .find(|s| s["kind"] == "write" && s["text"].as_str().is_some_and(|t| t.contains(path)))
            .and_then(|s| s["diff"].as_str())
            .unwrap_or_else(|| panic!("no diff of {path}: {}", json.stdout))
            .to_string()
    };
    let sysctl = diff_of(SYSCTL);
    assert!(
        sysctl.starts_with(&format!("--- {SYSCTL} (node)\n+++ {SYSCTL} (rendered)\n@@"))
            && sysctl.contains("\n-net.ipv4.ip_forward = 0\n")
            && sysctl.contains("\n+net.ipv4.ip_forward = 1\n"),
        "{sysctl}"
    );
    let enc = diff_of(ENC);
    assert!(
        enc.contains("+  - aescbc:") && enc.contains("secretbox"),
        "{enc}"
    );
    let shown: Vec<&str> = enc.split("secret: ").skip(1).collect();
    assert!(
        !shown.is_empty()
            && shown
                .iter()
                .all(|v| v.starts_with("<masked>") || v.starts_with("<redacted>")),
        "{}",
        enc
    );
    // Some file the node does not have yet: diffed against /dev/null.
    assert!(json.stdout.contains("--- /dev/null"), "{}", json.stdout);
    let text = cli.run(&args).expect("up");
    assert_eq!(text.code, 0, "{}", text.all());
    assert!(
        text.stdout.contains("      -net.ipv4.ip_forward = 0")
            && text.stdout.contains("      +net.ipv4.ip_forward = 1"),
        "{}",
        text.stdout
    );
    for out in [json.all(), text.all()] {
        assert!(!out.contains(&old_key), "the node's key is shown");
    }
    assert_eq!(exec(n, &format!("sha256sum {SYSCTL} {ENC}"), ""), before);
}
