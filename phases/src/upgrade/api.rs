//! The upgrade's Kubernetes API: the client ([`api_for`]: `--kubeconfig`, else the first control
//! plane's `admin.conf`) and [`ApiSteps`], the [`NodeApi`] over `kubeapi`'s drain, uncordon and
//! wait-Ready.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clusterctl_exec::Transport;
use clusterctl_kubeapi::drain::{drain, wait_ready};
use clusterctl_kubeapi::{ClusterApi, KubeClusterApi};
use clusterctl_spec::ValidCluster;

use super::error::NodeApiError;
use super::NodeApi;
use crate::reach::ReachError;

/// The API client: `kubeconfig` (the cluster's context `clusterctl-<name>` when it has one, else its
/// current context), else `admin.conf` from the first control plane (`first`), written 0600 to the
/// local cache. Errors: the kubeconfig gives no usable client, or `admin.conf` could not be read or
/// cached ([`crate::access::api::cache_admin_conf`]).
pub(crate) fn api_for(
    cluster: &ValidCluster,
    kubeconfig: Option<&Path>,
    first: &dyn Transport,
) -> Result<KubeClusterApi, ReachError> {
    let name = cluster.name();
    if let Some(p) = kubeconfig {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let ctx = clusterctl_kubeapi::kubeconfig::cluster_context(&text, name);
        return Ok(KubeClusterApi::from_kubeconfig(p, ctx.as_deref())?);
    }
    let path = crate::access::api::cache_admin_conf(cluster, first)?;
    Ok(KubeClusterApi::from_kubeconfig(&path, None)?)
}

/// [`NodeApi`] over the `kube` client: drain, uncordon, wait Ready (polling every second).
pub(crate) struct ApiSteps {
    /// The cluster's API.
    pub(crate) api: Arc<KubeClusterApi>,
    /// How long a node's pods may take to be evicted.
    pub(crate) drain_timeout: Duration,
    /// How long a node may take to be Ready with the new kubelet.
    pub(crate) ready_timeout: Duration,
}

const POLL: Duration = Duration::from_secs(1);

impl NodeApi for ApiSteps {
    fn drain(&self, node: &str) -> Result<String, NodeApiError> {
        let r = drain(self.api.as_ref(), node, self.drain_timeout, POLL)?;
        Ok(format!(
            "node {node} cordoned, {} pod(s) evicted{}",
            r.evicted.len(),
            if r.kept.is_empty() {
                String::new()
            } else {
                format!(" ({} mirror/DaemonSet pod(s) left)", r.kept.len())
            }
        ))
    }
    fn uncordon(&self, node: &str) -> Result<(), NodeApiError> {
        Ok(self.api.set_unschedulable(node, false)?)
    }
    fn wait_ready(&self, node: &str, version: &str) -> Result<(), NodeApiError> {
        Ok(wait_ready(
            self.api.as_ref(),
            node,
            Some(version),
            self.ready_timeout,
            POLL,
        )?)
    }
}
