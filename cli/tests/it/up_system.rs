//! Whole-system test of `clusterctl up` on the test bed: the `ha-containerd` profile (3 control planes and
//! 2 of its workers) mapped onto systemd node containers reached over real SSH, with the recording
//! kubeadm/kubelet/kubectl stand-ins of `tests/standins/` installed on the nodes (no Kubernetes can run
//! here). Checks: a wrong host key is refused; an `up` killed after `init` converges when run again;
//! every phase ran on the right nodes in the right order; every rendered file landed with its content
//! and mode; containerd was really reconfigured and restarted; kube-vip used `super-admin.conf` during
//! init and `admin.conf` after; labels and taints reached the Nodes through the Kubernetes API (the
//! stand-in's `admin.conf` points at a recording HTTPS API server bound on the docker network's gateway:
//! the label and taint PATCHes with their content types and bodies, and the Node list polled until every
//! node is Ready); the kubeconfig was merged with the VIP; a second `up` runs no mutating command and
//! patches nothing; a label and a taint removed by hand are patched back by the next `up`; no secret appears in output, state or cache.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clusterctl_testbed::apiserver::{ApiServer, Recorded, TEST_TOKEN};
use clusterctl_testbed::cli::StandinCluster;
use clusterctl_testbed::docker::{docker_available, TestNode};
use clusterctl_testbed::{is_root, require};
use serde_json::{json, Value};

const STANDINS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/standins");
const KUBELET_UNIT: &str = "[Unit]\nDescription=kubelet STAND-IN (clusterctl tests)\n[Service]\nExecStart=/usr/bin/kubelet\nRestart=always\n[Install]\nWantedBy=multi-user.target\n";

fn install_standins(node: &TestNode) {
    for (file, target) in [
        ("kubeadm-standin.sh", "/usr/bin/kubeadm"),
        ("kubelet-standin.sh", "/usr/bin/kubelet"),
        ("kubectl-standin.sh", "/usr/bin/kubectl"),
    ] {
        let body = std::fs::read(Path::new(STANDINS).join(file)).expect("stand-in script");
        let (st, _, err) = node
            .exec(&format!("cat > {target} && chmod 755 {target}"), &body)
            .expect("exec");
        assert_eq!(st, 0, "{err}");
    }
    // Right after boot systemd may still be settling (a concurrent reload refuses the job): a few
    // tries, each error kept for the message.
    let mut errors = Vec::new();
    for _ in 0..5 {
        let (st, _, err) = node
            .exec(
                "cat > /etc/systemd/system/kubelet.service && systemctl daemon-reload && systemctl enable --now kubelet",
                KUBELET_UNIT.as_bytes(),
            )
            .expect("exec");
        if st == 0 {
            return;
        }
        errors.push(format!("exit {st}: {}", err.trim()));
        std::thread::sleep(Duration::from_secs(1));
    }
    panic!("kubelet stand-in unit on {}: {errors:?}", node.name);
}

