//! The names of the builtin CNI agent's NetworkPolicy enforcement, one source for the agent
//! (`clusterctl_cni::agent::netpol`), `destroy` (which deletes the table) and `status` (which reads
//! the agent's Events): its nftables table and the reasons of the Events it records.

/// The nftables table's family.
pub const FAMILY: &str = "inet";
/// The nftables table's name.
pub const TABLE: &str = "clusterctl-netpol";
/// The Events' `source.component` and `reportingComponent`.
pub const COMPONENT: &str = "clusterctl-cni-agent";
/// Event reason (Warning, on a Node): NetworkPolicy is not enforced on the node at all.
pub const NOT_ENFORCED: &str = "NetworkPolicyNotEnforced";
/// Event reason (Warning, on a Node or a NetworkPolicy): enforced fail-closed — the selected pods are
/// isolated and allowed nothing.
pub const FAILED_CLOSED: &str = "NetworkPolicyFailedClosed";
/// Event reason (Normal, on a Node or a NetworkPolicy): enforced as written again.
pub const ENFORCED: &str = "NetworkPolicyEnforced";
