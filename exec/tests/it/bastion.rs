//! `SshProvider` through a jump host (`spec.ssh.bastion`, issue 27 item 5) over real OpenSSH: two
//! node containers that this machine cannot reach (no default route, and the route back to this
//! machine's address on their network blackholed) and a bastion container on both their network and
//! a reachable one. Every node is reached through the bastion (the node sees the bastion's address as
//! the SSH client), commands and a 3 MiB upload and download cross the tunnel, the bastion logs in
//! with its own user and key, and host keys are checked on both hops: a wrong bastion key, a wrong
//! node key behind a good bastion, and an unknown bastion under `strict` are each refused.

use std::path::Path;
use std::time::Duration;

use clusterctl_exec::{
    Bastion, Cmd, ExecError, FileSpec, NodeSpec, Provider, SshAuth, SshProvider,
};
use clusterctl_spec::model::{HostKeyPolicy, Role};
use clusterctl_testbed::docker::{docker, docker_available, TestCluster};
use clusterctl_testbed::{is_root, require};

/// The provider as `reach::ssh_provider` makes it for a file with `spec.ssh.bastion`: the nodes'
/// key for `root`, the bastion's own user, key and policy, one known_hosts file.
fn provider(nodes: &TestCluster, jump: &TestCluster, known_hosts: &Path) -> SshProvider {
    SshProvider::new(
        "root",
        SshAuth::KeyFile {
            path: nodes.key.private.clone(),
            passphrase: None,
        },
    )
    .with_known_hosts(known_hosts.to_path_buf(), HostKeyPolicy::Strict)
    .with_connect_timeout(Duration::from_secs(10))
    .with_connect_attempts(1)
    .with_bastion(Bastion {
        host: jump.nodes[0].address.clone(),
        port: 22,
        user: "tester".into(),
        auth: SshAuth::KeyFile {
            path: jump.key.private.clone(),
            passphrase: None,
        },
        host_key_policy: HostKeyPolicy::Strict,
    })
}

/// The error of connecting to `node`, which must fail.
fn refused(p: &SshProvider, node: &NodeSpec) -> ExecError {
    match p.transport(node) {
        Ok(_) => panic!("{} was reached", node.name),
        Err(e) => e,
    }
}

fn specs(nodes: &TestCluster) -> Vec<NodeSpec> {
    nodes
        .nodes
        .iter()
        .map(|n| NodeSpec::new(n.name.clone(), Role::Worker, n.address.clone()))
        .collect()
}

/// Cuts this machine off from `nodes`: no default route, and its address on their network (the
/// gateway) unroutable from each node. The bastion, another address on that network, still reaches them.
fn isolate(nodes: &TestCluster) {
    for n in &nodes.nodes {
        n.sh(&format!(
            "ip route del default 2>/dev/null || true; ip route add blackhole {}/32",
            nodes.gateway
        ))
        .expect("isolate node");
    }
}