/// The ha-containerd profile with its first five nodes mapped onto `nodes`, the VIP on their network.
fn cluster_file(dir: &Path, nodes: &[TestNode], key: &Path, vip: &str) -> PathBuf {
    let profiles = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
    let mut text = std::fs::read_to_string(profiles.join("ha-containerd.yaml")).expect("profile");
    std::fs::copy(profiles.join("harbor-ca.crt"), dir.join("harbor-ca.crt")).expect("ca");
    if let Some(i) = text.find("\n  airgap:") {
        text.truncate(i + 1);
    }
    text = text
        // The LoadBalancer pool (kube-vip-cloud-provider) is proven on a real cluster
        // (real_cluster.rs); the recording API server here has no Deployments to apply it to.
        .replace(
            "      loadBalancerPool: {range: 172.20.6.117-172.20.6.120}\n",
            "",
        )
        .replace("172.20.6.110", vip)
        .replace("interface: ens18", "interface: eth0")
        .replace("user: bigred", "user: root")
        .replace(
            "keyFile: ~/.ssh/id_ed25519",
            &format!("keyFile: {}", key.display()),
        )
        .replace("hostCgroupVersion: v2", "hostCgroupVersion: v1")
        .replace(
            "    - {name: topgun-w3, role: worker, address: 172.20.6.116/16}\n",
            "",
        );
    for (i, n) in nodes.iter().enumerate() {
        text = text.replace(
            &format!("172.20.6.11{}/16", i + 1),
            &format!("{}/16", n.address),
        );
    }
    text = text.replace(
        &format!("{{name: topgun-w1, role: worker, address: {}/16}}", nodes[3].address),
        &format!(
            "{{name: topgun-w1, role: worker, address: {}/16, labels: {{disktype: ssd}}, taints: [{{key: dedicated, value: db, effect: NoSchedule}}]}}",
            nodes[3].address
        ),
    );
    // The stand-in nodes carry programs, not packages: only checked (the default, `upstream`, installs).
    assert!(
        !text.contains("\n  packages:"),
        "the profile now says where packages come from"
    );
    text = text.replace(
        "\n  nodes:\n",
        "\n  packages: {source: preinstalled}\n  nodes:\n",
    );
    let path = dir.join("cluster.yaml");
    std::fs::write(&path, text).expect("write cluster file");
    path
}

struct Run {
    code: i32,
    out: String,
}

fn up_cmd(file: &Path, home: &Path, known_hosts: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_clusterctl"));
    c.arg("up")
        .arg("-f")
        .arg(file)
        .arg("--known-hosts")
        .arg(known_hosts)
        .arg("--kubeconfig")
        .arg(home.join("kubeconfig"))
        // Node containers pass the preflight checks truthfully (time-sync is a warning), except the two
        // that only a real kubelet needs: these unprivileged containers would need
        // `nodeEnvironment: unprivileged-container`, and their resolver is Docker's loopback one.
        .args(["--ignore-preflight", "node-environment,resolv-conf"])
        .args(["--ready-timeout", "30"])
        // The profile's CNI is Cilium, installed with helm from pinned upstream downloads, which a
        // test cannot reach and the stand-in nodes cannot run: its install is proven on a real API
        // server with the real helm (tests/tests/it/cni_install.rs) and in the plan (cni_plan.rs).
        .args(["--skip-phases", "cni/sources,cni"])
        .args(extra)
        .env("HOME", home)
        .env("HARBOR_USERNAME", "robot")
        .env("HARBOR_PASSWORD", "harbor-password-not-to-be-shown")
        .stdin(Stdio::null());
    c
}

fn up(file: &Path, home: &Path, known_hosts: &Path, extra: &[&str]) -> Run {
    let out = up_cmd(file, home, known_hosts, extra)
        .output()
        .expect("run clusterctl up");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Run {
        code: out.status.code().unwrap_or(-1),
        out: text,
    }
}

/// Runs `up` and kills it (SIGKILL) as soon as it reports `init` done; returns what it printed.
fn up_killed_after_init(file: &Path, home: &Path, known_hosts: &Path) -> String {
    let mut child = up_cmd(file, home, known_hosts, &["-v"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let mut seen = String::new();
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("] init: done") {
            let _ = child.kill();
            break;
        }
    }
    let _ = child.wait();
    seen
}

fn sh(node: &TestNode, script: &str) -> String {
    node.sh(script).unwrap_or_else(|e| panic!("{e}"))
}

fn calls(node: &TestNode) -> Vec<String> {
    sh(
        node,
        "cat /var/log/clusterctl-standin/calls.log 2>/dev/null || true",
    )
    .lines()
    .map(str::to_string)
    .collect()
}

fn containerd_invocation(node: &TestNode) -> String {
    sh(node, "systemctl show -p InvocationID --value containerd")
}

/// A core/v1 Node as the API server returns it: `labels`, no taints, Ready `True` or `False` (with the
/// reason kubelet gives before a CNI is installed).
fn node_object(name: &str, ready: bool, labels: Value) -> Value {
    let cond = if ready {
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"})
    } else {
        json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady",
               "message": "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"})
    };
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1", "labels": labels},
           "spec": {"podCIDR": "10.244.0.0/24"},
           "status": {"conditions": [cond], "nodeInfo": {"kubeletVersion": "v1.34.1"}}})
}

