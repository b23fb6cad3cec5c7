//! The Docker test bed itself (tests/src/docker.rs): systemd node containers from the local node image
//! boot, answer real OpenSSH with the generated key, have distinct host keys, and are removed with
//! their network when the cluster guard drops.

use std::process::Command;

use clusterctl_testbed::docker::{docker, docker_available, TestCluster};
use clusterctl_testbed::{is_root, require};

#[test]
fn node_containers_boot_answer_ssh_and_are_removed_on_drop() {
    if !require("root and a Docker engine", is_root() && docker_available()) {
        return;
    }
    let cluster = TestCluster::start("tbed", 2).expect("test cluster");
    let network = cluster.network.clone();
    let names: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    for n in &cluster.nodes {
        assert_eq!(
            n.sh("systemctl is-active ssh containerd").unwrap(),
            "active\nactive"
        );
        let out = Command::new("ssh")
            .args(["-i"])
            .arg(&n.key_file)
            .args([
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
            ])
            .args([
                "-o",
                "LogLevel=ERROR",
                &format!("tester@{}", n.address),
                "sudo -n id -u; hostname",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("0\n{}\n", n.name)
        );
    }
    let keys = cluster.known_hosts().unwrap();
    let lines: Vec<&str> = keys.lines().collect();
    assert_eq!(lines.len(), 2);
    let key_of = |l: &str| l.split_whitespace().nth(2).unwrap_or("").to_string();
    assert_ne!(key_of(lines[0]), key_of(lines[1]), "nodes share a host key");
    drop(cluster);
    for name in names {
        assert!(docker(&["inspect", &name]).is_err(), "{name} still exists");
    }
    assert!(
        docker(&["network", "inspect", &network]).is_err(),
        "{network} still exists"
    );
}