#[test]
fn nodes_behind_a_bastion_are_reached_through_it_with_both_host_keys_checked() {
    if !require(
        "root and a Docker engine (scripts/services/docker.sh)",
        is_root() && docker_available(),
    ) {
        return;
    }
    let started = std::time::Instant::now();
    let nodes = TestCluster::start("bstn", 2).expect("node containers");
    // Declared after `nodes`, so dropped first: its container leaves the nodes' network before that
    // network is removed.
    let jump = TestCluster::start("bstj", 1).expect("bastion container");
    let bastion = &jump.nodes[0];
    docker(&["network", "connect", &nodes.network, &bastion.name]).expect("network connect");
    let bastion_inside = docker(&[
        "inspect",
        "--format",
        &format!(
            "{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}",
            nodes.network
        ),
        &bastion.name,
    ])
    .expect("bastion address on the nodes' network");
    isolate(&nodes);

    // Directly, the nodes cannot be reached.
    let kh_all = nodes.dir().join("known_hosts_all");
    let good = format!(
        "{}{}",
        nodes.known_hosts().unwrap(),
        jump.known_hosts().unwrap()
    );
    std::fs::write(&kh_all, &good).unwrap();
    let mut direct = provider(&nodes, &jump, &kh_all);
    direct.options.bastion = None;
    direct.options.connect_timeout = Duration::from_secs(3);
    let err = refused(&direct, &specs(&nodes)[0]);
    assert!(matches!(err, ExecError::Connect { .. }), "{err}");

    // Through the bastion: every node, commands and files both ways.
    let p = provider(&nodes, &jump, &kh_all);
    let transports = p.transports(&specs(&nodes));
    for (t, n) in transports.into_iter().zip(&nodes.nodes) {
        let t = t.unwrap_or_else(|e| panic!("{} through the bastion: {e}", n.name));
        assert_eq!(t.run(&Cmd::new("hostname")).unwrap().stdout_str(), n.name);
        let client = t
            .run(&Cmd::new("echo $SSH_CONNECTION"))
            .unwrap()
            .stdout_str();
        assert_eq!(
            client.split_whitespace().next(),
            Some(bastion_inside.as_str()),
            "{} sees {client:?}, not the bastion",
            n.name
        );
        let data: Vec<u8> = (0..3 * 1024 * 1024u32)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let spec = FileSpec {
            path: "/root/through-bastion.bin".into(),
            mode: 0o600,
            owner: None,
        };
        t.upload(&data, &spec).unwrap();
        assert_eq!(t.download(spec.path.to_str().unwrap()).unwrap(), Some(data));
    }
    // The bastion's side was the `tester` user's forwarding, with its own key.
    let log = bastion
        .sh("journalctl -u ssh --no-pager | grep -c 'Accepted publickey for tester' || true")
        .unwrap();
    assert!(log.parse::<u32>().unwrap_or(0) >= 2, "bastion log: {log}");

    // A wrong bastion host key (another host's key recorded for its address) is refused.
    let node0_key = nodes.nodes[0].known_hosts_line("ed25519").unwrap();
    let forged = node0_key.replacen(&nodes.nodes[0].address, &bastion.address, 1);
    let kh = nodes.dir().join("known_hosts_bad_bastion");
    std::fs::write(&kh, format!("{}{forged}\n", nodes.known_hosts().unwrap())).unwrap();
    let err = refused(&provider(&nodes, &jump, &kh), &specs(&nodes)[0]);
    match &err {
        ExecError::HostKey { reason, .. } => assert!(reason.contains("bastion"), "{reason}"),
        other => panic!("expected a refused bastion host key, got {other}"),
    }

    // A wrong node host key behind a good bastion is refused too (checked end to end).
    let node1_key = nodes.nodes[1].known_hosts_line("ed25519").unwrap();
    let forged = node1_key.replacen(&nodes.nodes[1].address, &nodes.nodes[0].address, 1);
    let kh = nodes.dir().join("known_hosts_bad_node");
    std::fs::write(&kh, format!("{forged}\n{}", jump.known_hosts().unwrap())).unwrap();
    let err = refused(&provider(&nodes, &jump, &kh), &specs(&nodes)[0]);
    match &err {
        ExecError::HostKey { node, reason } => {
            assert_eq!(node, &nodes.nodes[0].name);
            assert!(!reason.contains("bastion"), "{reason}");
        }
        other => panic!("expected a refused node host key, got {other}"),
    }

    // An unknown bastion under `strict` is refused and not recorded.
    let kh = nodes.dir().join("known_hosts_nodes_only");
    std::fs::write(&kh, nodes.known_hosts().unwrap()).unwrap();
    let err = refused(&provider(&nodes, &jump, &kh), &specs(&nodes)[0]);
    assert!(matches!(err, ExecError::HostKey { .. }), "{err}");
    assert_eq!(
        std::fs::read_to_string(&kh).unwrap(),
        nodes.known_hosts().unwrap()
    );
    eprintln!("bastion test took {:?}", started.elapsed());
}
