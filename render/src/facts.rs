//! Per-node facts render takes as input: what the phases learn by looking at a node (containerd major
//! version, cgroup version, interface names, the underlay interface's MTU, the overlay MTU already
//! installed) and what [`Facts::assumed`] guesses for offline rendering.

use clusterctl_spec::ValidCluster;
use std::collections::BTreeMap;

/// The host's cgroup hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// Legacy (v1) hierarchy.
    V1,
    /// Unified (v2) hierarchy.
    V2,
}

/// Facts of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// containerd major version: 1 (config schema `version = 2`) or 2 (schema `version = 3`). Default 1:
    /// Debian bookworm ships containerd 1.6.
    pub containerd_major: u32,
    /// The host's cgroup version. Default v2.
    pub cgroup: CgroupVersion,
    /// The interface carrying the VIP when the cluster file names none (kube-vip `vip_interface`).
    pub vip_interface: Option<String>,
    /// The node's underlay interface (the one holding its address) and that interface's MTU, when
    /// looked at: the cluster's overlay MTU is derived from the smallest of them.
    pub underlay: Option<(String, u32)>,
    /// The overlay MTU this node's CNI agent runs with now (the `mtu` of its installed
    /// `/etc/clusterctl/cni/agent.json`), when the node is already in a cluster: the running
    /// cluster's MTU, which a joining node may not lower implicitly.
    pub installed_overlay_mtu: Option<u32>,
}

impl Default for NodeFacts {
    fn default() -> Self {
        NodeFacts {
            containerd_major: 1,
            cgroup: CgroupVersion::V2,
            vip_interface: None,
            underlay: None,
            installed_overlay_mtu: None,
        }
    }
}

/// Facts for every node, by node name; a node without an entry gets [`NodeFacts::default`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// Facts by node name.
    pub nodes: BTreeMap<String, NodeFacts>,
}

impl Facts {
    /// Assumed facts for offline rendering (`clusterctl render`): containerd 1.x, and the cgroup version
    /// the file declares in `spec.runtime.hostCgroupVersion` (else v2), for every node.
    pub fn assumed(cluster: &ValidCluster) -> Facts {
        let cgroup = match cluster.spec().runtime.host_cgroup_version {
            Some(clusterctl_spec::model::CgroupVersion::V1) => CgroupVersion::V1,
            _ => CgroupVersion::V2,
        };
        let nodes = cluster
            .nodes()
            .iter()
            .map(|n| {
                (
                    n.name.clone(),
                    NodeFacts {
                        cgroup,
                        ..NodeFacts::default()
                    },
                )
            })
            .collect();
        Facts { nodes }
    }

    /// The facts of `node` (defaults when absent).
    pub fn node(&self, node: &str) -> NodeFacts {
        self.nodes.get(node).cloned().unwrap_or_default()
    }
}
