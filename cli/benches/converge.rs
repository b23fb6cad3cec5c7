//! Benchmark (issue 29 item 3, the SSH side): how a no-change `up` — the converge check a user runs
//! to ask "is the cluster still what the file says?" — grows with the number of SSH nodes, side by
//! side with its floor in the same run.
//!
//! Per N (10, 30, 100): N light node containers over real SSH (`StandinCluster`: systemd + sshd,
//! the recording kubeadm/kubelet/kubectl stand-ins, no real kubelet) and the recording API server the
//! stand-ins' `admin.conf` points at, serving the N Nodes Ready. A first `up` (1 control plane,
//! N − 1 workers, `cni: none`) builds the cluster (its time is printed, not compared); then each
//! repetition runs `up` again, which must say "is up to date; nothing changed": its wall time and peak
//! RSS (`/usr/bin/time -f %M`). The floor: the least any converge check over SSH must do — one
//! OpenSSH connection per node, all in parallel, reading clusterctl's state record
//! (`/var/lib/clusterctl/state.json`) with the same key and known_hosts file. Goal (issue 29): under
//! 10 s at 100 nodes, linear; the ratio clusterctl / floor and the time per node are printed and never
//! fail the run.
//!
//! `CONVERGE_SIZES=10,100` chooses the sizes, `CONVERGE_PARALLEL=N` passes `up --parallel N`.
//! `BENCH_SHORT=1`: N = 3, one repetition (proves the benchmark works). Needs root and a Docker engine
//! (skips outside CI when missing, fails in CI). By hand: `cargo bench -p clusterctl --bench converge`
//! (results in docs/performance.md, "The converge check over SSH").

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clusterctl_testbed::cli::{
    install_standins, ssh_cluster_yaml, Clusterctl, FileNode, StandinApi, StandinCluster,
};
use clusterctl_testbed::docker::{docker_available, TestNode};
use clusterctl_testbed::{is_root, require};

/// The preflight checks node containers cannot pass (as the whole-system tests ignore them).
const IGNORE: &str = "time-sync,module/br_netfilter,node-environment,resolv-conf";
/// Stand-ins installed on this many nodes at once.
const INSTALL_WIDTH: usize = 10;

/// One size's figures.
struct Row {
    n: usize,
    first_up: Duration,
    converge: Duration,
    converge_mib: f64,
    floor: Duration,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Installs the stand-ins on every node, [`INSTALL_WIDTH`] at a time.
fn install_all(nodes: &[TestNode]) {
    for chunk in nodes.chunks(INSTALL_WIDTH) {
        std::thread::scope(|s| {
            for n in chunk {
                s.spawn(move || install_standins(n).expect("stand-ins"));
            }
        });
    }
}

/// `--parallel N` when `CONVERGE_PARALLEL=N` is set (else `up`'s default, 16).
fn parallel_flag() -> Vec<String> {
    std::env::var("CONVERGE_PARALLEL")
        .ok()
        .map(|n| vec!["--parallel".to_string(), n])
        .unwrap_or_default()
}

/// `clusterctl up` with the file in `home`, under `/usr/bin/time`: (output, wall time, peak RSS MiB).
fn up(cli: &Clusterctl, home: &Path, known_hosts: &Path) -> (String, Duration, f64) {
    let rss = home.join("rss");
    let t = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss)
        .arg(&cli.bin)
        .args(["up", "-f", "cluster.yaml", "--ready-timeout", "120"])
        .arg("--known-hosts")
        .arg(known_hosts)
        .args(["--ignore-preflight", IGNORE])
        .args(parallel_flag())
        .current_dir(home)
        .env("HOME", home)
        .env_remove("XDG_CACHE_HOME")
        .env("KUBECONFIG", cli.kubeconfig())
        .output()
        .expect("run clusterctl up");
    let took = t.elapsed();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "up failed:\n{text}");
    let kib: f64 = std::fs::read_to_string(&rss)
        .ok()
        .and_then(|s| s.trim().lines().last()?.trim().parse().ok())
        .unwrap_or(0.0);
    (text, took, kib / 1024.0)
}

