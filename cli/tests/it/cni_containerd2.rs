//! containerd 2.x runs the builtin CNI through its CRI (issue 15, item 1), in a systemd node container
//! (`clusterctl_testbed::docker`): containerd 2.2.1, runc 1.3.3, crictl and `portmap` v1.10.0 as
//! `scripts/k8s/build.sh` builds them from their Go modules into the test-bed cache
//! (`clusterctl_testbed::k8sbin`), the pause image from `scripts/k8s/images.sh`; the built clusterctl as `/usr/local/bin/clusterctl` and
//! `/opt/cni/bin/clusterctl-cni`; the builtin CNI's files rendered by `clusterctl_render` for a node
//! whose facts say containerd 2, and a static peers file giving the node a /28 podCIDR.
//!
//! Shown: the rendered template declares CNI 1.1.0 and the agent keeps it (portmap v1.10.0 supports
//! it); containerd's CRI reports NetworkReady (it calls STATUS on both plugins of a 1.1.0 list); 12 pod
//! sandboxes (`crictl runp`) get addresses of the /28 (14 usable). Then the node container restarts:
//! its `/run` (the sandboxes' network namespaces) and `/var/lib/containerd` start empty, the IPAM
//! state under `/var/lib/cni` stays, and no DEL ever comes for the 12. The agent frees their leases at
//! its start (their namespaces are gone), and 12 new sandboxes get addresses — without that, only 2
//! would (`no free address left`).

use clusterctl_testbed::docker::{docker, docker_available, ClusterOptions, TestCluster, TestNode};
use serde_json::Value;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const POD_CIDR: &str = "10.244.7.0/28";
const CRICTL: &str = "crictl --runtime-endpoint unix:///run/containerd/containerd.sock";

fn cache() -> PathBuf {
    std::env::var_os("CLUSTERCTL_TESTBED_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/clusterctl-testbed"))
}

fn sh(n: &TestNode, script: &str) -> String {
    n.sh(script).unwrap_or_else(|e| panic!("{}: {e:#}", n.name))
}

fn put(n: &TestNode, path: &str, text: &str) {
    let dir = Path::new(path)
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| "/".into());
    let (st, _, err) = n
        .exec(
            &format!("mkdir -p '{dir}' && cat > '{path}'"),
            text.as_bytes(),
        )
        .expect("docker exec");
    assert_eq!(st, 0, "writing {path} on {}: {err}", n.name);
}

fn cp(n: &TestNode, from: &Path, to: &str) {
    docker(&[
        "cp",
        &from.display().to_string(),
        &format!("{}:{to}", n.name),
    ])
    .unwrap_or_else(|e| panic!("docker cp {} {to}: {e:#}", from.display()));
}

