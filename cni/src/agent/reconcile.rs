//! One reconcile pass of the overlay on this node: make the kernel state equal the desired state
//! derived from (this node, its peers), adding what is missing, removing what is stale on our
//! device, and leaving the rest. Idempotent; safe after a crash (it reads everything back).
//!
//! Desired state: one VXLAN device (VNI, UDP port, local = this node's underlay address, bound to
//! the underlay link, learning off, MTU = underlay MTU − 50 unless set, MAC = [`super::peers::vtep_mac`]
//! of this node, tx checksum offload off) holding the VTEP address `podCIDR.network/32`; and for each
//! other node `P`: route `P.podCIDR via P.vtep dev VXLAN onlink`, permanent neighbour
//! `P.vtep lladdr P.mac`, permanent fdb `P.mac dst P.node_ip`.

use super::peers::{vtep_mac, Peer};
use super::AgentError;
use crate::ethtool;
use crate::netlink::{AddrEntry, FdbEntry, LinkEntry, NeighEntry, Netlink, RouteEntry, VxlanSpec};
use std::collections::HashSet;

/// VXLAN overhead on an IPv4 underlay, bytes: outer IPv4 20 + UDP 8 + VXLAN 8 + inner Ethernet 14.
pub(crate) const VXLAN_OVERHEAD: u32 = 50;

/// Device settings of the overlay.
#[derive(Debug, Clone)]
pub struct DeviceConfig {
    /// Device name.
    pub name: String,
    /// VNI.
    pub vni: u32,
    /// UDP port.
    pub port: u16,
    /// MTU override, bytes (else underlay MTU − 50).
    pub mtu: Option<u32>,
    /// Underlay interface override (else the link holding this node's address).
    pub underlay: Option<String>,
}

/// What a pass changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The device was created (or re-created because VNI, port or local address differed).
    pub device_created: bool,
    /// Entries (routes, neighbours, fdb, addresses) added.
    pub added: usize,
    /// Stale entries removed.
    pub removed: usize,
    /// The device MTU in effect.
    pub mtu: u32,
    /// One line per change (`+route 10.244.2.0/24 via 10.244.2.0`, `-fdb 0e:cc:… dst …`).
    pub log: Vec<String>,
}

fn find_underlay(nl: &mut Netlink, me: &Peer, name: Option<&str>) -> Result<LinkEntry, AgentError> {
    if let Some(n) = name {
        return nl
            .link_by_name(n)?
            .ok_or_else(|| AgentError::Config(format!("underlay interface {n} does not exist")));
    }
    for l in nl.links()? {
        if nl.addrs(l.index)?.iter().any(|a| a.address == me.node_ip) {
            return Ok(l);
        }
    }
    Err(AgentError::Config(format!(
        "no interface holds this node's address {}",
        me.node_ip
    )))
}

