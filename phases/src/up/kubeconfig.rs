//! `kubeconfig`: the admin kubeconfig read from the first control plane (read-only), its server set to
//! the control-plane endpoint (the VIP), and merged into the user's kubeconfig under a cluster, user and
//! context all named `clusterctl-<name>` (as kind names its own `kind-<name>`;
//! `clusterctl_kubeapi::kubeconfig::entry_name`); entries of other clusters are kept, `current-context`
//! is set only when there was none (`clusterctl export kubeconfig` always sets it, as kind's does).
//! Written 0600, only when it changes.
//! Format: the kubeconfig `v1.Config` (clusters/users/contexts as named lists).

use super::{UpData, ADMIN_CONF};
use crate::access::kubeconfig::{target, AdminKubeconfigError};
use crate::ctx::{Change, NodeCtx, PlanKind};
use crate::error::PhaseError;
use serde_yaml::{Mapping, Value};
use std::path::PathBuf;

fn named(name: &str, key: &str, inner: Value) -> Value {
    let mut m = Mapping::new();
    m.insert("name".into(), name.into());
    m.insert(key.into(), inner);
    Value::Mapping(m)
}

fn upsert(root: &mut Mapping, list: &str, entry: Value) {
    let name = entry.get("name").cloned();
    let v = root
        .entry(list.into())
        .or_insert_with(|| Value::Sequence(Vec::new()));
    if !v.is_sequence() {
        *v = Value::Sequence(Vec::new());
    }
    if let Some(seq) = v.as_sequence_mut() {
        seq.retain(|e| e.get("name") != name.as_ref());
        seq.push(entry);
    }
}

/// When [`merge`] sets `current-context` to the merged context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Current {
    /// Only when the kubeconfig has none (`up`).
    IfUnset,
    /// Always (`export kubeconfig`, as kind's).
    Always,
}

/// Merges the admin kubeconfig `admin` into `existing` (empty: a new file) for `cluster` with `server`
/// (`https://host:port`) and, when given, `tls-server-name` (the host the serving certificate names
/// when `server` is a local forward): cluster, user and context `clusterctl-<cluster>` replace entries
/// of those names, every other entry is kept; `current` says whether `current-context` is set.
/// Errors: `admin` is not a kubeconfig with a cluster and a user.
pub fn merge(
    existing: &str,
    admin: &str,
    cluster: &str,
    server: &str,
    tls_server_name: Option<&str>,
    current: Current,
) -> Result<String, AdminKubeconfigError> {
    let a: Value = serde_yaml::from_str(admin).map_err(AdminKubeconfigError::NotYaml)?;
    let mut c = a["clusters"][0]["cluster"]
        .as_mapping()
        .cloned()
        .ok_or(AdminKubeconfigError::NoCluster)?;
    let u = a["users"][0]["user"]
        .as_mapping()
        .cloned()
        .ok_or(AdminKubeconfigError::NoUser)?;
    c.insert("server".into(), server.into());
    match tls_server_name {
        Some(n) => c.insert("tls-server-name".into(), n.into()),
        None => c.remove("tls-server-name"),
    };
    // A kubeconfig clusterctl cannot read is refused, never replaced (its other entries would be lost).
    let mut root =
        clusterctl_kubeapi::kubeconfig::parse(existing).map_err(AdminKubeconfigError::Existing)?;
    root.entry("apiVersion".into())
        .or_insert_with(|| "v1".into());
    root.entry("kind".into()).or_insert_with(|| "Config".into());
    let name = clusterctl_kubeapi::kubeconfig::entry_name(cluster);
    upsert(
        &mut root,
        "clusters",
        named(&name, "cluster", Value::Mapping(c)),
    );
    upsert(&mut root, "users", named(&name, "user", Value::Mapping(u)));
    let mut ctxm = Mapping::new();
    ctxm.insert("cluster".into(), name.as_str().into());
    ctxm.insert("user".into(), name.as_str().into());
    upsert(
        &mut root,
        "contexts",
        named(&name, "context", Value::Mapping(ctxm)),
    );
    let unset = root
        .get("current-context")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .is_empty();
    if unset || current == Current::Always {
        root.insert("current-context".into(), name.into());
    }
    serde_yaml::to_string(&Value::Mapping(root)).map_err(AdminKubeconfigError::Write)
}

/// The `kubeconfig` phase (first control plane; writes on this machine): [`refresh`] with the
/// endpoint, or the docker provider's local forward.
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let local = data.api.local();
    let server = local
        .map(|l| l.server.clone())
        .unwrap_or_else(|| format!("https://{}", data.spec.endpoint));
    let tls_name = local.map(|l| l.tls_server_name.as_str());
    refresh(
        ctx,
        &data.spec.cluster,
        &server,
        tls_name,
        data.spec.kubeconfig.as_ref(),
    )
}

