//! A [`Ruleset`] as an nftables script, and applying it: one table of the agent's own,
//! [`TABLE`] (`inet clusterctl-netpol`), replaced whole in one `nft -f -` transaction (create if
//! missing, delete, re-create), so a packet sees either the old rules or the new ones, never a
//! half-written set; conntrack entries are not touched, so established connections continue.
//!
//! ```text
//! table inet clusterctl-netpol {
//!   set ingress_isolated { type ipv4_addr; elements = { 10.244.1.5 } }
//!   set egress_isolated  { type ipv4_addr; }
//!   set p0_pods { type ipv4_addr; elements = { 10.244.1.5 } }           # pods policy 0 selects
//!   set p0_in0  { type ipv4_addr; flags interval; elements = { … } }    # peers of its ingress rule 0
//!   chain forward {
//!     type filter hook forward priority filter; policy accept;
//!     ct state established,related accept
//!     ip saddr @egress_isolated jump egress
//!     ip daddr @ingress_isolated jump ingress
//!   }
//!   chain egress  { ip saddr @p0_pods ip daddr @p0_eg0 meta l4proto tcp th dport { 53 } return … ; drop }
//!   chain ingress { ip daddr @p0_pods ip saddr @p0_in0 meta l4proto tcp th dport { 80 } accept … ; drop }
//! }
//! ```
//!
//! Only the forward hook: a node's own traffic to its pods leaves through `output` and a pod's
//! traffic to its node arrives through `input`, so both pass, as Kubernetes requires. The table is
//! never deleted by the agent on exit: it keeps enforcing while the agent restarts.

use super::compile::{PortMatch, Rule, Ruleset};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

/// The table: family and name, as `nft list table inet clusterctl-netpol` takes them (render's
/// `cni::netpol` names, which `destroy` deletes).
pub const TABLE: &str = "inet clusterctl-netpol";

/// The nft script that replaces the table with `rs`.
pub fn script(rs: &Ruleset) -> String {
    let mut s = format!("table {TABLE} {{}}\ndelete table {TABLE}\ntable {TABLE} {{\n");
    set(
        &mut s,
        "ingress_isolated",
        false,
        &addrs(&rs.ingress_isolated),
    );
    set(
        &mut s,
        "egress_isolated",
        false,
        &addrs(&rs.egress_isolated),
    );
    let mut ingress = String::new();
    let mut egress = String::new();
    for (i, p) in rs.policies.iter().enumerate() {
        set(&mut s, &format!("p{i}_pods"), false, &addrs(&p.pods));
        for (j, r) in p.ingress.iter().enumerate() {
            let name = format!("p{i}_in{j}");
            let head = format!("ip daddr @p{i}_pods{}", peers(&mut s, &name, r, "saddr"));
            rules(
                &mut ingress,
                &head,
                r,
                "daddr",
                "accept",
                &format!("{} ingress {j}", p.id),
            );
        }
        for (j, r) in p.egress.iter().enumerate() {
            let name = format!("p{i}_eg{j}");
            let head = format!("ip saddr @p{i}_pods{}", peers(&mut s, &name, r, "daddr"));
            rules(
                &mut egress,
                &head,
                r,
                "daddr",
                "return",
                &format!("{} egress {j}", p.id),
            );
        }
    }
    s.push_str(concat!(
        "  chain forward {\n",
        "    type filter hook forward priority filter; policy accept;\n",
        "    ct state established,related accept\n",
        "    ip saddr @egress_isolated jump egress\n",
        "    ip daddr @ingress_isolated jump ingress\n",
        "  }\n"
    ));
    let _ = write!(s, "  chain egress {{\n{egress}    counter drop\n  }}\n");
    let _ = write!(
        s,
        "  chain ingress {{\n{ingress}    counter drop\n  }}\n}}\n"
    );
    s
}

fn addrs(set: &BTreeSet<Ipv4Addr>) -> Vec<String> {
    set.iter().map(Ipv4Addr::to_string).collect()
}

fn set(s: &mut String, name: &str, interval: bool, elements: &[String]) {
    let flags = if interval { " flags interval;" } else { "" };
    let elems = if elements.is_empty() {
        String::new()
    } else {
        format!(" elements = {{ {} }}", elements.join(", "))
    };
    let _ = writeln!(s, "  set {name} {{ type ipv4_addr;{flags}{elems} }}");
}

/// Declares the peers set of `r` named `name` and returns the match of address `field` on it
/// (`saddr` for ingress, `daddr` for egress); empty for "everyone".
fn peers(s: &mut String, name: &str, r: &Rule, field: &str) -> String {
    match &r.peers {
        None => String::new(),
        Some(p) => {
            set(s, name, true, &p.elements());
            format!(" ip {field} @{name}")
        }
    }
}

/// The rules of one policy rule: `head`, then per port match its destination limit (on field
/// `dst`), protocol and ports, then `verdict`, commented with `what`.
fn rules(out: &mut String, head: &str, r: &Rule, dst: &str, verdict: &str, what: &str) {
    let line = |out: &mut String, m: &str| {
        let _ = writeln!(out, "    {head}{m} {verdict} comment \"{what}\"");
    };
    match &r.ports {
        None => line(out, ""),
        Some(ms) => {
            for m in ms {
                line(out, &port_match(m, dst));
            }
        }
    }
}

fn port_match(m: &PortMatch, dst: &str) -> String {
    let mut s = String::new();
    if let Some(pods) = &m.pods {
        let _ = write!(s, " ip {dst} {{ {} }}", addrs(pods).join(", "));
    }
    let _ = write!(s, " meta l4proto {}", m.proto.nft());
    if let Some(ports) = &m.ports {
        let list: Vec<String> = ports
            .iter()
            .map(|&(lo, hi)| {
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                }
            })
            .collect();
        let _ = write!(s, " th dport {{ {} }}", list.join(", "));
    }
    s
}

/// How the agent runs `nft`: the program and leading arguments (`["nft"]` on a node; tests run it
/// inside a network namespace, e.g. `["ip", "netns", "exec", "<ns>", "nft"]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nft(pub Vec<String>);

impl Default for Nft {
    fn default() -> Self {
        Self(vec!["nft".to_string()])
    }
}

impl Nft {
    /// Runs `nft <args>` with `stdin`; the output on success. Errors: the program missing
    /// (`NotFound`) or failing (its stderr).
    pub fn run(&self, args: &[&str], stdin: &str) -> io::Result<String> {
        let (prog, pre) = self
            .0
            .split_first()
            .ok_or_else(|| io::Error::other("empty nft command"))?;
        let mut child = Command::new(prog)
            .args(pre)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        if let Some(mut i) = child.stdin.take() {
            i.write_all(stdin.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(io::Error::other(format!(
                "nft {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// Replaces the table with `rs` in one transaction. Errors: as [`Nft::run`]; on a failure the
    /// previous table stays as it was.
    pub fn apply(&self, rs: &Ruleset) -> io::Result<()> {
        self.run(&["-f", "-"], &script(rs)).map(drop)
    }

    /// Deletes the table (`clusterctl cni cleanup`); a missing table is fine.
    pub fn remove(&self) -> io::Result<()> {
        self.run(
            &["-f", "-"],
            &format!("table {TABLE} {{}}\ndelete table {TABLE}\n"),
        )
        .map(drop)
    }
}
