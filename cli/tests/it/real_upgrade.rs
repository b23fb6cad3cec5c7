//! `clusterctl upgrade` by one minor for real (issue 11 item 6, issue 12 item 3): a real cluster (1
//! control plane + 1 worker, `real_support`) of the upstream v1.34.4 programs built from their Go
//! modules is upgraded to v1.35.4 (built the same way) with `clusterctl upgrade`, its kubeadm, kubelet
//! and kubectl packages coming from a real signed apt repository served from this machine
//! (`clusterctl_testbed::aptrepo::kubernetes_repository`, laid out and packaged as pkgs.k8s.io's:
//! `core:/stable:/v1.34/deb/` and `core:/stable:/v1.35/deb/`, `.deb`s built with `dpkg-deb` from the
//! Go-built programs, signed with a key the test makes), named by the file as the package mirror. The
//! images of both versions (`scripts/k8s/images.sh`, no pulls) are served by one registry on the test
//! network's gateway.
//!
//! Before `up`, each node gets the 1.34.4 packages from the v1.34 repository by hand, as a user
//! following the kubeadm install guide would (held); `up` runs with `packages.source: preinstalled`
//! (these node containers carry Debian 12's containerd 1.6.20, which `up` would refuse to keep for
//! 1.34 under `mirror`). On a cgroup v1 host (this test bed) the file says kubelet `failCgroupV1:
//! false` and ignores kubeadm's `SystemVerification` preflight check with its reason, as kubeadm
//! documents for 1.35 on cgroup v1. The file then says v1.35.4 and `packages.source: mirror`, and
//! `upgrade` switches each node to the v1.35 repository (key, source, apt's signature-checked lists),
//! installs exactly `1.35.4-*` and holds it.
//!
//! Asserted while the upgrade runs: at most one node is unschedulable at any time and the cordons and
//! uncordons come one node at a time in upgrade order, control plane then worker (the real `kubectl
//! get nodes --watch`, in the API server's order), and the app's ClusterIP Service (two replicas, a
//! PodDisruptionBudget of one) answers every second from every node's network namespace through
//! kube-proxy throughout. After it: every node reports
//! kubelet v1.35.4 and is Ready, the control plane runs v1.35.4, the packages are `1.35.4-1.1` and
//! held, the apt source names `/v1.35/deb/`, the app serves (ClusterIP, CoreDNS name), `status` is
//! clean, and a second `upgrade` changes nothing.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clusterctl_testbed::aptrepo::{kubernetes_repository, FileServer, SigningKey};
use clusterctl_testbed::docker::TestNode;
use clusterctl_testbed::k8sbin::require_programs;
use clusterctl_testbed::k8snode::{cache_root, ImageStore};

use crate::real_support::{self, wait_for, FileOptions, RealCluster};

const FROM: &str = "v1.34.4";
const TO: &str = "v1.35.4";
/// What `aptrepo::kubernetes_repository` packages.
const PACKAGED: [&str; 5] = ["kubeadm", "kubelet", "kubectl", "crictl", "cni-plugins"];

/// One registry storage holding the images of both versions: hard links of the two stores' files
/// (content-addressed blobs, tags per repository), so nothing is copied.
fn merged_store(a: &ImageStore, b: &ImageStore) -> (ImageStore, tempfile::TempDir) {
    let parent = cache_root().join("registry");
    let dir = tempfile::Builder::new()
        .prefix(".upgrade-")
        .tempdir_in(&parent)
        .expect("merged storage dir");
    for s in [a, b] {
        let st = std::process::Command::new("cp")
            .arg("-alf")
            .arg(format!("{}/.", s.storage.display()))
            .arg(dir.path())
            .status()
            .expect("cp");
        assert!(st.success(), "cp -al {}", s.storage.display());
    }
    (
        ImageStore {
            storage: dir.path().to_path_buf(),
            version: a.version.clone(),
        },
        dir,
    )
}

