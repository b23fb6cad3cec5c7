//! The cluster's API client as every command but `up` gets it ([`cluster_api`]): the kubeconfig
//! context named after the cluster, else `admin.conf` fetched from the first control plane over its
//! transport and cached 0600 ([`kubeconfig_for`], [`cache_admin_conf`]). Above `reach` (which reaches
//! the first control plane) and `node_containers` (the docker provider's local API), below the
//! workflows.

use std::path::{Path, PathBuf};

use clusterctl_exec::Transport;
use clusterctl_kubeapi::KubeClusterApi;
use clusterctl_spec::ValidCluster;

use super::kubeconfig::ADMIN_CONF;
use crate::reach::ReachError;

/// The kubeconfig path and context for the cluster's API: `kubeconfig` (the cluster's context,
/// `clusterctl-<cluster>` — see `clusterctl_kubeapi::kubeconfig::cluster_context` — else its current
/// context); else the cluster's context in any file of `$KUBECONFIG`, or `~/.kube/config` (the one `up` merges); else `/etc/kubernetes/admin.conf` fetched from
/// the first control plane over its transport and kept 0600 in the local cache
/// (`~/.cache/clusterctl/<cluster>/admin.conf`). Errors: what is missing.
pub(crate) fn kubeconfig_for(
    cluster: &ValidCluster,
    kubeconfig: Option<&Path>,
    known_hosts: Option<&Path>,
) -> Result<(PathBuf, Option<String>), ReachError> {
    let name = cluster.name().to_string();
    let with_context = |p: &Path| -> Option<String> {
        let text = std::fs::read_to_string(p).ok()?;
        clusterctl_kubeapi::kubeconfig::cluster_context(&text, &name)
    };
    if let Some(p) = kubeconfig {
        return Ok((p.to_path_buf(), with_context(p)));
    }
    for p in super::kubeconfig::candidates(None) {
        if let Some(ctx) = with_context(&p) {
            return Ok((p, Some(ctx)));
        }
    }
    let first = cluster.first_control_plane();
    let mut reached = crate::reach::reach(cluster, &[first], known_hosts);
    let Some(t) = reached.transports.get(&first.name) else {
        return Err(ReachError::FirstControlPlane {
            cluster: name,
            node: first.name.clone(),
            source: Box::new(
                reached
                    .errors
                    .remove(&first.name)
                    .unwrap_or(ReachError::NoAddress),
            ),
        });
    };
    Ok((cache_admin_conf(cluster, t.as_ref())?, None))
}

/// Downloads `/etc/kubernetes/admin.conf` from the first control plane (`first`) and writes it 0600 to
/// the cluster's local cache directory (`~/.cache/clusterctl/<cluster>/admin.conf`); returns that path.
/// For the docker provider its server is the API port Docker publishes on 127.0.0.1 and its
/// `tls-server-name` the endpoint host ([`super::kubeconfig::via_local`], as `up` merges it, and as kind
/// reaches its nodes): the endpoint admin.conf names is the node's, which this machine may not reach.
/// Errors: the download failed, the file is missing or (docker) not a kubeconfig, or the cache is not
/// writable.
pub(crate) fn cache_admin_conf(
    cluster: &ValidCluster,
    first: &dyn Transport,
) -> Result<PathBuf, ReachError> {
    let name = cluster.name();
    let admin = first
        .download(ADMIN_CONF)
        .map_err(|source| ReachError::AdminConf {
            node: first.node().to_string(),
            source,
        })?
        .ok_or_else(|| ReachError::NoAdminConf {
            cluster: name.to_string(),
            path: ADMIN_CONF,
            node: first.node().to_string(),
        })?;
    let admin = match crate::node_containers::local_api(cluster, false) {
        Some(local) => super::kubeconfig::via_local(&String::from_utf8_lossy(&admin), &local)
            .map_err(|source| ReachError::AdminKubeconfig {
                node: first.node().to_string(),
                source,
            })?
            .into_bytes(),
        None => admin,
    };
    let dir = crate::local::cache_dir(name).ok_or(ReachError::NoCache)?;
    let path = dir.join("admin.conf");
    crate::local::write_private(&path, 0o600, &admin).map_err(|source| ReachError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// The cluster's API client: [`kubeconfig_for`], then the `kube` client for that file and context.
/// Errors: as [`kubeconfig_for`], or the kubeconfig does not give a usable client.
pub(crate) fn cluster_api(
    cluster: &ValidCluster,
    kubeconfig: Option<&Path>,
    known_hosts: Option<&Path>,
) -> Result<KubeClusterApi, ReachError> {
    let (path, context) = kubeconfig_for(cluster, kubeconfig, known_hosts)?;
    Ok(KubeClusterApi::from_kubeconfig(&path, context.as_deref())?)
}
