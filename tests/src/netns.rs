//! Network namespaces, veth underlays and "nodes" for CNI tests, each uniquely named and removed by a
//! drop guard (also when the test fails). Set-up and observation use `ip` from iproute2 and `ping`
//! from iputils-ping; only the product code is barred from running them.
//!
//! Shapes: an [`Underlay`] is a namespace holding a bridge; each [`Node`] is a namespace joined to
//! that bridge by a veth pair, with its underlay interface `ul0` at `172.31.<net>.<n>/24`, up; a pod
//! is just a [`Netns`] with `lo` up.

use anyhow::{bail, Context, Result};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// True when network namespaces can be made here (root, `ip netns add` works).
pub fn available() -> bool {
    if !crate::is_root() {
        return false;
    }
    let name = crate::unique_name("probe");
    let ok = Command::new("ip")
        .args(["netns", "add", &name])
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if ok {
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
    }
    ok
}

/// Runs `ip ARGS…` and fails with its stderr when it exits non-zero.
pub fn ip(args: &[&str]) -> Result<String> {
    run("ip", args)
}

fn run(prog: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .with_context(|| format!("run {prog}"))?;
    if !out.status.success() {
        bail!(
            "{prog} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A named network namespace (`/run/netns/NAME`), deleted on drop with everything inside it.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates `<prefix><unique>` with `lo` up. Errors: `ip netns add` failing (not root).
    pub fn new(prefix: &str) -> Result<Self> {
        let name = crate::unique_name(prefix);
        ip(&["netns", "add", &name])?;
        let ns = Self { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace file, as a runtime passes it in `CNI_NETNS`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.name))
    }

    /// `ip -n NAME ARGS…`.
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// A command to run inside the namespace (`ip netns exec NAME PROG`).
    pub fn command(&self, prog: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, prog]);
        c
    }

    /// Runs `PROG ARGS…` inside the namespace and returns its output (any exit status).
    pub fn exec(&self, prog: &str, args: &[&str]) -> Result<Output> {
        Ok(self.command(prog).args(args).output()?)
    }

    /// Pings `dst` from inside the namespace: `count` probes, 1 s timeout each; true when any reply came.
    pub fn ping(&self, dst: Ipv4Addr, count: u32) -> bool {
        self.exec(
            "ping",
            &[
                "-c",
                &count.to_string(),
                "-W",
                "1",
                "-i",
                "0.2",
                "-q",
                &dst.to_string(),
            ],
        )
        .map(|o| o.status.success())
        .unwrap_or(false)
    }

    /// Names of the links in the namespace (without `@peer` suffixes).
    pub fn links(&self) -> Result<Vec<String>> {
        let out = self.ip(&["-o", "link", "show"])?;
        Ok(out
            .lines()
            .filter_map(|l| l.split(':').nth(1))
            .map(|n| n.trim().split('@').next().unwrap_or("").to_string())
            .collect())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .stderr(Stdio::null())
            .status();
    }
}

/// The shared underlay: a namespace with bridge `br0` that node veths attach to.
#[derive(Debug)]
pub struct Underlay {
    ns: Netns,
    net: u8,
    count: std::cell::Cell<u8>,
}

impl Underlay {
    /// Creates the underlay for `172.31.<net>.0/24`. Errors: as [`Netns::new`].
    pub fn new(net: u8) -> Result<Self> {
        let ns = Netns::new("ul")?;
        ns.ip(&["link", "add", "br0", "type", "bridge"])?;
        ns.ip(&["link", "set", "br0", "up"])?;
        Ok(Self {
            ns,
            net,
            count: std::cell::Cell::new(0),
        })
    }

    /// Adds a node namespace joined to the bridge; its `ul0` gets `172.31.<net>.<n>/24` with `n`
    /// counting from 1, MTU `mtu`. Errors: `ip` failures.
    pub fn add_node(&self, mtu: u32) -> Result<Node> {
        let n = self.count.get() + 1;
        self.count.set(n);
        let ns = Netns::new("nd")?;
        let port = format!("p{}", crate::unique_name(""));
        let mtu_s = mtu.to_string();
        self.ns.ip(&[
            "link",
            "add",
            &port,
            "mtu",
            &mtu_s,
            "type",
            "veth",
            "peer",
            "name",
            "ul0",
            "mtu",
            &mtu_s,
            "netns",
            ns.name(),
        ])?;
        self.ns.ip(&["link", "set", &port, "master", "br0", "up"])?;
        let addr = Ipv4Addr::new(172, 31, self.net, n);
        ns.ip(&["addr", "add", &format!("{addr}/24"), "dev", "ul0"])?;
        ns.ip(&["link", "set", "ul0", "up"])?;
        Ok(Node { ns, addr })
    }
}

/// A "node": a namespace on the underlay with address `addr` on `ul0`.
#[derive(Debug)]
pub struct Node {
    /// The node's namespace.
    pub ns: Netns,
    /// Its underlay address.
    pub addr: Ipv4Addr,
}
