//! A node of another architecture gets the CNI agent the bundle carries for it (issue 27 item 9): one
//! air-gapped control plane (stand-ins, reached over SSH) whose sshd runs with the kernel's 32-bit x86
//! personality (systemd `Personality=x86`), so every command clusterctl runs there gets `uname -m` =
//! `i686` from the kernel. The bundle (written from a loopback registry as the other `airgap_up*`
//! tests do) carries, as `airgap bundle --agent 386=PATH` does, an agent for `386` — a **stand-in**
//! file (no clusterctl can be built for 386 here). `up` (air-gap phases, preflight and the builtin
//! CNI's phase) passes preflight's `arch` check, streams that agent to the node and installs it as
//! `/usr/local/bin/clusterctl` and `/opt/cni/bin/clusterctl-cni` instead of this machine's binary and
//! embedded plugin; a second run changes neither.

use crate::airgap_support::{air_gapped, bundle_served_with, up_args, valid_file};
use clusterctl_testbed::cli::{ssh_cluster_yaml, Clusterctl, FileNode};
use clusterctl_testbed::docker::{docker_available, TestCluster};
use clusterctl_testbed::registry::{self, Registry};
use clusterctl_testbed::{is_root, require};

#[test]
fn up_places_the_bundles_agent_on_a_node_of_another_architecture() {
    if !require("root", is_root())
        || !require("docker", docker_available())
        || !require("docker-registry", registry::available())
        || !require(
            "an x86_64 machine (the node takes x86's 32-bit personality)",
            std::env::consts::ARCH == "x86_64",
        )
    {
        return;
    }
    let reg = Registry::start().expect("registry");
    let cluster = TestCluster::start("agarch", 1).expect("node container");
    let n = &cluster.nodes[0];
    air_gapped(&cluster.nodes);
    n.sh("mkdir -p /etc/systemd/system/ssh.service.d && printf '[Service]\\nPersonality=x86\\n' > /etc/systemd/system/ssh.service.d/arch.conf && systemctl daemon-reload && systemctl restart ssh")
        .expect("x86 personality for sshd");
    // `init` is not run here; the kubectl stand-in the `cni` phase calls needs only its kubeconfig.
    n.sh("mkdir -p /etc/kubernetes && echo '# written by init' > /etc/kubernetes/admin.conf")
        .expect("admin.conf");
    let work = tempfile::tempdir().expect("tempdir");
    let agent = work.path().join("clusterctl-linux-386");
    let marker = clusterctl_testbed::unique_name("agent-386");
    std::fs::write(
        &agent,
        format!("#!/bin/sh\n# {marker}\nexec sleep infinity\n"),
    )
    .expect("agent");
    let text = ssh_cluster_yaml(
        "agarch",
        &cluster.key.private,
        "builtin",
        None,
        "  airgap:\n    bundle: site.tar\n",
        &[FileNode::control_plane(n)],
    );
    let file = work.path().join("cluster.yaml");
    let valid = valid_file(&file, &text);
    let bundle = work.path().join("site.tar");
    let summary = bundle_served_with(
        &valid,
        &reg,
        2700,
        work.path(),
        &bundle,
        vec![("386".into(), agent.clone())],
    );
    let entry = summary
        .manifest
        .binaries
        .iter()
        .find(|b| b.path == "bin/clusterctl-linux-386")
        .unwrap_or_else(|| panic!("no agent in {:?}", summary.manifest.binaries));
    assert_eq!(entry.arch.as_deref(), Some("386"));
    drop(reg);

    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), work.path());
    let run = || {
        let args = up_args(
            &file,
            &n.known_hosts,
            &[
                "--only",
                "airgap/verify,airgap/packages,preflight,cni",
                "--skip-phases",
                "cni/agent-credentials",
            ],
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli.run(&args).expect("run clusterctl up")
    };
    let r = run();
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(!r.all().contains("arch:"), "{}", r.all());
    let placed = n
        .sh("A=/var/lib/clusterctl/airgap/bin/clusterctl-linux-386; cmp $A /usr/local/bin/clusterctl && cmp $A /opt/cni/bin/clusterctl-cni && grep -c MARKER /usr/local/bin/clusterctl; uname -m".replace("MARKER", &marker).as_str())
        .expect("the agent placed");
    assert_eq!(
        placed, "1\nx86_64",
        "docker exec is not under sshd's personality"
    );
    let again = run();
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(!again.all().contains("install -m 0755"), "{}", again.all());
}
