//! A real kube-apiserver (`clusterctl_testbed::envtest`) run with the flags and files clusterctl
//! renders for `spec.apiServer`: the flags are the first control plane's kubeadm
//! `ClusterConfiguration` `apiServer.extraArgs` (what kubeadm writes into the static pod) and the files
//! its rendered node files (audit policy, OIDC CA, AuthenticationConfiguration) — each placed in the
//! test's directory instead of `/etc/kubernetes/…`, the flags naming them changed to match (the only
//! change; the static pod would mount them at the rendered paths). Shared by `audit_seen.rs` and
//! `oidc_login.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clusterctl_render::{render, Facts};
use clusterctl_testbed::envtest::Envtest;
use serde_json::Value;

/// What clusterctl renders for the API server of a one-control-plane cluster.
pub(crate) struct RenderedApiServer {
    /// `apiServer.extraArgs` of the kubeadm ClusterConfiguration, in order.
    pub(crate) flags: Vec<(String, String)>,
    /// Rendered node files under `/etc/kubernetes/{audit,oidc,authn}/`: path → text.
    pub(crate) files: BTreeMap<String, String>,
}

impl RenderedApiServer {
    /// The value of flag `name`.
    pub(crate) fn flag(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Renders a one-node Kubernetes 1.34 cluster file (in `dir`; the API server the tests run is the
/// test bed's v1.34.4) whose `spec.apiServer` is `api_server` (YAML lines
/// indented by four spaces) and returns what the API server gets.
pub(crate) fn rendered(dir: &Path, api_server: &str) -> RenderedApiServer {
    let file = dir.join(format!("{}.yaml", clusterctl_testbed::unique_name("c")));
    std::fs::write(
        &file,
        format!(
            "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: apitest}}\nspec:\n  kubernetesVersion: v1.34.1\n  apiServer:\n{api_server}  provider: ssh\n  controlPlane: {{endpoint: 10.88.0.11:6443}}\n  ssh: {{user: root}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: 10.88.0.11}}\n"
        ),
    )
    .expect("cluster file");
    let loaded = clusterctl_spec::load(&file).expect("load");
    let cluster = clusterctl_spec::validate(&loaded).expect("valid").cluster;
    let out = render(&cluster, &Facts::assumed(&cluster)).expect("renders");
    let init = out
        .node_file("cp1", "/etc/kubernetes/kubeadm/init.yaml")
        .expect("kubeadm init config");
    let text = String::from_utf8(init.content.clone()).expect("utf-8");
    let cfg = text
        .split("\n---\n")
        .filter_map(|d| serde_yaml::from_str::<Value>(d).ok())
        .find(|d| d["kind"] == "ClusterConfiguration")
        .expect("ClusterConfiguration");
    let flags = cfg["apiServer"]["extraArgs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            (
                a["name"].as_str().unwrap_or_default().to_string(),
                a["value"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let files = out.per_node["cp1"]
        .iter()
        .filter(|f| {
            [
                "/etc/kubernetes/audit/",
                "/etc/kubernetes/oidc/",
                "/etc/kubernetes/authn/",
            ]
            .iter()
            .any(|d| f.path.starts_with(d))
        })
        .map(|f| {
            (
                f.path.clone(),
                String::from_utf8(f.content.clone()).expect("utf-8"),
            )
        })
        .collect();
    RenderedApiServer { flags, files }
}

/// `path` (absolute on a node) under `root`.
pub(crate) fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Starts a real API server with the rendered audit and authentication flags (the others —
/// admission plugins, the test bed's own certificates — are the test bed's), every rendered file and
/// absolute log path placed under `root`.
pub(crate) fn envtest_with(r: &RenderedApiServer, root: &Path) -> Envtest {
    for (path, text) in &r.files {
        let p = under(root, path);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("dir");
        std::fs::write(&p, text).expect("rendered file");
    }
    let flags: Vec<String> = r
        .flags
        .iter()
        .filter(|(k, _)| {
            k.starts_with("audit-") || k.starts_with("oidc-") || k == "authentication-config"
        })
        .map(|(k, v)| {
            let v = if v.starts_with('/') {
                let p = under(root, v);
                std::fs::create_dir_all(p.parent().expect("a parent")).expect("dir");
                p.display().to_string()
            } else {
                v.clone()
            };
            format!("--{k}={v}")
        })
        .collect();
    match Envtest::start_with_flags(&flags) {
        Ok(e) => e,
        Err(e) => panic!("the API server with the rendered flags {flags:?}: {e}"),
    }
}
