//! The names of the builtin CNI agent's masquerade rule, one source for the agent that makes it
//! (`clusterctl_cni::agent::masq`) and for `destroy`, which removes it: an nftables table, or, where
//! nftables is missing, an iptables chain in table `nat` entered from `POSTROUTING` by one jump rule
//! tagged with a comment.

/// The nftables table name.
pub const TABLE: &str = "clusterctl-cni";
/// The iptables chain (table `nat`) of the fallback.
pub const CHAIN: &str = "CLUSTERCTL-CNI-MASQ";
/// The comment on the fallback's jump rule in `POSTROUTING`.
pub const COMMENT: &str = "clusterctl-cni";
