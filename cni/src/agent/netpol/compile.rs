//! The policy compiler: `networking.k8s.io/v1` NetworkPolicies, the cluster's Pods and Namespaces
//! and this node's name in, a [`Ruleset`] out — pure, no I/O (the nftables table is
//! [`super::table`]'s).
//!
//! Semantics (Kubernetes'): a pod is isolated for ingress (egress) when some policy of its namespace
//! selects it and has `Ingress` (`Egress`) in its `policyTypes` (default: `Ingress`, plus `Egress`
//! when the policy has egress rules); an isolated pod's traffic in that direction passes when any
//! rule of any policy selecting it allows it. A rule allows its peers (`from`/`to`: pods by
//! `podSelector` in the policy's namespace, pods of namespaces by `namespaceSelector`, both
//! together, or `ipBlock` CIDRs minus `except`; absent or empty: everyone) on its ports (absent or
//! empty: every port; a number, a named port — resolved on the destination pod, so per pod — or
//! `port`..`endPort`; protocol TCP by default, UDP, SCTP). Only this node's pods are selected here:
//! the forward hook of a node sees the traffic of its own pods, egress on the sender's node and
//! ingress on the receiver's. Host-network pods and pods without an IPv4 address are neither
//! selected nor peers; IPv6 `ipBlock`s are left out (pod addresses are IPv4).
//!
//! A policy that cannot be compiled (a malformed selector, an impossible port range, an unknown
//! protocol, a bad CIDR) still isolates the pods it selects, for its policy types, and allows
//! nothing: it fails closed, and is reported in [`Ruleset::failed`].

mod peers;

use super::select::{self, Ranges, SelectorError};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPort, NetworkPolicySpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

/// A transport protocol a policy port names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Proto {
    /// TCP (the default).
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Proto {
    /// The nftables name (`meta l4proto …`).
    pub fn nft(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Sctp => "sctp",
        }
    }
    fn parse(s: Option<&str>) -> Result<Self, PolicyError> {
        match s.unwrap_or("TCP") {
            "TCP" => Ok(Proto::Tcp),
            "UDP" => Ok(Proto::Udp),
            "SCTP" => Ok(Proto::Sctp),
            other => Err(PolicyError::Protocol(other.to_string())),
        }
    }
}

/// Why a policy could not be compiled (it then fails closed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A pod or namespace selector cannot be evaluated.
    #[error(transparent)]
    Selector(#[from] SelectorError),
    /// A protocol other than TCP, UDP, SCTP.
    #[error("unsupported protocol {0:?}")]
    Protocol(String),
    /// A port number outside 1..65535.
    #[error("port {0} is outside 1..65535")]
    Port(i64),
    /// `endPort` below `port`, outside the port range, or with a named port.
    #[error("endPort {end} does not fit port {port}")]
    EndPort {
        /// The port (number or name).
        port: String,
        /// The endPort.
        end: i32,
    },
    /// An `ipBlock` CIDR or `except` that is not a CIDR.
    #[error("ipBlock {0:?} is not a CIDR")]
    Cidr(String),
    /// An `except` that is not inside its `ipBlock`'s CIDR.
    #[error("ipBlock except {except} is not inside {cidr}")]
    Except {
        /// The block.
        cidr: String,
        /// The exception.
        except: String,
    },
    /// A peer with `ipBlock` and a selector at once.
    #[error("a peer has ipBlock together with a selector")]
    MixedPeer,
}

/// Which ports of which protocol one match allows; `pods` limits the destination (a named port
/// resolves to a number per destination pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMatch {
    /// Destinations the match is limited to (named ports), `None`: any.
    pub pods: Option<BTreeSet<Ipv4Addr>>,
    /// The protocol.
    pub proto: Proto,
    /// Inclusive port ranges; `None`: every port of `proto`.
    pub ports: Option<Vec<(u16, u16)>>,
}

/// One ingress or egress rule, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The peers (`from`/`to`); `None`: everyone.
    pub peers: Option<Ranges>,
    /// Where `peers` comes from, one [`Source`] per peer of the rule (empty for everyone): the
    /// table keeps one set per distinct source, shared by every rule naming it.
    pub sources: Vec<Source>,
    /// The ports; `None`: every port of every protocol. `Some` is never empty.
    pub ports: Option<Vec<PortMatch>>,
}

