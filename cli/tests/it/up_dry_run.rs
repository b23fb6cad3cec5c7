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
    let (code, out, err) = clusterctl(&["up", "--dry-run"], dir.path());
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("offline: no node is contacted"), "{out}");
    assert!(out.contains("cluster lab: Kubernetes v1.34.1"), "{out}");
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
            .any(|l| l.contains("kubeconfig") && l.contains("context `lab`")),
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
