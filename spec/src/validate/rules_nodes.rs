//! Rules on nodes: at least one control plane; names are unique DNS-1123 labels; addresses parse (with an
//! optional prefix length), are unique and usable; ssh nodes have an address; labels and taints follow
//! Kubernetes syntax; an even number of stacked-etcd control planes is warned about; provider-specific
//! fields (port mappings for docker, SSH overrides for ssh) are used with the right provider.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

use super::Ctx;
use crate::diag::Diagnostic;
use crate::model::{ClusterFile, ClusterSpec, HostKeyPolicy, Node, Provider, Role};
use crate::syntax;
use crate::valid::{SshTarget, ValidNode};

/// Why a node address does not parse; the text continues `node address …`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AddressError {
    /// The address part is not an IP address.
    #[error("{text:?} is not an IP address")]
    NotIp {
        /// The address part as written.
        text: String,
        /// The parser's error.
        #[source]
        source: std::net::AddrParseError,
    },
    /// `ip/prefix` with a prefix length that does not parse or is too long for the family.
    #[error("the prefix length is not valid")]
    Prefix(#[source] ipnet::AddrParseError),
}

/// Parses `ip` or `ip/prefix` into (address, subnet). Errors: [`AddressError`].
pub(crate) fn parse_address(text: &str) -> Result<(IpAddr, Option<IpNet>), AddressError> {
    let not_ip = |a: &str, source| AddressError::NotIp {
        text: a.to_string(),
        source,
    };
    let t = text.trim();
    if let Some((a, _)) = t.split_once('/') {
        let addr = IpAddr::from_str(a).map_err(|e| not_ip(a, e))?;
        let net = IpNet::from_str(t).map_err(AddressError::Prefix)?;
        Ok((addr, Some(net.trunc())))
    } else {
        IpAddr::from_str(t)
            .map(|a| (a, None))
            .map_err(|e| not_ip(t, e))
    }
}

/// Rejects addresses no node can have.
pub(crate) fn unusable(addr: &IpAddr) -> Option<&'static str> {
    if addr.is_unspecified() {
        Some("the unspecified address")
    } else if addr.is_loopback() {
        Some("a loopback address")
    } else if addr.is_multicast() {
        Some("a multicast address")
    } else if matches!(addr, IpAddr::V4(v4) if v4.is_broadcast()) {
        Some("the broadcast address")
    } else {
        None
    }
}

/// Why a Linux interface name is refused; the text continues `interface "x" …`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InterfaceNameError {
    /// Empty, or longer than the kernel's 15 bytes (`IFNAMSIZ` − 1).
    #[error("must be 1 to 15 characters")]
    Length,
    /// `.`, `..`, or a '/', ':', white-space or control character.
    #[error("may not contain '/', ':' or spaces")]
    Chars,
}

/// The VIP interface `ifname` (written at `at`) is a Linux interface name ([`interface_name`]); an
/// error there when not.
pub(crate) fn check_interface_name(ctx: &mut Ctx<'_>, ifname: &str, at: String) {
    if let Err(why) = interface_name(ifname) {
        ctx.push(
            Diagnostic::error(
                "spec::vip-interface",
                format!("interface name {ifname:?} {why}"),
            )
            .help("give the Linux interface name, e.g. `ens18`")
            .at(at),
        );
    }
}

/// A Linux interface name: 1–15 characters, no '/', no whitespace, not `.`/`..`.
pub(crate) fn interface_name(s: &str) -> Result<(), InterfaceNameError> {
    if s.is_empty() || s.len() > 15 {
        return Err(InterfaceNameError::Length);
    }
    if s == "."
        || s == ".."
        || s.chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
    {
        return Err(InterfaceNameError::Chars);
    }
    Ok(())
}

pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile) -> Vec<ValidNode> {
    let spec = &file.spec;
    if spec.nodes.is_empty() {
        ctx.push(
            Diagnostic::error("spec::no-nodes", "the cluster has no nodes")
                .help("add at least one node with `role: control-plane` under spec.nodes")
                .at("spec.nodes"),
        );
        return Vec::new();
    }
    control_plane_count(ctx, spec);
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    let mut addrs: BTreeMap<IpAddr, usize> = BTreeMap::new();
    let mut out = Vec::new();
    // Host ports are shared by all node containers of the docker host.
    let mut host_ports = BTreeSet::new();
    for (i, node) in spec.nodes.iter().enumerate() {
        let p = format!("spec.nodes[{i}]");
        node_name(ctx, node, i, &p, &mut names);
        let (address, subnet) = node_address(ctx, spec.provider, node, i, &p, &mut addrs);
        check_labels_taints(ctx, node, &p);
        check_node_provider(ctx, file, node, &p, &mut host_ports);
        out.push(valid_node(file, node, i, address, subnet));
    }
    out
}

