//! Benchmark (issue 28 item 4): NetworkPolicy enforcement by the builtin CNI agent side by side with
//! kube-network-policies (`sigs.k8s.io/kube-network-policies` v0.8.0, kind's kindnet enforcer, built
//! from its Go module by `scripts/k8s/build.sh VERSION kube-network-policies`), in one run on the
//! same node, API server, pods and policies (`world`): one node network namespace, pod namespaces
//! plumbed by the real plugin, a real kube-apiserver (envtest) holding the Pods (`status.podIP` set
//! as a kubelet would), Namespaces and NetworkPolicies; each subject a process of its own in the node
//! namespace (`subject`).
//!
//! Measured per subject:
//! * start: from the process start to the first probe a policy denies, with every policy present;
//! * time to enforcement: from the API call's return (create or delete) to the first probe that sees
//!   the change — a default deny, an allow on top of it, the allow deleted, the deny deleted — on a
//!   pod no other policy selects; TCP probes every ~20 ms (a denied probe waits 300 ms);
//! * CPU (seconds from the start, then % of a core while idle) and memory (RSS, peak) with the full
//!   set of policies and pods;
//! * pod-to-pod throughput through the node (iperf2, single TCP stream) to a pod the policies isolate
//!   with the fewer policies, against the floor: the same flow with no policy and no table at all,
//!   alternated round by round.
//!
//! Sizes: 1,000 policies over 200 pods in 10 namespaces, throughput with 100 policies, iperf 10 s × 3
//! rounds, 5 latency repetitions, 20 s idle. `BENCH_SHORT=1`: 50 policies over 10 pods, 10 policies,
//! 1 s × 1, 1 repetition, 2 s idle — proves the benchmark works. Ratios are printed, never asserted.
//! A subject that does not enforce (kube-network-policies on a kernel without `nft_queue`) is reported
//! with the errors of its log and left out of the figures. Results: docs/cni.md ("Side by side with
//! kube-network-policies").

mod subject;
#[path = "../../tests/it/support.rs"]
mod support;
mod world;

use clusterctl_testbed::envtest::Envtest;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};
use subject::{Iperf, Kind, Running};
use support::{listen, probe};
use world::{until, Pod, World};

/// The run's sizes.
struct Sizes {
    pods: usize,
    namespaces: usize,
    policies: usize,
    tput_policies: usize,
    iperf_secs: u32,
    rounds: usize,
    reps: usize,
    idle: Duration,
}

const FULL: Sizes = Sizes {
    pods: 200,
    namespaces: 10,
    policies: 1000,
    tput_policies: 100,
    iperf_secs: 10,
    rounds: 3,
    reps: 5,
    idle: Duration::from_secs(20),
};

const SHORT: Sizes = Sizes {
    pods: 10,
    namespaces: 2,
    policies: 50,
    tput_policies: 10,
    iperf_secs: 1,
    rounds: 1,
    reps: 1,
    idle: Duration::from_secs(2),
};

/// How long a subject may take to enforce its first policy after its start.
const START_LIMIT: Duration = Duration::from_secs(20);

/// The probe namespace's pods: `client` → `server` (iperf), `web` (latency), `sentinel` (start).
struct Probes {
    client: Pod,
    server: Pod,
    web: Pod,
    sentinel: Pod,
    _iperf: Iperf,
}

fn probes(w: &World) -> Probes {
    let ns = w.probe_ns.clone();
    let client = w.pod(&ns, "client", json!({"app": "client"}));
    let server = w.pod(&ns, "server", json!({"app": "server"}));
    let web = w.pod(&ns, "web", json!({"app": "web"}));
    let sentinel = w.pod(&ns, "sentinel", json!({"app": "sentinel"}));
    listen(&web.ns, 8080);
    listen(&sentinel.ns, 8080);
    let iperf = Iperf::serve(&server.ns);
    let t = Duration::from_millis(300);
    assert!(probe(&client.ns, web.ip, 8080, t) && probe(&client.ns, sentinel.ip, 8080, t));
    // The sentinel is denied by a policy of its own (a subject enforces once it is); the iperf server
    // is isolated, its iperf port allowed from the client.
    w.policy(
        &ns,
        "sentinel-deny",
        json!({"podSelector": {"matchLabels": {"app": "sentinel"}}, "policyTypes": ["Ingress"]}),
    );
    w.policy(
        &ns,
        "allow-iperf",
        json!({"podSelector": {"matchLabels": {"app": "server"}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}], "ports": [{"port": 5001}]}]}),
    );
    Probes {
        client,
        server,
        web,
        sentinel,
        _iperf: iperf,
    }
}

