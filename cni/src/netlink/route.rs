//! IPv4 route operations over rtnetlink (`RTM_NEWROUTE`, `RTM_DELROUTE`, `RTM_GETROUTE`) in the main
//! table: link-scope routes (`dst dev X scope link`), gateway routes, and `onlink` gateway routes.

use super::{Netlink, NlResult};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol, RouteScope,
    RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::Ipv4Addr;

/// An IPv4 route in the main table: `dst/prefix_len [via gateway] dev oif [onlink]`; a route without
/// a gateway has scope link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteEntry {
    /// Destination network address.
    pub dst: Ipv4Addr,
    /// Destination prefix length, bits (0 for the default route).
    pub prefix_len: u8,
    /// Next hop, if any.
    pub gateway: Option<Ipv4Addr>,
    /// Output interface index.
    pub oif: u32,
    /// `RTNH_F_ONLINK`: the gateway is reachable on `oif` without a covering connected route.
    pub onlink: bool,
}

fn msg(e: &RouteEntry) -> RouteMessage {
    let mut m = RouteMessage::default();
    m.header.address_family = AddressFamily::Inet;
    m.header.destination_prefix_length = e.prefix_len;
    m.header.table = RouteHeader::RT_TABLE_MAIN;
    m.header.protocol = RouteProtocol::Boot;
    m.header.kind = RouteType::Unicast;
    m.header.scope = if e.gateway.is_some() {
        RouteScope::Universe
    } else {
        RouteScope::Link
    };
    if e.onlink {
        m.header.flags = RouteFlags::Onlink;
    }
    if e.prefix_len > 0 {
        m.attributes
            .push(RouteAttribute::Destination(RouteAddress::Inet(e.dst)));
    }
    if let Some(gw) = e.gateway {
        m.attributes
            .push(RouteAttribute::Gateway(RouteAddress::Inet(gw)));
    }
    m.attributes.push(RouteAttribute::Oif(e.oif));
    m
}

impl Netlink {
    /// Adds or replaces a route (`NLM_F_CREATE | NLM_F_REPLACE`): idempotent.
    /// Errors: `ENETUNREACH` for a gateway not reachable without `onlink`, `ENODEV`.
    pub fn replace_route(&mut self, e: &RouteEntry) -> NlResult<()> {
        let op = format!("add route {}/{} dev {}", e.dst, e.prefix_len, e.oif);
        self.request(
            RouteNetlinkMessage::NewRoute(msg(e)),
            NLM_F_CREATE | NLM_F_REPLACE,
            &op,
        )
    }

    /// Deletes a route; a missing one is success.
    pub fn del_route(&mut self, e: &RouteEntry) -> NlResult<()> {
        let op = format!("delete route {}/{} dev {}", e.dst, e.prefix_len, e.oif);
        let mut m = msg(e);
        m.header.protocol = RouteProtocol::Unspec;
        m.header.scope = RouteScope::NoWhere;
        match self.request(RouteNetlinkMessage::DelRoute(m), 0, &op) {
            Err(err) if err.is_not_found() => Ok(()),
            r => r,
        }
    }

    /// Every IPv4 route in the main table, optionally only those leaving through `oif`.
    pub fn routes(&mut self, oif: Option<u32>) -> NlResult<Vec<RouteEntry>> {
        let mut q = RouteMessage::default();
        q.header.address_family = AddressFamily::Inet;
        let all = self.dump(RouteNetlinkMessage::GetRoute(q), "dump routes")?;
        let mut out = Vec::new();
        for m in all {
            let RouteNetlinkMessage::NewRoute(r) = m else {
                continue;
            };
            if r.header.table != RouteHeader::RT_TABLE_MAIN {
                continue;
            }
            let mut e = RouteEntry {
                dst: Ipv4Addr::UNSPECIFIED,
                prefix_len: r.header.destination_prefix_length,
                gateway: None,
                oif: 0,
                onlink: r.header.flags.contains(RouteFlags::Onlink),
            };
            for a in &r.attributes {
                match a {
                    RouteAttribute::Destination(RouteAddress::Inet(d)) => e.dst = *d,
                    RouteAttribute::Gateway(RouteAddress::Inet(g)) => e.gateway = Some(*g),
                    RouteAttribute::Oif(o) => e.oif = *o,
                    _ => {}
                }
            }
            if oif.is_none_or(|o| o == e.oif) {
                out.push(e);
            }
        }
        Ok(out)
    }
}