/// At least one control plane; a warning for an even number (stacked etcd).
fn control_plane_count(ctx: &mut Ctx<'_>, spec: &ClusterSpec) {
    let cps = spec
        .nodes
        .iter()
        .filter(|n| n.role == Role::ControlPlane)
        .count();
    if cps == 0 {
        ctx.push(
            Diagnostic::error(
                "spec::no-control-plane",
                "no node has `role: control-plane`",
            )
            .help("make the first node `role: control-plane`")
            .at("spec.nodes"),
        );
    } else if cps % 2 == 0 {
        let second = spec
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.role == Role::ControlPlane)
            .map(|(i, _)| i)
            .next_back()
            .unwrap_or(0);
        ctx.push(
            Diagnostic::warning("spec::even-control-planes", format!("{cps} control planes with stacked etcd: an even count tolerates no more failures than {}", cps - 1))
                .help(format!("use an odd number of control planes ({} or {})", cps - 1, cps + 1))
                .at(format!("spec.nodes[{second}].role")),
        );
    }
}

/// Node `i`'s name (at `p`) is a DNS-1123 label not used before (`names`: name → first index).
fn node_name<'a>(
    ctx: &mut Ctx<'_>,
    node: &'a Node,
    i: usize,
    p: &str,
    names: &mut BTreeMap<&'a str, usize>,
) {
    if let Err(why) = syntax::dns1123_label(&node.name) {
        ctx.push(
            Diagnostic::error(
                "spec::node-name",
                format!("node name {:?} {why}", node.name),
            )
            .help("use a DNS-1123 label: lower-case letters, digits and '-', e.g. `worker-1`")
            .at(format!("{p}.name")),
        );
    } else if let Some(first) = names.insert(&node.name, i) {
        names.insert(&node.name, first);
        ctx.push(
            Diagnostic::error(
                "spec::node-name-duplicate",
                format!(
                    "node name {:?} is already used by spec.nodes[{first}]",
                    node.name
                ),
            )
            .help("give every node a unique name")
            .at(format!("{p}.name")),
        );
    }
}

/// Node `i`'s address (at `p`): required over SSH, ignored (with a warning) on docker, usable and
/// not used before (`addrs`: address → first index). Returns the address and its subnet, when used.
fn node_address(
    ctx: &mut Ctx<'_>,
    provider: Provider,
    node: &Node,
    i: usize,
    p: &str,
    addrs: &mut BTreeMap<IpAddr, usize>,
) -> (Option<IpAddr>, Option<IpNet>) {
    let mut address = None;
    let mut subnet = None;
    match (&node.address, provider) {
        (None, Provider::Ssh) => ctx.push(
            Diagnostic::error("spec::node-address", format!("node {:?} has no address", node.name))
                .help("add `address: <IP>` (optionally with the prefix length, e.g. 172.20.6.111/24); the ssh provider connects to it")
                .at(p),
        ),
        (None, Provider::Docker) => {}
        (Some(a), provider) => match parse_address(a) {
            Err(why) => ctx.push(
                Diagnostic::error("spec::node-address", format!("node address {why}"))
                    .help("write an IP address, optionally with the prefix length, e.g. `172.20.6.111/24`")
                    .at(format!("{p}.address")),
            ),
            Ok((addr, net)) => {
                if let Some(what) = unusable(&addr) {
                    ctx.push(
                        Diagnostic::error("spec::node-address", format!("node address {addr} is {what}"))
                            .help("use the address other nodes reach this node at")
                            .at(format!("{p}.address")),
                    );
                } else if let Some(first) = addrs.get(&addr) {
                    ctx.push(
                        Diagnostic::error("spec::node-address-duplicate", format!("address {addr} is already used by spec.nodes[{first}]"))
                            .help("give every node its own address")
                            .at(format!("{p}.address")),
                    );
                } else {
                    addrs.insert(addr, i);
                }
                if provider == Provider::Docker {
                    ctx.push(
                        Diagnostic::warning("spec::docker-address", "the docker provider assigns node addresses; this one is ignored")
                            .help("remove `address` for docker nodes")
                            .at(format!("{p}.address")),
                    );
                } else {
                    // Really ignored on docker: the endpoint, advertiseAddress and node-ip come
                    // from the container Docker creates, never from this address.
                    address = Some(addr);
                    subnet = net;
                }
            }
        },
    }
    (address, subnet)
}

