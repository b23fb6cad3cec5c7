//! ADD: allocate the pod address, create the veth pair with its container end directly in
//! `CNI_NETNS` under `CNI_IFNAME`, configure both ends, and return the result.
//!
//! Container side: address `podIP/32`, a permanent neighbour `169.254.1.1 → ee:ee:ee:ee:ee:ee`, routes
//! `169.254.1.1 dev IF scope link` and `default via 169.254.1.1 dev IF`. Host side: up, `proxy_arp=1`,
//! `proxy_delay=0`, route `podIP/32 dev HOSTEND scope link`; `net.ipv4.ip_forward=1`.

use super::config::NetConf;
use super::env::Env;
use super::error::{code, CniError};
use super::names::{host_veth_name, pod_mac, HOST_MAC};
use super::result::{add_result, Attached, GATEWAY};
use super::timing::mark;
use crate::ipam::Attachment;
use crate::netlink::{format_mac, AddrEntry, NeighEntry, Netlink, RouteEntry, VethSpec};
use crate::netns::NetnsGuard;
use crate::sysctl;
use serde_json::Value;
use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;

/// Runs ADD. Errors: 4 when `CNI_NETNS` cannot be opened, 11 when the podCIDR is unknown or
/// exhausted, 7 for a bad podCIDR, 999 for netlink/sysctl failures (after undoing what was done).
pub(crate) fn add(env: &Env, conf: &NetConf) -> Result<Value, CniError> {
    let netns = env.netns.as_deref().unwrap_or_default();
    let ns = File::open(netns).map_err(|e| {
        CniError::new(
            code::INVALID_ENV,
            "cannot open CNI_NETNS",
            format!("{netns}: {e}"),
        )
    })?;
    let cidr = conf.resolve_pod_cidr()?;
    let ipam = conf.ipam(Some(cidr))?;
    let att = Attachment {
        container_id: env.container_id.clone(),
        ifname: env.ifname.clone(),
    };
    let ip = ipam.allocate(&att, Some(netns))?;
    mark("ipam");
    let host_name = host_veth_name(&env.container_id, &env.ifname);
    match plumb(env, conf, &ns, &host_name, ip) {
        Ok(()) => {
            mark("netlink");
            let a = Attached {
                host_name: &host_name,
                host_mac: format_mac(&HOST_MAC),
                ifname: &env.ifname,
                container_mac: format_mac(&pod_mac(ip)),
                netns,
                ip,
            };
            Ok(add_result(conf, &a))
        }
        Err(e) => {
            if let Ok(mut nl) = Netlink::open() {
                let _ = nl.delete_link(&host_name);
            }
            let _ = ipam.release(&att);
            Err(e)
        }
    }
}

fn plumb(
    env: &Env,
    conf: &NetConf,
    ns: &File,
    host_name: &str,
    ip: Ipv4Addr,
) -> Result<(), CniError> {
    let mut host = Netlink::open()?;
    let spec = VethSpec {
        host_name,
        host_mac: HOST_MAC,
        peer_name: &env.ifname,
        peer_mac: pod_mac(ip),
        mtu: conf.mtu,
        peer_netns_fd: ns.as_raw_fd(),
    };
    if let Err(e) = host.create_veth(&spec) {
        if !e.is_exists() {
            return Err(e.into());
        }
        // A host end left by an earlier ADD of the same (containerID, ifname): replace it.
        if host.link_by_name(host_name)?.is_some() {
            host.delete_link(host_name)?;
            host.create_veth(&spec)?;
        } else {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                format!("interface {} already exists in the container", env.ifname),
                format!(
                    "CNI_NETNS {} already has a link named {}",
                    env.netns.as_deref().unwrap_or(""),
                    env.ifname
                ),
            ));
        }
    }
    mark("veth");
    {
        let _inside = NetnsGuard::enter(ns).map_err(|e| internal("enter CNI_NETNS", e))?;
        let mut c = Netlink::open()?;
        let idx = nix::net::if_::if_nametoindex(env.ifname.as_str())
            .map_err(|e| internal("find the container interface", e))?;
        c.set_link(idx, None, None)?;
        c.add_addr(&AddrEntry {
            index: idx,
            address: ip,
            prefix_len: 32,
        })?;
        c.replace_neigh(&NeighEntry {
            index: idx,
            ip: GATEWAY,
            mac: HOST_MAC,
        })?;
        c.replace_route(&RouteEntry {
            dst: GATEWAY,
            prefix_len: 32,
            gateway: None,
            oif: idx,
            onlink: false,
        })?;
        c.replace_route(&RouteEntry {
            dst: Ipv4Addr::UNSPECIFIED,
            prefix_len: 0,
            gateway: Some(GATEWAY),
            oif: idx,
            onlink: false,
        })?;
    }
    mark("container");
    let hidx =
        nix::net::if_::if_nametoindex(host_name).map_err(|e| internal("find the host end", e))?;
    sysctl::write(&format!("net/ipv4/conf/{host_name}/proxy_arp"), "1")
        .map_err(|e| internal("proxy_arp", e))?;
    sysctl::write(&format!("net/ipv4/neigh/{host_name}/proxy_delay"), "0")
        .map_err(|e| internal("proxy_delay", e))?;
    host.replace_route(&RouteEntry {
        dst: ip,
        prefix_len: 32,
        gateway: None,
        oif: hidx,
        onlink: false,
    })?;
    sysctl::ensure("net/ipv4/ip_forward", "1").map_err(|e| internal("ip_forward", e))?;
    Ok(())
}

pub(crate) fn internal(what: &str, e: impl std::fmt::Display) -> CniError {
    CniError::new(code::INTERNAL, format!("{what} failed"), e.to_string())
}
