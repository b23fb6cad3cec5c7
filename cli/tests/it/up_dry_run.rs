//! `clusterctl up --dry-run` with no file: the README's first command. It must work on any machine
//! (no Docker, no SSH, no network: PATH is emptied and HOME is a fresh directory), print the embedded
//! `lab` profile's plan per node with every command and file write, and exit 0.

use std::process::Command;

fn clusterctl(args: &[&str], dir: &std::path::Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", dir.join("empty-path"))
        .env("HOME", dir)
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .output()
        .expect("run clusterctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The lines of the section titled with `prefix` (up to the next blank line).
fn section<'a>(out: &'a str, prefix: &str) -> Vec<&'a str> {
    out.lines()
        .skip_while(|l| !l.starts_with(prefix))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn dry_run_without_a_file_prints_the_lab_plan_offline() {
    let dir = tempfile::tempdir().expect("tempdir");
    // --verbose: every check in full (the default plan folds them, see the test below).
    let (code, out, err) = clusterctl(&["up", "--dry-run", "--verbose"], dir.path());
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("offline: no node is contacted"), "{out}");
    assert!(out.contains("cluster lab: Kubernetes v1.34.1"), "{out}");
    // Which file it plans is said (README walkthrough finding, point 11): none here, so `lab`.
    assert!(
        err.contains("no cluster.yaml here") && err.contains("the built-in `lab` profile"),
        "{err}"
    );
    // -v lists every check in full: a multi-line script is not cut (point 1).
    assert!(!out.contains(" lines)"), "{out}");
    assert!(out.contains("/etc/os-release"), "{out}");
    assert!(out.contains("create container lab-control-plane"), "{out}");

    let cp = section(&out, "node control-plane (control-plane");
    let w = section(&out, "node worker2 (worker");
    assert!(!cp.is_empty() && !w.is_empty(), "{out}");
    let pos = |lines: &[&str], needle: &str| lines.iter().position(|l| l.contains(needle));
    // The control plane: facts and preflight checks, runtime files, init, CNI, in this order.
    let facts = pos(&cp, "facts").expect("facts");
    let preflight = pos(&cp, "preflight").expect("preflight");
    let containerd = pos(&cp, "/etc/containerd/config.toml").expect("containerd config write");
    let init = pos(&cp, "kubeadm init --config").expect("kubeadm init");
    let cni = pos(&cp, "/opt/cni/bin/clusterctl-cni").expect("CNI binary");
    assert!(
        facts < preflight && preflight < containerd && containerd < init && init < cni,
        "{cp:#?}"
    );
    assert!(
        cp.iter()
            .any(|l| l.contains("init") && l.contains("--upload-certs")),
        "{cp:#?}"
    );
    assert!(
        cp.iter()
            .any(|l| l.contains("systemctl restart containerd")),
        "{cp:#?}"
    );
    assert!(
        cp.iter()
            .any(|l| l.contains("kubeconfig") && l.contains("context `clusterctl-lab`")),
        "{cp:#?}"
    );
    // A worker joins (with the credentials fetched on the first control plane) and never inits.
    assert!(pos(&w, "kubeadm join --config").is_some(), "{w:#?}");
    assert!(pos(&w, "kubeadm init --config").is_none(), "{w:#?}");
    assert!(w.iter().any(|l| l.contains("on control-plane:")), "{w:#?}");
    // Every write shows path, size and mode, never content; secrets appear only as placeholders.
    assert!(
        cp.iter()
            .any(|l| l.contains("write") && l.contains("mode 0600")),
        "{cp:#?}"
    );
    assert!(!out.contains("@@CLUSTERCTL_"), "{out}");
    assert!(
        out.contains("change(s) planned; nothing was changed"),
        "{out}"
    );
    // Nothing was written on this machine (no cache, no kubeconfig).
    assert!(!dir.path().join(".cache").exists() && !dir.path().join(".kube").exists());
}

#[test]
fn phase_selection_is_checked_and_applied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, err) = clusterctl(&["up", "--dry-run", "--skip-phases", "joins"], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("unknown phase `joins`") && err.contains("join/worker"),
        "{err}"
    );

    let (code, out, err) = clusterctl(&["up", "--dry-run", "--only", "join"], dir.path());
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("kubeadm join --config") && !out.contains("kubeadm init --config"),
        "{out}"
    );
    assert!(!out.contains("/etc/containerd/config.toml"), "{out}");
}

