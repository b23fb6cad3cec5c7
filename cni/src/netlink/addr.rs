//! Address operations over rtnetlink (`RTM_NEWADDR`, `RTM_DELADDR`, `RTM_GETADDR`), IPv4.

use super::{Netlink, NlResult};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::{IpAddr, Ipv4Addr};

/// An IPv4 address on a link: `address/prefix_len` on interface `index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrEntry {
    /// Interface index.
    pub index: u32,
    /// The address.
    pub address: Ipv4Addr,
    /// Prefix length, bits.
    pub prefix_len: u8,
}

fn msg(e: &AddrEntry) -> AddressMessage {
    let mut m = AddressMessage::default();
    m.header.family = AddressFamily::Inet;
    m.header.prefix_len = e.prefix_len;
    m.header.index = e.index;
    m.attributes
        .push(AddressAttribute::Local(IpAddr::V4(e.address)));
    m.attributes
        .push(AddressAttribute::Address(IpAddr::V4(e.address)));
    m
}

impl Netlink {
    /// Adds an address; an identical existing address is success (idempotent).
    /// Errors: `ENODEV` for a missing link, `EPERM`.
    pub fn add_addr(&mut self, e: &AddrEntry) -> NlResult<()> {
        let op = format!("add address {}/{} dev {}", e.address, e.prefix_len, e.index);
        match self.request(
            RouteNetlinkMessage::NewAddress(msg(e)),
            NLM_F_CREATE | NLM_F_EXCL,
            &op,
        ) {
            Err(err) if err.is_exists() => Ok(()),
            r => r,
        }
    }

    /// Removes an address; a missing one is success.
    pub fn del_addr(&mut self, e: &AddrEntry) -> NlResult<()> {
        let op = format!(
            "delete address {}/{} dev {}",
            e.address, e.prefix_len, e.index
        );
        match self.request(RouteNetlinkMessage::DelAddress(msg(e)), 0, &op) {
            Err(err) if err.is_not_found() => Ok(()),
            r => r,
        }
    }

    /// Every IPv4 address on interface `index`.
    pub fn addrs(&mut self, index: u32) -> NlResult<Vec<AddrEntry>> {
        let mut q = AddressMessage::default();
        q.header.family = AddressFamily::Inet;
        let all = self.dump(RouteNetlinkMessage::GetAddress(q), "dump addresses")?;
        let mut out = Vec::new();
        for m in all {
            if let RouteNetlinkMessage::NewAddress(a) = m {
                if a.header.index != index {
                    continue;
                }
                let addr = a.attributes.iter().find_map(|x| match x {
                    AddressAttribute::Local(IpAddr::V4(v)) => Some(*v),
                    _ => None,
                });
                let addr = addr.or_else(|| {
                    a.attributes.iter().find_map(|x| match x {
                        AddressAttribute::Address(IpAddr::V4(v)) => Some(*v),
                        _ => None,
                    })
                });
                if let Some(address) = addr {
                    out.push(AddrEntry {
                        index,
                        address,
                        prefix_len: a.header.prefix_len,
                    });
                }
            }
        }
        Ok(out)
    }
}