/// Installs kubeadm, kubelet, kubectl 1.34.4 from the v1.34 repository on `node` by hand, held — what
/// the kubeadm install guide has a user do (the key dearmored into its keyring, `signed-by=`).
fn preinstall(c: &RealCluster, node: &str, url: &str) {
    let v = FROM.trim_start_matches('v');
    let script = format!(
        "set -e\n\
         mkdir -p -m 755 /etc/apt/keyrings\n\
         /usr/lib/apt/apt-helper -qq download-file '{url}/core:/stable:/v1.34/deb/Release.key' /tmp/k8s.key\n\
         gpg --batch --yes --dearmor -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg /tmp/k8s.key 2>/dev/null \
           || {{ sed '1,/^$/d;/^=/,$d' /tmp/k8s.key | base64 -d > /etc/apt/keyrings/kubernetes-apt-keyring.gpg; }}\n\
         echo 'deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] {url}/core:/stable:/v1.34/deb/ /' > /etc/apt/sources.list.d/kubernetes.list\n\
         apt-get update -q -o Dir::Etc::sourcelist=/etc/apt/sources.list.d/kubernetes.list -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 >/dev/null\n\
         DEBIAN_FRONTEND=noninteractive apt-get install -y -q kubeadm='{v}-*' kubelet='{v}-*' kubectl='{v}-*' >/dev/null\n\
         apt-mark hold kubeadm kubelet kubectl >/dev/null\n\
         dpkg-query -W -f='${{Package}}=${{Version}} ' kubeadm kubelet kubectl\n"
    );
    let out = c
        .node(node)
        .sh(&script)
        .unwrap_or_else(|e| panic!("{node}: {e:#}"));
    assert!(out.contains(&format!("kubeadm={v}-1.1")), "{node}: {out}");
}

fn packages_of(c: &RealCluster, node: &str) -> (String, String) {
    let n = c.node(node);
    let v = n
        .sh("dpkg-query -W -f='${Package}=${Version} ' kubeadm kubelet kubectl")
        .expect("dpkg-query");
    let held = n
        .sh("apt-mark showhold | sort | tr '\\n' ' '")
        .expect("holds");
    (v.trim().to_string(), held.trim().to_string())
}

/// A Deployment of two busybox httpd pods (tolerating every taint), a PodDisruptionBudget keeping one
/// of them available through drains, and their ClusterIP Service.
fn app(image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: app}}}}\n  template:\n    metadata: {{labels: {{app: app}}}}\n    spec:\n      tolerations: [{{operator: Exists}}]\n      containers:\n      - name: web\n        image: {image}\n        command: [\"sh\", \"-c\", \"echo hello > /tmp/index.html; exec httpd -f -p 8080 -h /tmp\"]\n        readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1}}\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: app}}\nspec:\n  minAvailable: 1\n  selector: {{matchLabels: {{app: app}}}}\n---\napiVersion: v1\nkind: Service\nmetadata: {{name: app}}\nspec:\n  selector: {{app: app}}\n  ports: [{{port: 80, targetPort: 8080}}]\n"
    )
}

/// The app's pods Running and Ready, its Service answering on its ClusterIP (kube-proxy) and its name
/// resolved to that address through CoreDNS (busybox's own resolver: `nslookup`). No `wget -T`: the
/// static busybox's wget crashes with it (exit 139).
fn app_serves(c: &RealCluster) -> Result<(), String> {
    crate::real_cluster::pods_ready(c, "kube-system", "k8s-app=kube-dns", 2)?;
    crate::real_cluster::pods_ready(c, "default", "app=app", 2)?;
    let exec = |cmd: &str| {
        c.first()
            .sh(&format!(
                "kubectl --kubeconfig /etc/kubernetes/admin.conf exec deploy/app -- {cmd}"
            ))
            .map_err(|e| format!("{cmd}: {e:#}"))
    };
    let ip = c.kubectl("get service app -o jsonpath='{.spec.clusterIP}'");
    let page = exec(&format!("wget -q -O- http://{ip}/index.html"))?;
    if page.trim() != "hello" {
        return Err(format!("ClusterIP {ip} answered {page:?}"));
    }
    let ns = exec("nslookup app.default.svc.cluster.local")?;
    if !ns.contains(&ip) {
        return Err(format!("nslookup: {ns}"));
    }
    Ok(())
}

