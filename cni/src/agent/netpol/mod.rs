//! NetworkPolicy (`networking.k8s.io/v1`) on this node: [`compile`] turns the policies, pods and
//! namespaces into a [`Ruleset`] (pure), [`nft`] writes it as one nftables table of the agent's own,
//! `inet clusterctl-netpol`, replaced in one transaction, and [`watch`] keeps it in line with the
//! API (list, then watch NetworkPolicies, Pods and Namespaces; re-applied within one second of a
//! change). See docs/cni.md, "NetworkPolicy".

mod apply;
mod cache;
pub mod compile;
pub mod nft;
pub mod report;
pub mod select;
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
