//! Masquerade of pod traffic leaving the pod network, kept in one place of its own so that removing
//! it is one step. With nftables (the `nft` program present), one table `ip clusterctl-cni`,
//! applied atomically with `nft -f -` (one transaction: create-if-missing, delete, re-create):
//!
//! ```text
//! table ip clusterctl-cni {
//!   chain postrouting {
//!     type nat hook postrouting priority srcnat; policy accept;
//!     ip saddr 10.244.0.0/16 ip daddr != 10.244.0.0/16 masquerade
//!   }
//! }
//! ```
//!
//! Without `nft`, the iptables fallback: one chain `CLUSTERCTL-CNI-MASQ` of its own in the `nat`
//! table, holding `-s 10.244.0.0/16 ! -d 10.244.0.0/16 -j MASQUERADE`, entered from `POSTROUTING`
//! by one jump rule tagged with the comment `clusterctl-cni`; removal deletes the jump, flushes and
//! deletes the chain. Both are driven through the programs (`nft`, `iptables`), as kube-proxy does.

use ipnet::Ipv4Net;
use std::io::{self, Write};
use std::process::{Command, Stdio};

/// The nftables table name, the iptables chain (table `nat`) of the fallback and the comment on its
/// jump rule in `POSTROUTING` (render's, which `destroy` reads too).
pub use clusterctl_render::cni::masq::{CHAIN, COMMENT, TABLE};

/// Which firewall holds the masquerade rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// nftables, table [`TABLE`].
    Nftables,
    /// iptables, chain [`CHAIN`] in table `nat`.
    Iptables,
}

/// The nft script that (re)creates the table for `cluster_cidr`.
pub fn script(cluster_cidr: Ipv4Net) -> String {
    format!(
        "table ip {TABLE} {{}}\ndelete table ip {TABLE}\ntable ip {TABLE} {{\n  chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    ip saddr {c} ip daddr != {c} masquerade\n  }}\n}}\n",
        c = cluster_cidr
    )
}

/// Runs `prog args` with `stdin`; Ok(true) on exit 0, Ok(false) on another exit status, the spawn
/// error otherwise (`NotFound` when `prog` is not installed). `stderr` of a failure is returned in
/// the second field.
fn run(prog: &str, args: &[&str], stdin: &str) -> io::Result<(bool, String)> {
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut i) = child.stdin.take() {
        i.write_all(stdin.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    ))
}

fn must(prog: &str, args: &[&str], stdin: &str) -> io::Result<()> {
    match run(prog, args, stdin)? {
        (true, _) => Ok(()),
        (false, err) => Err(io::Error::other(format!(
            "{prog} {}: {err}",
            args.join(" ")
        ))),
    }
}

fn nft_present() -> bool {
    !matches!(run("nft", &["--version"], ""), Err(e) if e.kind() == io::ErrorKind::NotFound)
}

/// Installs (or replaces) the masquerade rule with `backend`. Errors: the program missing or
/// refusing the rules.
pub fn apply_with(backend: Backend, cluster_cidr: Ipv4Net) -> io::Result<()> {
    match backend {
        Backend::Nftables => must("nft", &["-f", "-"], &script(cluster_cidr)),
        Backend::Iptables => {
            let c = cluster_cidr.to_string();
            // Create the chain when missing (a failure here means it exists), then refill it.
            let _ = run("iptables", &["-w", "-t", "nat", "-N", CHAIN], "")?;
            must("iptables", &["-w", "-t", "nat", "-F", CHAIN], "")?;
            must(
                "iptables",
                &[
                    "-w",
                    "-t",
                    "nat",
                    "-A",
                    CHAIN,
                    "-s",
                    &c,
                    "!",
                    "-d",
                    &c,
                    "-j",
                    "MASQUERADE",
                ],
                "",
            )?;
            if !run("iptables", &jump_rule("-C"), "")?.0 {
                must("iptables", &jump_rule("-A"), "")?;
            }
            Ok(())
        }
    }
}

/// The `iptables` arguments that check (`-C`), append (`-A`) or delete (`-D`) our tagged jump from the
/// nat table's `POSTROUTING` to [`CHAIN`].
fn jump_rule(op: &'static str) -> [&'static str; 11] {
    [
        "-w",
        "-t",
        "nat",
        op,
        "POSTROUTING",
        "-m",
        "comment",
        "--comment",
        COMMENT,
        "-j",
        CHAIN,
    ]
}

/// Installs (or replaces) the masquerade rule: nftables when `nft` is installed, else the iptables
/// fallback. Returns the backend used. Errors: as [`apply_with`].
pub fn apply(cluster_cidr: Ipv4Net) -> io::Result<Backend> {
    let b = if nft_present() {
        Backend::Nftables
    } else {
        Backend::Iptables
    };
    apply_with(b, cluster_cidr).map(|()| b)
}

/// Removes the masquerade rule whole from both backends (the nftables table; the iptables jump and
/// chain); what is missing, and a backend that is not installed, is fine. Errors: a program present
/// but failing to remove what exists.
pub fn remove() -> io::Result<()> {
    if nft_present() {
        must(
            "nft",
            &["-f", "-"],
            &format!("table ip {TABLE} {{}}\ndelete table ip {TABLE}\n"),
        )?;
    }
    let del = jump_rule("-D");
    match run("iptables", &del, "") {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        // Delete every copy of the jump (one normally).
        Ok((true, _)) => while run("iptables", &del, "")?.0 {},
        Ok((false, _)) => {}
    }
    if run("iptables", &["-w", "-t", "nat", "-F", CHAIN], "")?.0 {
        must("iptables", &["-w", "-t", "nat", "-X", CHAIN], "")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn script_is_one_table() {
        let s = super::script("10.244.0.0/16".parse().unwrap());
        assert!(s.contains("ip saddr 10.244.0.0/16 ip daddr != 10.244.0.0/16 masquerade"));
        assert_eq!(s.matches("delete table ip clusterctl-cni").count(), 1);
    }
}