/// What the watchers saw during the upgrade.
#[derive(Debug, Default)]
struct Watched {
    /// `cordon NODE` / `uncordon NODE`, in the API server's order (watch events).
    transitions: Vec<String>,
    /// The most nodes unschedulable at once after any event, with the state then.
    most_unschedulable: (usize, String),
    /// Node events seen, and how many times the watch was (re)started (the API server restarts).
    events: usize,
    watches: usize,
    /// The last line each ended watch printed on stderr (why it ended), at most 5.
    watch_ends: Vec<String>,
    /// Probes of the ClusterIP (one per node per second) and the failed ones (`secs node: why`).
    probes: usize,
    failed: Vec<String>,
}

/// `curl` of `http://IP/index.html` from the network namespace of the node container with process
/// `pid` (as a process on that node: kube-proxy's rules route it), 2 s per try, up to 3 tries.
fn probe(pid: &str, ip: &str) -> Result<(), String> {
    let out = std::process::Command::new("nsenter")
        .args(["-t", pid, "-n", "curl", "-sS", "-m", "2", "--retry", "2"])
        .args(["--retry-delay", "0", "--retry-all-errors"])
        .arg(format!("http://{ip}/index.html"))
        .output()
        .map_err(|e| format!("nsenter: {e}"))?;
    let body = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && body.trim() == "hello" {
        Ok(())
    } else {
        Err(format!(
            "{} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Probes the ClusterIP `ip` from each node's network namespace every second until `stop`.
fn probe_until(nodes: &[(String, String)], ip: &str, stop: &AtomicBool, w: &Mutex<Watched>) {
    let t = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let tick = Instant::now();
        for (name, pid) in nodes {
            let r = probe(pid, ip);
            let mut w = w.lock().expect("watched");
            w.probes += 1;
            if let Err(e) = r {
                w.failed
                    .push(format!("{:.0}s {name}: {e}", t.elapsed().as_secs_f64()));
            }
        }
        if let Some(rest) = Duration::from_secs(1).checked_sub(tick.elapsed()) {
            std::thread::sleep(rest);
        }
    }
}

/// Follows the Nodes' `spec.unschedulable` with the real `kubectl get nodes --watch` on the first
/// control plane (in the API server's order; restarted while its API server is being replaced) until
/// `stop`, recording each cordon and uncordon and the most nodes unschedulable at once. The running
/// `docker exec`'s process id is kept in `pid` so that the caller can end it.
fn watch_cordons(
    first: &TestNode,
    stop: &AtomicBool,
    pid: &Mutex<Option<u32>>,
    w: &Mutex<Watched>,
) {
    let mut state: BTreeMap<String, bool> = BTreeMap::new();
    while !stop.load(Ordering::Relaxed) {
        let child = std::process::Command::new("docker")
            .args(["exec", &first.name, "timeout", "1200", "kubectl"])
            .args([
                "--kubeconfig",
                "/etc/kubernetes/admin.conf",
                "get",
                "nodes",
                "--watch",
            ])
            .arg("-o=jsonpath={.metadata.name}={.spec.unschedulable}{\"\\n\"}")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let Ok(mut child) = child else {
            std::thread::sleep(Duration::from_secs(1));
            continue;
        };
        *pid.lock().expect("pid") = Some(child.id());
        w.lock().expect("watched").watches += 1;
        if let Some(out) = child.stdout.take() {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let Some((name, value)) = line.trim().split_once('=') else {
                    continue;
                };
                let now = value == "true";
                let was = state.insert(name.to_string(), now).unwrap_or(false);
                let mut w = w.lock().expect("watched");
                w.events += 1;
                if now != was {
                    let what = if now { "cordon" } else { "uncordon" };
                    w.transitions.push(format!("{what} {name}"));
                }
                let n = state.values().filter(|v| **v).count();
                if n > w.most_unschedulable.0 {
                    w.most_unschedulable = (n, format!("{state:?}"));
                }
            }
        }
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        let _ = child.wait();
        *pid.lock().expect("pid") = None;
        let mut w = w.lock().expect("watched");
        if w.watch_ends.len() < 5 {
            let last = err
                .lines()
                .last()
                .unwrap_or("(nothing on stderr)")
                .to_string();
            w.watch_ends.push(last);
        }
        drop(w);
        if !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

#[test]
fn upgrade_one_minor_for_real_with_packages_from_a_signed_apt_repository() {
    if !clusterctl_testbed::require(
        "dpkg-deb, apt-ftparchive, gpg (scripts/packages/packages.list), nsenter and curl",
        clusterctl_testbed::have("dpkg-deb")
            && clusterctl_testbed::have("apt-ftparchive")
            && clusterctl_testbed::have("gpg")
            && clusterctl_testbed::have("nsenter")
            && clusterctl_testbed::have("curl"),
    ) {
        return;
    }
    let Some((image, old_store)) = real_support::available() else {
        return;
    };
    let Some(old_bins) = require_programs(FROM, &PACKAGED) else {
        return;
    };
    let Some(new_bins) = require_programs(TO, &PACKAGED) else {
        return;
    };
    let new_store = match ImageStore::ensure(TO) {
        Ok(s) => s,
        Err(e) => {
            clusterctl_testbed::require(&format!("the {TO} images: {e:#}"), false);
            return;
        }
    };
    let t = Instant::now();
    let (store, _merged) = merged_store(&old_store, &new_store);
    // Kubernetes 1.35 on cgroup v1 (this host's /sys/fs/cgroup decides): the kubelet refuses to start
    // unless failCgroupV1 is false, and kubeadm's SystemVerification preflight check refuses the host
    // unless it is ignored ("You must also explicitly skip this validation", system-validators). The
    // kubelet configuration kubeadm uploads at init is what `kubeadm upgrade` keeps, so the file says
    // both from the start.
    let v1 = std::process::Command::new("stat")
        .args(["-fc", "%T", "/sys/fs/cgroup"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() != "cgroup2fs")
        .unwrap_or(false);
    let opts = FileOptions {
        extra_spec: if v1 {
            "  kubeadm:\n    ignorePreflightErrors:\n      - {check: SystemVerification, reason: \"cgroup v1 test bed; kubelet failCgroupV1 is false\"}\n".into()
        } else {
            String::new()
        },
        ..FileOptions::default()
    };
    let c = real_support::start("rupg", 1, 1, opts, &(image, store));

    // The repository: both minors as pkgs.k8s.io packages them, one key, served on the test
    // network's gateway.
    let www = tempfile::tempdir().expect("repo dir");
    let key = SigningKey::generate().expect("gpg key");
    let tr = Instant::now();
    for bins in [&old_bins, &new_bins] {
        kubernetes_repository(www.path(), bins, &key).expect("repository");
    }
    eprintln!(
        "[real] repository (v1.34 and v1.35) built and signed in {:.1}s",
        tr.elapsed().as_secs_f64()
    );
    let server = FileServer::start(&c.nodes.gateway, www.path()).expect("file server");
    let url = server.url();
    let names: Vec<String> = c.roles.iter().map(|(n, _)| n.clone()).collect();
    for n in &names {
        preinstall(&c, n, &url);
    }

    let mut text = std::fs::read_to_string(&c.file).expect("file");
    if v1 {
        text = text.replace(
            "kubelet: {resolvConf",
            "kubelet: {failCgroupV1: false, resolvConf",
        );
    }
    std::fs::write(&c.file, &text).expect("file");
    let up = c.up(&[]);
    assert!(up.all().contains("converged"), "{}", up.all());
    c.apply(&app(&c.busybox()));
    wait_for(
        "the app serving before the upgrade",
        Duration::from_secs(240),
        || app_serves(&c),
    );

    // The file now says v1.35.4, packages from the repository (the mirror of pkgs.k8s.io).
    let text = text
        .replace(
            &format!("kubernetesVersion: {FROM}"),
            &format!("kubernetesVersion: {TO}"),
        )
        .replace(
            "packages: {source: preinstalled}",
            &format!("packages: {{source: mirror, mirror: {{url: \"{url}\"}}}}"),
        );
    assert!(text.contains("source: mirror"), "{text}");
    std::fs::write(&c.file, &text).expect("file");
    server.clear();
    let f = c.file.to_string_lossy().into_owned();
    let to = TO.trim_start_matches('v');
    let ip = c.kubectl("get service app -o jsonpath='{.spec.clusterIP}'");
    let pids: Vec<(String, String)> = names
        .iter()
        .map(|n| {
            let pid = clusterctl_testbed::docker::docker(&["inspect", "-f", "{{.State.Pid}}", n])
                .expect("docker inspect");
            (n.clone(), pid.trim().to_string())
        })
        .collect();
    let stop = AtomicBool::new(false);
    let (watched, watch_pid) = (Mutex::new(Watched::default()), Mutex::new(None));
    let tu = Instant::now();
    let r = std::thread::scope(|s| {
        let cordons = s.spawn(|| watch_cordons(c.first(), &stop, &watch_pid, &watched));
        let probes = s.spawn(|| probe_until(&pids, &ip, &stop, &watched));
        // The watch must be running before anything is cordoned.
        wait_for("the node watch", Duration::from_secs(60), || {
            let w = watched.lock().expect("watched");
            if w.events >= names.len() {
                Ok(())
            } else {
                Err(format!("{w:?}"))
            }
        });
        let r = c.clusterctl(&["upgrade", "-f", &f, "--to", to]);
        // Let the watch deliver the last events, then end it (the `docker exec` this test started).
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::Relaxed);
        if let Some(p) = *watch_pid.lock().expect("pid") {
            let _ = std::process::Command::new("kill")
                .arg(p.to_string())
                .status();
        }
        cordons.join().expect("node watch");
        probes.join().expect("prober");
        r
    });
    let seen = watched.into_inner().expect("watched");
    let out = r.all();
    eprintln!("{out}");
    eprintln!("[real] watched: {seen:?}");
    if r.code != 0 {
        // What the control plane went through (restarts, the API server's containers, events).
        let diag = c.first().sh(
            "kubectl --kubeconfig /etc/kubernetes/admin.conf get pods -A -o wide; \
             crictl ps -a --name 'kube-apiserver|etcd' 2>&1; \
             kubectl --kubeconfig /etc/kubernetes/admin.conf get events -A --sort-by=.lastTimestamp | tail -30; \
             journalctl -u kubelet --no-pager --since '-4min' | grep -iE 'kube-apiserver|Killing|static' | tail -30",
        );
        eprintln!("[real] after the failed upgrade:\n{diag:?}");
    }
    assert_eq!(r.code, 0, "upgrade failed:\n{out}");
    assert!(out.contains(&format!("upgraded to v{to}")), "{out}");
    eprintln!(
        "[real] upgrade {FROM} -> {TO} took {:.1}s",
        tu.elapsed().as_secs_f64()
    );
    if v1 {
        assert!(
            out.contains("kubeadm's preflight check SystemVerification is ignored (spec.kubeadm.ignorePreflightErrors): cgroup v1 test bed"),
            "{out}"
        );
    }
    // One node at a time, in upgrade order, never two unschedulable; the Service answered throughout.
    let (cp, worker) = (&names[0], &names[1]);
    assert_eq!(
        seen.transitions,
        [
            format!("cordon {cp}"),
            format!("uncordon {cp}"),
            format!("cordon {worker}"),
            format!("uncordon {worker}")
        ],
        "{seen:?}"
    );
    assert_eq!(seen.most_unschedulable.0, 1, "{seen:?}");
    assert!(seen.probes >= 2 * 20, "too few probes: {seen:?}");
    assert!(seen.events >= 6, "too few node events: {seen:?}");
    assert!(
        seen.failed.is_empty(),
        "the Service at {ip} did not answer during the upgrade: {seen:?}"
    );
    // The packages came from the v1.35 repository, its signed index fetched.
    let asked = server.requests();
    assert!(
        asked.iter().any(|p| p.contains("/v1.35/deb/InRelease")),
        "{asked:?}"
    );
    assert!(
        asked
            .iter()
            .any(|p| p.contains("/v1.35/deb/") && p.ends_with("/kubelet_1.35.4-1.1_amd64.deb")),
        "{asked:?}"
    );

    // Every node: kubelet v1.35.4, Ready; packages 1.35.4-1.1, held; the source names v1.35.
    let versions = c.kubectl(
        "get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion}{\"\\n\"}{end}'",
    );
    for n in &names {
        assert!(
            versions.lines().any(|l| l.trim() == format!("{n} {TO}")),
            "{versions}"
        );
        let (pkgs, held) = packages_of(&c, n);
        assert_eq!(
            pkgs,
            format!("kubeadm={to}-1.1 kubectl={to}-1.1 kubelet={to}-1.1"),
            "{n}"
        );
        for p in ["kubeadm", "kubectl", "kubelet"] {
            assert!(held.split(' ').any(|h| h == p), "{n}: {p} not held: {held}");
        }
        let list = c
            .node(n)
            .sh("cat /etc/apt/sources.list.d/kubernetes.list")
            .expect("list");
        assert!(list.contains("/core:/stable:/v1.35/deb/ /"), "{n}: {list}");
        let kubeadm = c.node(n).sh("kubeadm version -o short").expect("kubeadm");
        assert_eq!(kubeadm.trim(), TO, "{n}");
    }
    wait_for("every node Ready", Duration::from_secs(180), || {
        crate::real_cluster::all_ready(&c)
    });
    let api = c.kubectl("version -o json");
    assert!(api.contains(&format!("\"gitVersion\": \"{TO}\"")), "{api}");
    for component in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        let image = c.kubectl(&format!(
            "-n kube-system get pod {component}-{cp} -o jsonpath='{{.spec.containers[0].image}}'"
        ));
        assert!(image.ends_with(&format!("{component}:{TO}")), "{image}");
    }
    wait_for(
        "the app serving after the upgrade",
        Duration::from_secs(240),
        || app_serves(&c),
    );
    let status = c.clusterctl(&["status", "-f", &f]);
    let s = status.all();
    assert_eq!(status.code, 0, "status:\n{s}");
    assert!(
        s.contains("; 2 of 2 registered node(s) Ready")
            && s.contains("no stuck pods")
            && !s.contains("not registered")
            && !s.contains("missing on the node"),
        "status:\n{s}"
    );
    // Run again: already there, nothing changes (no package fetched, no node cordoned).
    server.clear();
    let again = c.clusterctl(&["upgrade", "-f", &f, "--to", to]);
    let a = again.all();
    assert_eq!(again.code, 0, "{a}");
    assert!(
        a.contains(&format!("is already at v{to}; nothing changed")),
        "{a}"
    );
    let fetched: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|p| p.ends_with(".deb"))
        .collect();
    assert!(fetched.is_empty(), "{fetched:?}");
    eprintln!(
        "[real] upgrade test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    drop(server);
}