#[test]
fn up_without_a_file_outside_dry_run_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, err) = clusterctl(&["up"], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no cluster file"), "{err}");
}

#[test]
fn zero_parallelism_is_invalid_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    for args in [
        &["up", "--dry-run", "--parallel", "0"][..],
        &["airgap", "bundle", "--jobs", "0"][..],
        &["airgap", "import", "site.tar", "--jobs", "0"][..],
    ] {
        let (code, _, err) = clusterctl(args, dir.path());
        assert_eq!(code, 2, "{args:?}: {err}");
        // Said in words, not as clap's `0 is not in 1..18446744073709551615` (issue 16, point 12).
        assert!(err.contains("must be at least 1"), "{args:?}: {err}");
        assert!(!err.contains("18446744073709551615"), "{args:?}: {err}");
    }
}

#[test]
fn dry_run_with_a_bundle_that_is_a_fifo_is_refused_at_once() {
    // Issue 17, finding 9: `airgap.bundle` naming a FIFO (nobody writing to it) made `up --dry-run`
    // wait forever. It is refused before anything is read.
    let dir = tempfile::tempdir().expect("tempdir");
    let st = Command::new("mkfifo")
        .arg(dir.path().join("site.fifo"))
        .status()
        .expect("mkfifo");
    assert!(st.success());
    let lab = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles/lab.yaml"))
        .expect("lab profile");
    std::fs::write(
        dir.path().join("cluster.yaml"),
        format!("{lab}  airgap:\n    bundle: site.fifo\n"),
    )
    .expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(["up", "--dry-run", "-f", "cluster.yaml"])
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", dir.path().join("empty-path"))
        .env("HOME", dir.path())
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run clusterctl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("up --dry-run still waiting on the FIFO after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("read");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("FIFO") && err.contains("site.fifo"), "{err}");
}

/// A docker-provider file with `spec.docker.network`, `runOptions.memory`/`cpus` and a node's
/// `portMappings`: the plan creates (or joins) that network and a container publishing the port on
/// 127.0.0.1 unless `listenAddress` says otherwise (docs/spec.md), with the limits. The node's
/// `address` is ignored, as validate warns (Docker assigns it): the endpoint is the container's name.
#[test]
fn dry_run_of_a_docker_file_uses_its_network_ports_and_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("c.yaml"),
        r#"apiVersion: clusterctl.io/v1alpha1
kind: Cluster
metadata:
  name: ports
spec:
  provider: docker
  kubernetesVersion: v1.34.1
  docker:
    network: kind
    runOptions:
      memory: 2g
      cpus: "1.5"
  nodes:
    - name: c1
      role: control-plane
      address: 10.0.0.5
      portMappings:
        - {containerPort: 80, hostPort: 18080}
        - {containerPort: 53, hostPort: 18053, protocol: UDP, listenAddress: 0.0.0.0}
"#,
    )
    .expect("cluster file");
    let (code, out, err) = clusterctl(&["up", "--dry-run", "-f", "c.yaml"], dir.path());
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("create network kind (if missing)"), "{out}");
    // The ignored address (validate warns) is nowhere in the plan: the endpoint is the container.
    assert!(out.contains("endpoint ports-c1:6443"), "{out}");
    assert!(!out.contains("10.0.0.5"), "{out}");
    let container = out
        .lines()
        .find(|l| l.contains("create container ports-c1"))
        .unwrap_or_else(|| panic!("{out}"));
    for part in [
        "port 127.0.0.1:18080->80/tcp",
        "port 0.0.0.0:18053->53/udp",
        "memory 2147483648 bytes",
        "cpus 1.5",
    ] {
        assert!(container.contains(part), "{part}: {container}");
    }
}

