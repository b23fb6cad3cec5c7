//! Lifecycle of a real cluster (root + Docker + the test bed's Kubernetes build; see `real_cluster.rs`
//! for the set-up): `clusterctl up` killed (SIGKILL, and the node's `kubeadm` with it where it runs)
//! at every phase boundary and at points inside `kubeadm init`, then run again until it converges —
//! on 1 control plane + 1 worker. It ends with a working cluster: every join succeeded, one etcd member,
//! traffic across nodes. Then, on the same cluster: a label and a taint removed by hand are reported by
//! `status` and put back by the next `up`, and a second `up` changes nothing. The kills inside the HA
//! file's `kubeadm init` and control-plane joins run at the start of the HA test
//! (`real_cluster::ha_cluster_over_ssh_for_real`) with [`up_killed_when`], [`DELAYED_KUBELET`] and
//! [`REAL_KUBELET`] from here.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clusterctl_testbed::docker::TestNode;

use crate::real_cluster::{check_cluster_on, pods_ready};
use crate::real_support::{self, wait_for, FileOptions, RealCluster};

/// A `clusterctl up` running in the background, its output collected line by line.
struct Background {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Background {
    fn start(c: &RealCluster) -> Background {
        let kh = c.nodes.dir().join("known_hosts");
        let mut child = Command::new(&c.cc.bin)
            .args(["up", "-f"])
            .arg(&c.file)
            .arg("--known-hosts")
            .arg(&kh)
            .current_dir(&c.cc.dir)
            .env("HOME", &c.cc.dir)
            .env("KUBECONFIG", c.cc.kubeconfig())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("clusterctl up");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        let out: Box<dyn std::io::Read + Send> = Box::new(child.stdout.take().expect("stdout"));
        let err: Box<dyn std::io::Read + Send> = Box::new(child.stderr.take().expect("stderr"));
        for pipe in [out, err] {
            let lines = lines.clone();
            readers.push(std::thread::spawn(move || {
                for l in BufReader::new(pipe).lines().map_while(Result::ok) {
                    lines.lock().unwrap_or_else(|e| e.into_inner()).push(l);
                }
            }));
        }
        Background {
            child,
            lines,
            readers,
        }
    }

    fn output(&self) -> String {
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .join("\n")
    }

    /// Kills the process (SIGKILL) and returns everything it printed.
    fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        self.output()
    }
}

/// Kills every `kubeadm` process on `node` (the node's own process ids, inside its container).
fn kill_kubeadm(node: &TestNode) {
    let _ = node.sh("for p in $(pidof kubeadm); do kill -9 $p; done; true");
}

/// Replaces the node's kubelet with a wrapper that starts the real one (`/usr/bin/kubelet.real`) 30 s
/// late — `--version` and `version`, which kubeadm's preflight asks, answer at once — so that a kill
/// point between kubeadm's static-pod manifests and the kubelet's bootstrap (`kubelet.conf`) lasts
/// long enough to be seen on a loaded machine (seen missed with a 200 ms poll). Undone by
/// [`REAL_KUBELET`].
pub(crate) const DELAYED_KUBELET: &str = "set -e; [ -e /usr/bin/kubelet.real ] || mv /usr/bin/kubelet /usr/bin/kubelet.real; \
    printf '#!/bin/sh\ncase \" $* \" in *\" --version \"*|*\" version \"*) exec /usr/bin/kubelet.real \"$@\";; esac\nsleep 30\nexec /usr/bin/kubelet.real \"$@\"\n' > /usr/bin/kubelet.tmp; \
    chmod 0755 /usr/bin/kubelet.tmp; mv -f /usr/bin/kubelet.tmp /usr/bin/kubelet";

/// Puts the real kubelet back (see [`DELAYED_KUBELET`]).
pub(crate) const REAL_KUBELET: &str =
    "if [ -e /usr/bin/kubelet.real ]; then mv -f /usr/bin/kubelet.real /usr/bin/kubelet; fi";

