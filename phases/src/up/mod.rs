//! The phases of `clusterctl up`, in order: `facts` → `render` → `preflight` → `packages` → `files` →
//! `runtime/<kind>` → `control-plane/kube-vip` → `init` → `control-plane/kube-vip-admin` → `cni` →
//! `join/control-plane` (one at a time) → `join/worker` (in parallel) → `kube-vip-cloud-provider` (with a
//! `vip.loadBalancerPool`) → `labels` → `addons` → `images` →
//! `wait-ready` → `kubeconfig`. [`phases`] builds the list for a cluster (kube-vip phases only with a
//! VIP, the CNI phase shaped by the CNI choice; with an air-gap bundle, [`airgap`]'s phases: its
//! verification first, its packages after `render` unless the bundle is the `packages` phase's
//! source, its images after the runtime); [`UpData`] is what they share.

pub(crate) mod addons;
pub(crate) mod airgap;
pub mod api;
pub(crate) mod cni;
pub mod cni_install;
pub mod cni_token;
pub(crate) mod credentials;
mod declared;
pub(crate) mod encryption;
pub(crate) mod facts;
pub(crate) mod files;
pub mod from_file;
pub(crate) mod images;
pub(crate) mod init;
pub(crate) mod join;
pub mod kubeconfig;
pub(crate) mod kubevip;
pub mod labels;
pub mod launch;
pub(crate) mod lb_pool;
pub(crate) mod packages;
pub(crate) mod placed;
pub mod preflight;
pub(crate) mod ready;
pub(crate) mod rollout;
pub(crate) mod rollout_apiserver;
pub mod run;
pub(crate) mod runtime;

use crate::ctx::{Mode, NodeCtx, Secrets};
use crate::engine::Phase;
use crate::error::PhaseError;
use crate::kubeadm::JoinSecrets;
use crate::report::Reporter;
use clusterctl_exec::Transport;
use clusterctl_render::{Purpose, RenderedFile};
use clusterctl_spec::model::{CniPlugin, RuntimeKind};
use clusterctl_spec::ValidNode;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

pub use crate::access::kubeconfig::ADMIN_CONF;
pub use facts::NodeFacts;

/// The kubeconfig with `system:masters` rights that kubeadm ≥ 1.29 writes on the first control plane
/// only; kube-vip uses it until `init` finished (RBAC for admin.conf does not exist before).
pub const SUPER_ADMIN_CONF: &str = "/etc/kubernetes/super-admin.conf";
/// The kubelet's kubeconfig; its presence means the node has joined (or was initialised).
pub const KUBELET_CONF: &str = "/etc/kubernetes/kubelet.conf";
/// `kubectl` with the admin kubeconfig, as run on the first control plane (only to apply the CNI's
/// manifests; Nodes are read and patched through the Kubernetes API from this machine, [`api`]).
pub const KUBECTL: &str = "kubectl --kubeconfig /etc/kubernetes/admin.conf";

/// The cluster as the phases of `up` need it (built by the CLI from the validated cluster file).
#[derive(Debug, Clone)]
pub struct UpSpec {
    /// `metadata.name`: kubeconfig context name, state and cache key.
    pub cluster: String,
    /// `spec.kubernetesVersion`, e.g. `1.34.1` (exact; `clusterctl_spec::versions::tag` writes it
    /// with its `v`).
    pub kubernetes_version: semver::Version,
    /// Nodes in file order; the first control plane runs `kubeadm init`.
    pub nodes: Vec<ValidNode>,
    /// `controlPlaneEndpoint` as `host:port` (the VIP's when there is one).
    pub endpoint: String,
    /// The kube-vip address, when the control plane has a VIP.
    pub vip: Option<String>,
    /// Container runtime.
    pub runtime: RuntimeKind,
    /// CNI choice.
    pub cni: CniPlugin,
    /// For calico, cilium, flannel and kindnet: what their install needs ([`cni_install`]).
    pub cni_install: Option<cni_install::CniInstall>,
    /// Images to put into every node's runtime (`images.preload`), as local image references.
    pub preload_images: Vec<String>,
    /// The user's kubeconfig to merge the admin context into; `None`: `$KUBECONFIG`'s first entry or
    /// `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// The clusterctl binary installed as `/opt/cni/bin/clusterctl-cni` for the builtin CNI.
    pub binary: Option<PathBuf>,
    /// How long `wait-ready` waits for every node to be Ready.
    pub ready_timeout: Duration,
    /// Preflight check ids whose failure is reported but does not stop `up` (e.g. `time-sync`).
    pub ignore_preflight: Vec<String>,
    /// The air-gap bundle to install from (`airgap.bundle`), when the file names one ([`airgap`]).
    pub airgap: Option<airgap::AirgapUp>,
    /// Where kubeadm, kubelet, kubectl and the runtime come from (`spec.packages`, [`packages`]).
    pub packages: crate::packages::Settings,
    /// The proxy environment of the `packages` phase's downloads (`spec.proxy`: `http_proxy`,
    /// `https_proxy`, `no_proxy` in both cases); empty without a proxy.
    pub proxy: Vec<(String, String)>,
    /// The lab's cluster objects applied by the `addons` phase (local-path-provisioner, the local
    /// registry's ConfigMap; `clusterctl_render::addons::steps`); empty when neither is on.
    pub addons: Vec<clusterctl_render::cni::install::ApplyStep>,
    /// Encryption at rest (`spec.apiServer.encryption`), when on: its existing objects are rewritten
    /// once it is turned on or changed ([`encryption::rewrite`]).
    pub encryption: Option<clusterctl_spec::model::Encryption>,
    /// kube-vip-cloud-provider's objects (`vip.loadBalancerPool`, `clusterctl_render::lb_pool`),
    /// applied by the `kube-vip-cloud-provider` phase; empty without a pool.
    pub lb_objects: Vec<serde_json::Value>,
}

