//! The agent's nftables table as data: a [`Ruleset`] becomes named sets (their elements) and named
//! chains (their rules), under stable indices ([`Names`]), so that two tables can be compared
//! object by object ([`super::diff`]) and only what changed is sent to `nft`
//! ([`super::nft::whole`] writes all of it).
//!
//! ```text
//! set ingress_isolated, egress_isolated      this node's isolated pods
//! set lS                                     this node's pods one selection picks (namespace and
//!                                            podSelector; shared by the policies selecting so)
//! set sS (interval)                          the addresses of one peer (podSelector,
//!                                            namespaceSelector, both, or ipBlock minus except;
//!                                            shared by every rule naming it)
//! chain forward   (hook)  established → accept; egress_isolated → jump egress;
//!                         ingress_isolated → jump ingress
//! chain egress            ip saddr @lS jump pK_egress … ; counter drop     (K: the policy's index)
//! chain pK_egress         ip daddr @sS <ports> goto egress_allowed comment "ns/name egress J"
//! chain egress_allowed    ingress_isolated → jump ingress; accept
//! chain ingress           ip daddr @lS jump pK_ingress … ; counter drop
//! chain pK_ingress        ip saddr @sS <ports> accept comment "ns/name ingress J"
//! ```
//!
//! A rule with several peers is one line per peer; with no peers (everyone), one line without a
//! set. An egress allowed by some policy goes on to the ingress check (`egress_allowed`), which
//! accepts or drops: every path out of `egress` and `ingress` ends in a verdict, so one policy's
//! chain returning without a match falls through to the next policy's jump, then to the drop.

use super::compile::{Compiled, PortMatch, Rule, Ruleset};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::Ipv4Addr;

/// One set: whether it holds ranges (`flags interval`), and its elements: inclusive address
/// ranges (`lo == hi` for one address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Set {
    pub(crate) interval: bool,
    pub(crate) elements: BTreeSet<(u32, u32)>,
}

/// One chain: its hook line for the base chain (`None` for a regular chain) and its rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chain {
    pub(crate) hook: Option<&'static str>,
    pub(crate) rules: Vec<String>,
}

/// The table: sets and chains by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Table {
    pub(crate) sets: BTreeMap<String, Set>,
    pub(crate) chains: BTreeMap<String, Chain>,
}

/// The stable indices the table's names carry: per policy (`namespace/name`) for its chains, per
/// set key ([`Compiled::pods_key`], [`super::compile::Source::key`]) for the shared sets. An index
/// is kept while its policy or key is in the ruleset; a new one takes the lowest free index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Names {
    policies: Index,
    sets: Index,
}

/// Indices by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Index(BTreeMap<String, usize>);

impl Index {
    /// `keys` (in order, repeats ignored) following these indices.
    fn next<'a>(&self, keys: impl Iterator<Item = &'a str>) -> Self {
        let keys: Vec<&str> = keys.collect();
        let present: BTreeSet<&str> = keys.iter().copied().collect();
        let mut kept: BTreeMap<String, usize> = self
            .0
            .iter()
            .filter(|(k, _)| present.contains(k.as_str()))
            .map(|(k, &i)| (k.clone(), i))
            .collect();
        let mut used: BTreeSet<usize> = kept.values().copied().collect();
        let mut free = 0;
        for k in keys {
            if kept.contains_key(k) {
                continue;
            }
            while used.contains(&free) {
                free += 1;
            }
            used.insert(free);
            kept.insert(k.to_string(), free);
        }
        Self(kept)
    }

    fn of(&self, key: &str) -> usize {
        self.0.get(key).copied().unwrap_or_default()
    }
}

/// Every set key of `rs`, in order: per policy its selection, then its rules' sources.
fn set_keys(rs: &Ruleset) -> impl Iterator<Item = &str> {
    rs.policies.iter().flat_map(|p| {
        let rules = p.ingress.iter().chain(&p.egress);
        std::iter::once(p.pods_key.as_str())
            .chain(rules.flat_map(|r| r.sources.iter().map(|s| s.key.as_str())))
    })
}

