//! Shared by the day-2 commands (`status`, `get`, `upgrade`): the CLI's reading of `clusterctl_phases::reach` (reaching existing nodes, the kubeconfig for the API, one
//! closure per node in parallel) with its errors as text.

use std::path::PathBuf;

use clusterctl_exec::DockerProvider;
use clusterctl_kubeapi::KubeClusterApi;
use clusterctl_spec::{ValidCluster, ValidNode};

/// Transports to nodes, and why the others could not be reached (`clusterctl_phases::reach`).
pub(crate) use clusterctl_phases::reach::{on_each, Reached};

/// The Docker provider of `cluster` (no container is created); errors as text.
pub(crate) fn docker_provider(cluster: &ValidCluster) -> Result<DockerProvider, String> {
    clusterctl_phases::reach::docker_provider(cluster).map_err(|e| e.to_string())
}

/// Reaches `nodes` of `cluster` that exist (`clusterctl_phases::reach::reach`).
pub(crate) fn reach(
    cluster: &ValidCluster,
    nodes: &[&ValidNode],
    known_hosts: Option<&PathBuf>,
) -> Reached {
    clusterctl_phases::reach::reach(cluster, nodes, known_hosts.map(PathBuf::as_path))
}

/// The kubeconfig path and context for the cluster's API (`clusterctl_phases::reach::kubeconfig_for`);
/// errors as text.
pub(crate) fn kubeconfig_for(
    cluster: &ValidCluster,
    kubeconfig: Option<&PathBuf>,
    known_hosts: Option<&PathBuf>,
) -> Result<(PathBuf, Option<String>), String> {
    clusterctl_phases::reach::kubeconfig_for(
        cluster,
        kubeconfig.map(PathBuf::as_path),
        known_hosts.map(PathBuf::as_path),
    )
    .map_err(|e| e.to_string())
}

/// `admin.conf` of the first control plane cached 0600 (`clusterctl_phases::reach::cache_admin_conf`);
/// errors as text.
pub(crate) fn cache_admin_conf(
    cluster: &ValidCluster,
    first: &dyn clusterctl_exec::Transport,
) -> Result<PathBuf, String> {
    clusterctl_phases::reach::cache_admin_conf(cluster, first).map_err(|e| e.to_string())
}

/// The cluster's API client (`clusterctl_phases::reach::cluster_api`); errors as text.
pub(crate) fn cluster_api(
    cluster: &ValidCluster,
    kubeconfig: Option<&PathBuf>,
    known_hosts: Option<&PathBuf>,
) -> Result<KubeClusterApi, String> {
    clusterctl_phases::reach::cluster_api(
        cluster,
        kubeconfig.map(PathBuf::as_path),
        known_hosts.map(PathBuf::as_path),
    )
    .map_err(|e| e.to_string())
}