/// Reads `admin.conf` on the node of `ctx` (the first control plane) and merges it into the user's
/// kubeconfig ([`target`] of `explicit`) for `cluster` with `server` and `tls_name` ([`merge`],
/// [`Current::IfUnset`]), written 0600 only when it changes; offline it plans the merge. Shared by
/// `up` and `certs renew` (which refreshes the renewed client certificate). Errors: admin.conf missing,
/// no kubeconfig path, the kubeconfig unreadable or not one clusterctl can merge into.
pub(crate) fn refresh(
    ctx: &mut NodeCtx,
    cluster: &str,
    server: &str,
    tls_name: Option<&str>,
    explicit: Option<&PathBuf>,
) -> Result<(), PhaseError> {
    let Some(path) = target(explicit) else {
        return Err(ctx.local_error("no kubeconfig path: set KUBECONFIG or HOME"));
    };
    let admin = match ctx.read_file(ADMIN_CONF)? {
        None => {
            // Offline (a dry run without --probe): admin.conf cannot be read, so the merge is
            // planned by its target (not counted, as before; `put_local` counts the real write).
            let merge = Change::new(
                PlanKind::Local,
                format!(
                    "merge {ADMIN_CONF} into {} as context `{}` with server {server}{} (mode 0600)",
                    path.display(),
                    clusterctl_kubeapi::kubeconfig::entry_name(cluster),
                    tls_name
                        .map(|n| format!(", tls-server-name {n}"))
                        .unwrap_or_default()
                ),
            )
            .uncounted();
            ctx.change(merge, |_| Ok(()))?;
            return Ok(());
        }
        Some(None) => {
            return Err(ctx.local_error(format!(
                "{ADMIN_CONF} does not exist on the first control plane"
            )))
        }
        Some(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
    };
    let path = crate::local::follow_links(&path);
    let existing = crate::local::read_if_exists(&path)
        .map_err(|e| ctx.local_error_in(format_args!("reading {}", path.display()), &e))?;
    let merged = merge(
        &existing,
        &admin,
        cluster,
        server,
        tls_name,
        Current::IfUnset,
    )
    .map_err(|e| ctx.local_error_from(&e))?;
    ctx.put_local(&path, 0o600, merged.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    server: https://10.0.0.11:6443\n    certificate-authority-data: Q0E=\nusers:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ\ncontexts:\n- name: kubernetes-admin@kubernetes\n  context: {cluster: kubernetes, user: kubernetes-admin}\ncurrent-context: kubernetes-admin@kubernetes\n";

    #[test]
    fn merges_under_the_cluster_name_with_the_vip() {
        let existing = "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster: {server: https://1.2.3.4:6443}\ncontexts: []\nusers: []\ncurrent-context: other\n";
        let out = merge(
            existing,
            ADMIN,
            "topgun",
            "https://10.0.0.10:6443",
            None,
            Current::IfUnset,
        )
        .expect("merge");
        let v: Value = serde_yaml::from_str(&out).expect("yaml");
        assert_eq!(v["current-context"], Value::from("other"));
        let clusters = v["clusters"].as_sequence().expect("clusters");
        assert_eq!(clusters.len(), 2);
        assert_eq!(clusters[0]["name"], Value::from("other"), "kept");
        assert_eq!(clusters[1]["name"], Value::from("clusterctl-topgun"));
        assert_eq!(
            clusters[1]["cluster"]["server"],
            Value::from("https://10.0.0.10:6443")
        );
        let ctx0 = &v["contexts"][0];
        assert_eq!(ctx0["name"], Value::from("clusterctl-topgun"));
        assert_eq!(ctx0["context"]["cluster"], Value::from("clusterctl-topgun"));
        assert_eq!(ctx0["context"]["user"], Value::from("clusterctl-topgun"));
        assert_eq!(v["users"][0]["name"], Value::from("clusterctl-topgun"));
        // Merging again gives the same file; `Always` (export kubeconfig) switches to it.
        let again = |current| {
            merge(
                &out,
                ADMIN,
                "topgun",
                "https://10.0.0.10:6443",
                None,
                current,
            )
            .expect("merge")
        };
        assert_eq!(again(Current::IfUnset), out);
        let switched: Value = serde_yaml::from_str(&again(Current::Always)).expect("yaml");
        assert_eq!(
            switched["current-context"],
            Value::from("clusterctl-topgun")
        );
        assert_eq!(switched["clusters"].as_sequence().map(Vec::len), Some(2));
        let fresh: Value = serde_yaml::from_str(
            &merge(
                "",
                ADMIN,
                "lab",
                "https://x:6443",
                Some("lab-cp"),
                Current::IfUnset,
            )
            .expect("merge"),
        )
        .expect("yaml");
        assert_eq!(fresh["current-context"], Value::from("clusterctl-lab"));
        assert_eq!(
            fresh["clusters"][0]["cluster"]["tls-server-name"],
            Value::from("lab-cp")
        );
    }
}