impl Names {
    /// Indices 0, 1, … in the order of `rs` (a table written from nothing).
    pub(crate) fn fresh(rs: &Ruleset) -> Self {
        Self::default().next(rs)
    }

    /// The names for `rs` following these: the indices of policies and keys still present kept,
    /// the others freed, a new one given the lowest free index.
    pub(crate) fn next(&self, rs: &Ruleset) -> Self {
        Self {
            policies: self
                .policies
                .next(rs.policies.iter().map(|p| p.id.as_str())),
            sets: self.sets.next(set_keys(rs)),
        }
    }
}

const FORWARD_HOOK: &str = "type filter hook forward priority filter; policy accept;";

impl Table {
    /// The table enforcing `rs`, each policy named by its index in `names` (which must hold every
    /// policy of `rs`).
    pub(crate) fn build(rs: &Ruleset, names: &Names) -> Self {
        let mut t = Table::default();
        t.set("ingress_isolated", false, addrs(&rs.ingress_isolated));
        t.set("egress_isolated", false, addrs(&rs.egress_isolated));
        t.chain(
            "forward",
            Some(FORWARD_HOOK),
            vec![
                "ct state established,related accept".into(),
                "ip saddr @egress_isolated jump egress".into(),
                "ip daddr @ingress_isolated jump ingress".into(),
            ],
        );
        t.chain(
            "egress_allowed",
            None,
            vec![
                "ip daddr @ingress_isolated jump ingress".into(),
                "accept".into(),
            ],
        );
        let mut ingress = Vec::new();
        let mut egress = Vec::new();
        // Dispatch in the order of rs.policies (namespace/name), whatever the indices.
        for p in &rs.policies {
            if let Some(jump) = t.policy(names, p, Dir::Ingress) {
                ingress.push(jump);
            }
            if let Some(jump) = t.policy(names, p, Dir::Egress) {
                egress.push(jump);
            }
        }
        ingress.push("counter drop".into());
        egress.push("counter drop".into());
        t.chain("ingress", None, ingress);
        t.chain("egress", None, egress);
        t
    }

    fn set(&mut self, name: &str, interval: bool, elements: BTreeSet<(u32, u32)>) {
        self.sets
            .insert(name.to_string(), Set { interval, elements });
    }

    fn chain(&mut self, name: &str, hook: Option<&'static str>, rules: Vec<String>) {
        self.chains.insert(name.to_string(), Chain { hook, rules });
    }

    /// Adds policy `p`'s chain of direction `d`, the sets of its pods and of its rules' sources
    /// (shared with other policies naming the same); the dispatch rule jumping to that chain, or
    /// `None` when it has no rule in `d`.
    fn policy(&mut self, names: &Names, p: &Compiled, d: Dir) -> Option<String> {
        let rules = match d {
            Dir::Ingress => &p.ingress,
            Dir::Egress => &p.egress,
        };
        if rules.is_empty() {
            return None;
        }
        let pods = format!("l{}", names.sets.of(&p.pods_key));
        if !self.sets.contains_key(&pods) {
            self.set(&pods, false, addrs(&p.pods));
        }
        let mut lines = Vec::new();
        for (j, r) in rules.iter().enumerate() {
            let what = format!("{} {} {j}", p.id, d.word());
            if r.sources.is_empty() {
                push_rules(&mut lines, "", r, d.verdict(), &what);
            }
            for src in &r.sources {
                let name = format!("s{}", names.sets.of(&src.key));
                // A shared set is the same whichever rule names it: made once.
                if !self.sets.contains_key(&name) {
                    self.set(&name, true, src.addrs.ranges().iter().copied().collect());
                }
                let head = format!("ip {} @{name} ", d.peer_field());
                push_rules(&mut lines, &head, r, d.verdict(), &what);
            }
        }
        let chain = format!("p{}_{}", names.policies.of(&p.id), d.word());
        self.chain(&chain, None, lines);
        Some(format!("ip {} @{pods} jump {chain}", d.pod_field()))
    }