/// Renders every node's files from the gathered facts (`from_file::renderer` wraps
/// `clusterctl_render::render`).
pub trait Renderer: Send + Sync {
    /// Files per node name. Errors: render's, naming what could not be rendered.
    fn render(
        &self,
        facts: &BTreeMap<String, NodeFacts>,
    ) -> Result<BTreeMap<String, Vec<RenderedFile>>, clusterctl_render::RenderError>;
}

impl<F> Renderer for F
where
    F: Fn(
            &BTreeMap<String, NodeFacts>,
        ) -> Result<BTreeMap<String, Vec<RenderedFile>>, clusterctl_render::RenderError>
        + Send
        + Sync,
{
    fn render(
        &self,
        facts: &BTreeMap<String, NodeFacts>,
    ) -> Result<BTreeMap<String, Vec<RenderedFile>>, clusterctl_render::RenderError> {
        self(facts)
    }
}

/// What the phases of one `up` share.
pub struct UpData {
    /// The cluster.
    pub spec: UpSpec,
    /// Renders files once facts are known.
    pub renderer: Box<dyn Renderer>,
    /// Facts per node (filled by `facts`).
    pub facts: Mutex<BTreeMap<String, NodeFacts>>,
    /// Rendered files per node (filled by `render`).
    pub files: RwLock<BTreeMap<String, Vec<RenderedFile>>>,
    /// Join secrets, once read or created (by the first join that needs them).
    pub join: Mutex<Option<JoinSecrets>>,
    /// The encryption configuration's providers with their keys, once read from the first control
    /// plane or generated ([`encryption`]); never shown.
    pub encryption: Mutex<Option<Vec<serde_yaml::Value>>>,
    /// The first control plane's transport (joins fetch credentials through it), when reachable.
    pub first_cp_transport: Option<Arc<dyn Transport>>,
    /// The run's mode, reporter and secrets (for the credential steps run on the first control plane).
    pub mode: Mode,
    /// Reporter.
    pub reporter: Arc<dyn Reporter>,
    /// Redaction list.
    pub secrets: Secrets,
    /// The Kubernetes API client (`labels`, `wait-ready`), built at first use from `admin.conf`.
    pub api: api::ApiAccess,
}

impl UpData {
    /// The first control-plane node.
    pub fn first_cp(&self) -> Option<&ValidNode> {
        self.spec.nodes.iter().find(|n| n.is_control_plane())
    }
    /// The rendered files of `node` with one of `purposes` (a [`crate::up::placed`] group), in
    /// render order.
    pub fn files_of(&self, node: &str, purposes: &[Purpose]) -> Vec<RenderedFile> {
        self.files
            .read()
            .map(|f| {
                f.get(node)
                    .map(|v| {
                        v.iter()
                            .filter(|x| purposes.contains(&x.purpose))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }
    /// The facts of `node` (default when unknown, e.g. offline).
    pub fn facts_of(&self, node: &str) -> NodeFacts {
        self.facts
            .lock()
            .ok()
            .and_then(|f| f.get(node).cloned())
            .unwrap_or_default()
    }
}

/// Digest material: the purpose-filtered files of the node (path, mode, sha256).
fn files_inputs(data: &UpData, node: &ValidNode, groups: &[&[Purpose]]) -> String {
    let mut s = String::new();
    for g in groups {
        for f in data.files_of(&node.name, g) {
            s.push_str(&format!(
                "{} {:o} {}\n",
                f.path,
                f.mode,
                crate::util::sha256_hex(&f.content)
            ));
        }
    }
    s
}

/// The phases of `up` for `spec`, in order: the declared ones ([`declared::DECLARED`]) the file
/// includes.
pub fn phases(spec: &UpSpec) -> Vec<Phase<UpData>> {
    declared::DECLARED
        .iter()
        .filter(|d| (d.when)(spec))
        .map(|d| d.phase)
        .collect()
}

/// Runs `f` for `ctx`'s node with a second context on the first control plane (`cp`, phase `phase`):
/// what `cp` plans is shown under `ctx`'s node as `on <first>: …` and its changes count there. Used by
/// the steps that need the first control plane on another node's behalf (join credentials, the CNI
/// agent's token). Errors: no control plane in the cluster, or what `f` returns.
pub(crate) fn on_first_cp<T>(
    ctx: &mut NodeCtx,
    data: &UpData,
    phase: String,
    f: impl FnOnce(&mut NodeCtx, &mut NodeCtx) -> Result<T, PhaseError>,
) -> Result<T, PhaseError> {
    let Some(first) = data.first_cp().cloned() else {
        return Err(ctx.local_error("the cluster has no control-plane node"));
    };
    let mut cp = NodeCtx::new(
        first.clone(),
        data.first_cp_transport.clone(),
        data.mode,
        data.reporter.clone(),
        data.secrets.clone(),
    );
    cp.phase = phase;
    let result = f(ctx, &mut cp);
    for mut e in cp.plan.drain(..) {
        e.text = format!("on {}: {}", first.name, e.text);
        e.node = ctx.node.name.clone();
        ctx.plan.push(e);
    }
    ctx.changes += cp.changes;
    result
}