/// Starts `kind` and waits until it enforces (the sentinel denied): the time that took, or `None`
/// when the process exits or [`START_LIMIT`] passes first.
fn start_enforcing(w: &World, p: &Probes, kind: Kind, peer: &Path) -> (Running, Option<Duration>) {
    let t = Instant::now();
    let mut run = subject::start(w, kind, peer);
    loop {
        let step = t.elapsed() + Duration::from_secs(1);
        if let Some(d) = until(&p.client.ns, p.sentinel.ip, 8080, false, t, step) {
            return (run, Some(d));
        }
        if run.exited() || t.elapsed() > START_LIMIT {
            return (run, None);
        }
    }
}

/// Throughput rounds, alternated: the bare floor (no table at all), the node with no policy (the
/// agent's masquerade table, so connections are tracked as on a real node), then each enforcing
/// subject on that node. Mbit/s per column in that order.
fn throughput(w: &World, p: &Probes, s: &Sizes, kinds: &[Kind], peer: &Path) -> Vec<Vec<f64>> {
    let mut cols = vec![Vec::new(); kinds.len() + 2];
    let run_iperf = || subject::iperf(&p.client.ns, p.server.ip, s.iperf_secs);
    for _ in 0..s.rounds {
        w.masquerade(false);
        cols[0].push(run_iperf());
        w.masquerade(true);
        cols[1].push(run_iperf());
        for (i, &k) in kinds.iter().enumerate() {
            let (run, ready) = start_enforcing(w, p, k, peer);
            ready.unwrap_or_else(|| panic!("{} stopped enforcing", k.label()));
            cols[i + 2].push(run_iperf());
            drop(run);
        }
    }
    cols
}

/// What one subject did with the full set of policies.
struct Full {
    start: Duration,
    start_cpu: f64,
    idle_cpu_pct: f64,
    /// Per transition (deny, allow, allow deleted, deny deleted), the times of the repetitions.
    took: [Vec<Duration>; 4],
    cpu: f64,
    rss: f64,
    hwm: f64,
    table_lines: usize,
    applies_ms: Vec<f64>,
    reload_ms: Option<f64>,
}

