//! The benchmark's world: one node network namespace on an underlay, pod namespaces plumbed by the
//! real plugin (the bytes `up` installs), their Pod objects on a real kube-apiserver (envtest) with
//! `status.podIP` set as a kubelet would, the NetworkPolicies, a ServiceAccount token both subjects
//! authenticate with, and a relay that makes the API server reachable on `127.0.0.1:<its port>`
//! from inside the node namespace (where both subjects run).

use crate::support::{in_ns, probe};
use clusterctl_testbed::envtest::Envtest;
use clusterctl_testbed::netns::{Netns, Node, Underlay};
use serde_json::{json, Value};
use std::io::Write;
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Namespace, ServiceAccount and token the subjects run as (bound to `cluster-admin`).
const SA: &str = "netpol-bench";

/// A pod: its network namespace and the address the plugin gave it.
pub(crate) struct Pod {
    pub(crate) ns: Netns,
    pub(crate) ip: Ipv4Addr,
}

/// Everything the subjects and the probes share.
pub(crate) struct World {
    pub(crate) env: &'static Envtest,
    _underlay: Underlay,
    pub(crate) node: Node,
    pub(crate) dir: tempfile::TempDir,
    conf: String,
    /// The probe namespace (client, server, web, sentinel).
    pub(crate) probe_ns: String,
    /// The background namespaces the bulk of the pods and policies live in.
    pub(crate) bulk_ns: Vec<String>,
    pub(crate) bulk_pods: Vec<Pod>,
    /// Background policies created so far.
    pub(crate) policies: usize,
}

impl World {
    /// The node namespace, the relay, the ServiceAccount and the probe namespace.
    pub(crate) fn new(env: &'static Envtest) -> World {
        let underlay = Underlay::new(76).expect("underlay");
        let node = underlay.add_node(1500).expect("node");
        relay(&node.ns, env.addr());
        let dir = tempfile::tempdir().expect("tempdir");
        let conf = json!({"cniVersion": "1.0.0", "name": "npbench", "type": "clusterctl-cni",
            "podCIDR": "10.246.0.0/16", "dataDir": dir.path().join("ipam").display().to_string()})
        .to_string();
        let installed = dir.path().join("clusterctl-cni");
        clusterctl_cni_embed::install(&installed).expect("write the embedded plugin");
        let probe_ns = env.create_namespace("npbp").expect("namespace");
        let token = service_account(env, &probe_ns);
        // The token and CA the peer reads as in-cluster files; ours reads the kubeconfig.
        std::fs::write(dir.path().join("token"), &token).expect("token");
        std::fs::write(dir.path().join("ca.crt"), env.ca_pem()).expect("ca");
        let kc = env.kubeconfig_with_token("bench", &token);
        std::fs::write(dir.path().join("kubeconfig"), kc).expect("kubeconfig");
        let w = World {
            env,
            _underlay: underlay,
            node,
            dir,
            conf,
            probe_ns,
            bulk_ns: Vec::new(),
            bulk_pods: Vec::new(),
            policies: 0,
        };
        w.masquerade(true);
        w
    }

    /// The node's name (its namespace's), which every Pod's `spec.nodeName` carries.
    pub(crate) fn node_name(&self) -> &str {
        self.node.ns.name()
    }

