//! `spec.proxy` (issue 27 item 6) on a real systemd node container over SSH: `up --only files,runtime`
//! writes containerd's and the kubelet's proxy drop-ins, reloads systemd and restarts containerd,
//! whose environment then holds the proxy and the completed `NO_PROXY`. A counting HTTP proxy of this
//! test (on the test network's gateway) is the only way to a registry (Debian's `docker-registry` on
//! this machine's loopback, named `registry.proxied.test`, a name the node cannot resolve): the real
//! containerd, asked over CRI by the real `crictl`, pulls an image from it through the proxy. Pulls
//! of a node address and of a `.svc` name go direct (they fail there: nothing listens / no such
//! name) and the proxy sees none of them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use clusterctl_testbed::cli::{ssh_cluster_yaml, Clusterctl, FileNode};
use clusterctl_testbed::docker::{docker, docker_available, TestCluster, TestNode};
use clusterctl_testbed::registry::{self, image, layer, Registry, Rng};
use clusterctl_testbed::{is_root, k8sbin, require};

/// The name the proxy alone resolves (to the loopback registry).
const PROXIED: &str = "registry.proxied.test";

/// A forward HTTP proxy (absolute-URI requests and `CONNECT`) that records every request's target
/// `host:port` and reaches only [`PROXIED`] (mapped to `127.0.0.1`); any other target is answered 502.
struct CountingProxy {
    addr: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl CountingProxy {
    fn start(ip: &str) -> CountingProxy {
        let listener = TcpListener::bind((ip, 0)).expect("proxy listen");
        let addr = listener.local_addr().expect("proxy addr").to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let log = log.clone();
                std::thread::spawn(move || serve(conn, &log));
            }
        });
        CountingProxy { addr, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// One client connection: the request head, then a byte pipe to the mapped target.
fn serve(client: TcpStream, log: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(client.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (authority, path) = if method == "CONNECT" {
        (target.to_string(), String::new())
    } else {
        let rest = target.strip_prefix("http://").unwrap_or(target);
        let (a, p) = rest.split_once('/').unwrap_or((rest, ""));
        (a.to_string(), format!("/{p}"))
    };
    let authority = if authority.contains(':') {
        authority
    } else {
        format!("{authority}:80")
    };
    if let Ok(mut l) = log.lock() {
        l.push(authority.clone());
    }
    let mut head = String::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if !h.to_ascii_lowercase().starts_with("proxy-") {
            head.push_str(&h);
        }
    }
    let mut client_w = client;
    let port = authority.rsplit_once(':').map(|(_, p)| p).unwrap_or("80");
    let upstream = match authority.rsplit_once(':') {
        Some((host, _)) if host == PROXIED => TcpStream::connect(format!("127.0.0.1:{port}")).ok(),
        _ => None,
    };
    let Some(mut up) = upstream else {
        let _ = client_w.write_all(
            b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        return;
    };
    if method == "CONNECT" {
        let _ = client_w.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
    } else {
        let version = parts.next().unwrap_or("HTTP/1.1");
        let _ = up.write_all(format!("{method} {path} {version}\r\n{head}\r\n").as_bytes());
    }
    // Whatever the reader buffered beyond the head, then both directions until either side closes.
    let buffered = reader.buffer().to_vec();
    let _ = up.write_all(&buffered);
    let mut up_r = up.try_clone().expect("clone");
    let mut client_r = reader.into_inner();
    let t = std::thread::spawn(move || {
        let _ = std::io::copy(&mut up_r, &mut client_w);
        let _ = client_w.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut client_r, &mut up);
    let _ = up.shutdown(Shutdown::Write);
    let _ = t.join();
}

fn sh(node: &TestNode, script: &str) -> String {
    node.sh(script).unwrap_or_else(|e| panic!("{e:#}"))
}

/// `crictl pull REF` on the node, through containerd's CRI socket: (exit status, output).
fn crictl_pull(node: &TestNode, reference: &str) -> (i32, String) {
    let (st, out, err) = node
        .exec(
            &format!("timeout 60 /usr/local/bin/crictl --runtime-endpoint unix:///run/containerd/containerd.sock --timeout 50s pull {reference}"),
            b"",
        )
        .expect("crictl");
    (st, format!("{out}{err}"))
}

#[test]
fn containerd_pulls_through_the_proxy_and_the_clusters_own_addresses_go_direct() {
    if !require(
        "root, a Docker engine and Debian's docker-registry",
        is_root() && docker_available() && registry::available(),
    ) {
        return;
    }
    let Some(bins) = k8sbin::require_programs("v1.34.4", &["crictl"]) else {
        return;
    };
    let started = std::time::Instant::now();
    let tc = TestCluster::start("prxy", 1).expect("node container");
    let n = &tc.nodes[0];
    docker(&[
        "cp",
        &bins.path("crictl").to_string_lossy(),
        &format!("{}:/usr/local/bin/crictl", n.name),
    ])
    .expect("crictl onto the node");
    let reg = Registry::start().expect("registry");
    let mut rng = Rng(27);
    let l = layer(&mut rng, "proxied", 4096).expect("layer");
    reg.push("app", "1", &image(&[l], "amd64", "proxied"))
        .expect("push");
    let reg_port = reg
        .addr()
        .rsplit_once(':')
        .map(|(_, p)| p.to_string())
        .unwrap();
    let proxy = CountingProxy::start(&tc.gateway);

    let dir = tempfile::tempdir().expect("tempdir");
    let extra = format!(
        "  proxy:\n    http: http://{p}\n    https: http://{p}\n    noProxy: [corp.example]\n",
        p = proxy.addr
    );
    let file = ssh_cluster_yaml(
        "prxy",
        &n.key_file,
        "builtin",
        None,
        &extra,
        &[FileNode::control_plane(n)],
    );
    std::fs::write(dir.path().join("cluster.yaml"), &file).expect("cluster file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), dir.path());
    let kh = n.known_hosts.to_string_lossy().into_owned();
    let r = cli
        .run(&[
            "up",
            "-f",
            "cluster.yaml",
            "--known-hosts",
            &kh,
            "--only",
            "files,runtime",
        ])
        .expect("up");
    assert_eq!(r.code, 0, "up --only files,runtime:\n{}", r.all());

    // The drop-ins are in place and containerd runs with them.
    let env = sh(n, "systemctl show containerd -p Environment");
    for want in [
        format!("HTTP_PROXY=http://{}", proxy.addr),
        format!("HTTPS_PROXY=http://{}", proxy.addr),
    ] {
        assert!(env.contains(&want), "{want} not in {env}");
    }
    let no_proxy = env
        .split_whitespace()
        .find_map(|w| w.strip_prefix("NO_PROXY="))
        .unwrap_or_else(|| panic!("no NO_PROXY in {env}"))
        .to_string();
    let entries: Vec<&str> = no_proxy.split(',').collect();
    for want in [
        "corp.example",
        "localhost",
        "127.0.0.1",
        n.address.as_str(),
        n.name.as_str(),
        "10.244.0.0/16",
        "10.96.0.0/16",
        ".svc",
        ".cluster.local",
    ] {
        assert!(entries.contains(&want), "{want} not in NO_PROXY {no_proxy}");
    }
    let kubelet = sh(
        n,
        "cat /etc/systemd/system/kubelet.service.d/20-clusterctl-proxy.conf",
    );
    assert!(
        kubelet.contains(&format!("Environment=\"NO_PROXY={no_proxy}\"")),
        "{kubelet}"
    );

    // containerd reaches the registry only through the proxy: plain HTTP for that name.
    let host = format!("{PROXIED}:{reg_port}");
    n.exec(
        &format!("mkdir -p /etc/containerd/certs.d/{host} && cat > /etc/containerd/certs.d/{host}/hosts.toml"),
        format!("server = \"http://{host}\"\n[host.\"http://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n").as_bytes(),
    )
    .expect("hosts.toml");
    let (st, out) = crictl_pull(n, &format!("{host}/app:1"));
    assert_eq!(st, 0, "pull through the proxy: {out}");
    let seen = proxy.seen();
    assert!(seen.iter().any(|s| s == &host), "proxy saw {seen:?}");

    // The cluster's own addresses go direct: the node's address (nothing listens on that port) and a
    // `.svc` name (no such name) fail on the node, and the proxy sees neither.
    let before = proxy.seen().len();
    let direct = [
        format!("{}:5999/app:1", n.address),
        "registry.kube-system.svc:5000/app:1".to_string(),
    ];
    for reference in &direct {
        let (st, out) = crictl_pull(n, reference);
        assert_ne!(st, 0, "{reference} pulled: {out}");
    }
    let after = proxy.seen();
    assert_eq!(
        after.len(),
        before,
        "the proxy saw in-cluster pulls: {:?}",
        &after[before..]
    );
    let mut by_target: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &after {
        *by_target.entry(s.as_str()).or_default() += 1;
    }
    eprintln!(
        "proxy requests by target: {by_target:?}; test took {:?}",
        started.elapsed()
    );
}