/// Issue 16, point 10: the plan of a fresh cluster (no state record anywhere) lists no `rollout/*`
/// step — `init` and `join` apply the settings, a rollout would restart the API servers and kubelets
/// for nothing — while a node whose record (here the local cache's) shows the rollout ran before, with
/// other settings, gets it planned. Every plan line's kind column starts at the same place, sub-phases
/// such as `join/worker/credentials` included. The kubeconfig line names the server `up` really writes
/// for the docker provider (the API server published on 127.0.0.1), not the in-network endpoint.
#[test]
fn a_fresh_plan_has_no_rollout_aligned_columns_and_the_published_api_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, out, err) = clusterctl(&["up", "--dry-run", "-v"], dir.path());
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let steps: Vec<&str> = out
        .lines()
        .filter(|l| {
            l.starts_with("  ")
                && [
                    " check  ", " run  ", " write  ", " note  ", " api  ", " local  ",
                ]
                .iter()
                .any(|k| l.contains(k))
        })
        .collect();
    assert!(steps.len() > 50, "{out}");
    assert!(
        !steps.iter().any(|l| l.trim_start().starts_with("rollout/")),
        "{out}"
    );
    assert!(out.contains("  join/worker/credentials "), "{out}");
    let kind_at = |l: &str| {
        let rest = l.trim_start();
        let phase_end = rest.find(' ').unwrap_or(0) + (l.len() - rest.len());
        phase_end + l[phase_end..].len() - l[phase_end..].trim_start().len()
    };
    let first = kind_at(steps[0]);
    for l in &steps {
        assert_eq!(kind_at(l), first, "misaligned: {l:?}\n{out}");
    }
    let kubeconfig = steps
        .iter()
        .find(|l| l.contains("merge /etc/kubernetes/admin.conf"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        kubeconfig.contains("server https://127.0.0.1:<port Docker assigns>")
            && kubeconfig.contains("tls-server-name lab-control-plane"),
        "{kubeconfig}"
    );
    assert!(!out.contains("https://lab-control-plane:6443"), "{out}");

    // The local cache says the worker ran rollout/kubelet before with other settings: planned there
    // (and only there).
    let cache = dir.path().join(".cache/clusterctl/lab");
    std::fs::create_dir_all(&cache).expect("cache dir");
    std::fs::write(
        cache.join("worker.json"),
        r#"{"version":1,"cluster":"lab","node":"worker","phases":{"rollout/kubelet":{"inputs":"00","at":1}},"files":{}}"#,
    )
    .expect("cache record");
    let (code, out, err) = clusterctl(&["up", "--dry-run"], dir.path());
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let worker = section(&out, "node worker (worker");
    assert!(
        worker
            .iter()
            .any(|l| l.contains("rollout/kubelet") && l.contains("systemctl restart kubelet")),
        "{worker:#?}"
    );
    let worker2 = section(&out, "node worker2 (worker");
    assert!(
        !worker2.iter().any(|l| l.contains("rollout/")),
        "{worker2:#?}"
    );
}

/// A container standing in for a docker-provider node (labels as the provider sets them, `sleep` as
/// its process): reachable by `docker exec`, but no Kubernetes node. Removed on drop.
struct FakeNode(String);

impl FakeNode {
    fn start(cluster: &str, node: &str, image: &str) -> Self {
        let name = format!("{cluster}-{node}");
        let me = FakeNode(name.clone());
        clusterctl_testbed::docker::docker(&[
            "run",
            "-d",
            "--name",
            &name,
            "--label",
            &format!("io.clusterctl.cluster={cluster}"),
            "--label",
            &format!("io.clusterctl.node={node}"),
            "--label",
            "io.clusterctl.role=control-plane",
            "--entrypoint",
            "sleep",
            image,
            "600",
        ])
        .expect("container");
        me
    }
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        let _ = clusterctl_testbed::docker::docker(&["rm", "-f", "-v", &self.0]);
    }
}