fn full_run(w: &World, p: &Probes, s: &Sizes, kind: Kind, peer: &Path) -> Full {
    let (run, ready) = start_enforcing(w, p, kind, peer);
    let start = ready.unwrap_or_else(|| panic!("{} did not enforce", kind.label()));
    let start_cpu = run.cpu();
    std::thread::sleep(s.idle);
    let idle_cpu_pct = (run.cpu() - start_cpu) / s.idle.as_secs_f64() * 100.0;
    let mut took: [Vec<Duration>; 4] = Default::default();
    let ns = w.probe_ns.as_str();
    let limit = Duration::from_secs(10);
    let deny = json!({"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"]});
    let allow = json!({"podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}], "ports": [{"port": 8080}]}]});
    for _ in 0..s.reps {
        let steps: [(&dyn Fn() -> Instant, bool); 4] = [
            (&|| w.policy(ns, "deny-web", deny.clone()), false),
            (&|| w.policy(ns, "allow-web", allow.clone()), true),
            (&|| w.delete_policy(ns, "allow-web"), false),
            (&|| w.delete_policy(ns, "deny-web"), true),
        ];
        for (i, (change, want)) in steps.iter().enumerate() {
            let t = change();
            let d = until(&p.client.ns, p.web.ip, 8080, *want, t, limit).unwrap_or_else(|| {
                panic!("{}: transition {i} not seen in {limit:?}", kind.label())
            });
            took[i].push(d);
        }
    }
    let (rss, hwm) = run.memory();
    Full {
        start,
        start_cpu,
        idle_cpu_pct,
        took,
        cpu: run.cpu(),
        rss,
        hwm,
        table_lines: run.table_lines(),
        applies_ms: run.applies_ms(),
        reload_ms: run.reload_ms(),
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms(v: &[Duration]) -> f64 {
    median(
        &v.iter()
            .map(|d| d.as_secs_f64() * 1000.0)
            .collect::<Vec<_>>(),
    )
}

fn report_full(kind: Kind, f: &Full) {
    let t = &f.took;
    println!(
        "{:<22} start {:>6.0} ms (cpu {:.2} s) | deny {:>4.0} ms, allow {:>4.0} ms, allow deleted {:>4.0} ms, deny deleted {:>4.0} ms | idle cpu {:.1} % | cpu total {:.2} s | rss {:.1} MiB, peak {:.1} MiB | table {} lines",
        kind.label(), f.start.as_secs_f64() * 1000.0, f.start_cpu, ms(&t[0]), ms(&t[1]), ms(&t[2]), ms(&t[3]),
        f.idle_cpu_pct, f.cpu, f.rss, f.hwm, f.table_lines
    );
    if !f.applies_ms.is_empty() {
        println!(
            "{:<22} its applies (compile + nft -f): {} in this run, median {:.0} ms, max {:.0} ms; nft -f of the table alone {:.0} ms",
            "",
            f.applies_ms.len(),
            median(&f.applies_ms),
            f.applies_ms.iter().copied().fold(0.0, f64::max),
            f.reload_ms.unwrap_or(f64::NAN)
        );
    }
}

/// Tries the peer once with the throughput set: whether it enforces, and if not, why.
fn peer_enforces(w: &World, p: &Probes, peer: &Path) -> bool {
    let (mut run, ready) = start_enforcing(w, p, Kind::Peer, peer);
    if let Some(d) = ready {
        println!("kube-network-policies enforces ({d:?} after its start)");
        return true;
    }
    let why = if run.exited() {
        "exited"
    } else {
        "still running"
    };
    let (rss, hwm) = run.memory();
    println!(
        "kube-network-policies did NOT enforce within {START_LIMIT:?} ({why}; cpu {:.2} s, rss {rss:.1} MiB, peak {hwm:.1} MiB); its errors:",
        run.cpu()
    );
    for l in run.errors(12) {
        println!("  | {l}");
    }
    println!("  peer column: n/a (see docs/cni.md: this kernel has no nft_queue)");
    false
}

fn main() {
    if let Ok(node) = std::env::var(subject::AGENT_ENV) {
        subject::agent_main(&node);
        return;
    }
    let short = std::env::var_os("BENCH_SHORT").is_some();
    let s = if short { SHORT } else { FULL };
    let iperf = std::process::Command::new("iperf")
        .arg("-v")
        .output()
        .is_ok();
    if !clusterctl_testbed::require(
        "root with network namespaces",
        clusterctl_testbed::netns::available(),
    ) || !clusterctl_testbed::require(
        "iperf (Debian package iperf, scripts/packages/cni.list)",
        iperf,
    ) {
        return;
    }
    let Some(env) = Envtest::require_shared() else {
        return;
    };
    let version = clusterctl_testbed::k8sbin::DEFAULT_VERSION;
    let Some(bins) =
        clusterctl_testbed::k8sbin::require_programs(version, &["kube-network-policies"])
    else {
        return;
    };
    let peer = bins.path("kube-network-policies").to_path_buf();
    let t = Instant::now();
    let mut w = World::new(env);
    let p = probes(&w);
    w.bulk(s.namespaces, s.pods);
    w.policies_up_to(s.tput_policies - 2);
    println!(
        "set-up: {} pods, {} policies in {:.1} s",
        s.pods + 4,
        s.tput_policies,
        t.elapsed().as_secs_f64()
    );
    let mut kinds = vec![Kind::Ours];
    if peer_enforces(&w, &p, &peer) {
        kinds.push(Kind::Peer);
    }
    let tput = throughput(&w, &p, &s, &kinds, &peer);
    let (bare, floor) = (median(&tput[0]), median(&tput[1]));
    println!(
        "throughput, {} policies, iperf {} s x {} (median Mbit/s):",
        s.tput_policies, s.iperf_secs, s.rounds
    );
    println!("  no table at all         {bare:>8.0}   runs {:?}", tput[0]);
    println!(
        "  no policy (floor)       {floor:>8.0}   runs {:?}   ratio to no table {:.3}",
        tput[1],
        floor / bare
    );
    for (i, k) in kinds.iter().enumerate() {
        let m = median(&tput[i + 2]);
        println!(
            "  {:<22}  {m:>8.0}   runs {:?}   ratio to the floor {:.3} (goal >= 0.95), to no table {:.3}",
            k.label(),
            tput[i + 2],
            m / floor,
            m / bare
        );
    }
    w.policies_up_to(s.policies - 2);
    println!(
        "{} policies over {} pods ({} namespaces):",
        s.policies,
        s.pods + 4,
        s.namespaces + 1
    );
    let full: Vec<(Kind, Full)> = kinds
        .iter()
        .map(|&k| (k, full_run(&w, &p, &s, k, &peer)))
        .collect();
    for (k, f) in &full {
        report_full(*k, f);
    }
    if let [(_, ours), (_, theirs)] = full.as_slice() {
        println!(
            "ratios kube-network-policies / ours: start {:.2}, deny {:.2}, idle cpu {:.2}, rss {:.2}",
            theirs.start.as_secs_f64() / ours.start.as_secs_f64(),
            ms(&theirs.took[0]) / ms(&ours.took[0]),
            theirs.idle_cpu_pct / ours.idle_cpu_pct,
            theirs.rss / ours.rss
        );
    }
    let _ = &p.sentinel;
    println!("total {:.1} s", t.elapsed().as_secs_f64());
}
