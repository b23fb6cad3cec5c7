//! What `upgrade` still reads of `clusterctl_phases::reach` through the CLI (reaching existing nodes,
//! caching the first control plane's `admin.conf`), with its errors as text. `status` and `get` call
//! their `clusterctl_phases` entry points directly.

use std::path::PathBuf;

use clusterctl_phases::reach::Reached;
use clusterctl_spec::{ValidCluster, ValidNode};

/// Reaches `nodes` of `cluster` that exist (`clusterctl_phases::reach::reach`).
pub(crate) fn reach(
    cluster: &ValidCluster,
    nodes: &[&ValidNode],
    known_hosts: Option<&PathBuf>,
) -> Reached {
    clusterctl_phases::reach::reach(cluster, nodes, known_hosts.map(PathBuf::as_path))
}

/// `admin.conf` of the first control plane cached 0600 (`clusterctl_phases::reach::cache_admin_conf`);
/// errors as text.
pub(crate) fn cache_admin_conf(
    cluster: &ValidCluster,
    first: &dyn clusterctl_exec::Transport,
) -> Result<PathBuf, String> {
    clusterctl_phases::reach::cache_admin_conf(cluster, first).map_err(|e| e.to_string())
}
