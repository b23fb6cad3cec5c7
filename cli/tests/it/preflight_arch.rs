//! Preflight's `arch` check on a real node container reached over SSH (issue 27 item 9). The node
//! first reports this machine's architecture: preflight passes. Then its sshd runs with the kernel's
//! 32-bit x86 personality (systemd `Personality=x86` for `ssh.service`), so every command clusterctl
//! runs there — `uname -m` of the facts included — really gets `i686` from the kernel, as on a 32-bit
//! host: `up` stops in preflight with the `arch` error naming the node's architecture, this binary's
//! and what to do (a clusterctl built for it, or `airgap bundle --agent`), and changes nothing.

use clusterctl_testbed::cli::{install_standins, ssh_cluster_yaml, Clusterctl, FileNode, Run};
use clusterctl_testbed::docker::{docker_available, TestCluster, TestNode};
use clusterctl_testbed::{is_root, require};

fn exec(n: &TestNode, script: &str) -> String {
    let (st, out, err) = n.exec(script, b"").expect("exec");
    assert_eq!(st, 0, "{script} on {}: {err}", n.name);
    out
}

/// `up --only preflight`, ignoring the two checks a node container cannot pass.
fn preflight(cli: &Clusterctl, kh: &str) -> Run {
    cli.run(&[
        "up",
        "-f",
        "cluster.yaml",
        "--known-hosts",
        kh,
        "--only",
        "preflight",
        "--ignore-preflight",
        "node-environment,resolv-conf",
    ])
    .expect("up")
}

/// `s` without whitespace and the report's frame characters (long lines may wrap).
fn flat(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '│' | '×' | '╰' | '─' | '├'))
        .collect()
}

#[test]
fn a_node_of_another_architecture_is_refused_with_what_to_do() {
    if !require(
        "docker and root for node containers",
        docker_available() && is_root(),
    ) || !require(
        "an x86_64 machine (the node takes x86's 32-bit personality)",
        std::env::consts::ARCH == "x86_64",
    ) {
        return;
    }
    let tc = TestCluster::start("pfarch", 1).expect("node container");
    let n = &tc.nodes[0];
    install_standins(n).expect("stand-ins");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = ssh_cluster_yaml(
        "pfarch",
        &n.key_file,
        "builtin",
        None,
        "",
        &[FileNode::control_plane(n)],
    );
    std::fs::write(dir.path().join("cluster.yaml"), &file).expect("cluster file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), dir.path());
    let kh = n.known_hosts.to_string_lossy().into_owned();
    let r = preflight(&cli, &kh);
    assert!(!r.all().contains("arch:"), "{}", r.all());

    exec(
        n,
        "mkdir -p /etc/systemd/system/ssh.service.d && printf '[Service]\\nPersonality=x86\\n' > /etc/systemd/system/ssh.service.d/arch.conf && systemctl daemon-reload && systemctl restart ssh",
    );
    let r = preflight(&cli, &kh);
    let out = r.all();
    assert_ne!(r.code, 0, "another architecture must stop up:\n{out}");
    for want in [
        n.name.as_str(),
        "arch:",
        "the node is 386 (`uname -m`: i686) but this clusterctl is built for amd64",
        "clusterctl airgap bundle -f FILE --agent 386=",
    ] {
        assert!(
            flat(&out).contains(&flat(want)),
            "{want:?} missing in:\n{out}"
        );
    }
    assert_eq!(
        exec(
            n,
            "ls /usr/local/bin/clusterctl /opt/cni/bin/clusterctl-cni 2>/dev/null | wc -l"
        )
        .trim(),
        "0",
        "preflight placed a binary"
    );
}