/// Runs `up` and kills it as soon as `when(output so far)` holds (polled every 200 ms), with the
/// `kubeadm` of `kubeadm_on`. Panics when `up` ends before that. Returns the output.
pub(crate) fn up_killed_when(
    c: &RealCluster,
    what: &str,
    mut when: impl FnMut(&str) -> bool,
    kubeadm_on: &[&TestNode],
) -> String {
    let t = Instant::now();
    let mut bg = Background::start(c);
    loop {
        if when(&bg.output()) {
            break;
        }
        if let Ok(Some(status)) = bg.child.try_wait() {
            let out = bg.kill();
            panic!("up ended ({status}) before the kill point `{what}`:\n{out}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "kill point `{what}` not reached in 10 minutes:\n{}",
            bg.output()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = bg.kill();
    for n in kubeadm_on {
        kill_kubeadm(n);
    }
    eprintln!(
        "[real] up killed at `{what}` after {:.1}s",
        t.elapsed().as_secs_f64()
    );
    out
}

/// The phases of `up` for the cluster file, as its dry run lists them.
fn phase_list(c: &RealCluster) -> Vec<String> {
    let f = c.file.to_string_lossy().into_owned();
    let r = c.cc.run(&["up", "--dry-run", "-f", &f]).expect("dry run");
    assert_eq!(r.code, 0, "{}", r.all());
    let line = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("phases: "))
        .unwrap_or_else(|| panic!("no phase list:\n{}", r.stdout))
        .to_string();
    line.split(" → ").map(String::from).collect()
}

/// True when an output line of phase `phase` (`[node] phase: …`) was printed.
fn phase_started(out: &str, phase: &str) -> bool {
    let needle = format!("] {phase}: ");
    let sub = format!("] {phase}/");
    out.lines().any(|l| l.contains(&needle) || l.contains(&sub))
}

/// The first control plane answers through its own address with admin.conf (the control plane runs).
fn api_answers(node: &TestNode) -> bool {
    node.sh(&format!(
        "kubectl --kubeconfig /etc/kubernetes/admin.conf --server https://{}:6443 --request-timeout=2s get --raw /readyz",
        node.address
    ))
    .is_ok_and(|o| o == "ok")
}

#[test]
fn up_killed_at_every_phase_boundary_and_inside_kubeadm_init() {
    let Some(env) = real_support::available() else {
        return;
    };
    let t = Instant::now();
    let c = real_support::start("rkl", 1, 1, FileOptions::default(), &env);
    let cp = c.first().clone();
    let worker = c.workers()[0].clone();
    let phases = phase_list(&c);
    eprintln!("[real] phases: {phases:?}");
    let pos = |p: &str| {
        phases
            .iter()
            .position(|x| x == p)
            .unwrap_or_else(|| panic!("no phase {p} in {phases:?}"))
    };
    let mut kills = 0;
    // Boundaries before init: kill when the next phase prints its first line.
    for next in &phases[pos("files")..=pos("init")] {
        up_killed_when(
            &c,
            &format!("before {next}"),
            |o| phase_started(o, next),
            &[],
        );
        kills += 1;
    }
    // Inside `kubeadm init`: (a) its kubeconfig phase wrote admin.conf (long before the control plane
    // runs, the token and certificates are registered and the add-ons installed) ...
    up_killed_when(
        &c,
        "kubeadm init wrote admin.conf",
        |_| cp.sh("test -f /etc/kubernetes/admin.conf").is_ok(),
        &[&cp],
    );
    // ... (b) the control plane answers (wait-control-plane, upload-config) ...
    up_killed_when(
        &c,
        "the control plane of kubeadm init answers",
        |_| api_answers(&cp),
        &[&cp],
    );
    // ... (c) the bootstrap token and cluster-info exist but the add-ons do not (finishing run).
    up_killed_when(
        &c,
        "cluster-info exists, CoreDNS not yet",
        |_| {
            cp.sh("kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-public get configmap cluster-info -o name")
                .is_ok()
        },
        &[&cp],
    );
    kills += 3;
    // Boundaries after init, until `up` converges on its own (`join/control-plane` has no node here).
    let after: Vec<String> = phases[pos("init") + 1..]
        .iter()
        .filter(|p| *p != "join/control-plane")
        .cloned()
        .collect();
    for next in &after {
        let mut bg = Background::start(&c);
        let ended = loop {
            if phase_started(&bg.output(), next) {
                break None;
            }
            if let Ok(Some(st)) = bg.child.try_wait() {
                break Some(st);
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let out = bg.kill();
        match ended {
            None => {
                kills += 1;
                eprintln!("[real] up killed before {next}");
            }
            Some(st) => panic!("up ended ({st}) before phase {next}:\n{out}"),
        }
    }
    eprintln!("[real] {kills} kills in {:.1}s", t.elapsed().as_secs_f64());
    let last = c.up(&[]);
    assert!(last.all().contains("up: cluster"), "{}", last.all());
    check_cluster_on(&c, &[worker.name.clone(), cp.name.clone()]);
    assert_eq!(c.etcd_members(), vec![cp.name.clone()]);
    // Every token the joins used was registered: the worker joined (Ready above), and no join failed.
    let again = c.up(&[]);
    assert!(
        again.all().contains("is up to date; nothing changed"),
        "{}",
        again.all()
    );

    // Drift: a label and a taint declared in the file, removed by hand, reported by `status` and put
    // back by the next `up`.
    let text = std::fs::read_to_string(&c.file).expect("file");
    let text = text.replace(
        &format!("    - {{name: {}, role: worker, address: {}}}", worker.name, worker.address),
        &format!(
            "    - {{name: {}, role: worker, address: {}, labels: {{disktype: ssd}}, taints: [{{key: dedicated, value: db, effect: NoSchedule}}]}}",
            worker.name, worker.address
        ),
    );
    std::fs::write(&c.file, text).expect("file");
    c.up(&[]);
    let labels = |c: &RealCluster| {
        c.kubectl(&format!(
            "get node {} -o jsonpath='{{.metadata.labels.disktype}} {{.spec.taints}}'",
            worker.name
        ))
    };
    let set = labels(&c);
    assert!(
        set.starts_with("ssd ") && set.contains("\"dedicated\"") && set.contains("\"db\""),
        "{set}"
    );
    c.kubectl(&format!("label node {} disktype-", worker.name));
    c.kubectl(&format!("taint node {} dedicated-", worker.name));
    let f = c.file.to_string_lossy().into_owned();
    let status = c.clusterctl(&["status", "-f", &f]);
    assert_eq!(status.code, 0, "{}", status.all());
    let s = status.all();
    assert!(
        s.contains(&format!("  {}: disktype=ssd", worker.name))
            && s.contains(&format!("  {}: dedicated=db:NoSchedule", worker.name)),
        "status names the lost label and taint:\n{s}"
    );
    let fixed = c.up(&[]);
    assert!(
        fixed
            .all()
            .contains(&format!("node {}: set labels disktype=ssd", worker.name))
            && fixed.all().contains("set taints dedicated=db:NoSchedule"),
        "{}",
        fixed.all()
    );
    let back = labels(&c);
    assert!(
        back.starts_with("ssd ") && back.contains("\"dedicated\""),
        "{back}"
    );
    let s = c.clusterctl(&["status", "-f", &f]).all();
    assert!(!s.contains("missing on the node"), "{s}");
    wait_for("web pods still Ready", Duration::from_secs(60), || {
        pods_ready(&c, "default", "app=web", 2)
    });
    eprintln!(
        "[real] kill points and drift done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
