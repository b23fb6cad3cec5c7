//! The embedded CNI dataplane: the CNI plugin (spec 1.1.0; ADD, DEL, CHECK, VERSION, STATUS, GC), its
//! IPAM, the netlink operations, and the VXLAN overlay agent. The plugin path starts no async runtime.
//!
//! Feature `agent` (default) adds the overlay agent; without it the crate is the plugin alone, which
//! is how the dedicated plugin binary that clusterctl embeds is built (`clusterctl-cni-embed`).

#[cfg(feature = "agent")]
pub mod agent;
pub(crate) mod ethtool;
pub(crate) mod ipam;
pub mod netlink;
pub mod netns;
pub mod plugin;
pub(crate) mod sysctl;

/// The IPv4 CIDR type used across the crate's API (from `ipnet`).
pub use ipnet::Ipv4Net;