/// Serves the Nodes `names` (each also at `/api/v1/nodes/<name>`, which PATCH answers with); `ready`
/// says which are Ready.
fn serve_nodes(api: &ApiServer, names: &[&str], ready: impl Fn(&str) -> bool) {
    let items: Vec<Value> = names
        .iter()
        .map(|n| {
            node_object(
                n,
                ready(n),
                json!({"kubernetes.io/hostname": n, "kubernetes.io/os": "linux"}),
            )
        })
        .collect();
    for (n, item) in names.iter().zip(&items) {
        api.serve(&format!("/api/v1/nodes/{n}"), item.clone());
    }
    api.serve(
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "1"}, "items": items}),
    );
}

fn is_node_list(r: &Recorded) -> bool {
    r.method == "GET" && r.path == "/api/v1/nodes"
}

/// Line index of the first line containing every needle.
fn line_of(out: &str, needles: &[&str]) -> usize {
    out.lines()
        .position(|l| needles.iter().all(|n| l.contains(n)))
        .unwrap_or_else(|| panic!("no line with {needles:?} in:\n{out}"))
}

#[test]
fn up_builds_the_ha_containerd_profile_on_node_containers() {
    if !require("root", is_root()) || !require("docker", docker_available()) {
        return;
    }
    let sc = StandinCluster::start("up", 5).expect("node containers");
    let (store, cluster) = (&sc.store, &sc.cluster);
    let nodes = &cluster.nodes;
    for n in nodes {
        install_standins(n);
    }
    let names = [
        "topgun-c1",
        "topgun-c2",
        "topgun-c3",
        "topgun-w1",
        "topgun-w2",
    ];
    let by_name: BTreeMap<&str, &TestNode> = names.iter().copied().zip(nodes.iter()).collect();
    let home = tempfile::tempdir().expect("home");
    let vip = format!(
        "{}.250",
        cluster
            .gateway
            .rsplit_once('.')
            .map(|(a, _)| a)
            .unwrap_or("172.30.0")
    );
    let file = cluster_file(home.path(), nodes, &cluster.key.private, &vip);
    let known_hosts = nodes[0].known_hosts.clone();

    // The recording API server, where this machine (clusterctl's kube client) and the nodes reach it;
    // the kubeadm stand-in writes admin.conf for it. topgun-w2 is NotReady until the Nodes have been
    // listed once after the labels phase patched (wait-ready must poll until it turns Ready).
    let api =
        ApiServer::start_on(cluster.gateway.parse().expect("gateway address")).expect("api server");
    serve_nodes(&api, &names, |n| n != "topgun-w2");
    let api_dir = store.path().join("api");
    std::fs::create_dir_all(&api_dir).expect("api dir");
    std::fs::write(api_dir.join("url"), api.url()).expect("url");
    std::fs::write(api_dir.join("ca.crt"), api.ca_pem()).expect("ca");
    std::fs::write(api_dir.join("token"), TEST_TOKEN).expect("token");

    // 1. A changed host key is refused before anything runs.
    let bad = home.path().join("bad_known_hosts");
    let good = std::fs::read_to_string(&known_hosts).expect("known_hosts");
    let c1_line = nodes[0].known_hosts_line("ed25519").expect("c1 key");
    let c2_key = nodes[1].known_hosts_line("ed25519").expect("c2 key");
    let forged = format!(
        "{} {}",
        nodes[0].address,
        c2_key.split_once(' ').map(|x| x.1).unwrap_or_default()
    );
    std::fs::write(&bad, good.replace(&c1_line, &forged)).expect("write");
    let r = up(&file, home.path(), &bad, &["--dry-run", "--probe"]);
    assert_ne!(r.code, 0, "{}", r.out);
    assert!(
        r.out.contains("topgun-c1") && r.out.contains("host key"),
        "{}",
        r.out
    );
    assert!(
        nodes
            .iter()
            .all(|n| calls(n).iter().all(|l| l.starts_with("kubelet start"))),
        "nothing ran"
    );

    let before: Vec<String> = nodes.iter().map(containerd_invocation).collect();

    // 2. An `up` whose `kubeadm init` fails half-way (certificates and static pods written, no
    // admin.conf): it stops at init and says where, with the command, its status and output.
    std::fs::write(store.path().join("fail-init-once"), "").expect("flag");
    let failed = up(&file, home.path(), &known_hosts, &[]);
    assert_eq!(failed.code, 1, "{}", failed.out);
    assert!(
        failed.out.contains("phase `init` failed on node `topgun-c1`: command `kubeadm init --config /etc/kubernetes/kubeadm/init.yaml --upload-certs` exited with status 1")
            && failed.out.contains("timed out waiting for the condition"),
        "{}",
        failed.out
    );
    assert!(!failed.out.contains("join/"), "{}", failed.out);

    // 3. An `up` killed right after init (which resets the half-done one first), then run again:
    // converges.
    let killed = up_killed_after_init(&file, home.path(), &known_hosts);
    assert!(killed.contains("] init: done"), "{killed}");
    let done = std::sync::atomic::AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            // Turn topgun-w2 Ready once wait-ready has seen it NotReady (a Node list after a PATCH).
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let rec = api.recorded();
                if let Some(p) = rec.iter().position(|r| r.method == "PATCH") {
                    if rec[p..].iter().any(is_node_list) {
                        serve_nodes(&api, &names, |_| true);
                        return;
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let r = up(&file, home.path(), &known_hosts, &[]);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    assert_eq!(r.code, 0, "{}", r.out);
    let out = format!("{}{killed}{}", failed.out, r.out);
    // UP_SYSTEM_LOG=FILE keeps the output of the runs (for docs/phases.md's example session).
    if let Some(p) = std::env::var_os("UP_SYSTEM_LOG") {
        let _ = std::fs::write(
            p,
            format!(
                "{}
=== killed
{killed}
=== resumed
{}",
                failed.out, r.out
            ),
        );
    }

    // Phases on the right nodes, in order.
    let c1 = calls(by_name["topgun-c1"]);
    let inits: Vec<usize> = (0..c1.len())
        .filter(|i| c1[*i].starts_with("kubeadm init --config"))
        .collect();
    let resets: Vec<usize> = (0..c1.len())
        .filter(|i| c1[*i] == "kubeadm reset --config /etc/kubernetes/kubeadm/reset.yaml")
        .collect();
    assert_eq!(inits.len(), 2, "the failed init and one more: {c1:?}");
    assert_eq!(resets.len(), 1, "{c1:?}");
    assert!(inits[0] < resets[0] && resets[0] < inits[1], "{c1:?}");
    let reset_cfg = sh(
        by_name["topgun-c1"],
        &format!(
            "cat /var/log/clusterctl-standin/{}-kubeadm.yaml",
            resets[0] + 1
        ),
    );
    assert!(
        reset_cfg.contains("kind: ResetConfiguration"),
        "{reset_cfg}"
    );
    assert!(
        c1.contains(
            &"kubeadm init --config /etc/kubernetes/kubeadm/init.yaml --upload-certs".to_string()
        ),
        "{c1:?}"
    );
    for n in ["topgun-c2", "topgun-c3", "topgun-w1", "topgun-w2"] {
        let c = calls(by_name[n]);
        assert_eq!(c.iter().filter(|l| l.starts_with("kubeadm join --config /etc/kubernetes/kubeadm/join.yaml")).count(), 1, "{n}: {c:?}");
        assert!(
            !c.iter().any(|l| l.starts_with("kubeadm init")),
            "{n}: {c:?}"
        );
    }
    let init = line_of(&out, &["[topgun-c1] init: run: kubeadm init"]);
    let j2 = line_of(&out, &["[topgun-c2] join/control-plane: run: kubeadm join"]);
    let j2_done = line_of(&out, &["[topgun-c2] join/control-plane: done"]);
    let j3 = line_of(&out, &["[topgun-c3] join/control-plane: run: kubeadm join"]);
    let w1 = line_of(&out, &["[topgun-w1] join/worker: run: kubeadm join"]);
    let rt = line_of(
        &out,
        &["[topgun-c1] runtime/containerd: run: systemctl restart containerd"],
    );
    assert!(
        rt < init && init < j2 && j2 < j2_done && j2_done < j3 && j3 < w1,
        "order:\n{out}"
    );
    for n in names {
        assert!(
            out.contains(&format!("[{n}] preflight:")),
            "{n} preflight:\n{out}"
        );
    }

    // Rendered files landed with content and mode (secret-filled kubeadm configs: mode and no placeholder).
    let loaded = clusterctl_spec::load(&file).expect("load");
    let valid = clusterctl_spec::validate(&loaded).expect("valid").cluster;
    let rendered = clusterctl_render::render(&valid, &clusterctl_render::Facts::assumed(&valid))
        .expect("render");
    use clusterctl_render::Purpose as P;
    for (name, files) in &rendered.per_node {
        let node = by_name[name.as_str()];
        for f in files {
            if matches!(
                f.purpose,
                P::KubeadmReset | P::KubeadmUpgrade | P::KindConfig | P::HelmValues
            ) {
                continue;
            }
            let mode = sh(node, &format!("stat -c %a {}", f.path));
            let content = sh(node, &format!("cat {}", f.path));
            match f.purpose {
                P::KubeadmInit | P::KubeadmJoin => {
                    assert_eq!(mode, "600", "{name} {}", f.path);
                    assert!(
                        !content.contains("@@CLUSTERCTL_") && content.contains("token:"),
                        "{name} {}",
                        f.path
                    );
                }
                // The first control plane's manifest is rendered for the time before init
                // (super-admin.conf); after init it must point at admin.conf.
                P::KubeVip => {
                    assert_eq!(mode, format!("{:o}", f.mode), "{name} {}", f.path);
                    let after_init = f.as_text().replace(
                        "path: /etc/kubernetes/super-admin.conf",
                        "path: /etc/kubernetes/admin.conf",
                    );
                    assert_eq!(content, after_init.trim_end(), "{name} {}", f.path);
                }
                _ => {
                    assert_eq!(mode, format!("{:o}", f.mode), "{name} {}", f.path);
                    assert_eq!(content, f.as_text().trim_end(), "{name} {}", f.path);
                }
            }
        }
    }

    // containerd really reconfigured and restarted, and running.
    for (i, n) in nodes.iter().enumerate() {
        assert_ne!(containerd_invocation(n), before[i], "{} restarted", n.name);
        assert_eq!(sh(n, "systemctl is-active containerd"), "active");
        assert!(sh(n, "cat /etc/containerd/config.toml").contains("SystemdCgroup = true"));
    }

    // kube-vip: super-admin.conf while init ran on c1, admin.conf afterwards and on the other control planes.
    let c1n = by_name["topgun-c1"];
    let at_init = sh(
        c1n,
        "cat /var/log/clusterctl-standin/*-kube-vip-at-init.yaml",
    );
    assert!(
        at_init.contains("/etc/kubernetes/super-admin.conf")
            && !at_init.contains("path: /etc/kubernetes/admin.conf"),
        "{at_init}"
    );
    for n in ["topgun-c1", "topgun-c2", "topgun-c3"] {
        let kv = sh(by_name[n], "cat /etc/kubernetes/manifests/kube-vip.yaml");
        assert!(
            kv.contains("/etc/kubernetes/admin.conf") && !kv.contains("super-admin"),
            "{n}: {kv}"
        );
    }
    assert!(
        sh(
            by_name["topgun-w1"],
            "test -e /etc/kubernetes/manifests/kube-vip.yaml && echo yes || echo no"
        ) == "no"
    );
    assert!(
        calls(c1n)
            .iter()
            .filter(|l| l.starts_with("kubelet start"))
            .count()
            >= 2,
        "kubelet restarted after the switch"
    );

    // Taints at registration (nodeRegistration.taints of the join configuration kubeadm was given) ...
    let w1_join = sh(
        by_name["topgun-w1"],
        "cat /etc/kubernetes/kubeadm/join.yaml",
    );
    assert!(
        w1_join.contains("taints:\n  - key: dedicated\n    value: db\n    effect: NoSchedule"),
        "{w1_join}"
    );
    // ... and reconciled through the Kubernetes API from this machine: the Nodes listed, then one
    // merge patch of the labels and one strategic merge patch of the taints of topgun-w1 only.
    let rec = api.recorded();
    let patches: Vec<&Recorded> = rec.iter().filter(|r| r.method == "PATCH").collect();
    assert_eq!(patches.len(), 2, "{patches:#?}");
    assert!(
        patches
            .iter()
            .all(|p| p.path == "/api/v1/nodes/topgun-w1"
                && p.query.contains("fieldManager=clusterctl")),
        "{patches:#?}"
    );
    assert_eq!(patches[0].content_type, "application/merge-patch+json");
    assert_eq!(
        patches[0].json(),
        json!({"metadata": {"labels": {"disktype": "ssd"}}})
    );
    assert_eq!(
        patches[1].content_type,
        "application/strategic-merge-patch+json"
    );
    assert_eq!(
        patches[1].json(),
        json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}})
    );
    let first_patch = rec.iter().position(|r| r.method == "PATCH").unwrap_or(0);
    assert!(
        rec[..first_patch].iter().any(is_node_list),
        "labels listed the Nodes first: {rec:#?}"
    );
    // wait-ready saw topgun-w2 NotReady and listed again until it was Ready.
    assert!(
        rec[first_patch..]
            .iter()
            .filter(|r| is_node_list(r))
            .count()
            >= 2,
        "wait-ready polled: {rec:#?}"
    );
    assert!(
        out.contains("[topgun-c1] labels: api: node topgun-w1: set labels disktype=ssd"),
        "{out}"
    );
    assert!(
        !calls(by_name["topgun-c1"])
            .iter()
            .any(|l| l.starts_with("kubectl")
                && (l.contains(" label ") || l.contains(" taint ") || l.contains(" get "))),
        "no kubectl on the node for Nodes"
    );

    // The kubeconfig: context `clusterctl-<cluster>`, VIP as server, 0600.
    let kc = std::fs::read_to_string(home.path().join("kubeconfig")).expect("kubeconfig");
    assert!(
        kc.contains("name: clusterctl-topgun")
            && kc.contains(&format!("server: https://{vip}:6443")),
        "{kc}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(home.path().join("kubeconfig"))
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // 4. A second `up`: no mutating command, nothing restarted, no new stand-in call. The API server
    // now holds what the labels phase patched (as a real one would): `labels`, which is not recorded and
    // checks on every run, finds nothing to change.
    let mut w1 = node_object(
        "topgun-w1",
        true,
        json!({"kubernetes.io/hostname": "topgun-w1", "kubernetes.io/os": "linux", "disktype": "ssd"}),
    );
    w1["spec"]["taints"] = json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]);
    let mut items: Vec<Value> = names
        .iter()
        .filter(|n| **n != "topgun-w1")
        .map(|n| {
            node_object(
                n,
                true,
                json!({"kubernetes.io/hostname": n, "kubernetes.io/os": "linux"}),
            )
        })
        .collect();
    items.push(w1.clone());
    api.serve("/api/v1/nodes/topgun-w1", w1);
    api.serve(
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "2"}, "items": items}),
    );
    let calls_before: Vec<Vec<String>> = nodes.iter().map(calls).collect();
    let api_before = api.recorded().len();
    let inv_before: Vec<String> = nodes.iter().map(containerd_invocation).collect();
    let start = Instant::now();
    let again = up(&file, home.path(), &known_hosts, &[]);
    assert_eq!(again.code, 0, "{}", again.out);
    assert!(
        !again.out.contains(": run: ") && !again.out.contains(": write "),
        "second run changed something:\n{}",
        again.out
    );
    assert!(
        again.out.contains("is up to date; nothing changed"),
        "{}",
        again.out
    );
    let calls_after: Vec<Vec<String>> = nodes.iter().map(calls).collect();
    let stand_in_calls = |c: &Vec<Vec<String>>| -> Vec<Vec<String>> {
        c.iter()
            .map(|v| {
                v.iter()
                    .filter(|l| {
                        !l.starts_with("kubectl --kubeconfig /etc/kubernetes/admin.conf get")
                    })
                    .cloned()
                    .collect()
            })
            .collect()
    };
    assert_eq!(stand_in_calls(&calls_before), stand_in_calls(&calls_after));
    let api_again: Vec<Recorded> = api.recorded().split_off(api_before);
    assert!(
        api_again.iter().all(|r| r.method == "GET") && api_again.iter().any(is_node_list),
        "second run only reads Nodes: {api_again:#?}"
    );
    assert_eq!(
        inv_before,
        nodes.iter().map(containerd_invocation).collect::<Vec<_>>()
    );
    eprintln!("second up took {:?}", start.elapsed());
    if let Some(p) = std::env::var_os("UP_SYSTEM_LOG") {
        let mut log = std::fs::read_to_string(&p).unwrap_or_default();
        log.push_str(&format!("\n=== again\n{}", again.out));
        let _ = std::fs::write(p, log);
    }

    // 4b. The label and the taint removed by hand (the server's Nodes lose them): the next `up` puts
    // both back — `labels` is not recorded, so a converged cluster still gets its drift corrected —
    // and changes nothing on the nodes.
    serve_nodes(&api, &names, |_| true);
    let api_before = api.recorded().len();
    let calls_before: Vec<Vec<String>> = nodes.iter().map(calls).collect();
    let fixed = up(&file, home.path(), &known_hosts, &[]);
    assert_eq!(fixed.code, 0, "{}", fixed.out);
    assert!(
        fixed
            .out
            .contains("node topgun-w1: set labels disktype=ssd")
            && fixed
                .out
                .contains("node topgun-w1: set taints dedicated=db:NoSchedule"),
        "{}",
        fixed.out
    );
    assert!(!fixed.out.contains(": run: "), "{}", fixed.out);
    let again_patches: Vec<Recorded> = api
        .recorded()
        .split_off(api_before)
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(again_patches.len(), 2, "{again_patches:#?}");
    assert_eq!(
        again_patches[0].json(),
        json!({"metadata": {"labels": {"disktype": "ssd"}}})
    );
    assert_eq!(
        again_patches[1].json(),
        json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}})
    );
    assert_eq!(
        stand_in_calls(&calls_before),
        stand_in_calls(&nodes.iter().map(calls).collect())
    );

    // 5. No secret in output, state or cache.
    let join = sh(c1n, "cat /var/lib/clusterctl/join.json");
    assert_eq!(sh(c1n, "stat -c %a /var/lib/clusterctl/join.json"), "600");
    let j: serde_json::Value = serde_json::from_str(&join).expect("join.json");
    let token = j["token"].as_str().unwrap_or_default().to_string();
    let key = j["certificate_key"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(token.len(), 23);
    assert_eq!(key.len(), 64);
    let mut haystacks = vec![out.clone(), again.out.clone()];
    for n in nodes {
        assert_eq!(sh(n, "stat -c %a /var/lib/clusterctl/state.json"), "600");
        haystacks.push(sh(n, "cat /var/lib/clusterctl/state.json"));
    }
    for entry in std::fs::read_dir(home.path().join(".cache/clusterctl/topgun")).expect("cache") {
        let p = entry.expect("entry").path();
        haystacks.push(std::fs::read_to_string(&p).unwrap_or_default());
        assert_eq!(
            std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777,
            0o600
        );
    }
    for h in &haystacks {
        for s in [
            token.as_str(),
            key.as_str(),
            "harbor-password-not-to-be-shown",
        ] {
            assert!(!h.contains(s), "secret shown or stored:\n{h}");
        }
    }
    // The stand-in printed the token and key (as kubeadm does, shown with -v): redaction hid them.
    assert!(
        killed.contains("--certificate-key <redacted>") && killed.contains("--token <redacted>"),
        "{killed}"
    );
}
