//! Rules on `spec.controlPlane.vip.loadBalancerPool` (kube-vip-cloud-provider's address pools): it needs
//! `loadBalancerServices: true`; every `cidr` and `range` entry parses (comma-separated, as the `kubevip`
//! ConfigMap takes them); in ARP mode each lies inside the nodes' network (from addresses written with a
//! prefix length, or `vip.subnet`); none holds a node's address or the VIP, nor overlaps podSubnet or
//! serviceSubnet; namespace names are DNS labels; the image is a reference.

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

use super::Ctx;
use crate::diag::Diagnostic;
use crate::model::{ClusterFile, Provider, VipMode};
use crate::syntax;
use crate::valid::ValidNode;

const AT: &str = "spec.controlPlane.vip.loadBalancerPool";

/// An inclusive address range of one family, as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    v6: bool,
    first: u128,
    last: u128,
}

fn num(a: IpAddr) -> (bool, u128) {
    match a {
        IpAddr::V4(v) => (false, u128::from(u32::from(v))),
        IpAddr::V6(v) => (true, u128::from(v)),
    }
}

impl Span {
    fn of_net(n: &IpNet) -> Span {
        let (v6, first) = num(n.network());
        let (_, last) = num(n.broadcast());
        Span { v6, first, last }
    }
    fn contains(&self, a: IpAddr) -> bool {
        let (v6, x) = num(a);
        v6 == self.v6 && self.first <= x && x <= self.last
    }
    fn overlaps(&self, o: &Span) -> bool {
        self.v6 == o.v6 && self.first <= o.last && o.first <= self.last
    }
    fn inside(&self, o: &Span) -> bool {
        self.v6 == o.v6 && o.first <= self.first && self.last <= o.last
    }
}

/// Why a pool entry does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EntryError {
    /// Not `a.b.c.d/len`.
    #[error("{0:?} is not a CIDR")]
    Cidr(String),
    /// Not `first-last`.
    #[error("{0:?} is not a range `first-last` of two addresses")]
    Range(String),
    /// `first` after `last`, or two families.
    #[error("{0:?} runs backwards or mixes IPv4 and IPv6")]
    Backwards(String),
}

/// Parses one comma-separated `cidr` (`is_cidr`) or `range` value into spans. Errors: [`EntryError`]
/// for the first entry that does not parse.
pub(crate) fn spans(text: &str, is_cidr: bool) -> Result<Vec<Span>, EntryError> {
    let mut out = Vec::new();
    for e in text.split(',').map(str::trim) {
        if is_cidr {
            let n = IpNet::from_str(e).map_err(|_| EntryError::Cidr(e.to_string()))?;
            out.push(Span::of_net(&n.trunc()));
            continue;
        }
        let bad = || EntryError::Range(e.to_string());
        let (a, b) = e.split_once('-').ok_or_else(bad)?;
        let a = IpAddr::from_str(a.trim()).map_err(|_| bad())?;
        let b = IpAddr::from_str(b.trim()).map_err(|_| bad())?;
        let ((fa, x), (fb, y)) = (num(a), num(b));
        if fa != fb || x > y {
            return Err(EntryError::Backwards(e.to_string()));
        }
        out.push(Span {
            v6: fa,
            first: x,
            last: y,
        });
    }
    Ok(out)
}

/// What the pool must stay clear of and inside of.
struct Around<'a> {
    nodes: &'a [ValidNode],
    vip: Option<IpAddr>,
    /// podSubnet and serviceSubnet, as parsed.
    ranges: Vec<(&'static str, IpNet)>,
    /// The nodes' networks (`None`: not checked, e.g. BGP mode).
    networks: Option<Vec<(String, IpNet)>>,
    /// Over SSH the nodes' network must be known to be checked (a warning when it is not).
    provider: Provider,
}

pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile, nodes: &[ValidNode]) {
    let Some(vip) = &file.spec.control_plane.vip else {
        return;
    };
    let Some(pool) = &vip.load_balancer_pool else {
        return;
    };
    if !vip.load_balancer_services {
        ctx.push(
            Diagnostic::error(
                "spec::lb-pool",
                "loadBalancerPool is set but loadBalancerServices is not: kube-vip would not announce the addresses",
            )
            .help("add `loadBalancerServices: true` to controlPlane.vip, or remove loadBalancerPool")
            .at(format!("{AT}#key")),
        );
    }
    if let Some(i) = &pool.image {
        if crate::image::ImageRef::parse(i).is_err() {
            ctx.push(
                Diagnostic::error("spec::image", format!("{i:?} is not an image reference"))
                    .help("write e.g. `ghcr.io/kube-vip/kube-vip-cloud-provider:v0.0.12`")
                    .at(format!("{AT}.image")),
            );
        }
    }
    let around = around(file, nodes);
    let mut entries = 0;
    let mut one = |ctx: &mut Ctx<'_>, text: &Option<String>, path: String, is_cidr: bool| {
        if let Some(t) = text {
            entries += 1;
            check_entry(ctx, &around, t, &path, is_cidr);
        }
    };
    one(ctx, &pool.cidr, format!("{AT}.cidr"), true);
    one(ctx, &pool.range, format!("{AT}.range"), false);
    for (ns, p) in &pool.namespaces {
        let at = format!("{AT}.namespaces.{ns}");
        if let Err(why) = syntax::dns1123_label(ns) {
            ctx.push(
                Diagnostic::error("spec::lb-pool", format!("namespace name {ns:?} {why}"))
                    .help("name the namespace whose Services take this pool, e.g. `team-a`")
                    .at(format!("{at}#key")),
            );
        }
        if p.cidr.is_none() && p.range.is_none() {
            ctx.push(
                Diagnostic::error(
                    "spec::lb-pool",
                    format!("the pool of namespace {ns} is empty"),
                )
                .help("give it a `cidr` or a `range`")
                .at(at.clone()),
            );
        }
        one(ctx, &p.cidr, format!("{at}.cidr"), true);
        one(ctx, &p.range, format!("{at}.range"), false);
    }
    if entries == 0 {
        ctx.push(
            Diagnostic::error("spec::lb-pool", "loadBalancerPool holds no addresses")
                .help("give it a `cidr` (e.g. `172.20.6.240/29`) or a `range` (e.g. `172.20.6.200-172.20.6.202`)")
                .at(AT),
        );
    }
}

