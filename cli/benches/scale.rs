//! Benchmark (issue 29 item 3): what clusterctl's API-side commands cost as a cluster grows, side by side
//! with the real `kubectl` doing the same reads in the same run. A real API server (the test bed's
//! envtest: upstream etcd + kube-apiserver on loopback) holds N Nodes and 2 N Pods simulated by the real
//! kwok (`sigs.k8s.io/kwok`, built by `scripts/k8s/build.sh VERSION kwok`, with its upstream `fast` node
//! and pod Stages: kwok makes each Node Ready and each Pod Running, keeps the node leases, and finishes
//! deletions as a kubelet would). The cluster file names the same N nodes (SSH addresses that are never
//! contacted: `status` asks node runtimes only about a stuck pod, and there is none).
//!
//! Per N, the median of the repetitions:
//! * `status`: `clusterctl status -f FILE --kubeconfig K -o json` (nodes, pods, the label and taint drift
//!   check against the file), its wall time and peak RSS (`/usr/bin/time -f %M`), against the floor
//!   `kubectl get nodes -o json` + `kubectl get pods -A -o json` (the two lists `status` reads);
//! * `drain`: `clusterctl_kubeapi::drain::drain` of one node (cordon, two evictions, wait until kwok has
//!   deleted the pods), against `kubectl drain --ignore-daemonsets --force` of another node.
//!
//! Ratios clusterctl / kubectl are printed; they never fail the run. `BENCH_SHORT=1`: N = 10, one
//! repetition (proves the benchmark works). Needs the test bed's programs (built when missing; a failure
//! to build fails in CI, skips outside it). Results and the command that produced them: docs/testing.md
//! ("Scale").

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use clusterctl_kubeapi::{ClusterApi, KubeClusterApi};
use clusterctl_testbed::envtest::Envtest;
use clusterctl_testbed::k8sbin::{self, DEFAULT_VERSION};
use serde_json::{json, Value};

/// Pods per simulated node.
const PODS_PER_NODE: usize = 2;
/// The annotation kwok's `--manage-nodes-with-annotation-selector` picks.
const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// kwok, running against the envtest API server; killed on drop.
struct Kwok(std::process::Child);

impl Drop for Kwok {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_kwok(kwok: &Path, kubeconfig: &Path, log: &Path) -> Kwok {
    let stages = kwok.parent().expect("kwok dir").join("stages");
    let configs: Vec<String> = std::fs::read_dir(&stages)
        .expect("kwok stages")
        .filter_map(|e| e.ok().map(|e| e.path().display().to_string()))
        .collect();
    let child = Command::new(kwok)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--config={}", configs.join(",")))
        .arg(format!(
            "--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake"
        ))
        // Its kubelet-like server on loopback only (the default listens on every interface).
        .arg("--server-address=127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("kwok log"))
        .spawn()
        .expect("start kwok");
    Kwok(child)
}

fn node_name(i: usize) -> String {
    if i == 0 {
        "scale-cp-0".into()
    } else {
        format!("scale-w-{i}")
    }
}

/// The cluster file: node 0 the control plane, the rest workers labelled by rack (the drift check
/// compares every declared label with the Node's).
fn cluster_file(name: &str, n: usize) -> String {
    let mut s = format!(
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: {DEFAULT_VERSION}\n  provider: ssh\n  networking: {{podSubnet: 10.128.0.0/12, serviceSubnet: 10.96.0.0/16}}\n  nodes:\n"
    );
    for i in 0..n {
        let role = if i == 0 { "control-plane" } else { "worker" };
        s += &format!(
            "    - {{name: {}, role: {role}, address: 10.{}.{}.{}, labels: {{bench.clusterctl.io/rack: r{}}}}}\n",
            node_name(i),
            200 + i / 62500,
            (i / 250) % 250,
            i % 250 + 1,
            i % 10
        );
    }
    s
}

/// The N Nodes and 2 N Pods as one `v1.List` for one `kubectl create`.
fn objects(n: usize, namespace: &str) -> Value {
    let mut items = Vec::new();
    for i in 0..n {
        let node = node_name(i);
        items.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": node,
            "annotations": {KWOK_ANNOTATION: "fake"},
            "labels": {"type": "kwok", "bench.clusterctl.io/rack": format!("r{}", i % 10)}}}));
        for p in 0..PODS_PER_NODE {
            items.push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": format!("{node}-p{p}"), "namespace": namespace},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1"}]}}));
        }
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn kubectl(kubectl: &Path, kubeconfig: &Path) -> Command {
    let mut c = Command::new(kubectl);
    c.arg(format!("--kubeconfig={}", kubeconfig.display()));
    c
}