/// One peer of a rule as a set of addresses: which pods a selector (pair) picks, or an `ipBlock`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// What it is, the same for every peer written the same way (namespace and selectors as
    /// JSON, or the block).
    pub key: String,
    /// Its addresses.
    pub addrs: Ranges,
}

/// One policy that selects pods of this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    /// `namespace/name`.
    pub id: String,
    /// This node's pods it selects.
    pub pods: BTreeSet<Ipv4Addr>,
    /// What selects them (its namespace and pod selector), the same for every policy selecting
    /// the same way: the table keeps one set per distinct selection.
    pub pods_key: String,
    /// Its ingress rules (empty when it has no `Ingress` type, or when it allows no ingress).
    pub ingress: Vec<Rule>,
    /// Its egress rules.
    pub egress: Vec<Rule>,
}

/// A policy that failed closed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// `namespace/name`.
    pub id: String,
    /// Why it could not be compiled.
    pub error: PolicyError,
}

/// What the node enforces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ruleset {
    /// This node's pods isolated for ingress.
    pub ingress_isolated: BTreeSet<Ipv4Addr>,
    /// This node's pods isolated for egress.
    pub egress_isolated: BTreeSet<Ipv4Addr>,
    /// The policies selecting some of this node's pods, ordered by `namespace/name`.
    pub policies: Vec<Compiled>,
    /// Policies that failed closed.
    pub failed: Vec<Failed>,
}

/// A pod as the compiler sees it.
#[derive(Debug)]
struct PodView<'a> {
    ns: &'a str,
    labels: Option<&'a BTreeMap<String, String>>,
    ip: Ipv4Addr,
    local: bool,
    /// Named container ports: (name, protocol) → number.
    ports: BTreeMap<(&'a str, Proto), u16>,
}

fn pod_view<'a>(p: &'a Pod, node: &str) -> Option<PodView<'a>> {
    let spec = p.spec.as_ref()?;
    let status = p.status.as_ref()?;
    if spec.host_network == Some(true)
        || matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"))
    {
        return None;
    }
    let ip = status
        .pod_ips
        .iter()
        .flatten()
        .map(|a| a.ip.as_str())
        .chain(status.pod_ip.as_deref())
        .find_map(|s| s.parse::<Ipv4Addr>().ok())?;
    let mut ports = BTreeMap::new();
    for c in &spec.containers {
        for cp in c.ports.iter().flatten() {
            let (Some(name), Ok(proto), Ok(n)) = (
                cp.name.as_deref(),
                Proto::parse(cp.protocol.as_deref()),
                u16::try_from(cp.container_port),
            ) else {
                continue;
            };
            ports.insert((name, proto), n);
        }
    }
    Some(PodView {
        ns: p.metadata.namespace.as_deref()?,
        labels: p.metadata.labels.as_ref(),
        ip,
        local: spec.node_name.as_deref() == Some(node),
        ports,
    })
}

/// The cluster as the compiler sees it, and the addresses of each peer source evaluated so far
/// (by [`Source::key`]: a selector written by many policies is evaluated once).
struct World<'a> {
    memo: std::cell::RefCell<BTreeMap<String, Ranges>>,
    pods: Vec<PodView<'a>>,
    ns_labels: BTreeMap<&'a str, Option<&'a BTreeMap<String, String>>>,
}

/// Compiles `policies` against `pods` and `namespaces` for node `node` (pods whose
/// `spec.nodeName` is `node` are this node's). Never fails: a policy that cannot be compiled is in
/// [`Ruleset::failed`] and fails closed.
pub fn compile(
    node: &str,
    policies: &[NetworkPolicy],
    pods: &[Pod],
    namespaces: &[Namespace],
) -> Ruleset {
    compile_refs(node, policies, pods, namespaces)
}

