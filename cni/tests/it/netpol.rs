//! NetworkPolicy enforced by the agent's policy loop (`clusterctl_cni::agent::netpol::watch::run`)
//! with real parts: a node network namespace, pod namespaces plumbed by the real plugin, the real
//! `nft` inside the node namespace, and a real kube-apiserver (envtest) holding the Namespaces,
//! Pods (their `status.podIP` set to what the plugin gave) and NetworkPolicies. Traffic is TCP
//! between small listeners inside the pod namespaces; a probe connects, sends a line and reads the
//! echo, so it passes only when the request and the reply both pass.

use crate::support::*;
use clusterctl_cni::agent::netpol::{self, Nft};
use clusterctl_testbed::envtest::Envtest;
use clusterctl_testbed::netns::{Netns, Underlay};
use serde_json::{json, Value};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one probe waits to connect and for the echo.
const PROBE: Duration = Duration::from_millis(300);

/// Probes until the flow's outcome is `want`; the time from `since` to the start of the first
/// probe that gave it. Panics after 5 s.
fn until(ns: &Netns, ip: Ipv4Addr, port: u16, want: bool, since: Instant) -> Duration {
    loop {
        let start = since.elapsed();
        if probe(ns, ip, port, PROBE) == want {
            return start;
        }
        assert!(
            since.elapsed() < Duration::from_secs(5),
            "{ip}:{port} still {}",
            if want { "blocked" } else { "open" }
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Pod {
    ns: Netns,
    ip: Ipv4Addr,
}

/// A pod namespace with an address from the real plugin, and its Pod object (`ports` as the
/// containers' ports) with `status.podIP` set.
fn pod(
    env: &Envtest,
    node: &Netns,
    conf: &str,
    ns: &str,
    name: &str,
    labels: Value,
    ports: Value,
) -> Pod {
    let pns = Netns::new("npp").expect("pod netns");
    let r = add(node, &format!("{ns}-{name}"), &pns, conf);
    assert!(r.ok, "ADD {name}: {} {}", r.stdout, r.stderr);
    let ip = result_ip(&r.json());
    let path = format!("/api/v1/namespaces/{ns}/pods");
    env.create(&path, &json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node.name(), "containers": [{"name": "c", "image": "x", "ports": ports}]}}))
        .expect("pod");
    env.merge_patch(&format!("{path}/{name}/status"),
        &json!({"status": {"phase": "Running", "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}]}}))
        .expect("pod status");
    Pod { ns: pns, ip }
}

fn policy(env: &Envtest, ns: &str, name: &str, spec: Value) -> Instant {
    env.create(
        &format!("/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"),
        &json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": name}, "spec": spec}),
    )
    .expect("policy");
    Instant::now()
}

fn delete_policy(env: &Envtest, ns: &str, name: &str) -> Instant {
    env.delete(&format!(
        "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{name}"
    ))
    .expect("delete policy");
    Instant::now()
}

/// The policy loop, as the agent runs it, on a thread; stopped (and joined) on drop.
struct Agent {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Agent {
    fn start(node: &Netns, kubeconfig: &std::path::Path) -> Agent {
        let stop = Arc::new(AtomicBool::new(false));
        let (n, kc, s) = (
            node.name().to_string(),
            kubeconfig.to_path_buf(),
            stop.clone(),
        );
        let nft = Nft(["ip", "netns", "exec", n.as_str(), "nft"]
            .map(String::from)
            .to_vec());
        let thread = std::thread::spawn(move || {
            netpol::watch::run(&n, Some(kc), &nft, Duration::from_secs(30), &s)
                .expect("policy loop");
        });
        Agent {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn policies_from_the_api_are_enforced_within_a_second_and_across_a_restart() {
    if !gate() {
        return;
    }
    let Some(env) = Envtest::require_shared() else {
        return;
    };
    // A node with an address of its own (the source of its connections to its pods).
    let underlay = Underlay::new(75).expect("underlay");
    let node = underlay.add_node(1500).expect("node").ns;
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("admin.conf");
    std::fs::write(&kc, env.kubeconfig("admin")).expect("kubeconfig");
    let conf = json!({"cniVersion": "1.0.0", "name": "nptest", "type": "clusterctl-cni",
        "podCIDR": "10.247.3.0/24", "dataDir": dir.path().join("ipam").display().to_string()})
    .to_string();
    let a_ns = env.create_namespace("npa").expect("namespace");
    let b_ns = env.create_namespace("npb").expect("namespace");
    env.merge_patch(
        &format!("/api/v1/namespaces/{b_ns}"),
        &json!({"metadata": {"labels": {"team": "b"}}}),
    )
    .expect("label");
    let client = json!({"app": "client"});
    let a = pod(env, &node, &conf, &a_ns, "a", client.clone(), json!([]));
    let srv = pod(
        env,
        &node,
        &conf,
        &a_ns,
        "srv",
        json!({"app": "server"}),
        json!([{"name": "http", "containerPort": 8080}]),
    );
    let c = pod(env, &node, &conf, &b_ns, "c", client.clone(), json!([]));
    let d = pod(
        env,
        &node,
        &conf,
        &b_ns,
        "d",
        json!({"app": "other"}),
        json!([]),
    );
    listen(&srv.ns, 8080);
    listen(&srv.ns, 9090);
    listen(&a.ns, 7070);
    listen(&d.ns, 7070);
    for (from, to, port) in [
        (&a, &srv, 8080),
        (&c, &srv, 9090),
        (&srv, &d, 7070),
        (&d, &a, 7070),
    ] {
        assert!(
            probe(&from.ns, to.ip, port, PROBE),
            "open before any policy"
        );
    }

    let agent = Agent::start(&node, &kc);
    // Default deny of ingress in a's namespace: new connections to its pods stop; the node reaches them.
    let t = policy(
        env,
        &a_ns,
        "deny-in",
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    );
    let deny_took = until(&a.ns, srv.ip, 8080, false, t);
    assert!(!probe(&c.ns, srv.ip, 8080, PROBE) && !probe(&d.ns, a.ip, 7070, PROBE));
    assert!(
        probe(&node, srv.ip, 8080, PROBE) && probe(&node, a.ip, 7070, PROBE),
        "the node reaches its pods"
    );

    // Allow clients of the same namespace on the named port http (8080): not 9090, not other namespaces.
    let t = policy(
        env,
        &a_ns,
        "allow-http",
        json!({"podSelector": {"matchLabels": {"app": "server"}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}], "ports": [{"port": "http"}]}]}),
    );
    let allow_took = until(&a.ns, srv.ip, 8080, true, t);
    assert!(!probe(&a.ns, srv.ip, 9090, PROBE), "another port");
    assert!(
        !probe(&c.ns, srv.ip, 8080, PROBE),
        "a client of another namespace"
    );

    // Egress deny on the server: its own connections stop, replies of allowed connections pass.
    let t = policy(
        env,
        &a_ns,
        "srv-no-egress",
        json!({"podSelector": {"matchLabels": {"app": "server"}},
        "policyTypes": ["Egress"]}),
    );
    until(&srv.ns, d.ip, 7070, false, t);
    assert!(!probe(&srv.ns, a.ip, 7070, PROBE), "egress denied");
    assert!(
        probe(&a.ns, srv.ip, 8080, PROBE),
        "replies of an allowed connection pass"
    );

    // ipBlock with except: a's 7070 from the pod range except c.
    let t = policy(
        env,
        &a_ns,
        "a-from-block",
        json!({"podSelector": {"matchLabels": {"app": "client"}},
        "ingress": [{"from": [{"ipBlock": {"cidr": "10.247.3.0/24", "except": [format!("{}/32", c.ip)]}}],
                     "ports": [{"port": 7070, "endPort": 7071}]}]}),
    );
    until(&d.ns, a.ip, 7070, true, t);
    assert!(!probe(&c.ns, a.ip, 7070, PROBE), "the except");

    // A restart: the table stays while no agent runs; a change made meanwhile is applied at start.
    drop(agent);
    let probing = Arc::new(AtomicBool::new(true));
    let leaked = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut leaked = 0;
            while probing.load(Ordering::Relaxed) {
                leaked += usize::from(probe(&c.ns, srv.ip, 8080, PROBE));
            }
            leaked
        });
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            probe(&a.ns, srv.ip, 8080, PROBE),
            "allowed while no agent runs"
        );
        delete_policy(env, &a_ns, "allow-http");
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            probe(&a.ns, srv.ip, 8080, PROBE),
            "the old rules stand until the agent is back"
        );
        let t = Instant::now();
        let agent = Agent::start(&node, &kc);
        let back = until(&a.ns, srv.ip, 8080, false, t);
        probing.store(false, Ordering::Relaxed);
        eprintln!("restarted agent enforced the change made while it was down after {back:?}");
        drop(agent);
        watcher.join().expect("watcher")
    });
    assert_eq!(leaked, 0, "a denied flow passed during the restart");
    let out = node
        .exec("nft", &["list", "table", "inet", "clusterctl-netpol"])
        .expect("nft");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("set ingress_isolated"),
        "the table stays after the agent stops: {table}"
    );

    // A reboot: the kernel's tables are gone (the node's nftables empty) and the agent starts again
    // (its systemd unit; cni_containerd2.rs restarts a node container and sees it run): it programs
    // the deny from the API again.
    node.exec("nft", &["delete", "table", "inet", "clusterctl-netpol"])
        .expect("nft");
    assert!(
        probe(&c.ns, srv.ip, 9090, PROBE),
        "no table: nothing denied"
    );
    let t = Instant::now();
    let agent = Agent::start(&node, &kc);
    let reboot_took = until(&c.ns, srv.ip, 9090, false, t);
    eprintln!(
        "after the simulated reboot the deny was enforced again {reboot_took:?} after the start"
    );

    // Deleting the deny opens the namespace again.
    let t = delete_policy(env, &a_ns, "deny-in");
    let open_took = until(&c.ns, srv.ip, 9090, true, t);
    drop(agent);
    eprintln!("deny took effect after {deny_took:?}, an allow after {allow_took:?}, removing the deny after {open_took:?}");
    for took in [deny_took, allow_took, open_took, reboot_took] {
        assert!(took < Duration::from_secs(1), "took {took:?}");
    }
}