fn docker_env_clusterctl(args: &[&str], dir: &std::path::Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run clusterctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 16, point 10: `--dry-run --probe` against a node that fails its probes (a container with no
/// Kubernetes in it) shows every phase — init, CNI, kubeconfig after the failing ones — with each
/// failure marked `FAIL` in place, reports every failure and exits 1. `node join --dry-run` on the
/// docker provider shows the container it would create for the joining node.
#[test]
fn a_probe_shows_every_phase_marking_failures_and_join_plans_its_container() {
    use clusterctl_testbed::docker::{docker_available, NodeImage};
    if !clusterctl_testbed::require("a Docker engine", docker_available()) {
        return;
    }
    let image = NodeImage::ensure().expect("node image");
    let name = clusterctl_testbed::unique_name("probe");
    let _cp = FakeNode::start(&name, "cp1", &image.tag);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("cluster.yaml"),
        format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: docker\n  docker: {{nodeImage: {}}}\n  nodes:\n    - {{name: cp1, role: control-plane}}\n    - {{name: w1, role: worker}}\n", image.tag),
    )
    .expect("write");
    let (code, out, err) = docker_env_clusterctl(
        &["up", "--dry-run", "--probe", "-f", "cluster.yaml"],
        dir.path(),
    );
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    let text_fails = out.lines().filter(|l| l.contains(" FAIL ")).count();
    let cp = section(&out, "node cp1 (control-plane");
    let fails: Vec<&&str> = cp.iter().filter(|l| l.contains(" FAIL ")).collect();
    assert!(!fails.is_empty(), "{cp:#?}\nstderr:\n{err}");
    let first_fail = cp.iter().position(|l| l.contains(" FAIL ")).unwrap_or(0);
    for later in ["kubeadm init --config", "kubeconfig "] {
        let at = cp
            .iter()
            .position(|l| l.contains(later))
            .unwrap_or_else(|| panic!("{later} missing after the failure:\n{cp:#?}"));
        assert!(at > first_fail, "{later}: {cp:#?}");
    }
    // Every failure is reported at the end too, each naming its phase.
    assert!(err.contains("up failed:"), "{err}");
    for f in &fails {
        let phase = f.split_whitespace().next().unwrap_or_default();
        assert!(
            err.contains(&format!("phase `{phase}` failed")),
            "{phase}: {err}"
        );
    }
    // The same plan for a script: `result: failed`, each failure in `failures` and in place as a
    // step of kind `phase` with `result: failed` (no `FAIL` kind), the rest `planned`.
    let (code, out, err) = docker_env_clusterctl(
        &[
            "up",
            "--dry-run",
            "--probe",
            "-f",
            "cluster.yaml",
            "-o",
            "json",
        ],
        dir.path(),
    );
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(v["result"], "failed", "{v}");
    let failures = v["failures"].as_array().expect("failures");
    assert_eq!(failures.len(), text_fails, "{v}");
    let steps = v["steps"].as_array().expect("steps");
    for f in failures {
        assert!(
            f["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty() && !m.contains('\n')),
            "{f}"
        );
        assert!(
            steps.iter().any(|s| s["kind"] == "phase"
                && s["result"] == "failed"
                && s["node"] == f["node"]
                && s["phase"] == f["phase"]),
            "{f}: {v}"
        );
    }
    assert!(steps
        .iter()
        .all(|s| s["kind"] != "FAIL" && (s["result"] == "planned") == (s["kind"] != "phase")));

    let (_, out, err) = docker_env_clusterctl(
        &["node", "join", "--dry-run", "-f", "cluster.yaml", "w1"],
        dir.path(),
    );
    let provider = section(&out, "provider docker:");
    assert!(
        provider.iter().any(|l| l.contains(&format!(
            "create container {name}-w1 (worker, image {}",
            image.tag
        ))),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    assert!(
        !provider.iter().any(|l| l.contains(&format!("{name}-cp1"))),
        "{out}"
    );
}

/// Walkthrough finding: `--ignore-preflight` with a check that does not exist (a typo) was accepted
/// and ignored nothing. It is refused (exit 2) naming the unknown entry and listing the valid ids; the
/// valid ones pass.
#[test]
fn an_unknown_ignored_preflight_check_is_refused_with_the_valid_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, err) = clusterctl(
        &[
            "up",
            "--dry-run",
            "--ignore-preflight",
            "time-sync,tme-sync",
        ],
        dir.path(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown check(s) `tme-sync`"), "{err}");
    assert!(!err.contains("`time-sync`"), "{err}");
    for valid in [
        "time-sync",
        "swap",
        "module/br_netfilter",
        "node-environment",
    ] {
        assert!(err.contains(valid), "{valid}: {err}");
    }
    let (code, _, err) = clusterctl(
        &[
            "node",
            "join",
            "--dry-run",
            "--ignore-preflight",
            "swapp",
            "w1",
        ],
        dir.path(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown check(s) `swapp`"), "{err}");
    let (code, out, err) = clusterctl(
        &[
            "up",
            "--dry-run",
            "--ignore-preflight",
            "time-sync,module/br_netfilter,node-environment,resolv-conf",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
}

/// Walkthrough finding: `up` on the SSH provider printed nothing while it connected (minutes, with
/// retries, for nodes still booting). Each node's connection is announced with its target and
/// attempts, and its outcome said, before anything else happens; an unreachable node fails the run
/// naming it.
#[test]
fn ssh_up_says_which_node_it_is_connecting_to() {
    // A local address and a port nothing listens on: the connection is refused at once.
    let Some((addr, port)) = clusterctl_testbed::refusing_address() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("c.yaml"),
        format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: conn}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  ssh: {{user: ops, port: {port}, connectAttempts: 1}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: {addr}}}\n"),
    )
    .expect("cluster file");
    let (code, out, err) = clusterctl(&["up", "--dry-run", "--probe", "-f", "c.yaml"], dir.path());
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains(&format!(
            "connecting to node cp1 (ops@{addr}:{port}, up to 1 attempt(s))…"
        )),
        "{err}"
    );
    assert!(err.contains("  node cp1: not reached after"), "{err}");
    assert!(err.contains("cannot reach every node"), "{err}");
}

/// Issue 16 point 10: the default plan shows what would change — no check rows (a per-node count
/// instead), one line per step (long commands cut with `…`), an identical step planned again on the
/// same node named as such — and stays well under 100 lines for the lab; `--verbose` and `-o json`
/// keep every entry in full.
#[test]
fn the_default_lab_plan_is_short_and_names_every_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, out, err) = clusterctl(&["up", "--dry-run"], dir.path());
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.lines().count() < 100,
        "{} lines:\n{out}",
        out.lines().count()
    );
    assert!(!out.contains("  check  "), "{out}");
    for node in ["node control-plane (", "node worker (", "node worker2 ("] {
        let lines = section(&out, node);
        let last = lines.last().copied().unwrap_or_default();
        assert!(
            last.contains(" check(s) (") && last.contains("-v/--verbose lists them"),
            "{lines:#?}"
        );
        let undo: Vec<&&str> = lines
            .iter()
            .filter(|l| l.contains("mkdir -p /var/lib/clusterctl/undo"))
            .collect();
        assert!(undo.len() == 1 && undo[0].ends_with('…'), "{lines:#?}");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("runtime/containerd")
                    && l.contains("(already planned in files)")),
            "{lines:#?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("/etc/containerd/config.toml")),
            "{lines:#?}"
        );
    }
    assert!(out.contains("modprobe overlay br_netfilter vxlan"), "{out}");
    assert!(out.contains("kubeadm init --config"), "{out}");

    let (code, full, err) = clusterctl(&["up", "--dry-run", "--verbose"], dir.path());
    assert_eq!(code, 0, "{err}");
    assert!(full.contains("  check  "), "{full}");
    assert!(full.lines().count() > out.lines().count() + 50, "{full}");
    // In full: every line of the multi-line facts script, each in the text column.
    let facts: Vec<&str> = full
        .lines()
        .skip_while(|l| !l.starts_with("node control-plane ("))
        .skip_while(|l| !l.trim_start().starts_with("facts"))
        .skip(1)
        .take_while(|l| l.starts_with("     "))
        .collect();
    assert!(facts.len() > 5, "{full}");
    // Named explicitly: no note of a default.
    let (code, _, err) = clusterctl(&["up", "--dry-run", "--profile", "lab"], dir.path());
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("no cluster.yaml here"), "{err}");
    let (code, json, err) = clusterctl(&["up", "--dry-run", "-o", "json"], dir.path());
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&json).expect("json");
    let steps = doc["steps"].as_array().expect("steps");
    assert!(steps.iter().any(|s| s["kind"] == "check"), "{json}");
    let undo = steps
        .iter()
        .filter(|s| {
            s["text"]
                .as_str()
                .is_some_and(|t| t.contains("mkdir -p /var/lib/clusterctl/undo"))
        })
        .count();
    assert_eq!(undo, 6, "{json}");
}
