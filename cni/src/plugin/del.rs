//! DEL: delete the host end (which deletes the pair and, with it, the host route and the container
//! interface) and release the address. Best effort per the spec: a missing link, a namespace that is
//! gone, or an address already released is success; DEL may be called any number of times.

use super::config::NetConf;
use super::env::Env;
use super::error::CniError;
use super::names::host_veth_name;
use super::timing::mark;
use crate::ipam::{Attachment, Ipam};
use crate::netlink::Netlink;

/// Runs DEL. Errors: 999 when netlink refuses to delete an existing link, 5 on IPAM I/O failure.
pub(crate) fn del(env: &Env, conf: &NetConf) -> Result<(), CniError> {
    let host_name = host_veth_name(&env.container_id, &env.ifname);
    let mut nl = Netlink::open()?;
    nl.delete_link(&host_name)?;
    mark("netlink");
    let ipam = Ipam::existing(conf.ipam_dir());
    let att = Attachment {
        container_id: env.container_id.clone(),
        ifname: env.ifname.clone(),
    };
    ipam.release(&att)?;
    mark("ipam");
    Ok(())
}
