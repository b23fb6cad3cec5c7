//! Day-2 changes in `up`: when the file's API server settings (certSANs, OIDC, audit, extraArgs — the
//! rendered `ClusterConfiguration` and the files the API server reads) or kubelet settings (the rendered
//! `KubeletConfiguration`) differ from what was applied, `up` rolls them out the way the kubeadm
//! documentation ("Reconfiguring a kubeadm cluster") and the seed's hand-run OIDC change do:
//!
//! - `rollout/kubeadm-config` (first control plane): `kubeadm init phase upload-config kubeadm --config`
//!   updates the `kube-system/kubeadm-config` ConfigMap (what later joins and upgrades read);
//! - `rollout/apiserver` (control planes, ONE AT A TIME): the API server's files (authentication
//!   configuration, audit policy, OIDC CA) placed; when the serving certificate lacks a certSAN, the old
//!   a new pair made by `kubeadm init phase certs apiserver` in a staging directory (kubeadm reuses an
//!   existing certificate, and `kubeadm certs renew` keeps the old SANs) and moved over the live one;
//!   `kubeadm init phase control-plane apiserver --config` regenerates the static pod; then the node's
//!   new API server must answer `/livez` (kubectl with admin.conf) before the next control plane
//!   starts, or the previous manifest and pair are put back (`rollout_apiserver`);
//! - `rollout/kubelet-config` (first control plane): `kubeadm init phase upload-config kubelet --config`
//!   updates the `kubelet-config` ConfigMap;
//! - `rollout/kubelet` (every node, one at a time): `kubeadm upgrade node phase kubelet-config` rewrites
//!   `/var/lib/kubelet/config.yaml` from it, then the kubelet is restarted and must be active again.
//!
//! What was applied is the phase's input digest in the node's state record (the engine skips a phase
//! recorded with the same digest). A node without a record was set up by `init`/`join` from the files
//! of this run, so the first run only records the baseline (and a dry run of a fresh cluster plans no
//! rollout). The configuration given to kubeadm
//! (`/etc/kubernetes/kubeadm/rollout.yaml`, 0600) is the first control plane's rendered
//! `ClusterConfiguration` and `KubeletConfiguration` with an `InitConfiguration` naming the node's own
//! advertise address, so each API server keeps its address.
//!
//! Also the `version` check: `up` never changes the Kubernetes version of a running cluster; a file
//! whose `kubernetesVersion` differs from the control plane's (the kube-apiserver static pod's image
//! tag) is refused with a pointer to `clusterctl upgrade`.

use super::UpData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::state::{NodeState, STATE_PATH};
use crate::up::placed;
use crate::version;
use clusterctl_exec::Cmd;
use clusterctl_spec::ValidNode;
use serde_yaml::{Mapping, Value};
use std::time::Duration;

/// The kubeadm configuration written for the rollout commands on each control plane (0600).
pub(crate) const ROLLOUT_CONFIG: &str = "/etc/kubernetes/kubeadm/rollout.yaml";
/// The kube-apiserver static pod manifest kubeadm writes.
pub(crate) const APISERVER_MANIFEST: &str = "/etc/kubernetes/manifests/kube-apiserver.yaml";
/// The API server's serving certificate and key.
pub(crate) const APISERVER_CERT: &str = "/etc/kubernetes/pki/apiserver.crt";

/// The document of `kind` in a multi-document YAML text, as a mapping.
fn doc(text: &str, kind: &str) -> Option<Mapping> {
    text.split("\n---")
        .filter_map(|d| serde_yaml::from_str::<Value>(d).ok())
        .filter_map(|v| match v {
            Value::Mapping(m) => Some(m),
            _ => None,
        })
        .find(|m| m.get("kind").and_then(Value::as_str) == Some(kind))
}

fn yaml(m: &Mapping) -> String {
    serde_yaml::to_string(&Value::Mapping(m.clone())).unwrap_or_default()
}

/// The first control plane's rendered init configuration text (empty when not rendered).
fn init_text(data: &UpData) -> String {
    data.first_cp()
        .and_then(|n| super::init::init_config(data, &n.name))
        .map(|f| String::from_utf8_lossy(&f.content).into_owned())
        .unwrap_or_default()
}

/// The rendered `ClusterConfiguration` without `kubernetesVersion` (a version change is an upgrade,
/// not a rollout), as YAML.
fn cluster_configuration(data: &UpData) -> Option<String> {
    let mut m = doc(&init_text(data), "ClusterConfiguration")?;
    m.remove("kubernetesVersion");
    Some(yaml(&m))
}

/// Digest material of `rollout/kubeadm-config`: the ClusterConfiguration.
pub(crate) fn cluster_inputs(data: &UpData, _: &ValidNode) -> String {
    cluster_configuration(data).unwrap_or_default()
}

