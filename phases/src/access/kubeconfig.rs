//! The cluster's admin kubeconfig as this machine uses it, with no I/O of its own beyond reading the
//! environment: where kubeadm writes it on a control plane ([`ADMIN_CONF`]), the user's kubeconfig
//! files as kubectl reads them ([`candidates`], [`target`]), and the docker provider's local forward
//! of the API server ([`LocalApi`], [`via_local`]). Below `reach`, `node_containers` and every
//! workflow.

use std::path::PathBuf;

/// Where `kubeadm` writes the admin kubeconfig; its presence means the control plane is initialised.
pub const ADMIN_CONF: &str = "/etc/kubernetes/admin.conf";

/// The user's kubeconfig path, where new entries are written: the first of [`candidates`].
pub fn target(explicit: Option<&PathBuf>) -> Option<PathBuf> {
    candidates(explicit).into_iter().next()
}

/// Every kubeconfig file a context is looked up in, as kubectl reads them: `explicit`, else every
/// entry of `$KUBECONFIG` (empty entries skipped), else `~/.kube/config` (none without `HOME`).
pub fn candidates(explicit: Option<&PathBuf>) -> Vec<PathBuf> {
    if let Some(p) = explicit {
        return vec![p.clone()];
    }
    if let Some(k) = std::env::var_os("KUBECONFIG") {
        let all: Vec<PathBuf> = std::env::split_paths(&k)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !all.is_empty() {
            return all;
        }
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".kube").join("config"))
        .into_iter()
        .collect()
}

/// How this machine reaches the API server when the endpoint itself is not reachable from here: the
/// docker provider's port published on 127.0.0.1 (as kind does). The serving certificate is still
/// checked against the endpoint's host (kubeconfig `tls-server-name`), which kubeadm always puts into
/// the API server's certSANs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalApi {
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// The `controlPlaneEndpoint` host the certificate names, e.g. `lab-control-plane`.
    pub tls_server_name: String,
}

/// `text` (kubeconfig `v1.Config`) with its first cluster's `server` set to `local.server` and its
/// `tls-server-name` to `local.tls_server_name`. Errors: not YAML with `clusters[0].cluster`.
pub fn via_local(text: &str, local: &LocalApi) -> Result<String, AdminKubeconfigError> {
    let mut v: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(AdminKubeconfigError::NotYaml)?;
    let cluster = v
        .get_mut("clusters")
        .and_then(|c| c.get_mut(0))
        .and_then(|c| c.get_mut("cluster"))
        .and_then(serde_yaml::Value::as_mapping_mut)
        .ok_or(AdminKubeconfigError::NoCluster)?;
    cluster.insert("server".into(), local.server.as_str().into());
    cluster.insert(
        "tls-server-name".into(),
        local.tls_server_name.as_str().into(),
    );
    serde_yaml::to_string(&v).map_err(AdminKubeconfigError::Write)
}

/// Why an admin kubeconfig could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AdminKubeconfigError {
    /// It is not YAML (the parser's error is the source; the text holds credentials, so the
    /// message names no part of it).
    #[error("admin kubeconfig is not YAML")]
    NotYaml(#[source] serde_yaml::Error),
    /// It has no `clusters[0].cluster`.
    #[error("admin kubeconfig has no cluster")]
    NoCluster,
    /// It has no `users[0].user`.
    #[error("admin kubeconfig has no user")]
    NoUser,
    /// The kubeconfig to merge into is not one clusterctl can read (not YAML, or its lists are not
    /// lists): it is left as it is.
    #[error("the kubeconfig to merge into cannot be read as one (left as it is; fix or move it)")]
    Existing(#[source] clusterctl_kubeapi::kubeconfig::KubeconfigError),
    /// The result could not be written as YAML.
    #[error("writing the kubeconfig as YAML")]
    Write(#[source] serde_yaml::Error),
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_local_address_keeps_the_endpoint_for_the_certificate() {
        let text = "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    server: https://lab-control-plane:6443\n    certificate-authority-data: Q0E=\n";
        let local = super::LocalApi {
            server: "https://127.0.0.1:40001".into(),
            tls_server_name: "lab-control-plane".into(),
        };
        let out = super::via_local(text, &local).expect("kubeconfig");
        assert!(out.contains("server: https://127.0.0.1:40001"), "{out}");
        assert!(out.contains("tls-server-name: lab-control-plane"), "{out}");
        assert!(out.contains("certificate-authority-data: Q0E="), "{out}");
        assert!(super::via_local("clusters: []", &local).is_err());
    }
}