/// [`compile`] of objects held elsewhere (the agent's cache), without copying them.
pub(crate) fn compile_refs<'a>(
    node: &str,
    policies: impl IntoIterator<Item = &'a NetworkPolicy>,
    pods: impl IntoIterator<Item = &'a Pod>,
    namespaces: impl IntoIterator<Item = &'a Namespace>,
) -> Ruleset {
    let world = World {
        memo: Default::default(),
        pods: pods.into_iter().filter_map(|p| pod_view(p, node)).collect(),
        ns_labels: namespaces
            .into_iter()
            .filter_map(|n| Some((n.metadata.name.as_deref()?, n.metadata.labels.as_ref())))
            .collect(),
    };
    let mut sorted: Vec<&NetworkPolicy> = policies.into_iter().collect();
    sorted.sort_by_cached_key(|p| id(p));
    let mut out = Ruleset::default();
    for p in sorted {
        let (Some(ns), Some(spec)) = (p.metadata.namespace.as_deref(), p.spec.as_ref()) else {
            continue;
        };
        let (ingress_type, egress_type) = types(spec);
        let everyone = Default::default();
        let sel = spec.pod_selector.as_ref().unwrap_or(&everyone);
        let selected = match world.select_local(ns, sel) {
            Ok(s) => s,
            Err(e) => {
                // Which pods it meant is unknown: isolate every local pod of its namespace.
                let all = world.select_local(ns, &everyone).unwrap_or_default();
                out.fail(id(p), e.into(), &all, ingress_type, egress_type);
                continue;
            }
        };
        if selected.is_empty() {
            continue;
        }
        let pods: BTreeSet<Ipv4Addr> = selected.iter().map(|v| v.ip).collect();
        if ingress_type {
            out.ingress_isolated.extend(&pods);
        }
        if egress_type {
            out.egress_isolated.extend(&pods);
        }
        match world.rules(ns, spec, &selected, ingress_type, egress_type) {
            Ok((ingress, egress)) => out.policies.push(Compiled {
                id: id(p),
                pods,
                pods_key: format!("local ns={ns} pods={}", key(sel)),
                ingress,
                egress,
            }),
            Err(error) => out.failed.push(Failed { id: id(p), error }),
        }
    }
    out
}

impl Ruleset {
    fn fail(&mut self, id: String, error: PolicyError, pods: &[&PodView<'_>], i: bool, e: bool) {
        for v in pods {
            if i {
                self.ingress_isolated.insert(v.ip);
            }
            if e {
                self.egress_isolated.insert(v.ip);
            }
        }
        self.failed.push(Failed { id, error });
    }
}

fn id(p: &NetworkPolicy) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or_default(),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

/// (Ingress, Egress) policy types: as written, else Ingress plus Egress when egress rules exist (the
/// API server's defaulting, so a stored policy always has them written).
fn types(spec: &NetworkPolicySpec) -> (bool, bool) {
    match &spec.policy_types {
        Some(t) if !t.is_empty() => (
            t.iter().any(|t| t == "Ingress"),
            t.iter().any(|t| t == "Egress"),
        ),
        _ => (true, spec.egress.as_ref().is_some_and(|e| !e.is_empty())),
    }
}

type Rules = (Vec<Rule>, Vec<Rule>);

impl<'a> World<'a> {
    fn select_local(
        &self,
        ns: &str,
        sel: &LabelSelector,
    ) -> Result<Vec<&PodView<'a>>, SelectorError> {
        let mut out = Vec::new();
        for v in self.pods.iter().filter(|v| v.local && v.ns == ns) {
            if select::matches(sel, v.labels)? {
                out.push(v);
            }
        }
        Ok(out)
    }