/// The validated node `i` with its resolved address, subnet, SSH target and VIP interface.
fn valid_node(
    file: &ClusterFile,
    node: &Node,
    i: usize,
    address: Option<IpAddr>,
    subnet: Option<IpNet>,
) -> ValidNode {
    let spec = &file.spec;
    let ssh = ssh_target(file, node);
    ValidNode {
        index: i,
        name: node.name.clone(),
        role: node.role,
        address,
        subnet,
        ssh,
        vip_interface: node.vip_interface.clone().or_else(|| {
            if node.role == Role::ControlPlane {
                spec.control_plane
                    .vip
                    .as_ref()
                    .and_then(|v| v.interface.clone())
            } else {
                None
            }
        }),
        labels: node.labels.clone(),
        taints: node.taints.clone().unwrap_or_default(),
        taints_set: node.taints.is_some(),
        port_mappings: node.port_mappings.clone(),
    }
}

fn ssh_target(file: &ClusterFile, node: &Node) -> SshTarget {
    let d = &file.spec.ssh;
    let o = node.ssh.clone().unwrap_or_default();
    SshTarget {
        user: o.user.unwrap_or_else(|| d.user.clone()),
        key_file: o.key_file.or_else(|| d.key_file.clone()),
        port: o.port.unwrap_or(d.port),
        host_key_policy: o.host_key_policy.unwrap_or(d.host_key_policy),
        connect_attempts: d.connect_attempts,
    }
}

fn check_labels_taints(ctx: &mut Ctx<'_>, node: &Node, p: &str) {
    for (k, v) in &node.labels {
        let kp = crate::position::join_key(&format!("{p}.labels"), k);
        if let Err(why) = syntax::label_key(k) {
            ctx.push(
                Diagnostic::error("spec::label", format!("label key {k:?} {why}"))
                    .help("a label key is `[prefix/]name`: name up to 63 letters, digits, '-', '_', '.', prefix a DNS subdomain")
                    .at(format!("{kp}#key")),
            );
        }
        if let Err(why) = syntax::label_value(v) {
            ctx.push(
                Diagnostic::error("spec::label", format!("label value {v:?} {why}"))
                    .help("a label value is empty or up to 63 letters, digits, '-', '_', '.', starting and ending alphanumeric")
                    .at(kp),
            );
        }
    }
    let mut seen = BTreeSet::new();
    for (j, t) in node.taints.iter().flatten().enumerate() {
        let tp = format!("{p}.taints[{j}]");
        if let Err(why) = syntax::label_key(&t.key) {
            ctx.push(
                Diagnostic::error("spec::taint", format!("taint key {:?} {why}", t.key))
                    .help("a taint key follows label-key syntax, e.g. `dedicated` or `example.com/gpu`")
                    .at(format!("{tp}.key")),
            );
        }
        if let Some(v) = &t.value {
            if let Err(why) = syntax::label_value(v) {
                ctx.push(
                    Diagnostic::error("spec::taint", format!("taint value {v:?} {why}"))
                        .help("a taint value follows label-value syntax")
                        .at(format!("{tp}.value")),
                );
            }
        }
        if !seen.insert((t.key.clone(), format!("{:?}", t.effect))) {
            ctx.push(
                Diagnostic::error(
                    "spec::taint",
                    format!("taint {}:{:?} is given twice", t.key, t.effect),
                )
                .help("a node has at most one taint per key and effect")
                .at(tp),
            );
        }
    }
}

