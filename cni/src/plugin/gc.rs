//! GC and STATUS (CNI spec 1.1.0). GC frees every IPAM reservation whose (containerID, ifname) is not
//! in `cni.dev/valid-attachments` and deletes a host end left behind for it, continuing past errors
//! and reporting them at the end. STATUS answers whether ADD can be served: the podCIDR is known and
//! has a free address.

use super::config::NetConf;
use super::error::{code, CniError};
use super::names::host_veth_name;
use crate::ipam::Attachment;
use crate::netlink::Netlink;
use std::collections::HashSet;

/// Runs GC. Errors: 7 without `cni.dev/valid-attachments`; otherwise the collected errors (999).
pub(crate) fn gc(conf: &NetConf) -> Result<(), CniError> {
    let valid = conf.valid_attachments.as_ref().ok_or_else(|| {
        CniError::new(
            code::INVALID_CONFIG,
            "GC needs cni.dev/valid-attachments",
            "the key is missing",
        )
    })?;
    let valid: HashSet<Attachment> = valid
        .iter()
        .map(|v| Attachment {
            container_id: v.container_id.clone(),
            ifname: v.ifname.clone(),
        })
        .collect();
    let freed = conf.ipam(None)?.gc(&valid)?;
    let mut errors = Vec::new();
    if !freed.is_empty() {
        match Netlink::open() {
            Ok(mut nl) => {
                for (_, att) in &freed {
                    if let Err(e) = nl.delete_link(&host_veth_name(&att.container_id, &att.ifname))
                    {
                        errors.push(e.to_string());
                    }
                }
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(CniError::new(
            code::INTERNAL,
            "GC left some resources",
            errors.join("; "),
        ))
    }
}

/// Runs STATUS. Errors: 50 when the podCIDR is unknown or has no free address.
pub(crate) fn status(conf: &NetConf) -> Result<(), CniError> {
    let cidr = conf.resolve_pod_cidr().map_err(|e| {
        CniError::new(
            code::NOT_AVAILABLE,
            "the node's podCIDR is not known",
            e.details,
        )
    })?;
    let ipam = conf.ipam(Some(cidr))?;
    let free = ipam.free()?;
    if free == 0 {
        return Err(CniError::new(
            code::NOT_AVAILABLE,
            "no free pod address",
            format!("all {} addresses of {cidr} are allocated", ipam.capacity()),
        ));
    }
    Ok(())
}