    /// How many objects the table holds (sets, elements, chains, rules): what a whole replace
    /// writes, to compare a difference with.
    pub(crate) fn size(&self) -> usize {
        let elements: usize = self.sets.values().map(|s| s.elements.len()).sum();
        let rules: usize = self.chains.values().map(|c| c.rules.len()).sum();
        self.sets.len() + elements + self.chains.len() + rules
    }
}

impl Set {
    /// The set's declaration body: `{ type ipv4_addr; [flags interval;] [elements = { … };] }`.
    pub(crate) fn body(&self) -> String {
        let flags = if self.interval {
            " flags interval;"
        } else {
            ""
        };
        let elems = if self.elements.is_empty() {
            String::new()
        } else {
            format!(" elements = {{ {} }}", join(&self.elements))
        };
        format!("{{ type ipv4_addr;{flags}{elems} }}")
    }
}

/// Address ranges as nft elements: `10.0.0.1, 10.0.1.0-10.0.1.255`.
pub(crate) fn join<'a>(ranges: impl IntoIterator<Item = &'a (u32, u32)>) -> String {
    let mut s = String::new();
    for (i, &(lo, hi)) in ranges.into_iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{}", Ipv4Addr::from(lo));
        if hi != lo {
            let _ = write!(s, "-{}", Ipv4Addr::from(hi));
        }
    }
    s
}

/// A direction of a policy's rules.
#[derive(Debug, Clone, Copy)]
enum Dir {
    Ingress,
    Egress,
}

impl Dir {
    fn word(self) -> &'static str {
        match self {
            Dir::Ingress => "ingress",
            Dir::Egress => "egress",
        }
    }
    /// The address of the selected pod: destination for ingress, source for egress.
    fn pod_field(self) -> &'static str {
        match self {
            Dir::Ingress => "daddr",
            Dir::Egress => "saddr",
        }
    }
    /// The address of the peer: source for ingress, destination for egress.
    fn peer_field(self) -> &'static str {
        match self {
            Dir::Ingress => "saddr",
            Dir::Egress => "daddr",
        }
    }
    /// Allowed ingress is accepted; allowed egress goes on to the ingress check.
    fn verdict(self) -> &'static str {
        match self {
            Dir::Ingress => "accept",
            Dir::Egress => "goto egress_allowed",
        }
    }
}

fn addrs(set: &BTreeSet<Ipv4Addr>) -> BTreeSet<(u32, u32)> {
    set.iter().map(|&a| (u32::from(a), u32::from(a))).collect()
}

/// The rules of one policy rule: `head` (its peers match), then per port match its destination
/// limit, protocol and ports, then `verdict`, commented with `what`.
fn push_rules(out: &mut Vec<String>, head: &str, r: &Rule, verdict: &str, what: &str) {
    let line = |m: &str| format!("{head}{m}{verdict} comment \"{what}\"");
    match &r.ports {
        None => out.push(line("")),
        Some(ms) => out.extend(ms.iter().map(|m| line(&port_match(m)))),
    }
}

/// `ip daddr { … } meta l4proto P th dport { … } ` (destination limit of a named port, protocol,
/// ports), with a trailing space.
fn port_match(m: &PortMatch) -> String {
    let mut s = String::new();
    if let Some(pods) = &m.pods {
        let _ = write!(s, "ip daddr {{ {} }} ", join(&addrs(pods)));
    }
    let _ = write!(s, "meta l4proto {} ", m.proto.nft());
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
        let _ = write!(s, "th dport {{ {} }} ", list.join(", "));
    }
    s
}