    fn rules(
        &self,
        ns: &str,
        spec: &NetworkPolicySpec,
        selected: &[&PodView<'a>],
        ingress: bool,
        egress: bool,
    ) -> Result<Rules, PolicyError> {
        let mut inr = Vec::new();
        if ingress {
            for r in spec.ingress.iter().flatten() {
                let peers = self.peers(ns, r.from.as_deref())?;
                let dst: Vec<&PodView<'a>> = selected.to_vec();
                if let Some(rule) = rule(peers, r.ports.as_deref(), &dst)? {
                    inr.push(rule);
                }
            }
        }
        let mut eg = Vec::new();
        if egress {
            for r in spec.egress.iter().flatten() {
                let peers = self.peers(ns, r.to.as_deref())?;
                // Named ports resolve on the destination: any pod among the peers (looked for
                // only when the rule names a port).
                let named = r
                    .ports
                    .iter()
                    .flatten()
                    .any(|p| matches!(p.port, Some(IntOrString::String(_))));
                let dst: Vec<&PodView<'a>> = self
                    .pods
                    .iter()
                    .filter(|_| named)
                    .filter(|v| peers.as_ref().is_none_or(|(p, _)| p.contains(v.ip)))
                    .collect();
                if let Some(rule) = rule(peers, r.ports.as_deref(), &dst)? {
                    eg.push(rule);
                }
            }
        }
        Ok((inr, eg))
    }
}

/// A selector as a key: its JSON (`{}` selects everything).
fn key(sel: &LabelSelector) -> String {
    serde_json::to_string(sel).unwrap_or_default()
}

/// One rule: its peers and ports resolved. `None` when it can match nothing (no peer address, or
/// only named ports no destination has).
fn rule(
    peers: Option<(Ranges, Vec<Source>)>,
    ports: Option<&[NetworkPolicyPort]>,
    dst: &[&PodView<'_>],
) -> Result<Option<Rule>, PolicyError> {
    if peers.as_ref().is_some_and(|(r, _)| r.is_empty()) {
        // Still check the ports, so a malformed one fails closed.
        let _ = port_matches(ports, dst)?;
        return Ok(None);
    }
    let (peers, sources) = peers.map_or((None, Vec::new()), |(r, s)| (Some(r), s));
    match port_matches(ports, dst)? {
        Some(m) if m.is_empty() => Ok(None),
        ports => Ok(Some(Rule {
            peers,
            sources,
            ports,
        })),
    }
}

/// The port matches of a rule; `None` for every port (absent or empty list).
fn port_matches(
    ports: Option<&[NetworkPolicyPort]>,
    dst: &[&PodView<'_>],
) -> Result<Option<Vec<PortMatch>>, PolicyError> {
    let Some(ports) = ports.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    // Numbers and ranges grouped per protocol; named ports per (protocol, number) → pods.
    let mut numeric: BTreeMap<Proto, Option<Vec<(u16, u16)>>> = BTreeMap::new();
    let mut named: BTreeMap<(Proto, u16), BTreeSet<Ipv4Addr>> = BTreeMap::new();
    for p in ports {
        let proto = Proto::parse(p.protocol.as_deref())?;
        match &p.port {
            None => {
                if p.end_port.is_some() {
                    return Err(PolicyError::EndPort {
                        port: String::new(),
                        end: p.end_port.unwrap_or_default(),
                    });
                }
                numeric.insert(proto, None);
            }
            Some(IntOrString::Int(n)) => {
                let lo = port_number(i64::from(*n))?;
                let hi = match p.end_port {
                    None => lo,
                    Some(e) if i64::from(e) >= i64::from(lo) && e <= 65535 => e as u16,
                    Some(e) => {
                        return Err(PolicyError::EndPort {
                            port: n.to_string(),
                            end: e,
                        })
                    }
                };
                if let Some(list) = numeric.entry(proto).or_insert_with(|| Some(Vec::new())) {
                    list.push((lo, hi));
                }
            }
            Some(IntOrString::String(name)) => {
                if let Some(e) = p.end_port {
                    return Err(PolicyError::EndPort {
                        port: name.clone(),
                        end: e,
                    });
                }
                for v in dst {
                    if let Some(&n) = v.ports.get(&(name.as_str(), proto)) {
                        named.entry((proto, n)).or_default().insert(v.ip);
                    }
                }
            }
        }
    }
    let mut out: Vec<PortMatch> = numeric
        .into_iter()
        .map(|(proto, ports)| PortMatch {
            pods: None,
            proto,
            ports: ports.map(|mut l| {
                l.sort_unstable();
                l.dedup();
                l
            }),
        })
        .collect();
    out.extend(named.into_iter().map(|((proto, n), pods)| PortMatch {
        pods: Some(pods),
        proto,
        ports: Some(vec![(n, n)]),
    }));
    Ok(Some(out))
}

fn port_number(n: i64) -> Result<u16, PolicyError> {
    u16::try_from(n)
        .ok()
        .filter(|&p| p != 0)
        .ok_or(PolicyError::Port(n))
}
