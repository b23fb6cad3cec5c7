//! The version checks of `upgrade`, before anything changes: `--to` is the cluster file's version
//! ([`file_version`]), and the running versions — the control plane's from the kube-apiserver static
//! pod on the first control plane ([`control_plane`]), each registered node's kubelet from the API
//! ([`nodes`]) — are at most one minor below it and never above it ([`crate::version::check_step`]).

use clusterctl_exec::{ExecError, Transport};
use clusterctl_kubeapi::ClusterApi;
use clusterctl_spec::ValidCluster;
use semver::Version;

use super::error::UpgradeError;
use super::source::ClusterSource;
use crate::version;
use clusterctl_spec::ValidNode;

/// Refuses a `to` that is not `cluster`'s `spec.kubernetesVersion` (its pre-release and build parts
/// ignored). Errors: [`UpgradeError::FileVersion`], naming how the cluster was named (`named`).
pub(crate) fn file_version(
    cluster: &ValidCluster,
    to: &Version,
    named: &ClusterSource,
) -> Result<(), UpgradeError> {
    let v = cluster.kubernetes_version();
    let file = Version::new(v.major, v.minor, v.patch);
    if &file == to {
        return Ok(());
    }
    Err(UpgradeError::FileVersion {
        to: to.clone(),
        file,
        named: named.clone(),
    })
}

/// The control plane's running version: the kube-apiserver image tag in its static pod manifest.
/// `Ok(None)` when there is no manifest or it names no version. Errors: the download failed.
pub(crate) fn control_plane_version(t: &dyn Transport) -> Result<Option<Version>, ExecError> {
    let bytes = t.download(crate::up::rollout::APISERVER_MANIFEST)?;
    Ok(bytes.and_then(|b| version::apiserver_manifest_version(&String::from_utf8_lossy(&b))))
}

/// Checks the control plane's running version on the first control plane (`node`, reached through
/// `t`) against `to`. Errors: the manifest could not be read, names no version (the cluster is not
/// up; `named` gives the hint's flag), or the version cannot go to `to` in one step (refused).
pub(crate) fn control_plane(
    node: &str,
    t: &dyn Transport,
    to: &Version,
    named: &ClusterSource,
) -> Result<(), UpgradeError> {
    match control_plane_version(t) {
        Ok(Some(cp)) => {
            version::check_step("the control plane", &cp, to).map_err(UpgradeError::Version)
        }
        Ok(None) => Err(UpgradeError::NotUp {
            node: node.to_string(),
            flag: named.flag(),
        }),
        Err(source) => Err(UpgradeError::ControlPlaneVersion {
            node: node.to_string(),
            source,
        }),
    }
}

/// Checks the kubelet version of every Node the API lists that is one of `nodes` against `to` (a
/// version that does not parse is skipped). Errors: listing the Nodes failed, or a kubelet cannot go
/// to `to` in one step (refused).
pub(crate) fn nodes(
    api: &dyn ClusterApi,
    nodes: &[ValidNode],
    to: &Version,
) -> Result<(), UpgradeError> {
    for n in &api.nodes().map_err(UpgradeError::Nodes)? {
        let status = clusterctl_kubeapi::node_status(n);
        if !nodes.iter().any(|x| x.name == status.name) {
            continue;
        }
        let Ok(v) = version::parse(&status.version) else {
            continue;
        };
        version::check_step(&format!("node {}", status.name), &v, to)
            .map_err(UpgradeError::Version)?;
    }
    Ok(())
}