    /// Installs (`true`) or removes the agent's masquerade table (`ip clusterctl-cni`, what the agent
    /// installs on every node, `clusterctl_cni::agent::masq::script`) in the node namespace. Its NAT
    /// rule turns connection tracking on for the namespace, as on a real node (kube-proxy's rules do
    /// too); without any table the kernel tracks no connection at all.
    pub(crate) fn masquerade(&self, on: bool) {
        let cidr = "10.246.0.0/16".parse().expect("cidr");
        let script = if on {
            clusterctl_cni::agent::masq::script(cidr)
        } else {
            format!("delete table ip {}\n", clusterctl_cni::agent::masq::TABLE)
        };
        let mut c = self
            .node
            .ns
            .command("nft")
            .args(["-f", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("nft");
        c.stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("script");
        assert!(c.wait().expect("nft").success(), "nft -f: {script}");
    }

    /// The kubeconfig file holding the token.
    pub(crate) fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// A pod namespace with an address from the real plugin (ADD as a runtime calls it) and its Pod
    /// object in `ns` with `labels` and `status.podIP`.
    pub(crate) fn pod(&self, ns: &str, name: &str, labels: Value) -> Pod {
        let pns = Netns::new("nbp").expect("pod netns");
        let ip = self.add(&format!("{ns}-{name}"), &pns);
        let path = format!("/api/v1/namespaces/{ns}/pods");
        self.env.create(&path, &json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": self.node_name(), "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1",
                "ports": [{"name": "http", "containerPort": 8080}]}]}}))
            .expect("pod");
        self.env
            .merge_patch(
                &format!("{path}/{name}/status"),
                &json!({"status": {"phase": "Running", "podIP": ip.to_string(),
                    "podIPs": [{"ip": ip.to_string()}],
                    "conditions": [{"type": "Ready", "status": "True"}]}}),
            )
            .expect("pod status");
        Pod { ns: pns, ip }
    }

    fn add(&self, cid: &str, pod: &Netns) -> Ipv4Addr {
        let out = self
            .node
            .ns
            .command(&self.dir.path().join("clusterctl-cni").display().to_string())
            .env_clear()
            .env("CNI_COMMAND", "ADD")
            .env("CNI_CONTAINERID", cid)
            .env("CNI_NETNS", pod.path())
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", "/usr/lib/cni")
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                c.stdin
                    .take()
                    .expect("stdin")
                    .write_all(self.conf.as_bytes())?;
                c.wait_with_output()
            })
            .expect("plugin ADD");
        let r: Value = serde_json::from_slice(&out.stdout).expect("ADD result");
        let a = r["ips"][0]["address"].as_str().expect("address");
        a.split('/')
            .next()
            .and_then(|s| s.parse().ok())
            .expect("IPv4")
    }

    /// `count` background pods over `namespaces` new namespaces (labels `team: t<i % 3>`), each pod
    /// labelled `app: a<i % 10>`, `role: r<i % 4>`.
    pub(crate) fn bulk(&mut self, namespaces: usize, count: usize) {
        for i in 0..namespaces {
            let ns = self.env.create_namespace("npbb").expect("namespace");
            self.env
                .merge_patch(
                    &format!("/api/v1/namespaces/{ns}"),
                    &json!({"metadata": {"labels": {"team": format!("t{}", i % 3)}}}),
                )
                .expect("label");
            self.bulk_ns.push(ns);
        }
        for i in 0..count {
            let ns = self.bulk_ns[i % namespaces].clone();
            let labels = json!({"app": format!("a{}", i % 10), "role": format!("r{}", i % 4)});
            let p = self.pod(&ns, &format!("p{i}"), labels);
            self.bulk_pods.push(p);
        }
    }

    /// Creates background policies until there are `total`: policy i in namespace i mod N selects
    /// `app: a<i % 10>` and allows ingress from `role: r<i % 4>` pods and from namespaces of team
    /// `t<i % 3>` on one port (every third also a port range, UDP); every other policy also
    /// isolates egress, allowing DNS and one `ipBlock` with an `except`.
    pub(crate) fn policies_up_to(&mut self, total: usize) {
        while self.policies < total {
            let i = self.policies;
            let ns = &self.bulk_ns[i % self.bulk_ns.len()];
            let mut ports = vec![json!({"port": 1000 + (i % 50) as u32})];
            if i.is_multiple_of(3) {
                ports.push(json!({"protocol": "UDP", "port": 2000, "endPort": 2100}));
            }
            let mut spec = json!({"podSelector": {"matchLabels": {"app": format!("a{}", i % 10)}},
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": format!("r{}", i % 4)}}},
                                      {"namespaceSelector": {"matchLabels": {"team": format!("t{}", i % 3)}}}],
                             "ports": ports}]});
            if i.is_multiple_of(2) {
                spec["policyTypes"] = json!(["Ingress", "Egress"]);
                spec["egress"] = json!([{"ports": [{"protocol": "UDP", "port": 53}]},
                    {"to": [{"ipBlock": {"cidr": "10.246.0.0/16", "except": [format!("10.246.{}.0/24", i % 200)]}}]}]);
            }
            self.policy(ns, &format!("bg-{i}"), spec);
            self.policies += 1;
        }
    }

    /// Creates one NetworkPolicy; the instant the API call returned.
    pub(crate) fn policy(&self, ns: &str, name: &str, spec: Value) -> Instant {
        self.env
            .create(
                &format!("/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"),
                &json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                        "metadata": {"name": name}, "spec": spec}),
            )
            .expect("policy");
        Instant::now()
    }

    /// Deletes one NetworkPolicy; the instant the API call returned.
    pub(crate) fn delete_policy(&self, ns: &str, name: &str) -> Instant {
        self.env
            .delete(&format!(
                "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{name}"
            ))
            .expect("delete policy");
        Instant::now()
    }
}

/// A ServiceAccount in `ns` bound to `cluster-admin`, and a one-hour token of it (TokenRequest).
fn service_account(env: &Envtest, ns: &str) -> String {
    env.create(
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA}}),
    )
    .expect("service account");
    env.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{SA}-{ns}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": ns}]}),
    )
    .expect("binding");
    let r = env
        .create(
            &format!("/api/v1/namespaces/{ns}/serviceaccounts/{SA}/token"),
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"expirationSeconds": 3600}}),
        )
        .expect("token");
    r["status"]["token"].as_str().expect("token").to_string()
}

/// Listens on `127.0.0.1:<addr's port>` inside `ns` and relays each connection to `addr` (the
/// API server on this machine's loopback), so a process in the node namespace reaches it at the
/// address its certificate names.
fn relay(ns: &Netns, addr: std::net::SocketAddr) {
    let l = in_ns(ns, || TcpListener::bind(("127.0.0.1", addr.port()))).expect("relay");
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let Ok(up) = TcpStream::connect(addr) else {
                continue;
            };
            for (mut from, mut to) in [
                (
                    c.try_clone().expect("clone"),
                    up.try_clone().expect("clone"),
                ),
                (up, c),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(Shutdown::Write);
                });
            }
        }
    });
}

/// Probes (every ~20 ms) until the flow's outcome is `want`: the time from `since` to the start of
/// the first probe that gave it, or `None` after `limit`. Waiting for a denial, a probe counts as
/// denied after 300 ms without an answer (a slow answer on a loaded machine is not taken for a
/// denial); waiting for an opening, a probe gives up after 50 ms (a denied SYN is dropped, so each
/// failed probe costs its timeout: the shorter one keeps the resolution near 70 ms).
pub(crate) fn until(
    ns: &Netns,
    ip: Ipv4Addr,
    port: u16,
    want: bool,
    since: Instant,
    limit: Duration,
) -> Option<Duration> {
    loop {
        let start = since.elapsed();
        let t = Duration::from_millis(if want { 50 } else { 300 });
        if probe(ns, ip, port, t) == want {
            return Some(start);
        }
        if since.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
