//! Shared helpers of the plugin tests of this crate: the dedicated `clusterctl-cni` binary (the
//! plugin alone) invoked exactly as a runtime does — environment + stdin, inside a node's network
//! namespace — reading results and the IPAM state, and where the test bed keeps the reference CNI
//! plugins built from their Go module (`scripts/k8s/build.sh`, layout in `scripts/k8s/paths.sh`).
#![allow(dead_code)]

use clusterctl_testbed::netns::Netns;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// True when the test may run (root and network namespaces); fails in CI when not.
pub(crate) fn gate() -> bool {
    clusterctl_testbed::require(
        "root with network namespaces (ip netns add)",
        clusterctl_testbed::netns::available(),
    )
}

/// The plugin binary this crate builds (the one the benchmark times and `up` installs).
pub(crate) fn plugin_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_clusterctl-cni"))
}

/// The reference CNI plugins the test bed builds for its Kubernetes version from their Go module
/// (containernetworking/plugins v1.10.0 for v1.34.4): a CNI bin dir, built by `scripts/k8s/build.sh`
/// when missing (`clusterctl_testbed::k8sbin`). `None` after a skip line when they cannot be built
/// outside CI; in CI that fails the test.
pub(crate) fn reference_plugins() -> Option<PathBuf> {
    let version = clusterctl_testbed::k8sbin::DEFAULT_VERSION;
    let bins = clusterctl_testbed::k8sbin::require_programs(version, &["cni-plugins"])?;
    Some(bins.path("cni-plugins").to_path_buf())
}

/// One plugin invocation's outcome.
#[derive(Debug)]
pub(crate) struct Call {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Call {
    /// stdout as JSON (Null when empty).
    pub(crate) fn json(&self) -> Value {
        if self.stdout.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&self.stdout)
                .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", self.stdout))
        }
    }
    /// The CNI error code of a failed call.
    pub(crate) fn code(&self) -> u64 {
        assert!(!self.ok, "expected a failure, got success: {}", self.stdout);
        self.json()["code"]
            .as_u64()
            .unwrap_or_else(|| panic!("no code in {}", self.stdout))
    }
}

/// Runs plugin binary `prog` inside `node` with the `CNI_*` variables set and `conf` on stdin;
/// `CNI_PATH` is `cni_path`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    prog: &Path,
    node: &Netns,
    cmd: &str,
    cid: &str,
    netns: Option<&Path>,
    ifname: &str,
    conf: &str,
    cni_path: &Path,
) -> Call {
    let mut c = node.command(prog.to_str().expect("utf8 path"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CNI_COMMAND", cmd)
        .env("CNI_CONTAINERID", cid)
        .env("CNI_IFNAME", ifname)
        .env("CNI_PATH", cni_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(n) = netns {
        c.env("CNI_NETNS", n);
    }
    let mut child = c.spawn().expect("spawn plugin");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(conf.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait plugin");
    Call {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// ADD of our plugin for `cid` into `pod`, eth0.
pub(crate) fn add(node: &Netns, cid: &str, pod: &Netns, conf: &str) -> Call {
    let p = plugin_path();
    run(
        &p,
        node,
        "ADD",
        cid,
        Some(&pod.path()),
        "eth0",
        conf,
        p.parent().expect("dir"),
    )
}

/// DEL of our plugin for `cid`, eth0, that must succeed.
pub(crate) fn del(node: &Netns, cid: &str, pod: Option<&Netns>, conf: &str) {
    let p = plugin_path();
    let ns = pod.map(|p| p.path());
    let c = run(
        &p,
        node,
        "DEL",
        cid,
        ns.as_deref(),
        "eth0",
        conf,
        p.parent().expect("dir"),
    );
    assert!(c.ok, "DEL {cid}: {} {}", c.stdout, c.stderr);
}

/// The first IPv4 address in a result.
pub(crate) fn result_ip(r: &Value) -> Ipv4Addr {
    let a = r["ips"][0]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("no ips in {r}"));
    a.split('/')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad address {a}"))
}

/// The IPAM state file of `network` under `data_dir`, as JSON (Null when absent).
pub(crate) fn state(data_dir: &Path, network: &str) -> Value {
    match std::fs::read_to_string(data_dir.join(network).join("state.json")) {
        Ok(s) => serde_json::from_str(&s).expect("state json"),
        Err(_) => Value::Null,
    }
}

/// Links of a namespace whose names look like our host ends (`cc` + 13 hex digits).
pub(crate) fn host_ends(node: &Netns) -> Vec<String> {
    node.links()
        .expect("links")
        .into_iter()
        .filter(|l| l.starts_with("cc") && l.len() == 15)
        .collect()
}

/// Waits (up to 20 s) until `node` has exactly `n` host ends: the kernel removes a veth pair whose
/// namespace was deleted asynchronously (in its netns clean-up work), not when `ip netns del`
/// returns.
pub(crate) fn wait_host_ends(node: &Netns, n: usize) -> Vec<String> {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let now = host_ends(node);
        if now.len() == n || std::time::Instant::now() > end {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Runs `f` on a thread inside `ns` (netlink sockets and child processes opened there live in it).
pub(crate) fn in_ns<T: Send>(ns: &Netns, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = clusterctl_cni::netns::open(&ns.path()).expect("open netns");
            let _g = clusterctl_cni::netns::NetnsGuard::enter(&file).expect("enter netns");
            f()
        })
        .join()
        .expect("thread")
    })
}

/// A TCP echo server on `port` inside `ns` (one line back per connection), for the life of the
/// process.
pub(crate) fn listen(ns: &Netns, port: u16) {
    let l = in_ns(ns, || TcpListener::bind(("0.0.0.0", port))).expect("bind");
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut line = String::new();
                if BufReader::new(&c).read_line(&mut line).is_ok() {
                    let _ = (&c).write_all(line.as_bytes());
                }
            });
        }
    });
}

/// Whether a TCP connection from `ns` to `ip:port` carries a line there and back within `t`
/// (connect and read timeouts): passes only when the request and the reply both pass.
pub(crate) fn probe(ns: &Netns, ip: Ipv4Addr, port: u16, t: Duration) -> bool {
    in_ns(ns, || {
        let Ok(mut c) = TcpStream::connect_timeout(&(ip, port).into(), t) else {
            return false;
        };
        let _ = c.set_read_timeout(Some(t));
        if c.write_all(b"ping\n").is_err() {
            return false;
        }
        let mut line = String::new();
        BufReader::new(&c).read_line(&mut line).is_ok() && line == "ping\n"
    })
}
