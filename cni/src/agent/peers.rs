//! Peers of the overlay: every node's name, underlay address and podCIDR, and what the agent derives
//! from them (VTEP address and MAC). Read from a static file for labs and tests, or from Kubernetes
//! Nodes (see [`super::kube`]).
//!
//! Static file format, one node per line, `#` starts a comment:
//! ```text
//! # name      underlay address   podCIDR
//! node-a      172.31.0.1         10.244.1.0/24
//! node-b      172.31.0.2         10.244.2.0/24
//! ```

use ipnet::Ipv4Net;
use std::net::Ipv4Addr;
use std::path::Path;

/// One node of the overlay.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Peer {
    /// Node name (Kubernetes `metadata.name`).
    pub name: String,
    /// Underlay address (the Node's `InternalIP`): VXLAN packets for it are sent here.
    pub node_ip: Ipv4Addr,
    /// The node's podCIDR (`spec.podCIDR`).
    pub pod_cidr: Ipv4Net,
}

impl Peer {
    /// The node's VTEP address: the network address of its podCIDR (`10.244.1.0` for
    /// `10.244.1.0/24`), as flannel assigns it.
    pub fn vtep_ip(&self) -> Ipv4Addr {
        self.pod_cidr.network()
    }

    /// The node's VTEP MAC, derived from its underlay address: `0e:cc:` + the four address bytes
    /// (locally administered, unicast), so peers need no MAC exchange.
    pub fn vtep_mac(&self) -> [u8; 6] {
        vtep_mac(self.node_ip)
    }
}

/// VTEP MAC for an underlay address (see [`Peer::vtep_mac`]).
pub fn vtep_mac(node_ip: Ipv4Addr) -> [u8; 6] {
    let o = node_ip.octets();
    [0x0e, 0xcc, o[0], o[1], o[2], o[3]]
}

/// A malformed peers file line.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {msg}")]
pub struct PeersError {
    /// The file.
    pub file: String,
    /// 1-based line number (0 for a read error).
    pub line: usize,
    /// What is wrong.
    pub msg: String,
}

/// Parses the static peers text. Errors: the first bad line (wrong field count, bad address or CIDR,
/// duplicate name).
pub fn parse(text: &str, file: &str) -> Result<Vec<Peer>, PeersError> {
    let mut out: Vec<Peer> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |msg: String| PeersError {
            file: file.to_string(),
            line: i + 1,
            msg,
        };
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 3 {
            return Err(err(format!(
                "expected `name address podCIDR`, got {} fields",
                f.len()
            )));
        }
        let node_ip: Ipv4Addr = f[1]
            .parse()
            .map_err(|_| err(format!("{:?} is not an IPv4 address", f[1])))?;
        let pod_cidr: Ipv4Net = f[2]
            .parse()
            .map_err(|_| err(format!("{:?} is not an IPv4 CIDR", f[2])))?;
        if out.iter().any(|p| p.name == f[0]) {
            return Err(err(format!("node {:?} listed twice", f[0])));
        }
        out.push(Peer {
            name: f[0].to_string(),
            node_ip,
            pod_cidr: pod_cidr.trunc(),
        });
    }
    Ok(out)
}

/// Reads and parses a peers file.
pub fn read(path: &Path) -> Result<Vec<Peer>, PeersError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| PeersError {
        file: file.clone(),
        line: 0,
        msg: e.to_string(),
    })?;
    parse(&text, &file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_derives() {
        let p = parse(
            "# c\nnode-a 172.31.0.1 10.244.1.0/24\n\nnode-b 172.31.0.2 10.244.2.7/24 # x\n",
            "f",
        )
        .unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].pod_cidr.to_string(), "10.244.2.0/24");
        assert_eq!(p[0].vtep_ip(), Ipv4Addr::new(10, 244, 1, 0));
        assert_eq!(p[0].vtep_mac(), [0x0e, 0xcc, 172, 31, 0, 1]);
        let e = parse("a 1.2.3.4 10.0.0.0/24\nb 1.2.3.x 10.0.1.0/24\n", "f").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(parse("a 1.2.3.4\n", "f").is_err());
        assert!(parse("a 1.2.3.4 10.0.0.0/24\na 1.2.3.5 10.0.1.0/24\n", "f").is_err());
    }
}