/// The floor: every node's state record read over OpenSSH, all nodes in parallel.
fn floor(nodes: &[TestNode]) -> Duration {
    let t = Instant::now();
    let children: Vec<_> = nodes
        .iter()
        .map(|n| {
            Command::new("ssh")
                .arg("-i")
                .arg(&n.key_file)
                .args(["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"])
                .arg("-o")
                .arg(format!("UserKnownHostsFile={}", n.known_hosts.display()))
                .arg(format!("root@{}", n.address))
                .arg("cat /var/lib/clusterctl/state.json")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn ssh")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().expect("ssh");
        assert!(
            out.status.success() && !out.stdout.is_empty(),
            "reading the state record: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    t.elapsed()
}

/// Builds an N-node cluster on stand-ins, then measures `reps` no-change `up`s and floors.
fn measure(n: usize, reps: usize) -> Row {
    // Many systemd containers booting at once on two cores: 120 s and 2 s more per node.
    let boot = Duration::from_secs(120 + 2 * n as u64);
    let sc = StandinCluster::start_booting_within("cv", n, boot).expect("node containers");
    let tc = &sc.cluster;
    install_all(&tc.nodes);
    let api = StandinApi::start(&tc.gateway, sc.store.path()).expect("api server");
    let names: Vec<&str> = tc.nodes.iter().map(|n| n.name.as_str()).collect();
    api.serve_nodes(&names);
    api.serve_control_plane_pods(&names[..1]);
    let file_nodes: Vec<FileNode> = tc
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            if i == 0 {
                FileNode::control_plane(node)
            } else {
                FileNode::worker(node)
            }
        })
        .collect();
    let home = tempfile::tempdir().expect("home");
    std::fs::write(
        home.path().join("cluster.yaml"),
        ssh_cluster_yaml("cvlab", &tc.key.private, "none", None, "", &file_nodes),
    )
    .expect("cluster file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), home.path());
    let kh = &tc.nodes[0].known_hosts;
    let (_, first_up, _) = up(&cli, home.path(), kh);
    let mut converge = Vec::new();
    let mut mib: f64 = 0.0;
    let mut floors = Vec::new();
    for _ in 0..reps {
        let (out, took, m) = up(&cli, home.path(), kh);
        assert!(
            out.contains("is up to date; nothing changed"),
            "the second up changed something:\n{out}"
        );
        converge.push(took);
        mib = mib.max(m);
        floors.push(floor(&tc.nodes));
    }
    Row {
        n,
        first_up,
        converge: median(converge),
        converge_mib: mib,
        floor: median(floors),
    }
}

fn main() {
    if !require("root and a Docker engine", is_root() && docker_available()) {
        return;
    }
    let short = std::env::var_os("BENCH_SHORT").is_some_and(|v| !v.is_empty() && v != "0");
    let sizes: Vec<usize> = match std::env::var("CONVERGE_SIZES") {
        Ok(v) => v.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
        Err(_) if short => vec![3],
        Err(_) => vec![10, 30, 100],
    };
    let reps = if short { 1 } else { 3 };
    let rows: Vec<Row> = sizes.iter().map(|&n| measure(n, reps)).collect();
    println!("converge: a no-change `up` over SSH (--parallel {}), median of {reps}; floor = OpenSSH reading every node's state record in parallel",
        std::env::var("CONVERGE_PARALLEL").unwrap_or_else(|_| "16, the default".into()));
    println!(
        "{:>6} {:>11} {:>11} {:>9} {:>9} {:>7} {:>13}",
        "nodes", "first up s", "no-change s", "RSS MiB", "floor s", "ratio", "ms per node"
    );
    for r in &rows {
        println!(
            "{:>6} {:>11.1} {:>11.3} {:>9.1} {:>9.3} {:>7.2} {:>13.1}",
            r.n,
            r.first_up.as_secs_f64(),
            r.converge.as_secs_f64(),
            r.converge_mib,
            r.floor.as_secs_f64(),
            r.converge.as_secs_f64() / r.floor.as_secs_f64(),
            r.converge.as_secs_f64() * 1000.0 / r.n as f64
        );
    }
}
