//! Rules on the control-plane endpoint and the kube-vip VIP: the endpoint parses as `host[:port]`; the VIP
//! is an address, is no node's address, and in ARP mode lies in the control planes' subnet (from node
//! addresses written with a prefix length, or `vip.subnet`) and has an interface on every control plane;
//! BGP mode has its BGP block. Resolves the endpoint.

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

use super::rules_nodes::check_interface_name;
use super::Ctx;
use crate::diag::Diagnostic;
use crate::model::{ClusterFile, Provider, Vip, VipMode};
use crate::syntax;
use crate::valid::{Endpoint, ValidNode};

/// Resolved endpoint facts.
pub(crate) struct VipOut {
    pub(crate) endpoint: Endpoint,
    pub(crate) vip: Option<IpAddr>,
}

/// Why a control-plane endpoint does not parse; the text continues `endpoint "x" …`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EndpointError {
    /// Nothing but white space.
    #[error("is empty")]
    Empty,
    /// A URL (`https://…`) instead of `host[:port]`.
    #[error("must not have a scheme")]
    Scheme,
    /// `[` without its `]`.
    #[error("has an unclosed '['")]
    UnclosedBracket,
    /// Text after `]` that is not `:port`.
    #[error("has text after ']'")]
    AfterBracket,
    /// A port that is not a number 0–65535.
    #[error("port {text:?} is not a number 1–65535")]
    Port {
        /// The port as written.
        text: String,
        /// The parser's error.
        #[source]
        source: std::num::ParseIntError,
    },
    /// Port 0.
    #[error("port 0 is not valid")]
    PortZero,
    /// `[…]` holding something other than an IPv6 address.
    #[error("{text:?} is not an IPv6 address")]
    NotIpv6 {
        /// The text between the brackets.
        text: String,
        /// The parser's error.
        #[source]
        source: std::net::AddrParseError,
    },
    /// A host that is neither an IP address nor a DNS name.
    #[error("host {host:?} is neither an IP address nor a DNS name: {source}")]
    Host {
        /// The host as written.
        host: String,
        /// Why it is not a DNS name.
        #[source]
        source: syntax::SyntaxError,
    },
}

/// Parses `host`, `host:port`, `[v6]:port` or a bare IPv6 address. Errors: [`EndpointError`].
pub(crate) fn parse_endpoint(text: &str) -> Result<Endpoint, EndpointError> {
    let port_err = |p: &str, source| EndpointError::Port {
        text: p.to_string(),
        source,
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(EndpointError::Empty);
    }
    if t.contains("://") {
        return Err(EndpointError::Scheme);
    }
    if let Ok(ip) = IpAddr::from_str(t) {
        return Ok(Endpoint {
            host: ip.to_string(),
            port: 6443,
        });
    }
    let (host, port) = if let Some(rest) = t.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or(EndpointError::UnclosedBracket)?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse::<u16>().map_err(|e| port_err(p, e))?,
            None if after.is_empty() => 6443,
            None => return Err(EndpointError::AfterBracket),
        };
        IpAddr::from_str(h).map_err(|source| EndpointError::NotIpv6 {
            text: h.to_string(),
            source,
        })?;
        (h.to_string(), port)
    } else {
        match t.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse::<u16>().map_err(|e| port_err(p, e))?),
            None => (t.to_string(), 6443),
        }
    };
    if port == 0 {
        return Err(EndpointError::PortZero);
    }
    if IpAddr::from_str(&host).is_err() {
        syntax::dns_name(&host).map_err(|source| EndpointError::Host {
            host: host.clone(),
            source,
        })?;
    }
    Ok(Endpoint { host, port })
}

pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile, nodes: &[ValidNode]) -> Option<VipOut> {
    let cp = &file.spec.control_plane;
    let (vip_ok, vip_addr) = match &cp.vip {
        Some(vip) => vip_settings(ctx, file, nodes, vip),
        None => (true, None),
    };
    let (endpoint_ok, endpoint) = endpoint(ctx, file, nodes, vip_addr);
    if !(vip_ok && endpoint_ok) {
        return None;
    }
    Some(VipOut {
        endpoint: endpoint?,
        vip: vip_addr,
    })
}