/// Digest material of `rollout/apiserver` on `node`: the ClusterConfiguration and the node's API server
/// files (path, mode, sha256).
pub(crate) fn apiserver_inputs(data: &UpData, node: &ValidNode) -> String {
    let mut s = cluster_inputs(data, node);
    for f in data.files_of(&node.name, placed::OTHER) {
        s.push_str(&format!(
            "{} {:o} {}\n",
            f.path,
            f.mode,
            crate::util::sha256_hex(&f.content)
        ));
    }
    s
}

/// Digest material of the kubelet phases: the rendered KubeletConfiguration.
pub(crate) fn kubelet_inputs(data: &UpData, _: &ValidNode) -> String {
    doc(&init_text(data), "KubeletConfiguration")
        .map(|m| yaml(&m))
        .unwrap_or_default()
}

/// The kubeadm configuration for the rollout commands on `node`: an InitConfiguration with the node's
/// own name and advertise address (bind port, CRI socket and the rest as rendered, without bootstrap
/// token or certificate key), the ClusterConfiguration and the KubeletConfiguration as rendered.
/// Errors: nothing rendered for the first control plane.
pub(crate) fn rollout_config(data: &UpData, node: &ValidNode) -> Result<String, NotRendered> {
    rollout_config_from(&init_text(data), node)
}

/// A kubeadm document the rollout needs is missing from the first control plane's rendered
/// configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no {kind} rendered for the first control plane")]
pub(crate) struct NotRendered {
    /// The document kind (`InitConfiguration`, `ClusterConfiguration`).
    pub kind: &'static str,
}

/// [`rollout_config`] from the first control plane's rendered init configuration `text`.
pub(crate) fn rollout_config_from(text: &str, node: &ValidNode) -> Result<String, NotRendered> {
    let mut init = doc(text, "InitConfiguration").ok_or(NotRendered {
        kind: "InitConfiguration",
    })?;
    let cluster = doc(text, "ClusterConfiguration").ok_or(NotRendered {
        kind: "ClusterConfiguration",
    })?;
    init.remove("bootstrapTokens");
    init.remove("certificateKey");
    let address = crate::reach::address_text(node);
    if let Some(Value::Mapping(ep)) = init.get_mut("localAPIEndpoint") {
        ep.insert("advertiseAddress".into(), address.into());
    } else {
        let mut ep = Mapping::new();
        ep.insert("advertiseAddress".into(), address.into());
        init.insert("localAPIEndpoint".into(), Value::Mapping(ep));
    }
    if let Some(Value::Mapping(reg)) = init.get_mut("nodeRegistration") {
        reg.insert("name".into(), node.name.clone().into());
    }
    let mut out = yaml(&init);
    out.push_str("---\n");
    out.push_str(&yaml(&cluster));
    if let Some(k) = doc(text, "KubeletConfiguration") {
        out.push_str("---\n");
        out.push_str(&yaml(&k));
    }
    Ok(out)
}

/// The API server port of the rendered InitConfiguration (`localAPIEndpoint.bindPort`, default 6443).
pub(super) fn bind_port(data: &UpData) -> u64 {
    doc(&init_text(data), "InitConfiguration")
        .and_then(|m| {
            m.get("localAPIEndpoint")
                .and_then(|e| e.get("bindPort"))
                .and_then(Value::as_u64)
        })
        .unwrap_or(6443)
}

