//! Neighbour (ARP) and bridge forwarding database (fdb) entries over rtnetlink (`RTM_NEWNEIGH`,
//! `RTM_DELNEIGH`, `RTM_GETNEIGH`). Entries are permanent (`NUD_PERMANENT`); fdb entries are
//! `AF_BRIDGE` with `NTF_SELF`, as `bridge fdb append … self permanent dst …` makes for a VXLAN device.

use super::{Netlink, NlResult};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::Ipv4Addr;

/// A permanent IPv4 neighbour entry: `ip` has MAC `mac` on interface `index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighEntry {
    /// Interface index.
    pub index: u32,
    /// Neighbour IPv4 address.
    pub ip: Ipv4Addr,
    /// Its MAC address.
    pub mac: [u8; 6],
}

/// A permanent fdb entry on a VXLAN device: frames for `mac` go to VTEP `dst` (underlay address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdbEntry {
    /// VXLAN interface index.
    pub index: u32,
    /// Remote MAC address.
    pub mac: [u8; 6],
    /// Remote VTEP underlay address.
    pub dst: Ipv4Addr,
}

fn neigh_msg(e: &NeighEntry) -> NeighbourMessage {
    let mut m = NeighbourMessage::default();
    m.header.family = AddressFamily::Inet;
    m.header.ifindex = e.index;
    m.header.state = NeighbourState::Permanent;
    m.attributes
        .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(
            e.ip,
        )));
    m.attributes
        .push(NeighbourAttribute::LinkLayerAddress(e.mac.to_vec()));
    m
}

fn fdb_msg(e: &FdbEntry) -> NeighbourMessage {
    let mut m = NeighbourMessage::default();
    m.header.family = AddressFamily::Bridge;
    m.header.ifindex = e.index;
    m.header.state = NeighbourState::Permanent;
    m.header.flags = NeighbourFlags::Own;
    m.attributes
        .push(NeighbourAttribute::LinkLayerAddress(e.mac.to_vec()));
    m.attributes
        .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(
            e.dst,
        )));
    m
}

/// The IPv4 address of a neighbour attribute; `AF_BRIDGE` dumps decode it as raw bytes.
fn ipv4(a: &NeighbourAddress) -> Option<Ipv4Addr> {
    match a {
        NeighbourAddress::Inet(ip) => Some(*ip),
        NeighbourAddress::Other(b) => <[u8; 4]>::try_from(b.as_slice()).ok().map(Ipv4Addr::from),
        _ => None,
    }
}

fn mac6(v: &[u8]) -> Option<[u8; 6]> {
    v.try_into().ok()
}

impl Netlink {
    /// Adds or replaces a permanent neighbour entry (idempotent).
    pub fn replace_neigh(&mut self, e: &NeighEntry) -> NlResult<()> {
        let op = format!("add neighbour {} dev {}", e.ip, e.index);
        self.request(
            RouteNetlinkMessage::NewNeighbour(neigh_msg(e)),
            NLM_F_CREATE | NLM_F_REPLACE,
            &op,
        )
    }

    /// Deletes a neighbour entry; a missing one is success.
    pub fn del_neigh(&mut self, e: &NeighEntry) -> NlResult<()> {
        let op = format!("delete neighbour {} dev {}", e.ip, e.index);
        match self.request(RouteNetlinkMessage::DelNeighbour(neigh_msg(e)), 0, &op) {
            Err(err) if err.is_not_found() => Ok(()),
            r => r,
        }
    }

    /// Permanent IPv4 neighbour entries on interface `index`.
    pub fn neighs(&mut self, index: u32) -> NlResult<Vec<NeighEntry>> {
        let found = self.permanent_entries(AddressFamily::Inet, index, "dump neighbours")?;
        Ok(found
            .into_iter()
            .map(|(ip, mac)| NeighEntry { index, ip, mac })
            .collect())
    }

    /// Adds or replaces a permanent fdb entry on a VXLAN device (idempotent).
    pub fn replace_fdb(&mut self, e: &FdbEntry) -> NlResult<()> {
        let op = format!(
            "add fdb {} dst {} dev {}",
            super::format_mac(&e.mac),
            e.dst,
            e.index
        );
        self.request(
            RouteNetlinkMessage::NewNeighbour(fdb_msg(e)),
            NLM_F_CREATE | NLM_F_REPLACE,
            &op,
        )
    }

    /// Deletes an fdb entry; a missing one is success.
    pub fn del_fdb(&mut self, e: &FdbEntry) -> NlResult<()> {
        let op = format!("delete fdb {} dev {}", super::format_mac(&e.mac), e.index);
        match self.request(RouteNetlinkMessage::DelNeighbour(fdb_msg(e)), 0, &op) {
            Err(err) if err.is_not_found() => Ok(()),
            r => r,
        }
    }

    /// Permanent fdb entries with a remote destination on device `index`.
    pub fn fdbs(&mut self, index: u32) -> NlResult<Vec<FdbEntry>> {
        let found = self.permanent_entries(AddressFamily::Bridge, index, "dump fdb")?;
        Ok(found
            .into_iter()
            .map(|(dst, mac)| FdbEntry { index, mac, dst })
            .collect())
    }

    /// (destination IPv4, link-layer address) of every permanent entry of `family` on device
    /// `index`: the neighbour table for `Inet`, the fdb for `Bridge`. `op` names the dump in errors.
    fn permanent_entries(
        &mut self,
        family: AddressFamily,
        index: u32,
        op: &str,
    ) -> NlResult<Vec<(Ipv4Addr, [u8; 6])>> {
        let mut q = NeighbourMessage::default();
        q.header.family = family;
        let all = self.dump(RouteNetlinkMessage::GetNeighbour(q), op)?;
        let mut out = Vec::new();
        for m in all {
            let RouteNetlinkMessage::NewNeighbour(n) = m else {
                continue;
            };
            if n.header.ifindex != index || n.header.state != NeighbourState::Permanent {
                continue;
            }
            let dst = n.attributes.iter().find_map(|a| match a {
                NeighbourAttribute::Destination(a) => ipv4(a),
                _ => None,
            });
            let mac = n.attributes.iter().find_map(|a| match a {
                NeighbourAttribute::LinkLayerAddress(m) => mac6(m),
                _ => None,
            });
            if let (Some(dst), Some(mac)) = (dst, mac) {
                out.push((dst, mac));
            }
        }
        Ok(out)
    }
}