/// Runs one pass for `me` and `peers` (which may include `me`; it is skipped).
/// Errors: netlink failures, or no underlay interface for `me.node_ip`.
pub(crate) fn reconcile(
    dev: &DeviceConfig,
    me: &Peer,
    peers: &[Peer],
) -> Result<Changes, AgentError> {
    let mut nl = Netlink::open()?;
    let mut ch = Changes::default();
    let underlay = find_underlay(&mut nl, me, dev.underlay.as_deref())?;
    let mtu = dev
        .mtu
        .unwrap_or(underlay.mtu.saturating_sub(VXLAN_OVERHEAD));
    ch.mtu = mtu;
    let mac = vtep_mac(me.node_ip);
    let spec = VxlanSpec {
        name: &dev.name,
        vni: dev.vni,
        port: dev.port,
        local: me.node_ip,
        underlay_index: underlay.index,
        mtu,
        mac,
    };
    let link = match nl.link_by_name(&dev.name)? {
        Some(l)
            if l.kind.as_deref() == Some("vxlan")
                && l.vxlan_id == Some(dev.vni)
                && l.vxlan_port == Some(dev.port)
                && l.vxlan_local == Some(me.node_ip) =>
        {
            if l.mtu != mtu || l.mac != mac || !l.up {
                nl.set_link(l.index, Some(mtu), Some(mac))?;
            }
            l
        }
        other => {
            if other.is_some() {
                nl.delete_link(&dev.name)?;
            }
            nl.create_vxlan(&spec)?;
            ch.device_created = true;
            nl.link_by_name(&dev.name)?.ok_or_else(|| {
                AgentError::Config(format!("{} vanished after creation", dev.name))
            })?
        }
    };
    let idx = link.index;
    if ethtool::tx_checksum(&dev.name).unwrap_or(true) {
        ethtool::tx_checksum_off(&dev.name).map_err(|e| {
            AgentError::Config(format!("turn tx checksum offload off on {}: {e}", dev.name))
        })?;
    }

    // The VTEP address.
    let want_addr = AddrEntry {
        index: idx,
        address: me.vtep_ip(),
        prefix_len: 32,
    };
    let addrs = nl.addrs(idx)?;
    for a in addrs.iter().filter(|a| **a != want_addr) {
        nl.del_addr(a)?;
        ch.removed += 1;
        ch.log.push(format!("-addr {}/{}", a.address, a.prefix_len));
    }
    if !addrs.contains(&want_addr) {
        nl.add_addr(&want_addr)?;
        ch.added += 1;
        ch.log.push(format!("+addr {}/32", want_addr.address));
    }

    let others: Vec<&Peer> = peers
        .iter()
        .filter(|p| p.name != me.name && p.node_ip != me.node_ip)
        .collect();

    // Routes: key (dst, prefix, gateway, onlink).
    let want_routes: Vec<RouteEntry> = others
        .iter()
        .map(|p| RouteEntry {
            dst: p.pod_cidr.network(),
            prefix_len: p.pod_cidr.prefix_len(),
            gateway: Some(p.vtep_ip()),
            oif: idx,
            onlink: true,
        })
        .collect();
    let have_routes = nl.routes(Some(idx))?;
    for r in have_routes.iter().filter(|r| !want_routes.contains(r)) {
        nl.del_route(r)?;
        ch.removed += 1;
        ch.log.push(format!("-route {r:?}"));
    }
    for r in want_routes.iter().filter(|r| !have_routes.contains(r)) {
        nl.replace_route(r)?;
        ch.added += 1;
        ch.log.push(format!("+route {r:?}"));
    }

    // Neighbours.
    let want_neigh: Vec<NeighEntry> = others
        .iter()
        .map(|p| NeighEntry {
            index: idx,
            ip: p.vtep_ip(),
            mac: p.vtep_mac(),
        })
        .collect();
    let have_neigh = nl.neighs(idx)?;
    let want_ips: HashSet<_> = want_neigh.iter().map(|n| n.ip).collect();
    for n in have_neigh.iter().filter(|n| !want_ips.contains(&n.ip)) {
        nl.del_neigh(n)?;
        ch.removed += 1;
        ch.log.push(format!("-neigh {n:?}"));
    }
    for n in want_neigh.iter().filter(|n| !have_neigh.contains(n)) {
        nl.replace_neigh(n)?;
        ch.added += 1;
        ch.log.push(format!("+neigh {n:?}"));
    }

    // Forwarding database.
    let want_fdb: Vec<FdbEntry> = others
        .iter()
        .map(|p| FdbEntry {
            index: idx,
            mac: p.vtep_mac(),
            dst: p.node_ip,
        })
        .collect();
    let have_fdb = nl.fdbs(idx)?;
    for f in have_fdb.iter().filter(|f| !want_fdb.contains(f)) {
        nl.del_fdb(f)?;
        ch.removed += 1;
        ch.log.push(format!("-fdb {f:?}"));
    }
    for f in want_fdb.iter().filter(|f| !have_fdb.contains(f)) {
        nl.replace_fdb(f)?;
        ch.added += 1;
        ch.log.push(format!("+fdb {f:?}"));
    }
    Ok(ch)
}

/// Deletes the overlay device (its routes, neighbours and fdb entries go with it). Returns whether
/// it existed.
pub(crate) fn remove_device(name: &str) -> Result<bool, AgentError> {
    Ok(Netlink::open()?.delete_link(name)?)
}
