//! Running `nft` and the table it programs: one table of the agent's own, [`TABLE`]
//! (`inet clusterctl-netpol`), laid out by [`super::table`]. [`script`] writes it whole — create if
//! missing, delete, re-create, in one `nft -f -` transaction — for the first apply and after a
//! failure; after that the applier sends only the difference ([`super::diff`]), also one
//! transaction. Either way a packet sees the old rules or the new ones, never a half-written set;
//! conntrack entries are not touched, so established connections continue.
//!
//! ```text
//! table inet clusterctl-netpol {
//!   set ingress_isolated { type ipv4_addr; elements = { 10.244.1.5 } }
//!   set egress_isolated  { type ipv4_addr; }
//!   set l0 { type ipv4_addr; elements = { 10.244.1.5 } }               # pods a selection picks here
//!   set s1 { type ipv4_addr; flags interval; elements = { … } }        # addresses of one peer
//!   chain forward {
//!     type filter hook forward priority filter; policy accept;
//!     ct state established,related accept
//!     ip saddr @egress_isolated jump egress
//!     ip daddr @ingress_isolated jump ingress
//!   }
//!   chain egress  { ip saddr @l0 jump p0_egress … ; counter drop }
//!   chain p0_egress { ip daddr @s2 meta l4proto tcp th dport { 53 } goto egress_allowed … }
//!   chain egress_allowed { ip daddr @ingress_isolated jump ingress; accept }
//!   chain ingress { ip daddr @l0 jump p0_ingress … ; counter drop }
//!   chain p0_ingress { ip saddr @s1 meta l4proto tcp th dport { 80 } accept … }
//! }
//! ```
//!
//! Only the forward hook: a node's own traffic to its pods leaves through `output` and a pod's
//! traffic to its node arrives through `input`, so both pass, as Kubernetes requires. The table is
//! never deleted by the agent on exit: it keeps enforcing while the agent restarts.

use super::compile::Ruleset;
use super::table::{Names, Table};
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::process::{Command, Stdio};

/// The table: family and name, as `nft list table inet clusterctl-netpol` takes them (render's
/// `cni::netpol` names, which `destroy` deletes).
pub const TABLE: &str = "inet clusterctl-netpol";

/// The nft script that replaces the table with `rs` (policies indexed in their order).
pub fn script(rs: &Ruleset) -> String {
    whole(&Table::build(rs, &Names::fresh(rs)))
}

/// The nft script that replaces the table with `t` in one transaction (create if missing,
/// delete, re-create).
pub(crate) fn whole(t: &Table) -> String {
    let mut s = format!("table {TABLE} {{}}\ndelete table {TABLE}\ntable {TABLE} {{\n");
    for (name, set) in &t.sets {
        let _ = writeln!(s, "  set {name} {}", set.body());
    }
    for (name, c) in &t.chains {
        let _ = writeln!(s, "  chain {name} {{");
        if let Some(h) = c.hook {
            let _ = writeln!(s, "    {h}");
        }
        for r in &c.rules {
            let _ = writeln!(s, "    {r}");
        }
        s.push_str("  }\n");
    }
    s.push_str("}\n");
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
