//! CHECK: verify, against `prevResult`, that the attachment is intact: the IPAM reservation, the host
//! end (up, with its `/32` route), and inside `CNI_NETNS` the interface (up), its address and the two
//! routes. Each missing piece fails with its own code (see [`super::error::code`]).

use super::config::NetConf;
use super::env::Env;
use super::error::{code, CniError};
use super::names::host_veth_name;
use super::result::{result_ipv4s, GATEWAY};
use crate::ipam::Attachment;
use crate::netlink::Netlink;
use crate::netns::NetnsGuard;
use std::fs::File;
use std::net::Ipv4Addr;

/// Runs CHECK. Errors: 7 without `prevResult`, 3 when `CNI_NETNS` is gone, 110–114 for a missing
/// interface, address, route, host end or reservation.
pub(crate) fn check(env: &Env, conf: &NetConf) -> Result<(), CniError> {
    let prev = conf.prev_result.as_ref().ok_or_else(|| {
        CniError::new(
            code::INVALID_CONFIG,
            "CHECK needs prevResult",
            "the configuration has no prevResult",
        )
    })?;
    let cidr = conf.resolve_pod_cidr()?;
    let ip = result_ipv4s(prev)
        .into_iter()
        .find(|ip| cidr.contains(ip))
        .ok_or_else(|| {
            CniError::new(
                code::INVALID_CONFIG,
                "prevResult has no address in the pod CIDR",
                cidr.to_string(),
            )
        })?;
    let att = Attachment {
        container_id: env.container_id.clone(),
        ifname: env.ifname.clone(),
    };
    let held = conf.ipam(None)?.lookup(&att)?;
    if held != Some(ip) {
        return Err(CniError::new(
            code::CHECK_IPAM,
            "IPAM reservation missing",
            format!(
                "prevResult has {ip}, IPAM holds {held:?} for {}/{}",
                env.container_id, env.ifname
            ),
        ));
    }
    let host_name = host_veth_name(&env.container_id, &env.ifname);
    let mut host = Netlink::open()?;
    let h = host
        .link_by_name(&host_name)?
        .filter(|l| l.up)
        .ok_or_else(|| {
            CniError::new(
                code::CHECK_HOST_END,
                "host end missing or down",
                host_name.clone(),
            )
        })?;
    let has_host_route = host
        .routes(Some(h.index))?
        .iter()
        .any(|r| r.dst == ip && r.prefix_len == 32 && r.gateway.is_none());
    if !has_host_route {
        return Err(CniError::new(
            code::CHECK_ROUTE,
            "host route missing",
            format!("{ip}/32 dev {host_name}"),
        ));
    }
    let netns = env.netns.as_deref().unwrap_or_default();
    let ns = File::open(netns).map_err(|e| {
        CniError::new(
            code::UNKNOWN_CONTAINER,
            "container network namespace is gone",
            format!("{netns}: {e}"),
        )
    })?;
    let _inside = NetnsGuard::enter(&ns).map_err(|e| super::add::internal("enter CNI_NETNS", e))?;
    let mut c = Netlink::open()?;
    let link = c
        .link_by_name(&env.ifname)?
        .filter(|l| l.up)
        .ok_or_else(|| {
            CniError::new(
                code::CHECK_INTERFACE,
                "container interface missing or down",
                env.ifname.clone(),
            )
        })?;
    if !c
        .addrs(link.index)?
        .iter()
        .any(|a| a.address == ip && a.prefix_len == 32)
    {
        return Err(CniError::new(
            code::CHECK_ADDRESS,
            "pod address missing",
            format!("{ip}/32 on {}", env.ifname),
        ));
    }
    let routes = c.routes(Some(link.index))?;
    let link_route = routes
        .iter()
        .any(|r| r.dst == GATEWAY && r.prefix_len == 32 && r.gateway.is_none());
    let default = routes
        .iter()
        .any(|r| r.prefix_len == 0 && r.dst == Ipv4Addr::UNSPECIFIED && r.gateway == Some(GATEWAY));
    if !link_route || !default {
        return Err(CniError::new(
            code::CHECK_ROUTE,
            "container route missing",
            format!("{GATEWAY} scope link: {link_route}, default via {GATEWAY}: {default}"),
        ));
    }
    Ok(())
}
