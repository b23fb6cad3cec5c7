//! Peers from Kubernetes Node objects, through the `kube` client: a list, then a watch from the
//! list's resourceVersion; any Node event (or a 410 Gone) triggers a new list and reconcile at once, a
//! failed watch a new list after [`ERROR_BACKOFF`], the watch's own timeout a periodic resync. This is the only part
//! of the crate that starts an async runtime (a current-thread tokio runtime owned by
//! [`KubeNodes`]); the plugin path never reaches it.
//!
//! A kubelet's credentials may read only its own Node on current Kubernetes (NodeRestriction), so the
//! agent uses its own ServiceAccount bound to a ClusterRole with get/list/watch on nodes.

use super::peers::Peer;
use super::{PeerSource, PeerSourceError};
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

/// Converts a Node into a peer: `metadata.name`, the first IPv4 `InternalIP` in
/// `status.addresses`, and `spec.podCIDR`. Returns `None` when any is missing or not IPv4 (a node
/// without a podCIDR yet is simply not a peer yet).
pub fn node_to_peer(node: &Node) -> Option<Peer> {
    let name = node.metadata.name.clone()?;
    let pod_cidr: Ipv4Net = node.spec.as_ref()?.pod_cidr.as_deref()?.parse().ok()?;
    let node_ip: Ipv4Addr = node
        .status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .filter(|a| a.type_ == "InternalIP")
        .find_map(|a| a.address.parse().ok())?;
    Some(Peer {
        name,
        node_ip,
        pod_cidr: pod_cidr.trunc(),
    })
}

/// What fails while connecting to or listing from the API server.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The current-thread runtime could not start.
    #[error("start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The kubeconfig file could not be read.
    #[error("read {}: {source}", .path.display())]
    ReadKubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig does not give a client configuration.
    #[error("kubeconfig {}: {source}", .path.display())]
    Kubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Neither in-cluster nor default configuration was found.
    #[error("Kubernetes client configuration: {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// The client could not be built.
    #[error("Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// Listing the Nodes failed.
    #[error("list nodes: {0}")]
    List(#[source] kube::Error),
    /// Listing the NetworkPolicies, Pods or Namespaces failed.
    #[error("list network policies, pods and namespaces: {0}")]
    ListPolicyInputs(#[source] kube::Error),
}

/// A client from `kubeconfig`, or from the in-cluster/default configuration when `None`. Must run
/// inside a tokio runtime. Errors: unreadable kubeconfig, bad credentials configuration.
pub async fn connect(kubeconfig: Option<PathBuf>) -> Result<kube::Client, KubeError> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = match kube::config::Kubeconfig::read_from(&path) {
                Ok(kc) => kc,
                Err(source) => return Err(KubeError::ReadKubeconfig { path, source }),
            };
            match kube::Config::from_custom_kubeconfig(kc, &Default::default()).await {
                Ok(c) => c,
                Err(source) => return Err(KubeError::Kubeconfig { path, source }),
            }
        }
        None => kube::Config::infer().await.map_err(KubeError::Infer)?,
    };
    kube::Client::try_from(config).map_err(KubeError::Client)
}

/// Peer source backed by the Kubernetes API.
pub struct KubeNodes {
    rt: tokio::runtime::Runtime,
    api: Api<Node>,
    resource_version: String,
}

impl KubeNodes {
    /// Connects with `kubeconfig` (or the in-cluster/default configuration when `None`).
    /// Errors: unreadable kubeconfig, bad credentials configuration, runtime creation.
    pub fn new(kubeconfig: Option<PathBuf>) -> Result<Self, KubeError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(KubeError::Runtime)?;
        let client = rt.block_on(connect(kubeconfig))?;
        Ok(Self {
            rt,
            api: Api::all(client),
            resource_version: String::new(),
        })
    }
}

impl PeerSource for KubeNodes {
    fn peers(&mut self) -> Result<Vec<Peer>, PeerSourceError> {
        let list = self
            .rt
            .block_on(self.api.list(&ListParams::default()))
            .map_err(KubeError::List)?;
        self.resource_version = list.metadata.resource_version.clone().unwrap_or_default();
        Ok(list.items.iter().filter_map(node_to_peer).collect())
    }

    fn wait(&mut self, timeout: Duration) {
        let secs = u32::try_from(timeout.as_secs())
            .unwrap_or(290)
            .clamp(1, 290);
        let api = self.api.clone();
        let rv = self.resource_version.clone();
        let outcome = self.rt.block_on(async move {
            tokio::time::timeout(
                timeout + Duration::from_secs(5),
                watch_once(&api, &rv, secs),
            )
            .await
            .unwrap_or(WatchOutcome::Ended)
        });
        if let WatchOutcome::Failed(e) = outcome {
            eprintln!(
                "clusterctl cni agent: watch nodes: {e}; listing again in {} s",
                ERROR_BACKOFF.min(timeout).as_secs_f32()
            );
            std::thread::sleep(ERROR_BACKOFF.min(timeout));
        }
    }
}

/// Pause after a failed watch before the next list, so an unreachable or failing API server is not
/// hammered (the agent's loop lists again right after [`PeerSource::wait`] returns).
pub const ERROR_BACKOFF: Duration = Duration::from_secs(2);

/// How one watch ended.
#[derive(Debug, PartialEq, Eq)]
pub enum WatchOutcome {
    /// A Node was added, modified or deleted, or the server said the resourceVersion is too old
    /// (410 Gone): list again now.
    Changed,
    /// The stream ended without an event (the server's watch timeout).
    Ended,
    /// The watch could not start or failed (text): list again after [`ERROR_BACKOFF`].
    Failed(String),
}

/// Watches Nodes from resourceVersion `rv` (an empty `rv` watches from "any") for at most `secs`
/// seconds (the server's `timeoutSeconds`) and reports how it ended; bookmarks are skipped.
pub async fn watch_once(api: &Api<Node>, rv: &str, secs: u32) -> WatchOutcome {
    use futures::StreamExt;
    let wp = WatchParams::default().timeout(secs);
    let stream = match api.watch(&wp, rv).await {
        Ok(s) => s,
        Err(e) => return WatchOutcome::Failed(e.to_string()),
    };
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(WatchEvent::Bookmark(_)) => continue,
            Ok(WatchEvent::Error(e)) if e.code == 410 => return WatchOutcome::Changed,
            Ok(WatchEvent::Error(e)) => {
                return WatchOutcome::Failed(format!("{} ({})", e.message, e.code))
            }
            Ok(_) => return WatchOutcome::Changed,
            Err(e) => return WatchOutcome::Failed(e.to_string()),
        }
    }
    WatchOutcome::Ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_from_real_node_json() {
        let node: Node = serde_json::from_str(include_str!("testdata/node.json")).unwrap();
        let p = node_to_peer(&node).unwrap();
        assert_eq!(p.name, "worker-1");
        assert_eq!(p.node_ip, Ipv4Addr::new(192, 168, 10, 21));
        assert_eq!(p.pod_cidr.to_string(), "10.244.1.0/24");
        assert_eq!(p.vtep_ip(), Ipv4Addr::new(10, 244, 1, 0));
        let mut no_cidr = node.clone();
        no_cidr.spec.as_mut().unwrap().pod_cidr = None;
        assert!(
            node_to_peer(&no_cidr).is_none(),
            "a node without podCIDR is not a peer yet"
        );
        let mut hostname_only = node;
        hostname_only
            .status
            .as_mut()
            .unwrap()
            .addresses
            .as_mut()
            .unwrap()
            .retain(|a| a.type_ != "InternalIP");
        assert!(node_to_peer(&hostname_only).is_none());
    }
}
