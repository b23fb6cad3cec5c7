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
pub(crate) mod runtime;

use crate::ctx::{Mode, NodeCtx, Secrets};
use crate::engine::{Phase, PhaseFn, Targets};
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

fn no_inputs(_: &UpData, _: &ValidNode) -> String {
    String::new()
}

/// The phases of `up` for `spec`, in order.
pub fn phases(spec: &UpSpec) -> Vec<Phase<UpData>> {
    // `airgap/verify` first: with a bundle, `facts` reads which containerd its archive gives a node
    // (rendered for on the first run) and `cni/sources` takes the CNI's files from it.
    let mut early = airgap::early_phases(spec).into_iter();
    let mut v: Vec<Phase<UpData>> = early.next().into_iter().collect();
    v.extend([
        Phase {
            name: "facts",
            targets: Targets::All,
            serial: false,
            record: false,
            required: true,
            inputs: no_inputs,
            run: facts::run,
        },
        Phase {
            name: "render",
            targets: Targets::Local,
            serial: false,
            record: false,
            required: true,
            inputs: no_inputs,
            run: files::render,
        },
        rollout::version_phase(),
    ]);
    if spec.cni_install.is_some() {
        // Before any node is changed: a file that cannot be had, or has another sha256, stops `up` here.
        // Not required: a selection without it (`--only init`, `--skip-phases cni`) downloads nothing,
        // and the `cni` phase obtains the files itself when it runs without this one.
        v.push(Phase {
            name: "cni/sources",
            targets: Targets::Local,
            serial: false,
            record: false,
            required: false,
            inputs: no_inputs,
            run: cni_install::run_sources,
        });
    }
    v.extend(early);
    v.extend([
        Phase {
            name: "preflight",
            targets: Targets::All,
            serial: false,
            record: false,
            required: false,
            inputs: no_inputs,
            run: preflight::run,
        },
        // After preflight's host checks, before any file or runtime configuration: not recorded, its
        // one probe runs every time (a node already at these versions is left alone).
        Phase {
            name: "packages",
            targets: Targets::All,
            serial: false,
            record: false,
            required: false,
            inputs: no_inputs,
            run: packages::run,
        },
        Phase {
            name: "files",
            targets: Targets::All,
            serial: false,
            record: true,
            required: false,
            inputs: |d, n| files_inputs(d, n, &[placed::HOST, placed::OTHER]),
            run: files::run,
        },
    ]);
    let runtime_name = match spec.runtime {
        RuntimeKind::Containerd => "runtime/containerd",
        RuntimeKind::Crio => "runtime/crio",
    };
    v.push(Phase {
        name: runtime_name,
        targets: Targets::All,
        serial: false,
        record: true,
        required: false,
        inputs: |d, n| files_inputs(d, n, &[placed::RUNTIME]),
        run: runtime::run,
    });
    v.extend(airgap::image_phases(spec));
    if spec.vip.is_some() {
        v.push(Phase {
            name: "control-plane/kube-vip",
            targets: Targets::ControlPlanes,
            serial: false,
            record: true,
            required: false,
            inputs: |d, n| files_inputs(d, n, &[placed::KUBE_VIP]),
            run: kubevip::run,
        });
    }
    v.push(Phase {
        name: "init",
        targets: Targets::FirstControlPlane,
        serial: false,
        record: true,
        required: false,
        inputs: |d, n| files_inputs(d, n, &[placed::KUBEADM_INIT]),
        run: init::run,
    });
    if spec.vip.is_some() {
        v.push(Phase {
            name: "control-plane/kube-vip-admin",
            targets: Targets::FirstControlPlane,
            serial: false,
            record: true,
            required: false,
            inputs: |d, n| files_inputs(d, n, &[placed::KUBE_VIP]),
            run: kubevip::switch_to_admin,
        });
    }
    match spec.cni {
        CniPlugin::Builtin => v.extend([
            Phase {
                name: "cni",
                targets: Targets::All,
                serial: false,
                record: true,
                required: false,
                inputs: cni::inputs,
                run: cni::run_builtin,
            },
            // After `cni` applied the agent's ServiceAccount and RBAC on the first control plane.
            // Not recorded: its check (one file read) runs every time, so a token near expiry is
            // renewed and a removed kubeconfig comes back.
            Phase {
                name: "cni/agent-credentials",
                targets: Targets::All,
                serial: false,
                record: false,
                required: false,
                inputs: cni_token::inputs,
                run: cni_token::run,
            },
        ]),
        CniPlugin::Calico | CniPlugin::Cilium | CniPlugin::Flannel | CniPlugin::Kindnet => {
            let run: PhaseFn<UpData> = if spec.cni_install.is_some() {
                cni_install::run
            } else {
                cni::run_manifests
            };
            v.push(Phase {
                name: "cni",
                targets: Targets::FirstControlPlane,
                serial: false,
                record: true,
                required: false,
                inputs: cni::inputs,
                run,
            })
        }
        CniPlugin::None => {}
    }
    v.push(Phase {
        name: "join/control-plane",
        targets: Targets::OtherControlPlanes,
        serial: true,
        record: true,
        required: false,
        inputs: |d, n| files_inputs(d, n, &[placed::KUBEADM_JOIN]),
        run: join::run,
    });
    v.push(Phase {
        name: "join/worker",
        targets: Targets::Workers,
        serial: false,
        record: true,
        required: false,
        inputs: |d, n| files_inputs(d, n, &[placed::KUBEADM_JOIN]),
        run: join::run,
    });
    v.extend(rollout::phases());
    if spec.encryption.is_some() {
        // After every API server was restarted with the configuration: rewriting through one of them
        // before would store in plain text again.
        v.push(Phase {
            name: "rollout/encrypt-existing",
            targets: Targets::FirstControlPlane,
            serial: false,
            record: true,
            required: false,
            inputs: encryption::rewrite_inputs,
            run: encryption::rewrite,
        });
    }
    if !spec.lb_objects.is_empty() {
        // After the joins: its Deployment needs schedulable nodes, and workers may run it.
        v.push(Phase {
            name: "kube-vip-cloud-provider",
            targets: Targets::FirstControlPlane,
            serial: false,
            record: true,
            required: false,
            inputs: lb_pool::inputs,
            run: lb_pool::run,
        });
    }
    // Not recorded: its check (one list of the Nodes) runs on every `up`, so a label or taint removed or
    // changed by hand is put back — a recorded phase would be skipped once done and never see the drift.
    v.push(Phase {
        name: "labels",
        targets: Targets::FirstControlPlane,
        serial: false,
        record: false,
        required: false,
        inputs: labels::inputs,
        run: labels::run,
    });
    if !spec.addons.is_empty() {
        // Not recorded: server-side apply answers `unchanged` for objects as applied, and an object
        // deleted by hand comes back.
        v.push(Phase {
            name: "addons",
            targets: Targets::FirstControlPlane,
            serial: false,
            record: false,
            required: false,
            inputs: addons::inputs,
            run: addons::run,
        });
    }
    if !spec.preload_images.is_empty() {
        v.push(Phase {
            name: "images",
            targets: Targets::All,
            serial: false,
            record: true,
            required: false,
            inputs: images::inputs,
            run: images::run,
        });
    }
    v.push(Phase {
        name: "wait-ready",
        targets: Targets::FirstControlPlane,
        serial: false,
        record: false,
        required: false,
        inputs: no_inputs,
        run: ready::run,
    });
    v.push(Phase {
        name: "kubeconfig",
        targets: Targets::FirstControlPlane,
        serial: false,
        record: false,
        required: false,
        inputs: no_inputs,
        run: kubeconfig::run,
    });
    v
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