fn check_node_provider(
    ctx: &mut Ctx<'_>,
    file: &ClusterFile,
    node: &Node,
    p: &str,
    host_ports: &mut BTreeSet<(Option<String>, u16, String)>,
) {
    let provider = file.spec.provider;
    // The docker provider names a node's container `<cluster>-<node>` (kind's naming), and that name
    // is the container's host name, so a DNS-1123 label: at most 63 characters.
    let container = file.metadata.name.len() + 1 + node.name.len();
    let names_valid = file.metadata.name.len() <= 63 && node.name.len() <= 63;
    if provider == Provider::Docker && names_valid && container > 63 {
        ctx.push(
            Diagnostic::error(
                "spec::node-name",
                format!(
                    "the node's container name `{}-{}` would be {container} characters; it is the container's host name, at most 63",
                    file.metadata.name, node.name
                ),
            )
            .help("shorten the node name or `metadata.name` so that together (with a '-') they fit in 63 characters")
            .at(format!("{p}.name")),
        );
    }
    if provider == Provider::Ssh && !node.port_mappings.is_empty() {
        ctx.push(
            Diagnostic::error(
                "spec::port-mappings",
                "portMappings are a docker-provider setting",
            )
            .help("remove portMappings for ssh hosts")
            .at(format!("{p}.portMappings")),
        );
    }
    if provider == Provider::Docker && node.ssh.is_some() {
        ctx.push(
            Diagnostic::warning(
                "spec::node-ssh",
                "ssh settings are ignored by the docker provider",
            )
            .help("remove `ssh` from docker nodes")
            .at(format!("{p}.ssh")),
        );
    }
    if let Some(s) = &node.ssh {
        if s.user.as_deref().is_some_and(|u| u.trim().is_empty()) {
            ctx.push(
                Diagnostic::error("spec::ssh", "ssh user is empty")
                    .help("give a login user or remove the field")
                    .at(format!("{p}.ssh.user")),
            );
        }
        if s.port == Some(0) {
            ctx.push(
                Diagnostic::error("spec::ssh", "ssh port 0 is not valid")
                    .help("use 1–65535 (usually 22)")
                    .at(format!("{p}.ssh.port")),
            );
        }
        if s.key_file.as_deref().is_some_and(|k| k.trim().is_empty()) {
            ctx.push(
                Diagnostic::error("spec::ssh", "ssh keyFile is empty")
                    .help("give a key file path or remove the field")
                    .at(format!("{p}.ssh.keyFile")),
            );
        }
        if s.host_key_policy == Some(HostKeyPolicy::Insecure) {
            ctx.push(super::rules_runtime::insecure_host_keys(&format!(
                "{p}.ssh.hostKeyPolicy"
            )));
        }
    }
    if let Some(ifname) = &node.vip_interface {
        if node.role != Role::ControlPlane {
            ctx.push(
                Diagnostic::error(
                    "spec::vip-interface",
                    format!(
                        "node {:?} is a worker; only control planes carry the VIP",
                        node.name
                    ),
                )
                .help("remove vipInterface from workers")
                .at(format!("{p}.vipInterface")),
            );
        } else if file.spec.control_plane.vip.is_none() {
            ctx.push(
                Diagnostic::error(
                    "spec::vip-interface",
                    "vipInterface is set but no VIP is configured",
                )
                .help("add spec.controlPlane.vip, or remove vipInterface")
                .at(format!("{p}.vipInterface")),
            );
        }
        check_interface_name(ctx, ifname, format!("{p}.vipInterface"));
    }
    for (j, m) in node.port_mappings.iter().enumerate() {
        let mp = format!("{p}.portMappings[{j}]");
        if m.container_port == 0 || m.host_port == 0 {
            ctx.push(
                Diagnostic::error("spec::port-mappings", "port 0 is not valid")
                    .help("use ports 1–65535")
                    .at(mp.clone()),
            );
        }
        if let Some(l) = &m.listen_address {
            if IpAddr::from_str(l).is_err() {
                ctx.push(
                    Diagnostic::error(
                        "spec::port-mappings",
                        format!("listenAddress {l:?} is not an IP address"),
                    )
                    .help("use e.g. 127.0.0.1 or 0.0.0.0")
                    .at(format!("{mp}.listenAddress")),
                );
            }
        }
        let proto = m.protocol.clone().unwrap_or_else(|| "TCP".into());
        if !matches!(proto.as_str(), "TCP" | "UDP" | "SCTP") {
            ctx.push(
                Diagnostic::error(
                    "spec::port-mappings",
                    format!("protocol {proto:?} is not TCP, UDP or SCTP"),
                )
                .help("use TCP, UDP or SCTP (upper case, as kind)")
                .at(format!("{mp}.protocol")),
            );
        }
        if !host_ports.insert((m.listen_address.clone(), m.host_port, proto)) {
            ctx.push(
                Diagnostic::error(
                    "spec::port-mappings",
                    format!(
                        "host port {} is already mapped (by this or another node)",
                        m.host_port
                    ),
                )
                .help("map each host port once")
                .at(format!("{mp}.hostPort")),
            );
        }
    }
}