/// `controlPlane.vip`: an IP address (checked against the nodes' networks), image, interface and
/// BGP settings. Returns whether the address is usable, and the address.
fn vip_settings(
    ctx: &mut Ctx<'_>,
    file: &ClusterFile,
    nodes: &[ValidNode],
    vip: &Vip,
) -> (bool, Option<IpAddr>) {
    let mut ok = true;
    let mut vip_addr = None;
    match IpAddr::from_str(vip.address.trim()) {
        Err(_) => {
            ok = false;
            ctx.push(
                Diagnostic::error(
                    "spec::vip",
                    format!("VIP {:?} is not an IP address", vip.address),
                )
                .help("write the VIP as a bare address, e.g. `172.20.6.110` (no prefix length)")
                .at("spec.controlPlane.vip.address"),
            );
        }
        Ok(addr) => {
            vip_addr = Some(addr);
            check_vip(ctx, file, nodes, addr);
        }
    }
    if let Some(i) = &vip.image {
        if crate::image::ImageRef::parse(i).is_err() {
            ctx.push(
                Diagnostic::error("spec::image", format!("{i:?} is not an image reference"))
                    .help("write e.g. `ghcr.io/kube-vip/kube-vip:v1.0.1`")
                    .at("spec.controlPlane.vip.image"),
            );
        }
    }
    if let Some(ifname) = &vip.interface {
        check_interface_name(ctx, ifname, "spec.controlPlane.vip.interface".into());
    }
    vip_bgp(ctx, vip);
    (ok, vip_addr)
}

/// The VIP's mode and its `bgp` settings agree; AS numbers, peers and the router ID are valid.
fn vip_bgp(ctx: &mut Ctx<'_>, vip: &Vip) {
    match (vip.mode, &vip.bgp) {
        (VipMode::Bgp, None) => ctx.push(
            Diagnostic::error("spec::vip-bgp", "VIP mode is bgp but no `bgp` settings are given")
                .help("add `bgp: {as: 65000, peers: [{address: 10.0.0.1, as: 65001}]}` or use `mode: arp`")
                .at("spec.controlPlane.vip.mode"),
        ),
        (VipMode::Arp, Some(_)) => ctx.push(
            Diagnostic::error("spec::vip-bgp", "`bgp` settings are given but the VIP mode is arp")
                .help("set `mode: bgp`, or remove `bgp`")
                .at("spec.controlPlane.vip.bgp#key"),
        ),
        (VipMode::Bgp, Some(b)) => {
            if b.local_as == 0 {
                ctx.push(Diagnostic::error("spec::vip-bgp", "AS number 0 is reserved").help("use your AS number, e.g. 65000").at("spec.controlPlane.vip.bgp.as"));
            }
            if b.peers.is_empty() {
                ctx.push(Diagnostic::error("spec::vip-bgp", "BGP mode needs at least one peer").help("add `peers: [{address: …, as: …}]`").at("spec.controlPlane.vip.bgp"));
            }
            for (i, peer) in b.peers.iter().enumerate() {
                if IpAddr::from_str(&peer.address).is_err() {
                    ctx.push(
                        Diagnostic::error("spec::vip-bgp", format!("BGP peer {:?} is not an IP address", peer.address))
                            .help("write the peer's address, e.g. 10.0.0.1")
                            .at(format!("spec.controlPlane.vip.bgp.peers[{i}].address")),
                    );
                }
            }
            if let Some(r) = &b.router_id {
                if std::net::Ipv4Addr::from_str(r).is_err() {
                    ctx.push(
                        Diagnostic::error("spec::vip-bgp", format!("routerId {r:?} is not an IPv4 address"))
                            .help("a BGP router ID is written as an IPv4 address")
                            .at("spec.controlPlane.vip.bgp.routerId"),
                    );
                }
            }
        }
        (VipMode::Arp, None) => {}
    }
}

/// `controlPlane.endpoint` (`host:port`, a warning when it does not use the VIP), or its default: the
/// VIP, the docker lab's load balancer, else the first control plane. Returns whether a given
/// endpoint parses, and the endpoint.
fn endpoint(
    ctx: &mut Ctx<'_>,
    file: &ClusterFile,
    nodes: &[ValidNode],
    vip_addr: Option<IpAddr>,
) -> (bool, Option<Endpoint>) {
    let cp = &file.spec.control_plane;
    let mut ok = true;
    let endpoint = match &cp.endpoint {
        Some(e) => match parse_endpoint(e) {
            Ok(ep) => {
                if let (Some(v), Ok(host_ip)) = (vip_addr, IpAddr::from_str(&ep.host)) {
                    if host_ip != v {
                        ctx.push(
                            Diagnostic::warning("spec::endpoint-not-vip", format!("the endpoint {ep} does not use the VIP {v}"))
                                .help("the VIP only gives HA when clients use it: set the endpoint to the VIP, or remove `endpoint` to default to it")
                                .at("spec.controlPlane.endpoint"),
                        );
                    }
                }
                Some(ep)
            }
            Err(why) => {
                ok = false;
                ctx.push(
                    Diagnostic::error("spec::endpoint", format!("endpoint {e:?} {why}"))
                        .help("write `host:port`, e.g. `172.20.6.110:6443` or `k8s-api.example.com:6443`")
                        .at("spec.controlPlane.endpoint"),
                );
                None
            }
        },
        None => match vip_addr {
            Some(v) => Some(Endpoint {
                host: v.to_string(),
                port: 6443,
            }),
            None if lab_load_balancer(file, nodes) => Some(Endpoint {
                host: format!("{}-{}", file.metadata.name, crate::lab::LOAD_BALANCER_NAME),
                port: crate::lab::LOAD_BALANCER_PORT,
            }),
            None => nodes
                .iter()
                .find(|n| n.is_control_plane())
                .map(|n| Endpoint {
                    host: n
                        .address
                        .map(|a| a.to_string())
                        .unwrap_or_else(|| format!("{}-{}", file.metadata.name, n.name)),
                    port: 6443,
                }),
        },
    };
    (ok, endpoint)
}

