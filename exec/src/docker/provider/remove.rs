//! Removing a cluster's containers and network: all of them (`destroy`), or what a failed
//! [`DockerProvider::create`] made.

use std::collections::HashMap;

use bollard::query_parameters::ListNetworksOptionsBuilder;

use super::{DockerNode, DockerProvider, CLUSTER_LABEL};
use crate::transport::ExecError;

impl DockerProvider {
    /// Removes every container of the cluster (with their anonymous volumes), its local registry and
    /// load balancer containers and its network.
    /// Returns how many containers were removed. Nothing to remove is not an error.
    pub fn remove(&self) -> Result<usize, ExecError> {
        self.remove_all().map(|r| r.containers.len())
    }

    /// As [`DockerProvider::remove`], saying what was removed: the containers' names and the networks'
    /// (both empty when the cluster has nothing on this engine).
    pub fn remove_all(&self) -> Result<Removed, ExecError> {
        // The registry and the load balancer first: they hold endpoints on the network.
        let registry = self.remove_registry()?;
        let lb = self.remove_load_balancer()?;
        let mut removed = self.remove_where(|_| true)?;
        removed.containers.extend(registry.into_iter().chain(lb));
        Ok(removed)
    }

    /// Removes the cluster's node containers that are not in `before` (matched by container name),
    /// then its labelled network unless containers still use it: what a failed [`DockerProvider::create`]
    /// made when `before` is what [`DockerProvider::list`] gave ahead of it.
    pub fn remove_created(&self, before: &[DockerNode]) -> Result<Removed, ExecError> {
        self.remove_where(|n| !before.iter().any(|b| b.container == n.container))
    }

    /// Removes the cluster's node containers `which` selects, then its labelled networks that no
    /// container uses any more.
    fn remove_where(&self, which: impl Fn(&DockerNode) -> bool) -> Result<Removed, ExecError> {
        let nodes: Vec<DockerNode> = self.list()?.into_iter().filter(which).collect();
        for n in &nodes {
            self.force_remove(&n.container)?;
        }
        self.client
            .block_on(async {
                let d = self.client.docker();
                let nets = d
                    .list_networks(Some(
                        ListNetworksOptionsBuilder::default()
                            .filters(&HashMap::from([(
                                "label",
                                vec![format!("{CLUSTER_LABEL}={}", self.cluster)],
                            )]))
                            .build(),
                    ))
                    .await
                    .map_err(|e| self.err(format!("listing networks: {e}")))?;
                let mut removed = Vec::new();
                for net in nets {
                    if let Some(name) = net.name {
                        // A network created for this cluster that another cluster's nodes joined
                        // (an explicit `spec.docker.network`) stays while they use it.
                        match d.remove_network(&name).await {
                            Ok(()) => removed.push(name),
                            Err(e) if e.to_string().contains("active endpoints") => {}
                            Err(e) => return Err(self.err(format!("removing network {name}: {e}"))),
                        }
                    }
                }
                Ok::<Vec<String>, ExecError>(removed)
            })
            .map(|networks| Removed {
                containers: nodes.into_iter().map(|n| n.container).collect(),
                networks,
            })
    }
}

/// What [`DockerProvider::remove_all`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed {
    /// The node containers' names.
    pub containers: Vec<String>,
    /// The networks' names.
    pub networks: Vec<String>,
}
