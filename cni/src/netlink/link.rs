//! Link operations over rtnetlink: create a veth pair whose peer lands directly in another network
//! namespace, create a VXLAN device, look links up by name, set them up, delete them.

use super::{Netlink, NlResult};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVeth, InfoVxlan, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use netlink_packet_route::RouteNetlinkMessage;
use std::net::Ipv4Addr;
use std::os::fd::RawFd;

/// A veth pair to create: the host end in the socket's namespace, the peer moved into the namespace
/// behind `peer_netns_fd` at creation (no separate move and rename). Both ends are created up.
#[derive(Debug, Clone)]
pub struct VethSpec<'a> {
    /// Host end name (at most 15 bytes).
    pub host_name: &'a str,
    /// Host end MAC address.
    pub host_mac: [u8; 6],
    /// Peer (container) end name, e.g. `eth0`.
    pub peer_name: &'a str,
    /// Peer MAC address.
    pub peer_mac: [u8; 6],
    /// MTU of both ends, bytes.
    pub mtu: u32,
    /// An open fd of the peer's network namespace (`/proc/…/ns/net` or `/run/netns/NAME`).
    pub peer_netns_fd: RawFd,
}

/// A VXLAN device to create (Linux `vxlan` link kind; attributes as `ip-link(8)` `type vxlan`).
#[derive(Debug, Clone)]
pub struct VxlanSpec<'a> {
    /// Device name, e.g. `clusterctl.1`.
    pub name: &'a str,
    /// VXLAN network identifier (VNI), 24 bits.
    pub vni: u32,
    /// Destination UDP port (8472 is the Linux/flannel default; IANA's is 4789).
    pub port: u16,
    /// Local underlay (VTEP source) address.
    pub local: Ipv4Addr,
    /// Underlay link index the tunnel is bound to.
    pub underlay_index: u32,
    /// MTU, bytes.
    pub mtu: u32,
    /// MAC address of the device.
    pub mac: [u8; 6],
}

/// What the plugin and the agent read back about a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkEntry {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// MTU, bytes.
    pub mtu: u32,
    /// MAC address (empty for links without one).
    pub mac: Vec<u8>,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Link kind (`veth`, `vxlan`, …) when the kernel reports one.
    pub kind: Option<String>,
    /// VXLAN VNI, when the link is a VXLAN device.
    pub vxlan_id: Option<u32>,
    /// VXLAN destination port, when the link is a VXLAN device.
    pub vxlan_port: Option<u16>,
    /// VXLAN local address, when set.
    pub vxlan_local: Option<Ipv4Addr>,
}

fn up_header(msg: &mut LinkMessage) {
    msg.header.flags = LinkFlags::Up;
    msg.header.change_mask = LinkFlags::Up;
}

