//! `clusterctl destroy` with the Docker provider: the cluster's node containers and network (made here
//! the way the provider labels them: `io.clusterctl.cluster=<name>`, containers `<name>-<node>`) are
//! removed; a container of another cluster is left alone; `--dry-run` before names them and removes
//! nothing.

use std::path::Path;
use std::process::Command;

use clusterctl_testbed::docker::{docker, docker_available, NodeImage};
use clusterctl_testbed::{is_root, require, unique_name};

/// Removes whatever the test made, also on failure.
struct Guard {
    containers: Vec<String>,
    networks: Vec<String>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = docker(&["rm", "-f", "-v", c]);
        }
        for n in &self.networks {
            let _ = docker(&["network", "rm", n]);
        }
    }
}

fn clusterctl(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .output()
        .expect("run clusterctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn destroy_removes_the_labelled_containers_and_network() {
    if !require("root and a Docker engine", is_root() && docker_available()) {
        return;
    }
    let image = NodeImage::ensure().expect("node image");
    let name = unique_name("dd");
    let other = unique_name("do");
    let network = format!("clusterctl-{name}");
    let label = format!("io.clusterctl.cluster={name}");
    let mut guard = Guard {
        containers: vec![
            format!("{name}-cp1"),
            format!("{name}-w1"),
            format!("{other}-cp1"),
        ],
        networks: vec![network.clone()],
    };
    docker(&["network", "create", "--label", &label, &network]).expect("network");
    for (node, role, cluster, net) in [
        ("cp1", "control-plane", name.as_str(), network.as_str()),
        ("w1", "worker", name.as_str(), network.as_str()),
        ("cp1", "control-plane", other.as_str(), "bridge"),
    ] {
        docker(&[
            "run",
            "-d",
            "--name",
            &format!("{cluster}-{node}"),
            "--network",
            net,
            "--label",
            &format!("io.clusterctl.cluster={cluster}"),
            "--label",
            &format!("io.clusterctl.node={node}"),
            "--label",
            &format!("io.clusterctl.role={role}"),
            &image.tag,
            "sleep",
            "300",
        ])
        .expect("container");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("cluster.yaml"),
        format!(
            "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: docker\n  networking: {{podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/16}}\n  nodes:\n    - {{name: cp1, role: control-plane}}\n    - {{name: w1, role: worker}}\n"
        ),
    )
    .expect("cluster file");
    // --dry-run: the plan names both containers and the network; nothing is removed.
    let (code, out, err) = clusterctl(dir.path(), &["destroy", "-f", "cluster.yaml", "--dry-run"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    for planned in [
        format!("remove container {name}-cp1 (node cp1)"),
        format!("remove container {name}-w1 (node w1)"),
        format!("remove network {network}"),
        "change(s) planned; nothing was changed (dry run).".to_string(),
    ] {
        assert!(out.contains(&planned), "{planned}:\n{out}");
    }
    let still = docker(&["ps", "-a", "-q", "--filter", &format!("label={label}")]).expect("ps");
    assert_eq!(still.lines().count(), 2, "the dry run removed nothing");
    let (code, out, err) = clusterctl(dir.path(), &["destroy", "-f", "cluster.yaml", "--yes"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("2 container(s)"), "{out}");
    let left = docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label={label}"),
        "--format",
        "{{.Names}}",
    ])
    .expect("ps");
    assert!(left.trim().is_empty(), "containers left: {left}");
    let nets = docker(&[
        "network",
        "ls",
        "--filter",
        &format!("name=^{network}$"),
        "--format",
        "{{.Name}}",
    ])
    .expect("ls");
    assert!(nets.trim().is_empty(), "network left: {nets}");
    let kept = docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label=io.clusterctl.cluster={other}"),
        "--format",
        "{{.Names}}",
    ])
    .expect("ps");
    assert_eq!(
        kept.trim(),
        format!("{other}-cp1"),
        "another cluster's container is kept"
    );
    guard.containers.retain(|c| c.starts_with(&other));
}

#[test]
fn destroy_of_a_cluster_that_never_existed_claims_nothing() {
    if !require("root and a Docker engine", is_root() && docker_available()) {
        return;
    }
    let name = unique_name("dn");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("cluster.yaml"),
        format!(
            "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: docker\n  nodes:\n    - {{name: cp1, role: control-plane}}\n"
        ),
    )
    .expect("cluster file");
    let (code, out, err) = clusterctl(dir.path(), &["destroy", "-f", "cluster.yaml", "--yes"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(&format!("destroy: cluster {name} not found"))
            && out.contains("nothing was removed"),
        "{out}"
    );
    // No line claims a removal.
    assert!(
        !out.lines()
            .any(|l| l.ends_with(" removed") && !l.contains("nothing was removed")),
        "{out}"
    );
    assert!(!out.contains("container(s)"), "{out}");
}
