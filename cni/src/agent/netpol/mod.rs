//! NetworkPolicy (`networking.k8s.io/v1`) on this node: [`compile`] turns the policies, pods and
//! namespaces into a [`Ruleset`] (pure), `table` lays it out as the sets and chains of one nftables
//! table of the agent's own, `inet clusterctl-netpol`, [`nft`] writes it whole, `diff` writes only
//! what changed since the table applied last (each one transaction), `apply` chooses between the
//! two and fails closed, and [`watch`] keeps it in line with the API (list, then watch
//! NetworkPolicies, Pods and Namespaces; re-applied within one second of a change). See
//! docs/cni.md, "NetworkPolicy".

mod apply;
mod cache;
pub mod compile;
mod diff;
pub mod nft;
pub mod report;
pub mod select;
mod table;
pub mod watch;

pub use compile::{compile, Ruleset};
pub use nft::{Nft, TABLE};

use super::AgentConfig;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Starts the policy loop ([`watch::run`]) for the agent with settings `cfg` on a thread of its own,
/// for the life of the process (`nft` as installed on the node). Errors: the thread not starting.
pub fn spawn(cfg: &AgentConfig) -> std::io::Result<std::thread::JoinHandle<()>> {
    static NEVER: AtomicBool = AtomicBool::new(false);
    let node = cfg.node_name.clone();
    let kubeconfig = cfg.kubeconfig.as_ref().map(PathBuf::from);
    let resync = Duration::from_secs(cfg.resync_seconds.max(1));
    std::thread::Builder::new()
        .name("network-policy".into())
        .spawn(move || {
            if let Err(e) = watch::run(&node, kubeconfig, &Nft::default(), resync, &NEVER) {
                eprintln!("clusterctl cni agent: network policy not enforced: {e}");
            }
        })
}

#[cfg(test)]
mod tests;
