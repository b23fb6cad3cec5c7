//! The embedded CNI dataplane: the CNI plugin (spec 1.1.0; ADD, DEL, CHECK, VERSION, STATUS, GC), its
//! IPAM, the netlink operations, and the VXLAN overlay agent. The plugin path starts no async runtime.

pub mod agent;
pub mod ethtool;
pub mod ipam;
pub mod netlink;
pub mod netns;
pub mod plugin;
pub mod sysctl;

/// The IPv4 CIDR type used across the crate's API (from `ipnet`).
pub use ipnet::Ipv4Net;
