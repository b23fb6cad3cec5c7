//! Whole-system test of `clusterctl up` on the test bed: the `ha-containerd` profile (3 control planes and
//! 2 of its workers) mapped onto systemd node containers reached over real SSH, with the recording
//! kubeadm/kubelet/kubectl stand-ins of `tests/standins/` installed on the nodes (no Kubernetes can run
//! here). Checks: a wrong host key is refused; an `up` killed after `init` converges when run again;
//! every phase ran on the right nodes in the right order; every rendered file landed with its content
//! and mode; containerd was really reconfigured and restarted; kube-vip used `super-admin.conf` during
//! init and `admin.conf` after; labels and taints reached the Nodes; the kubeconfig was merged with the
//! VIP; a second `up` runs no mutating command; no secret appears in output, state or cache.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clusterctl_testbed::docker::{docker_available, ClusterOptions, TestCluster, TestNode};
use clusterctl_testbed::{is_root, require};

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
    let (st, _, err) = node
        .exec(
            "cat > /etc/systemd/system/kubelet.service && systemctl daemon-reload && systemctl enable --now kubelet",
            KUBELET_UNIT.as_bytes(),
        )
        .expect("exec");
    assert_eq!(st, 0, "{err}");
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
        // Node containers cannot load kernel modules; the test bed host may lack br_netfilter.
        .args([
            "--ready-timeout",
            "30",
            "--ignore-preflight",
            "time-sync,module/br_netfilter",
        ])
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
    let store = tempfile::tempdir().expect("tempdir");
    let cluster = TestCluster::start_with(ClusterOptions {
        prefix: "up".into(),
        nodes: 5,
        extra_run_args: vec![
            "-v".into(),
            format!("{}:/var/lib/clusterctl-standin", store.path().display()),
        ],
        boot_timeout: Duration::from_secs(120),
    })
    .expect("node containers");
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

    // 2. An `up` killed right after init, then run again: converges, init ran once.
    let killed = up_killed_after_init(&file, home.path(), &known_hosts);
    assert!(killed.contains("] init: done"), "{killed}");
    let r = up(&file, home.path(), &known_hosts, &[]);
    assert_eq!(r.code, 0, "{}", r.out);
    let out = format!("{killed}{}", r.out);

    // Phases on the right nodes, in order.
    let c1 = calls(by_name["topgun-c1"]);
    assert_eq!(
        c1.iter()
            .filter(|l| l.starts_with("kubeadm init --config"))
            .count(),
        1,
        "{c1:?}"
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

    // Labels at registration, taints reconciled through the API.
    let w1_store = store.path().join("nodes/topgun-w1");
    assert!(std::fs::read_to_string(w1_store.join("labels"))
        .unwrap_or_default()
        .contains("disktype=ssd"));
    assert!(std::fs::read_to_string(w1_store.join("taints"))
        .unwrap_or_default()
        .contains("dedicated=db:NoSchedule"));

    // The kubeconfig: context named after the cluster, VIP as server, 0600.
    let kc = std::fs::read_to_string(home.path().join("kubeconfig")).expect("kubeconfig");
    assert!(
        kc.contains("name: topgun") && kc.contains(&format!("server: https://{vip}:6443")),
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

    // 3. A second `up`: no mutating command, nothing restarted, no new stand-in call.
    let calls_before: Vec<Vec<String>> = nodes.iter().map(calls).collect();
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
    assert_eq!(
        inv_before,
        nodes.iter().map(containerd_invocation).collect::<Vec<_>>()
    );
    eprintln!("second up took {:?}", start.elapsed());

    // 4. No secret in output, state or cache.
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
