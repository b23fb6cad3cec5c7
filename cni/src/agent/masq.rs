//! Masquerade of pod traffic leaving the pod network, in one nftables table of its own
//! (`table ip clusterctl-cni`), so that removing it is one `delete table`. The ruleset is applied
//! atomically with `nft -f -` (one transaction: create-if-missing, delete, re-create):
//!
//! ```text
//! table ip clusterctl-cni {
//!   chain postrouting {
//!     type nat hook postrouting priority srcnat; policy accept;
//!     ip saddr 10.244.0.0/16 ip daddr != 10.244.0.0/16 masquerade
//!   }
//! }
//! ```

use ipnet::Ipv4Net;
use std::io::{self, Write};
use std::process::{Command, Stdio};

/// The nftables table name.
pub const TABLE: &str = "clusterctl-cni";

/// The nft script that (re)creates the table for `cluster_cidr`.
pub fn script(cluster_cidr: Ipv4Net) -> String {
    format!(
        "table ip {TABLE} {{}}\ndelete table ip {TABLE}\ntable ip {TABLE} {{\n  chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    ip saddr {c} ip daddr != {c} masquerade\n  }}\n}}\n",
        c = cluster_cidr
    )
}

fn nft(script: &str) -> io::Result<()> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "nft: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Installs (or replaces) the masquerade table. Errors: `nft` missing or refusing the script.
pub fn apply(cluster_cidr: Ipv4Net) -> io::Result<()> {
    nft(&script(cluster_cidr))
}

/// Removes the table whole; a missing table is success.
pub fn remove() -> io::Result<()> {
    nft(&format!("table ip {TABLE} {{}}\ndelete table ip {TABLE}\n"))
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