impl Netlink {
    /// Creates a veth pair per `spec` (`RTM_NEWLINK`, `NLM_F_CREATE | NLM_F_EXCL`).
    /// Errors: `EEXIST` when the host name is taken, `EINVAL` for a bad name or MTU.
    pub fn create_veth(&mut self, spec: &VethSpec<'_>) -> NlResult<()> {
        // The peer cannot be created up: `veth_open` fails with ENOTCONN until both ends exist.
        let mut peer = LinkMessage::default();
        peer.attributes
            .push(LinkAttribute::IfName(spec.peer_name.to_string()));
        peer.attributes
            .push(LinkAttribute::Address(spec.peer_mac.to_vec()));
        peer.attributes.push(LinkAttribute::Mtu(spec.mtu));
        peer.attributes
            .push(LinkAttribute::NetNsFd(spec.peer_netns_fd));

        let mut msg = LinkMessage::default();
        up_header(&mut msg);
        msg.attributes
            .push(LinkAttribute::IfName(spec.host_name.to_string()));
        msg.attributes
            .push(LinkAttribute::Address(spec.host_mac.to_vec()));
        msg.attributes.push(LinkAttribute::Mtu(spec.mtu));
        msg.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Veth),
            LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))),
        ]));
        self.request(
            RouteNetlinkMessage::NewLink(msg),
            NLM_F_CREATE | NLM_F_EXCL,
            &format!("create veth {}", spec.host_name),
        )
    }

    /// Creates a VXLAN device per `spec`, up, with learning off (entries are programmed by the agent).
    /// Errors: `EEXIST` when the name is taken; `EADDRINUSE` when another device holds the VNI/port.
    pub fn create_vxlan(&mut self, spec: &VxlanSpec<'_>) -> NlResult<()> {
        let mut msg = LinkMessage::default();
        up_header(&mut msg);
        msg.attributes
            .push(LinkAttribute::IfName(spec.name.to_string()));
        msg.attributes
            .push(LinkAttribute::Address(spec.mac.to_vec()));
        msg.attributes.push(LinkAttribute::Mtu(spec.mtu));
        msg.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Vxlan),
            LinkInfo::Data(InfoData::Vxlan(vec![
                InfoVxlan::Id(spec.vni),
                InfoVxlan::Local(spec.local),
                InfoVxlan::Link(spec.underlay_index),
                InfoVxlan::Port(spec.port),
                InfoVxlan::Learning(false),
            ])),
        ]));
        self.request(
            RouteNetlinkMessage::NewLink(msg),
            NLM_F_CREATE | NLM_F_EXCL,
            &format!("create vxlan {}", spec.name),
        )
    }

    /// Sets a link's MTU, MAC and up flag (`RTM_SETLINK`). Errors: `ENODEV`, `EINVAL`.
    pub fn set_link(&mut self, index: u32, mtu: Option<u32>, mac: Option<[u8; 6]>) -> NlResult<()> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        up_header(&mut msg);
        if let Some(mtu) = mtu {
            msg.attributes.push(LinkAttribute::Mtu(mtu));
        }
        if let Some(mac) = mac {
            msg.attributes.push(LinkAttribute::Address(mac.to_vec()));
        }
        self.request(
            RouteNetlinkMessage::SetLink(msg),
            0,
            &format!("set link {index}"),
        )
    }

    /// Looks a link up by name. Returns `Ok(None)` when there is no such link.
    pub fn link_by_name(&mut self, name: &str) -> NlResult<Option<LinkEntry>> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        match self.get(
            RouteNetlinkMessage::GetLink(msg),
            &format!("get link {name}"),
        ) {
            Ok(RouteNetlinkMessage::NewLink(m)) => Ok(Some(entry(&m))),
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Looks a link up by index. Returns `Ok(None)` when there is no such link.
    pub fn link_by_index(&mut self, index: u32) -> NlResult<Option<LinkEntry>> {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        match self.get(
            RouteNetlinkMessage::GetLink(msg),
            &format!("get link {index}"),
        ) {
            Ok(RouteNetlinkMessage::NewLink(m)) => Ok(Some(entry(&m))),
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every link in the namespace.
    pub fn links(&mut self) -> NlResult<Vec<LinkEntry>> {
        let msgs = self.dump(
            RouteNetlinkMessage::GetLink(LinkMessage::default()),
            "dump links",
        )?;
        Ok(msgs
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(entry(l)),
                _ => None,
            })
            .collect())
    }

    /// Deletes a link by name. Returns `Ok(false)` when it did not exist. Deleting one end of a veth
    /// pair deletes both.
    pub fn delete_link(&mut self, name: &str) -> NlResult<bool> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        match self.request(
            RouteNetlinkMessage::DelLink(msg),
            0,
            &format!("delete link {name}"),
        ) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn entry(m: &LinkMessage) -> LinkEntry {
    let mut e = LinkEntry {
        index: m.header.index,
        name: String::new(),
        mtu: 0,
        mac: Vec::new(),
        up: m.header.flags.contains(LinkFlags::Up),
        kind: None,
        vxlan_id: None,
        vxlan_port: None,
        vxlan_local: None,
    };
    for a in &m.attributes {
        match a {
            LinkAttribute::IfName(n) => e.name = n.clone(),
            LinkAttribute::Mtu(v) => e.mtu = *v,
            LinkAttribute::Address(v) => e.mac = v.clone(),
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    match i {
                        LinkInfo::Kind(k) => e.kind = Some(k.to_string()),
                        LinkInfo::Data(InfoData::Vxlan(vx)) => {
                            for v in vx {
                                match v {
                                    InfoVxlan::Id(id) => e.vxlan_id = Some(*id),
                                    InfoVxlan::Port(p) => e.vxlan_port = Some(*p),
                                    InfoVxlan::Local(l) => e.vxlan_local = Some(*l),
                                    _ => {}
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    e
}