/// Whether the file gets the docker lab's API load balancer ([`crate::lab::load_balancer_enabled`]).
fn lab_load_balancer(file: &ClusterFile, nodes: &[ValidNode]) -> bool {
    let cp = &file.spec.control_plane;
    crate::lab::load_balancer_enabled(
        file.spec.provider.node_containers(),
        cp.vip.is_some() || cp.endpoint.is_some(),
        nodes.iter().filter(|n| n.is_control_plane()).count(),
        file.spec.docker.load_balancer.is_some(),
    )
}

fn check_vip(ctx: &mut Ctx<'_>, file: &ClusterFile, nodes: &[ValidNode], vip: IpAddr) {
    let Some(cfg) = &file.spec.control_plane.vip else {
        return;
    };
    if let Some(n) = nodes.iter().find(|n| n.address == Some(vip)) {
        ctx.push(
            Diagnostic::error(
                "spec::vip-is-node",
                format!("the VIP {vip} is also the address of node {}", n.name),
            )
            .help("choose a free address on the control planes' network for the VIP")
            .at("spec.controlPlane.vip.address"),
        );
    }
    let mut subnets: Vec<(String, IpNet)> = Vec::new();
    if let Some(s) = &cfg.subnet {
        match IpNet::from_str(s.trim()) {
            Ok(net) => subnets.push(("controlPlane.vip.subnet".to_string(), net.trunc())),
            Err(_) => ctx.push(
                Diagnostic::error(
                    "spec::vip-subnet",
                    format!("vip.subnet {s:?} is not a CIDR"),
                )
                .help("write the control planes' network, e.g. `172.20.6.0/24`")
                .at("spec.controlPlane.vip.subnet"),
            ),
        }
    }
    for n in nodes.iter().filter(|n| n.is_control_plane()) {
        if let Some(net) = n.subnet {
            subnets.push((format!("node {}", n.name), net));
        }
    }
    if cfg.mode == VipMode::Arp {
        if subnets.is_empty() && file.spec.provider == Provider::Ssh {
            ctx.push(
                Diagnostic::warning("spec::vip-subnet-unknown", format!("cannot check that the ARP VIP {vip} is on the control planes' network"))
                    .help("write control-plane addresses with their prefix length (e.g. 172.20.6.111/24) or set vip.subnet")
                    .at("spec.controlPlane.vip.address"),
            );
        }
        for (from, net) in &subnets {
            if !net.contains(&vip) {
                ctx.push(
                    Diagnostic::error("spec::vip-subnet", format!("the ARP VIP {vip} is not in the control planes' subnet {net} (from {from})"))
                        .help(format!("in ARP mode the VIP must be an unused address of {net}; choose one there or use `mode: bgp`"))
                        .at("spec.controlPlane.vip.address"),
                );
                break;
            }
        }
        let missing: Vec<&str> = nodes
            .iter()
            .filter(|n| n.is_control_plane() && n.vip_interface.is_none())
            .map(|n| n.name.as_str())
            .collect();
        if !missing.is_empty() {
            ctx.push(
                Diagnostic::error(
                    "spec::vip-interface",
                    format!(
                        "no VIP interface for control plane{} {}",
                        if missing.len() == 1 { "" } else { "s" },
                        missing.join(", ")
                    ),
                )
                .help("set `vip.interface` (e.g. `ens18`) or `vipInterface` on each control plane")
                .at("spec.controlPlane.vip"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            parse_endpoint("172.20.6.110:6443").map(|e| e.to_string()),
            Ok("172.20.6.110:6443".to_string())
        );
        assert_eq!(parse_endpoint("k8s.example.com").map(|e| e.port), Ok(6443));
        assert_eq!(
            parse_endpoint("[fd00::1]:443").map(|e| e.to_string()),
            Ok("[fd00::1]:443".to_string())
        );
        assert_eq!(
            parse_endpoint("fd00::1").map(|e| e.host),
            Ok("fd00::1".to_string())
        );
        for bad in ["", "https://a:1", "a:0", "a:x", "[fd00::1", "bad_host:1"] {
            assert!(parse_endpoint(bad).is_err(), "{bad}");
        }
    }
}