/// Polls `script` on `n` until it exits 0, at most `secs` seconds; returns its last output.
fn wait_for(n: &TestNode, script: &str, secs: u64) -> Result<String, String> {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        match n.exec(script, b"") {
            Ok((0, out, _)) => return Ok(out),
            Ok((_, out, err)) if Instant::now() >= end => return Err(format!("{out}{err}")),
            Err(e) if Instant::now() >= end => return Err(format!("{e:#}")),
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// The builtin profile rendered for the one node, with containerd 2 in its facts: (agent settings,
/// conflist template, unit).
fn rendered(
    name: &str,
    addr: Ipv4Addr,
) -> (clusterctl_render::cni::builtin::AgentConfig, String, String) {
    use clusterctl_render::cni::builtin::{AGENT_CONFIG_PATH, CONFLIST_TEMPLATE_PATH, UNIT_PATH};
    let profile = clusterctl_spec::from_profile("builtin").expect("builtin profile");
    let text = profile.source_text.replace("      mtu: 1450\n", "");
    let head = text.split("\n  nodes:\n").next().expect("nodes section");
    let yaml = format!(
        "{head}\n  nodes:\n    - name: {name}\n      role: control-plane\n      address: {addr}/16\n"
    );
    let loaded = clusterctl_spec::Loaded::from_text("cni-containerd2.yaml", yaml);
    let cluster = match clusterctl_spec::validate(&loaded) {
        Ok(v) => v.cluster,
        Err(d) => panic!("test cluster does not validate: {}", d.summary()),
    };
    let mut facts = clusterctl_render::Facts::assumed(&cluster);
    for f in facts.nodes.values_mut() {
        f.containerd_major = 2;
    }
    let r = clusterctl_render::render(&cluster, &facts).expect("render");
    let file = |p: &str| {
        r.node_file(name, p)
            .unwrap_or_else(|| panic!("{name} lacks {p}"))
            .as_text()
            .to_string()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("agent.json");
    std::fs::write(&p, file(AGENT_CONFIG_PATH)).expect("write agent.json");
    let cfg = clusterctl_cni::agent::load_config(&p).expect("the agent parses agent.json");
    (cfg, file(CONFLIST_TEMPLATE_PATH), file(UNIT_PATH))
}

/// Starts `count` pod sandboxes named `<prefix>N` through the CRI; returns each one's address, or
/// the error crictl printed.
fn sandboxes(n: &TestNode, prefix: &str, count: usize) -> Vec<Result<Ipv4Addr, String>> {
    (0..count)
        .map(|i| {
            let name = format!("{prefix}{i}");
            let conf = serde_json::json!({
                "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "attempt": 0},
                "log_directory": "/tmp",
                // containerd's config uses the systemd cgroup driver, which wants a slice.
                "linux": {"cgroup_parent": "cctest.slice"}
            });
            put(n, &format!("/tmp/{name}.json"), &conf.to_string());
            let (st, out, err) = n
                .exec(&format!("{CRICTL} runp /tmp/{name}.json"), b"")
                .expect("docker exec");
            if st != 0 {
                return Err(format!("{out}{err}"));
            }
            let id = out.trim().to_string();
            let info: Value = serde_json::from_str(&sh(n, &format!("{CRICTL} inspectp {id}")))
                .expect("inspectp JSON");
            info["status"]["network"]["ip"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("no pod address in {}", info["status"]["network"]))
        })
        .collect()
}

/// Waits until the node's systemd is up after a (re)start, then readies what a node's boot does not:
/// `/proc/sys` writable (Docker mounts it read-only; the plugin writes proxy_arp and ip_forward) and
/// the pause image in containerd's store (`/var/lib/containerd` is a tmpfs here).
fn node_up(n: &TestNode, pause: &Path) {
    wait_for(
        n,
        "s=$(systemctl is-system-running --wait 2>/dev/null); [ \"$s\" = running ] || [ \"$s\" = degraded ]",
        120,
    )
    .expect("systemd up");
    sh(n, "mount -o remount,rw /proc/sys");
    wait_for(n, "ctr version", 60).expect("containerd answers");
    cp(n, pause, "/root/pause.oci.tar");
    sh(
        n,
        "ctr -n k8s.io images import /root/pause.oci.tar >/dev/null",
    );
}

/// Waits until containerd's CRI reports the condition NetworkReady true; its `crictl info` status
/// on failure.
fn network_ready(n: &TestNode) -> Result<(), String> {
    let end = Instant::now() + Duration::from_secs(90);
    loop {
        let info = n.sh(&format!("{CRICTL} info")).unwrap_or_default();
        let v: Value = serde_json::from_str(&info).unwrap_or(Value::Null);
        let ready = v["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "NetworkReady" && c["status"] == true)
        });
        if ready {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(v["status"].to_string());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn containerd2_cri_with_cni_1_1_and_a_node_restart_frees_the_leases() {
    if !clusterctl_testbed::require(
        "root and a Docker engine (scripts/services/docker.sh)",
        clusterctl_testbed::is_root() && docker_available(),
    ) {
        return;
    }
    // Built by scripts/k8s/build.sh when missing (a failure fails the test in CI).
    let Some(bins) = clusterctl_testbed::k8sbin::require_programs(
        clusterctl_testbed::k8sbin::DEFAULT_VERSION,
        &[
            "containerd",
            "containerd-shim-runc-v2",
            "ctr",
            "runc",
            "crictl",
            "cni-plugins",
        ],
    ) else {
        return;
    };
    let files: Vec<(PathBuf, &str)> = vec![
        (bins.path("containerd").to_path_buf(), "/usr/local/bin/"),
        (
            bins.path("containerd-shim-runc-v2").to_path_buf(),
            "/usr/local/bin/",
        ),
        (bins.path("ctr").to_path_buf(), "/usr/local/bin/"),
        (bins.path("runc").to_path_buf(), "/usr/local/sbin/runc"),
        (bins.path("crictl").to_path_buf(), "/usr/local/bin/"),
        (
            bins.path("cni-plugins").join("portmap"),
            "/opt/cni/bin/portmap",
        ),
    ];
    let pause = cache().join(format!(
        "images/{}/pause_3.10.1.oci.tar",
        clusterctl_testbed::k8sbin::DEFAULT_VERSION
    ));
    if !clusterctl_testbed::require(
        "the pause image in the test-bed cache (scripts/k8s/images.sh v1.34.4)",
        pause.is_file(),
    ) {
        return;
    }
    // runc >= 1.2 needs CAP_SYS_PTRACE in the node, which every test-bed node has
    // (clusterctl_testbed::docker::systemd_node_run_args; docs/testbed-kubernetes.md).
    let cluster = TestCluster::start_with(ClusterOptions {
        prefix: "cd2".into(),
        nodes: 1,
        ..Default::default()
    })
    .expect("node container");
    let n = &cluster.nodes[0];
    let addr: Ipv4Addr = n.address.parse().expect("node address");
    let (mut cfg, template, unit) = rendered(&n.name, addr);
    let declared: Value = serde_json::from_str(&template).expect("template JSON");
    assert_eq!(
        declared["cniVersion"], "1.1.0",
        "containerd 2 facts → 1.1.0"
    );

    sh(n, "mkdir -p /opt/cni/bin /usr/local/sbin /etc/containerd /etc/systemd/system/containerd.service.d");
    for (f, to) in &files {
        cp(n, f, to);
    }
    let clusterctl = env!("CARGO_BIN_EXE_clusterctl");
    cp(n, Path::new(clusterctl), "/usr/local/bin/clusterctl");
    sh(
        n,
        "install -m 0755 /usr/local/bin/clusterctl /opt/cni/bin/clusterctl-cni",
    );
    let k8s = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/k8s/node");
    cp(
        n,
        &k8s.join("containerd-2.toml"),
        "/etc/containerd/config.toml",
    );
    cp(
        n,
        &k8s.join("containerd-local.conf"),
        "/etc/systemd/system/containerd.service.d/local.conf",
    );
    cfg.peers_file = Some("/etc/clusterctl/cni/peers".into());
    put(
        n,
        "/etc/clusterctl/cni/peers",
        &format!("{} {addr} {POD_CIDR}\n", n.name),
    );
    put(
        n,
        clusterctl_render::cni::builtin::AGENT_CONFIG_PATH,
        &serde_json::to_string_pretty(&cfg).expect("json"),
    );
    put(n, &cfg.conflist_template, &template);
    put(n, clusterctl_render::cni::builtin::UNIT_PATH, &unit);
    sh(
        n,
        "systemctl daemon-reload && systemctl restart containerd && \
         systemctl enable --now clusterctl-cni-agent.service",
    );
    node_up(n, &pause);
    assert!(
        sh(n, "containerd --version").contains("v2.2.1"),
        "the node runs containerd 2.2.1"
    );
    let conflist = wait_for(n, "cat /etc/cni/net.d/10-clusterctl.conflist", 60)
        .unwrap_or_else(|e| panic!("the agent wrote no conflist: {e}"));
    let list: Value = serde_json::from_str(&conflist).expect("conflist JSON");
    assert_eq!(list["cniVersion"], "1.1.0", "{conflist}");
    if let Err(e) = network_ready(n) {
        panic!("containerd never reported NetworkReady: {e}");
    }

    let net: clusterctl_cni::Ipv4Net = POD_CIDR.parse().expect("cidr");
    let first = sandboxes(n, "before", 12);
    for (i, r) in first.iter().enumerate() {
        let ip = r
            .as_ref()
            .unwrap_or_else(|e| panic!("sandbox before{i}: {e}"));
        assert!(net.contains(ip), "before{i}: {ip} not in {net}");
    }
    let state = sh(n, "cat /var/lib/cni/clusterctl/clusterctl/state.json");
    let v: Value = serde_json::from_str(&state).expect("state");
    assert_eq!(
        v["allocations"].as_object().map(|m| m.len()),
        Some(12),
        "{state}"
    );

    // The node container restarts: no DEL for the 12, their namespaces gone with /run.
    docker(&["restart", "-t", "5", &n.name]).expect("docker restart");
    node_up(n, &pause);
    let log = wait_for(
        n,
        "journalctl -b -u clusterctl-cni-agent --no-pager | grep 'IPAM leases'",
        60,
    )
    .unwrap_or_else(|e| panic!("the agent reported no lease reconciliation: {e}"));
    assert!(log.contains("dropped 12"), "{log}");
    network_ready(n).expect("NetworkReady after the restart");

    let second = sandboxes(n, "after", 12);
    let failed: Vec<String> = second
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().err().map(|e| format!("after{i}: {e}")))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of 12 sandboxes after the restart got no address: {failed:#?}",
        failed.len()
    );
}