/// Waits until kwok reports every Node Ready and every Pod Running.
fn wait_simulated(kc: &Path, cfg: &Path, n: usize) -> Duration {
    let t = Instant::now();
    loop {
        let nodes = run(kubectl(kc, cfg).args([
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
        ]));
        let pods = run(kubectl(kc, cfg).args([
            "get",
            "pods",
            "-A",
            "--field-selector=status.phase=Running",
            "-o",
            "name",
        ]));
        let ready = String::from_utf8_lossy(&nodes.stdout)
            .lines()
            .filter(|l| *l == "True")
            .count();
        let running = String::from_utf8_lossy(&pods.stdout).lines().count();
        if ready == n && running == n * PODS_PER_NODE {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "kwok: {ready}/{n} nodes Ready, {running}/{} pods Running after 300 s",
            n * PODS_PER_NODE
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `cmd` under `/usr/bin/time`: wall time and peak RSS in MiB.
fn timed(cmd: &mut Command, scratch: &Path) -> (Duration, f64, Output) {
    let rss = scratch.join("rss");
    let mut wrapped = Command::new("/usr/bin/time");
    wrapped
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss)
        .arg(cmd.get_program());
    wrapped.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    let t = Instant::now();
    let out = wrapped.output().expect("spawn /usr/bin/time");
    let took = t.elapsed();
    let kib: f64 = std::fs::read_to_string(&rss)
        .unwrap_or_default()
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0.0);
    (took, kib / 1024.0, out)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

struct Row {
    n: usize,
    status: Duration,
    status_mib: f64,
    floor: Duration,
    drain: Duration,
    kubectl_drain: Duration,
}

/// One size: a fresh API server, kwok, the objects, then the measurements.
fn measure(n: usize, reps: usize, bins: &k8sbin::K8sBins, dir: &Path) -> Row {
    let env = Envtest::start().expect("envtest");
    let name = format!("scale{n}");
    let cfg: PathBuf = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&cfg, env.kubeconfig(&name)).expect("kubeconfig");
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, cluster_file(&name, n)).expect("cluster file");
    let _kwok = start_kwok(
        bins.path("kwok"),
        &cfg,
        &dir.join(format!("{name}-kwok.log")),
    );
    let ns = env.create_namespace("scale-").expect("namespace");
    let list = dir.join(format!("{name}-objects.json"));
    std::fs::write(&list, objects(n, &ns).to_string()).expect("objects");
    let kc = bins.path("kubectl");
    let t = Instant::now();
    run(kubectl(kc, &cfg).arg("create").arg("-f").arg(&list));
    let created = t.elapsed();
    let simulated = wait_simulated(kc, &cfg, n);
    println!(
        "scale: N={n}: {} objects created in {:.1} s, Ready/Running after {:.1} s more",
        n * (1 + PODS_PER_NODE),
        created.as_secs_f64(),
        simulated.as_secs_f64()
    );
    let (mut status, mut floor, mut mib) = (Vec::new(), Vec::new(), 0f64);
    for _ in 0..reps {
        let mut c = Command::new(env!("CARGO_BIN_EXE_clusterctl"));
        c.arg("status")
            .arg("-f")
            .arg(&file)
            .arg("--kubeconfig")
            .arg(&cfg)
            .args(["-o", "json"])
            .env("HOME", dir);
        let (took, rss, out) = timed(&mut c, dir);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert_eq!(
            report["result"],
            "ok",
            "status on {n} simulated nodes: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        status.push(took);
        mib = mib.max(rss);
        let t = Instant::now();
        run(kubectl(kc, &cfg).args(["get", "nodes", "-o", "json"]));
        run(kubectl(kc, &cfg).args(["get", "pods", "-A", "-o", "json"]));
        floor.push(t.elapsed());
    }
    let api = KubeClusterApi::from_kubeconfig(&cfg, Some(&name)).expect("client");
    let (ours, theirs) = drains(&api, kc, &cfg, n);
    Row {
        n,
        status: median(status),
        status_mib: mib,
        floor: median(floor),
        drain: ours,
        kubectl_drain: theirs,
    }
}

/// Drains the last node with clusterctl's drain and the one before with `kubectl drain`.
fn drains(api: &dyn ClusterApi, kc: &Path, cfg: &Path, n: usize) -> (Duration, Duration) {
    let (a, b) = (node_name(n - 1), node_name(n - 2));
    let t = Instant::now();
    let r = clusterctl_kubeapi::drain::drain(
        api,
        &a,
        Duration::from_secs(120),
        Duration::from_millis(200),
    )
    .expect("clusterctl drain");
    let ours = t.elapsed();
    assert_eq!(r.evicted.len(), PODS_PER_NODE, "{r:?}");
    let t = Instant::now();
    run(kubectl(kc, cfg).args([
        "drain",
        &b,
        "--ignore-daemonsets",
        "--force",
        "--timeout=120s",
    ]));
    (ours, t.elapsed())
}

fn main() {
    let short = std::env::var_os("BENCH_SHORT").is_some_and(|v| !v.is_empty() && v != "0");
    let sizes: &[usize] = if short { &[10] } else { &[10, 100, 1000] };
    let reps = if short { 1 } else { 5 };
    let Some(bins) = k8sbin::require_programs(DEFAULT_VERSION, &["kwok", "kubectl"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let rows: Vec<Row> = sizes
        .iter()
        .map(|&n| measure(n, reps, &bins, dir.path()))
        .collect();
    println!("scale: median of {reps}; ratio = clusterctl / kubectl");
    println!(
        "{:>6} {:>10} {:>9} {:>12} {:>6} {:>10} {:>13} {:>6}",
        "nodes", "status s", "RSS MiB", "kubectl s", "ratio", "drain s", "kubectl s", "ratio"
    );
    for r in &rows {
        println!(
            "{:>6} {:>10.3} {:>9.1} {:>12.3} {:>6.2} {:>10.3} {:>13.3} {:>6.2}",
            r.n,
            r.status.as_secs_f64(),
            r.status_mib,
            r.floor.as_secs_f64(),
            r.status.as_secs_f64() / r.floor.as_secs_f64(),
            r.drain.as_secs_f64(),
            r.kubectl_drain.as_secs_f64(),
            r.drain.as_secs_f64() / r.kubectl_drain.as_secs_f64()
        );
    }
}