/// Every construct the compiler emits is accepted by the real `nft`: UDP and SCTP ports, ranges,
/// named ports, interval sets, empty sets; applying twice replaces the table.
#[test]
fn every_construct_is_accepted_by_nft() {
    if !gate() {
        return;
    }
    let ns = Netns::new("npt").expect("netns");
    let pods: Vec<k8s_openapi::api::core::v1::Pod> = serde_json::from_value(json!([
        {"metadata": {"namespace": "a", "name": "w", "labels": {"app": "w"}},
         "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "x",
            "ports": [{"name": "h", "containerPort": 80}, {"name": "s", "containerPort": 99, "protocol": "SCTP"}]}]},
         "status": {"podIP": "10.1.0.2"}}])).unwrap();
    let pol: Vec<k8s_openapi::api::networking::v1::NetworkPolicy> = serde_json::from_value(json!([
        {"metadata": {"namespace": "a", "name": "p"},
         "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
           "ingress": [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}, {"podSelector": {}}],
                        "ports": [{"port": "h"}, {"port": "s", "protocol": "SCTP"}, {"port": 1000, "endPort": 2000, "protocol": "UDP"}]}],
           "egress": [{"ports": [{"protocol": "UDP"}, {"port": 53}]}, {"to": [{"podSelector": {"matchLabels": {"x": "y"}}}]}]}}])).unwrap();
    let rs = netpol::compile("n", &pol, &pods, &[]);
    let nft = Nft(["ip", "netns", "exec", ns.name(), "nft"]
        .map(String::from)
        .to_vec());
    nft.apply(&rs).expect("nft accepts the script");
    nft.apply(&rs).expect("and replaces the table");
    let listed = nft
        .run(&["list", "table", "inet", "clusterctl-netpol"], "")
        .expect("list");
    // nft lists `meta l4proto P th dport` as `P dport`.
    for want in [
        "ip daddr 10.1.0.2 sctp dport 99",
        "udp dport 1000-2000",
        "tcp dport 53 goto egress_allowed",
        "counter",
    ] {
        assert!(listed.contains(want), "{want:?} in {listed}");
    }
    nft.remove().expect("remove");
    nft.remove().expect("remove twice");
}
