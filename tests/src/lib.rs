//! Test-bed harness for clusterctl's whole-system tests: uniquely named network namespaces, Docker node
//! containers built from a local Debian image, a loopback OCI registry, and recording stand-ins. Every
//! resource is removed by a drop guard. When `CI` is set, a missing capability fails instead of skipping.
//!
//! Modules are owned by area: `netns` (CNI), `docker` (node containers and the node image), `registry`
//! (OCI registry on loopback), `apiserver` (recording Kubernetes API server on loopback, lifecycle), `cli`
//! (running the clusterctl binary, cluster files for test nodes, stand-in installation; lifecycle), `k8sbin`
//! (upstream Kubernetes programs built from their Go modules by `scripts/k8s/build.sh`), `envtest` (a
//! real etcd + kube-apiserver on loopback for API tests) and `k8snode` (node containers with the real
//! kubeadm, kubelet and kubectl, and the version's images served to them from a registry);
//! `upstream`: published upstream files
//! the tests read from `../shared/upstream/` (Calico's CRDs and operator manifest); `keycloak`: a real
//! Keycloak on loopback as an OIDC issuer; `shape`: the sources' countable shape (import cycles, long
//! functions and files, provider matches) for the architecture checks.

pub mod apiserver;
pub mod aptrepo;
pub mod cli;
pub mod docker;
pub mod envtest;
pub mod k8sbin;
pub mod k8snode;
pub mod keycloak;
pub mod netns;
pub mod registry;
pub mod shape;
pub mod upstream;

use std::sync::atomic::{AtomicU32, Ordering};

/// Whether `program` is on `PATH` (`sh -c 'command -v PROGRAM'` succeeds); `false` when `sh` cannot run.
pub fn have(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Decides whether a test that needs `what` may run. Returns `true` when `available`; otherwise, when
/// the `CI` environment variable is set (CI must not skip silently) it panics naming the capability,
/// and outside CI it prints a skip line to stderr and returns `false`.
pub fn require(what: &str, available: bool) -> bool {
    if available {
        return true;
    }
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("required capability missing in CI: {what}");
    }
    eprintln!("SKIP: capability missing outside CI: {what}");
    false
}

/// A non-loopback address of this machine and a port nothing listens on there, so that an SSH
/// connection to it is refused at once (validation refuses loopback node addresses): the source
/// address of the route to a TEST-NET address (no packet is sent). `None` when there is no IPv4 route
/// — after [`require`] said so (which fails the test in CI).
pub fn refusing_address() -> Option<(String, u16)> {
    let udp = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
    let addr = match udp.connect("192.0.2.1:9").and_then(|_| udp.local_addr()) {
        Ok(a) => a.ip().to_string(),
        Err(e) => {
            require(&format!("an IPv4 route ({e})"), false);
            return None;
        }
    };
    let port = std::net::TcpListener::bind(format!("{addr}:0"))
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    Some((addr, port))
}

/// True when the process runs as root (uid 0).
pub fn is_root() -> bool {
    // SAFETY-free: read from /proc to avoid a libc dependency.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// A name unique to this test process and call: `<prefix><pid base36><counter>`, at most 15 bytes
/// when `prefix` is at most 5 bytes (fits Linux interface names).
pub fn unique_name(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    format!("{prefix}{}{}", to_base36(pid as u64), to_base36(n as u64))
}

fn to_base36(mut v: u64) -> String {
    const D: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(D[(v % 36) as usize]);
        v /= 36;
        if v == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}
