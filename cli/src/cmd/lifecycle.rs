//! Shared by the day-2 commands (`status`, `get`, `upgrade`): loading the cluster file, and the CLI's
//! reading of `clusterctl_phases::reach` (reaching existing nodes, the kubeconfig for the API, one
//! closure per node in parallel) with its errors as text.

use std::path::PathBuf;
use std::process::ExitCode;

use clusterctl_exec::DockerProvider;
use clusterctl_kubeapi::KubeClusterApi;
use clusterctl_spec::{ValidCluster, ValidNode};

/// Loads and validates `file`; on failure prints every diagnostic and returns exit code 2.
pub(crate) fn load_cluster(file: &std::path::Path) -> Result<ValidCluster, ExitCode> {
    match clusterctl_spec::load(file).and_then(|l| clusterctl_spec::validate(&l)) {
        Ok(v) => Ok(v.cluster),
        Err(d) => {
            eprintln!("{d}");
            Err(ExitCode::from(crate::EXIT_INVALID))
        }
    }
}

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

/// The message for node containers that could not be created or did not boot (`error`): when the
/// cluster had no container before (`existed` false), what the attempt made is removed first (as
/// `destroy` would) and said so; when the engine refused a privileged container (rootless Docker, a
/// policy: `unable to apply caps: operation not permitted`), the settings for unprivileged nodes are
/// named.
pub(crate) fn failed_create(provider: &DockerProvider, existed: bool, error: &str) -> String {
    let mut msg = format!("creating the node containers failed: {error}");
    if !existed {
        match provider.remove_all() {
            Ok(r) if !r.containers.is_empty() || !r.networks.is_empty() => msg.push_str(&format!(
                "\n  removed what this attempt created: {}",
                r.containers
                    .iter()
                    .map(|c| format!("container {c}"))
                    .chain(r.networks.iter().map(|n| format!("network {n}")))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Ok(_) => {}
            Err(e) => msg.push_str(&format!(
                "\n  removing what this attempt created failed too ({e}): run `clusterctl destroy`"
            )),
        }
    }
    if let Some(hint) = privileged_hint(error) {
        msg.push_str("\n  hint: ");
        msg.push_str(hint);
    }
    msg
}

/// The hint for an engine that refuses privileged containers, when `error` is its refusal.
pub(crate) fn privileged_hint(error: &str) -> Option<&'static str> {
    let e = error.to_ascii_lowercase();
    let refused = e.contains("unable to apply caps")
        || (e.contains("privileged") && (e.contains("not permitted") || e.contains("not allowed")))
        || (e.contains("operation not permitted") && e.contains("cap"));
    refused.then_some(
        "this Docker engine refuses privileged containers (rootless Docker, or a policy): run the nodes unprivileged with `docker.runOptions.privileged: false` and `nodeEnvironment: unprivileged-container` (docs/spec.md, `spec.nodeEnvironment`)",
    )
}

#[cfg(test)]
mod tests {
    use super::privileged_hint;

    #[test]
    fn the_engines_refusal_of_privileged_containers_gets_the_hint() {
        let raw = "Docker responded with status code 500: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: unable to apply caps: operation not permitted: unknown";
        assert!(privileged_hint(raw)
            .is_some_and(|h| h.contains("nodeEnvironment: unprivileged-container")));
        assert!(privileged_hint("no such image kindest/node:v1.34.1").is_none());
    }
}