/// `certSANs` of the rendered ClusterConfiguration.
pub(super) fn cert_sans(data: &UpData) -> Vec<String> {
    doc(&init_text(data), "ClusterConfiguration")
        .and_then(|m| {
            m.get("apiServer")
                .and_then(|a| a.get("certSANs"))
                .and_then(Value::as_sequence)
                .map(|s| {
                    s.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
        })
        .unwrap_or_default()
}

/// True when this phase has no record yet on the node: the node was configured by `init`/`join` from
/// this run's files, and the run only records the baseline. Offline (dry run) the state record the
/// engine loaded (the local cache) decides, without a plan line: a fresh cluster plans no rollout, a
/// node that ran the phase before (its settings changed since) plans it.
pub(super) fn baseline(ctx: &mut NodeCtx, data: &UpData) -> Result<bool, PhaseError> {
    if !ctx.can_query() {
        return Ok(!ctx.ran_before);
    }
    let Some(found) = ctx.read_file(STATE_PATH)? else {
        return Ok(!ctx.ran_before);
    };
    let recorded = found
        .and_then(|b| NodeState::parse(&b, &data.spec.cluster, ctx.name()))
        .is_some_and(|s| s.phases.contains_key(ctx.phase.as_str()));
    // Not a change: only a real run records the baseline, so only it says so.
    if !recorded && !ctx.mode.dry_run {
        ctx.info("first run: recorded as applied by init/join");
    }
    Ok(!recorded)
}

pub(super) fn place_config(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let node = ctx.node.clone();
    let cfg = rollout_config(data, &node).map_err(|e| ctx.local_error_from(&e))?;
    ctx.put_file(ROLLOUT_CONFIG, 0o600, cfg.as_bytes())?;
    Ok(())
}

fn kubeadm(ctx: &mut NodeCtx, args: &str) -> Result<(), PhaseError> {
    let mut c = Cmd::new(format!("kubeadm {args} --config {ROLLOUT_CONFIG}"));
    c.timeout = Some(Duration::from_secs(300));
    ctx.run(c)?;
    Ok(())
}

/// `rollout/kubeadm-config` (first control plane): updates the kubeadm-config ConfigMap.
pub(crate) fn kubeadm_config(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    if baseline(ctx, data)? {
        return Ok(());
    }
    place_config(ctx, data)?;
    kubeadm(ctx, "init phase upload-config kubeadm")
}

/// `rollout/kubelet-config` (first control plane): updates the kubelet-config ConfigMap.
pub(crate) fn kubelet_config(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    if baseline(ctx, data)? {
        return Ok(());
    }
    place_config(ctx, data)?;
    kubeadm(ctx, "init phase upload-config kubelet")
}

/// `rollout/kubelet` (every node, serial): `/var/lib/kubelet/config.yaml` rewritten from the ConfigMap,
/// kubelet restarted and active again.
pub(crate) fn kubelet(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    if baseline(ctx, data)? {
        return Ok(());
    }
    let mut c = Cmd::new("kubeadm upgrade node phase kubelet-config");
    c.timeout = Some(Duration::from_secs(300));
    ctx.run(c)?;
    ctx.run_script(
        "systemctl restart kubelet && for i in $(seq 1 30); do systemctl is-active --quiet kubelet && exit 0; sleep 1; done; systemctl is-active kubelet",
    )?;
    Ok(())
}

/// `version` (first control plane, every run): refuses a `kubernetesVersion` different from the one the
/// control plane runs (the kube-apiserver static pod's image tag), pointing to `clusterctl upgrade`. A
/// node without the manifest (not initialised yet) or a manifest naming no version passes.
pub(crate) fn version_check(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(Some(bytes)) = ctx.read_file(APISERVER_MANIFEST)? else {
        return Ok(());
    };
    let Some(running) = version::apiserver_manifest_version(&String::from_utf8_lossy(&bytes))
    else {
        return Ok(());
    };
    let wanted = data.spec.kubernetes_version.clone();
    if running == wanted {
        return Ok(());
    }
    let how = if running < wanted {
        format!(
            "run `clusterctl upgrade -f FILE --to {wanted}` (or `--profile NAME`: name the cluster as you did for `up`; one minor at a time); `up` never changes the version of a running cluster"
        )
    } else {
        format!("going down is not supported: set kubernetesVersion back to {running}")
    };
    Err(ctx.check_error(vec![format!(
        "the control plane runs {} and the file says kubernetesVersion {wanted}: {how}",
        clusterctl_spec::versions::tag(&running)
    )]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INIT: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nbootstrapTokens:\n- token: abcdef.0123456789abcdef\ncertificateKey: '00'\nlocalAPIEndpoint:\n  advertiseAddress: 10.0.0.1\n  bindPort: 6443\nnodeRegistration:\n  name: c1\n  criSocket: unix:///run/containerd/containerd.sock\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.34.1\napiServer:\n  certSANs:\n  - 127.0.0.1\n  - api.example.com\n---\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n";

    #[test]
    fn documents_are_found_by_kind() {
        let c = doc(INIT, "ClusterConfiguration").expect("cluster");
        assert_eq!(
            c.get("kubernetesVersion").and_then(Value::as_str),
            Some("v1.34.1")
        );
        assert!(doc(INIT, "JoinConfiguration").is_none());
    }

    #[test]
    fn rollout_config_names_the_node_and_drops_secrets() {
        let node = ValidNode::new(
            "c2",
            clusterctl_spec::model::Role::ControlPlane,
            "10.0.0.2".parse().ok(),
        );
        let text = rollout_config_from(INIT, &node).expect("config");
        let init = doc(&text, "InitConfiguration").expect("init");
        assert!(init.get("bootstrapTokens").is_none() && init.get("certificateKey").is_none());
        assert_eq!(
            init.get("localAPIEndpoint")
                .and_then(|e| e.get("advertiseAddress"))
                .and_then(Value::as_str),
            Some("10.0.0.2")
        );
        assert_eq!(
            init.get("nodeRegistration")
                .and_then(|e| e.get("name"))
                .and_then(Value::as_str),
            Some("c2")
        );
        assert!(doc(&text, "ClusterConfiguration").is_some());
        assert!(doc(&text, "KubeletConfiguration").is_some());
        assert!(!text.contains("abcdef"));
        let k = doc(INIT, "KubeletConfiguration").expect("kubelet");
        assert_eq!(k.get("maxPods").and_then(Value::as_u64), Some(110));
    }
}