fn around<'a>(file: &ClusterFile, nodes: &'a [ValidNode]) -> Around<'a> {
    let net = &file.spec.networking;
    let ranges = [
        ("podSubnet", &net.pod_subnet),
        ("serviceSubnet", &net.service_subnet),
    ]
    .into_iter()
    .filter_map(|(n, t)| IpNet::from_str(t.trim()).ok().map(|r| (n, r.trunc())))
    .collect();
    let vip = file.spec.control_plane.vip.as_ref();
    let networks = (vip.map(|v| v.mode) == Some(VipMode::Arp)).then(|| {
        let mut v: Vec<(String, IpNet)> = vip
            .and_then(|v| v.subnet.as_deref())
            .and_then(|s| IpNet::from_str(s.trim()).ok())
            .map(|n| ("controlPlane.vip.subnet".to_string(), n.trunc()))
            .into_iter()
            .collect();
        v.extend(
            nodes
                .iter()
                .filter_map(|n| n.subnet.map(|s| (format!("node {}", n.name), s))),
        );
        v
    });
    Around {
        nodes,
        vip: vip.and_then(|v| IpAddr::from_str(v.address.trim()).ok()),
        ranges,
        networks,
        provider: file.spec.provider,
    }
}

fn check_entry(ctx: &mut Ctx<'_>, a: &Around<'_>, text: &str, path: &str, is_cidr: bool) {
    let spans = match spans(text, is_cidr) {
        Ok(s) => s,
        Err(e) => {
            let help = if is_cidr {
                "write CIDRs, comma-separated, e.g. `172.20.6.240/29`"
            } else {
                "write ranges `first-last`, comma-separated, e.g. `172.20.6.200-172.20.6.202`"
            };
            ctx.push(
                Diagnostic::error("spec::lb-pool", e.to_string())
                    .help(help)
                    .at(path),
            );
            return;
        }
    };
    for s in &spans {
        if let Some(why) = clash(a, s) {
            ctx.push(
                Diagnostic::error("spec::lb-pool", format!("pool {text}: {why}"))
                    .help("give LoadBalancer Services unused addresses of the nodes' network, clear of the nodes, the VIP, podSubnet and serviceSubnet")
                    .at(path),
            );
            return;
        }
    }
    let Some(nets) = &a.networks else { return };
    if nets.is_empty() {
        if a.provider == Provider::Ssh {
            ctx.push(
                Diagnostic::warning("spec::lb-pool-network-unknown", format!("cannot check that the pool {text} is on the nodes' network"))
                    .help("write node addresses with their prefix length (e.g. 172.20.6.111/24) or set vip.subnet")
                    .at(path),
            );
        }
        return;
    }
    for s in &spans {
        if let Some((from, net)) = nets.iter().find(|(_, n)| !s.inside(&Span::of_net(n))) {
            ctx.push(
                Diagnostic::error("spec::lb-pool", format!("pool {text} is not inside the nodes' network {net} (from {from})"))
                    .help(format!("kube-vip announces LoadBalancer addresses by ARP: choose unused addresses of {net}"))
                    .at(path),
            );
            return;
        }
    }
}

/// What `s` holds or overlaps that it must not: a node's address, the VIP, podSubnet, serviceSubnet.
fn clash(a: &Around<'_>, s: &Span) -> Option<String> {
    if let Some(n) = a
        .nodes
        .iter()
        .find(|n| n.address.is_some_and(|x| s.contains(x)))
    {
        return Some(format!(
            "holds the address {} of node {}",
            n.address.map(|x| x.to_string()).unwrap_or_default(),
            n.name
        ));
    }
    if let Some(v) = a.vip.filter(|v| s.contains(*v)) {
        return Some(format!("holds the VIP {v}"));
    }
    a.ranges
        .iter()
        .find(|(_, r)| s.overlaps(&Span::of_net(r)))
        .map(|(name, r)| format!("overlaps {name} {r}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_as_kube_vip_cloud_provider_takes_them() {
        let s = spans("10.0.0.8/29, 10.0.1.0/30", true).expect("cidrs");
        assert_eq!(s.len(), 2);
        assert!(s[0].contains("10.0.0.15".parse().expect("ip")));
        assert!(!s[0].contains("10.0.0.16".parse().expect("ip")));
        let r = spans("10.0.0.200-10.0.0.202", false).expect("range");
        assert!(r[0].contains("10.0.0.201".parse().expect("ip")));
        assert!(r[0].inside(&Span::of_net(&"10.0.0.0/24".parse().expect("net"))));
        assert!(!r[0].inside(&Span::of_net(&"10.0.1.0/24".parse().expect("net"))));
        assert!(matches!(spans("10.0.0.1", true), Err(EntryError::Cidr(_))));
        assert!(matches!(
            spans("10.0.0.1/24-x", false),
            Err(EntryError::Range(_))
        ));
        assert!(matches!(
            spans("10.0.0.9-10.0.0.1", false),
            Err(EntryError::Backwards(_))
        ));
        assert!(matches!(
            spans("10.0.0.1-fd00::1", false),
            Err(EntryError::Backwards(_))
        ));
    }
}
