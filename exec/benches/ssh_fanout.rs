//! Benchmark: connect + gather facts + a preflight-like command list over 1, 8 and 32 SSH node
//! containers (tests/src/docker.rs), clusterctl's `SshTransport` side by side with OpenSSH in the same
//! run. clusterctl: one thread per node, connect (host key checked), then each command as its own
//! `Transport::run` on the one reused connection, as the phases do. OpenSSH: one
//! `ssh root@node sh -s` per node running the same command list, all nodes in parallel. Both check
//! host keys against the same known_hosts file and use the same key. Reports wall time per node count
//! (median of the repetitions) and the ratio clusterctl / OpenSSH.
//!
//! `BENCH_SHORT=1`: 1 and 2 nodes, one repetition; proves the benchmark works and never fails on a
//! ratio. Needs root and a Docker engine (skips outside CI when missing, fails in CI).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clusterctl_exec::{Cmd, SshTransport, Transport};
use clusterctl_testbed::docker::{docker_available, ClusterOptions, TestCluster, TestNode};
use clusterctl_testbed::{is_root, require};

/// What `up` asks of every node before changing anything: facts (OS, arch, kernel, resources,
/// interfaces, existing Kubernetes state) and preflight checks (swap, modules, sysctls, ports,
/// cgroups, runtime, time).
const COMMANDS: &[&str] = &[
    "uname -srm",
    "cat /etc/os-release",
    "nproc; grep MemTotal /proc/meminfo",
    "ip -o addr show",
    "test -e /etc/kubernetes/admin.conf && echo present || echo absent",
    "swapon --show --noheadings 2>/dev/null | wc -l",
    "grep -sE '^(overlay|br_netfilter) ' /proc/modules; echo modules checked",
    "cat /proc/sys/net/ipv4/ip_forward",
    "ss -Htln '( sport = :6443 or sport = :10250 or sport = :2379 )' | wc -l",
    "stat -fc %T /sys/fs/cgroup",
    "systemctl is-active containerd || true",
    "command -v runc containerd",
];

fn clusterctl_side(nodes: &[TestNode]) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = nodes
            .iter()
            .map(|n| {
                s.spawn(move || {
                    let t = SshTransport::connect(n.ssh_target("root"), n.ssh_options())
                        .unwrap_or_else(|e| panic!("clusterctl connect {}: {e}", n.name));
                    for c in COMMANDS {
                        let out = t
                            .run(&Cmd::new(*c))
                            .unwrap_or_else(|e| panic!("{c} on {}: {e}", n.name));
                        assert!(
                            out.success() && !out.stdout.is_empty(),
                            "{c} on {}: {out:?}",
                            n.name
                        );
                    }
                })
            })
            .collect();
        for h in handles {
            if h.join().is_err() {
                panic!("a clusterctl node thread failed");
            }
        }
    });
    start.elapsed()
}

fn openssh_side(nodes: &[TestNode]) -> Duration {
    let script: String = COMMANDS.iter().map(|c| format!("{c}\n")).collect();
    let start = Instant::now();
    let children: Vec<_> = nodes
        .iter()
        .map(|n| {
            let mut child = Command::new("ssh")
                .arg("-i")
                .arg(&n.key_file)
                .args([
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "StrictHostKeyChecking=yes",
                    "-o",
                    "LogLevel=ERROR",
                ])
                .arg("-o")
                .arg(format!("UserKnownHostsFile={}", n.known_hosts.display()))
                .arg(format!("root@{}", n.address))
                .args(["sh", "-s"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn ssh");
            if let Some(mut i) = child.stdin.take() {
                i.write_all(script.as_bytes()).expect("write script");
            }
            (n.name.clone(), child)
        })
        .collect();
    for (name, child) in children {
        let out = child.wait_with_output().expect("wait ssh");
        assert!(
            out.status.success() && !out.stdout.is_empty(),
            "ssh {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    if !require(
        "root and a Docker engine (scripts/services/docker.sh)",
        is_root() && docker_available(),
    ) {
        return;
    }
    let short = std::env::var_os("BENCH_SHORT").is_some_and(|v| !v.is_empty() && v != "0");
    let sizes: &[usize] = if short { &[1, 2] } else { &[1, 8, 32] };
    let reps = if short { 1 } else { 5 };
    let max = sizes.iter().copied().max().unwrap_or(1);
    let boot = Instant::now();
    let cluster = TestCluster::start_with(ClusterOptions {
        prefix: "bfan".into(),
        nodes: max,
        boot_timeout: Duration::from_secs(180),
        ..Default::default()
    })
    .expect("test cluster");
    println!(
        "ssh_fanout: {max} node containers ready in {:.1} s",
        boot.elapsed().as_secs_f64()
    );
    println!(
        "ssh_fanout: {} commands per node (connect + facts + preflight), median of {reps}",
        COMMANDS.len()
    );
    println!(
        "{:>6} {:>14} {:>14} {:>8}",
        "nodes", "clusterctl s", "openssh s", "ratio"
    );
    for &n in sizes {
        let nodes = &cluster.nodes[..n];
        // Warm both paths once (page cache, sshd's first fork) so the first size is not penalised.
        let _ = clusterctl_side(nodes);
        let _ = openssh_side(nodes);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            ours.push(clusterctl_side(nodes));
            theirs.push(openssh_side(nodes));
        }
        let (o, t) = (median(ours), median(theirs));
        println!(
            "{:>6} {:>14.3} {:>14.3} {:>8.2}",
            n,
            o.as_secs_f64(),
            t.as_secs_f64(),
            o.as_secs_f64() / t.as_secs_f64()
        );
    }
    drop(cluster);
}
