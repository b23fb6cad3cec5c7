//! The agent's reconciliation of this node's IPAM leases at start: a lease whose pod cannot be alive
//! any more is dropped, so its address is free again although no DEL ever came for it.
//!
//! Decided without an API server and without talking to the runtime, from what the node shows:
//! * a lease of another boot (its `bootID` differs from the running boot's): dropped — no pod
//!   survives a reboot (the plugin already treats such leases as free; this also removes them);
//! * a lease naming its pod's network namespace path: kept while that path exists, dropped once it
//!   is gone (the runtime removes the namespace when the sandbox goes; an ADD in flight has its
//!   namespace, so it is never mistaken for a leak);
//! * a lease written before boot IDs and paths were recorded: kept — and stamped with the running
//!   boot — while its host end (`cc…`) exists, dropped when it does not (the kernel removes a veth
//!   pair with the pod's namespace).
//!
//! For a dropped lease a host end left behind is deleted, as CNI GC does.

use crate::ipam::{Ipam, Lease};
use crate::netlink::Netlink;
use crate::plugin::names::host_veth_name;
use std::net::Ipv4Addr;
use std::path::Path;

/// Why a lease was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Made in another boot.
    EarlierBoot,
    /// Its network namespace path no longer exists.
    NetnsGone,
    /// Written before boot IDs were recorded, and its host end is gone.
    HostEndGone,
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Dropped::EarlierBoot => "made in an earlier boot",
            Dropped::NetnsGone => "its network namespace is gone",
            Dropped::HostEndGone => "recorded without a boot ID and its host end is gone",
        })
    }
}

/// What one reconciliation did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Leases kept.
    pub kept: usize,
    /// Leases kept that had no boot ID and now carry the running boot's.
    pub stamped: usize,
    /// Leases dropped, with the reason.
    pub dropped: Vec<(Ipv4Addr, Lease, Dropped)>,
    /// Host ends of dropped leases that could not be deleted (`name: error`).
    pub errors: Vec<String>,
}

/// Reconciles the leases of the IPAM store in `dir` against the running boot `boot_id` and the
/// node's namespaces and links (the calling thread's network namespace is the node's). Errors:
/// [`super::AgentError::Ipam`] for state I/O, netlink errors while a lease without boot ID needs its host end checked.
pub fn reconcile(dir: &Path, boot_id: &str) -> Result<Outcome, super::AgentError> {
    let ipam = Ipam::existing(dir);
    let mut nl: Option<Netlink> = None;
    let mut failure: Option<crate::netlink::NetlinkError> = None;
    let mut out = Outcome::default();
    let mut reasons = Vec::new();
    let dropped = ipam.retain(|ip, lease| {
        let verdict = match (&lease.boot_id, &lease.netns) {
            (Some(b), _) if b != boot_id => Some(Dropped::EarlierBoot),
            (_, Some(ns)) => (!Path::new(ns).exists()).then_some(Dropped::NetnsGone),
            (Some(_), None) => None,
            (None, None) => {
                if nl.is_none() {
                    match Netlink::open() {
                        Ok(n) => nl = Some(n),
                        Err(e) => {
                            failure = Some(e);
                            return true;
                        }
                    }
                }
                let name = host_veth_name(&lease.container_id, &lease.ifname);
                match nl.as_mut().map(|n| n.link_by_name(&name)) {
                    Some(Ok(Some(_))) => None,
                    Some(Ok(None)) => Some(Dropped::HostEndGone),
                    Some(Err(e)) => {
                        failure = Some(e);
                        return true;
                    }
                    None => return true,
                }
            }
        };
        match verdict {
            Some(why) => {
                reasons.push((ip, why));
                false
            }
            None => {
                if lease.boot_id.is_none() {
                    lease.boot_id = Some(boot_id.to_string());
                    out.stamped += 1;
                }
                out.kept += 1;
                true
            }
        }
    })?;
    if let Some(e) = failure {
        return Err(e.into());
    }
    for (ip, lease) in dropped {
        let why = reasons
            .iter()
            .find(|(r, _)| *r == ip)
            .map(|(_, w)| *w)
            .unwrap_or(Dropped::NetnsGone);
        if why != Dropped::HostEndGone {
            let name = host_veth_name(&lease.container_id, &lease.ifname);
            let deleted = match nl.as_mut() {
                Some(n) => n.delete_link(&name),
                None => Netlink::open().and_then(|mut n| {
                    let r = n.delete_link(&name);
                    nl = Some(n);
                    r
                }),
            };
            if let Err(e) = deleted {
                out.errors.push(format!("{name}: {e}"));
            }
        }
        out.dropped.push((ip, lease, why));
    }
    Ok(out)
}
