//! `up`'s phases, declared once, in order ([`DECLARED`]): each row names the phase, its targets, how
//! it runs ([`Runs`]: required, re-checked on every run, recorded, or recorded one node at a time), its
//! input digest and body, when the file makes it part of a run (a predicate on [`UpSpec`]) and which
//! phases must have run before it when both are part of the run (`after`). [`super::phases`] is the
//! rows whose predicate holds, in table order; `--skip-phases`/`--only` (`engine::check_selection`
//! and the engine's selection), `node join`'s subset and the dry-run plan all work on that list. The
//! tests check the order against every `after` (a row may only name phases declared above it).

use clusterctl_spec::model::{CniPlugin, RuntimeKind};
use clusterctl_spec::ValidNode;

use super::{
    addons, airgap, cni, cni_install, cni_token, encryption, facts, files, files_inputs, images,
    init, join, kubeconfig, kubevip, labels, lb_pool, packages, placed, preflight, ready, rollout,
    rollout_apiserver, runtime, UpData, UpSpec,
};
use crate::engine::{InputsFn, Phase, PhaseFn, Targets};

/// How a declared phase runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runs {
    /// On every run, and never left out by `--skip-phases`/`--only` (what later phases read: facts,
    /// rendering, the bundle's check, the version check). Not recorded.
    Required,
    /// On every run (its check is cheap and finds drift a record would hide). Not recorded.
    EveryRun,
    /// Recorded with its input digest: skipped when recorded with the same inputs.
    Recorded,
    /// Recorded, and on one node at a time (control-plane joins, rollouts).
    RecordedOneAtATime,
}

/// One declared phase: the phase, when the file includes it, and what must run before it.
pub(crate) struct Decl {
    /// The phase as the engine runs it.
    pub(crate) phase: Phase<UpData>,
    /// Whether the file makes it part of `up` (e.g. `control-plane/kube-vip` only with a VIP).
    pub(crate) when: fn(&UpSpec) -> bool,
    /// Phases that must run before it when both are part of the run; each declared above it.
    pub(crate) after: &'static [&'static str],
}

impl Decl {
    /// Only when `when` holds for the file.
    const fn when(mut self, when: fn(&UpSpec) -> bool) -> Decl {
        self.when = when;
        self
    }

    /// After `names` (those that are part of the run).
    const fn after(mut self, names: &'static [&'static str]) -> Decl {
        self.after = names;
        self
    }
}

/// A phase part of every run, with no predecessor named yet.
const fn decl(
    name: &'static str,
    targets: Targets,
    runs: Runs,
    inputs: InputsFn<UpData>,
    run: PhaseFn<UpData>,
) -> Decl {
    Decl {
        phase: Phase {
            name,
            targets,
            serial: matches!(runs, Runs::RecordedOneAtATime),
            record: matches!(runs, Runs::Recorded | Runs::RecordedOneAtATime),
            required: matches!(runs, Runs::Required),
            inputs,
            run,
        },
        when: |_| true,
        after: &[],
    }
}

fn no_inputs(_: &UpData, _: &ValidNode) -> String {
    String::new()
}

fn airgap_packages(s: &UpSpec) -> bool {
    // With `packages.source: bundle` the `packages` phase installs the bundle's files itself.
    s.airgap.is_some() && s.packages.source != crate::packages::Source::Bundle
}

fn builtin_cni(s: &UpSpec) -> bool {
    s.cni == CniPlugin::Builtin
}

fn third_party_cni(s: &UpSpec) -> bool {
    !matches!(s.cni, CniPlugin::Builtin | CniPlugin::None)
}

/// The runtimes' phases, the images' and the VIP's: what `init` and the joins need before them.
const RUNTIME: &[&str] = &["runtime/containerd", "runtime/crio"];
const BEFORE_INIT: &[&str] = &[
    "files",
    "runtime/containerd",
    "runtime/crio",
    "airgap/images",
    "airgap/mirror",
    "control-plane/kube-vip",
];

/// Every phase `up` may run, in order (see the module documentation).
pub(crate) const DECLARED: &[Decl] = {
    use Runs::*;
    use Targets::*;
    &[
        // First with a bundle: `facts` reads which containerd its archive gives a node and
        // `cni/sources` takes the CNI's files from it.
        decl("airgap/verify", Local, Required, no_inputs, airgap::verify)
            .when(|s| s.airgap.is_some()),
        decl("facts", All, Required, no_inputs, facts::run).after(&["airgap/verify"]),
        decl("render", Local, Required, no_inputs, files::render).after(&["facts"]),
        decl(
            "version",
            FirstControlPlane,
            Required,
            no_inputs,
            rollout::version_check,
        )
        .after(&["render"]),
        // Before any node is changed: a file that cannot be had, or has another sha256, stops `up`
        // here. Not required: a selection without it downloads nothing, and `cni` obtains the files
        // itself when it runs without this one.
        decl(
            "cni/sources",
            Local,
            EveryRun,
            no_inputs,
            cni_install::run_sources,
        )
        .when(|s| s.cni_install.is_some())
        .after(&["render"]),
        decl(
            "airgap/packages",
            All,
            Recorded,
            airgap::package_inputs,
            airgap::packages,
        )
        .when(airgap_packages)
        .after(&["airgap/verify", "facts"]),
        decl("preflight", All, EveryRun, no_inputs, preflight::run).after(&["render"]),
        // After preflight's host checks, before any file or runtime configuration; its one probe
        // runs every time (a node already at these versions is left alone).
        decl("packages", All, EveryRun, no_inputs, packages::run)
            .after(&["preflight", "airgap/packages"]),
        decl(
            "files",
            All,
            Recorded,
            |d, n| files_inputs(d, n, &[placed::HOST, placed::OTHER]),
            files::run,
        )
        .after(&["packages"]),
        decl(
            "runtime/containerd",
            All,
            Recorded,
            |d, n| files_inputs(d, n, &[placed::RUNTIME]),
            runtime::run,
        )
        .when(|s| s.runtime == RuntimeKind::Containerd)
        .after(&["files"]),
        decl(
            "runtime/crio",
            All,
            Recorded,
            |d, n| files_inputs(d, n, &[placed::RUNTIME]),
            runtime::run,
        )
        .when(|s| s.runtime == RuntimeKind::Crio)
        .after(&["files"]),
        // Once the runtime is configured: a mirror is filled from this machine, else every node
        // loads the bundle's images.
        decl("airgap/mirror", Local, EveryRun, no_inputs, airgap::mirror)
            .when(|s| s.airgap.as_ref().is_some_and(|a| a.mirror.is_some()))
            .after(RUNTIME),
        decl(
            "airgap/images",
            All,
            Recorded,
            airgap::image_inputs,
            airgap::images,
        )
        .when(|s| s.airgap.as_ref().is_some_and(|a| a.mirror.is_none()))
        .after(RUNTIME),
        decl(
            "control-plane/kube-vip",
            ControlPlanes,
            Recorded,
            |d, n| files_inputs(d, n, &[placed::KUBE_VIP]),
            kubevip::run,
        )
        .when(|s| s.vip.is_some())
        .after(RUNTIME),
        decl(
            "init",
            FirstControlPlane,
            Recorded,
            |d, n| files_inputs(d, n, &[placed::KUBEADM_INIT]),
            init::run,
        )
        .after(BEFORE_INIT),
        decl(
            "control-plane/kube-vip-admin",
            FirstControlPlane,
            Recorded,
            |d, n| files_inputs(d, n, &[placed::KUBE_VIP]),
            kubevip::switch_to_admin,
        )
        .when(|s| s.vip.is_some())
        .after(&["init"]),
        decl("cni", All, Recorded, cni::inputs, cni::run_builtin)
            .when(builtin_cni)
            .after(&["init"]),
        decl(
            "cni",
            FirstControlPlane,
            Recorded,
            cni::inputs,
            cni_install::run,
        )
        .when(|s| third_party_cni(s) && s.cni_install.is_some())
        .after(&["init", "cni/sources"]),
        decl(
            "cni",
            FirstControlPlane,
            Recorded,
            cni::inputs,
            cni::run_manifests,
        )
        .when(|s| third_party_cni(s) && s.cni_install.is_none())
        .after(&["init"]),
        // After `cni` applied the agent's ServiceAccount and RBAC on the first control plane. Its
        // check (one file read) runs every time, so a token near expiry is renewed and a removed
        // kubeconfig comes back.
        decl(
            "cni/agent-credentials",
            All,
            EveryRun,
            cni_token::inputs,
            cni_token::run,
        )
        .when(builtin_cni)
        .after(&["cni"]),
        decl(
            "join/control-plane",
            OtherControlPlanes,
            RecordedOneAtATime,
            |d, n| files_inputs(d, n, &[placed::KUBEADM_JOIN]),
            join::run,
        )
        .after(&["init", "cni"]),
        decl(
            "join/worker",
            Workers,
            Recorded,
            |d, n| files_inputs(d, n, &[placed::KUBEADM_JOIN]),
            join::run,
        )
        .after(&["init", "cni", "join/control-plane"]),
        // Day-2 rollouts (`rollout`), after the joins.
        decl(
            "rollout/kubeadm-config",
            FirstControlPlane,
            Recorded,
            rollout::cluster_inputs,
            rollout::kubeadm_config,
        )
        .after(&["join/control-plane", "join/worker"]),
        decl(
            "rollout/apiserver",
            ControlPlanes,
            RecordedOneAtATime,
            rollout::apiserver_inputs,
            rollout_apiserver::apiserver,
        )
        .after(&["rollout/kubeadm-config"]),
        decl(
            "rollout/kubelet-config",
            FirstControlPlane,
            Recorded,
            rollout::kubelet_inputs,
            rollout::kubelet_config,
        )
        .after(&["rollout/apiserver"]),
        decl(
            "rollout/kubelet",
            All,
            RecordedOneAtATime,
            rollout::kubelet_inputs,
            rollout::kubelet,
        )
        .after(&["rollout/kubelet-config"]),
        // After every API server was restarted with the configuration: rewriting through one of them
        // before would store in plain text again.
        decl(
            "rollout/encrypt-existing",
            FirstControlPlane,
            Recorded,
            encryption::rewrite_inputs,
            encryption::rewrite,
        )
        .when(|s| s.encryption.is_some())
        .after(&["rollout/apiserver"]),
        // After the joins: its Deployment needs schedulable nodes, and workers may run it.
        decl(
            "kube-vip-cloud-provider",
            FirstControlPlane,
            Recorded,
            lb_pool::inputs,
            lb_pool::run,
        )
        .when(|s| !s.lb_objects.is_empty())
        .after(&["join/control-plane", "join/worker"]),
        // Its check (one list of the Nodes) runs on every `up`, so a label or taint removed or
        // changed by hand is put back — a recorded phase would be skipped once done and never see
        // the drift.
        decl(
            "labels",
            FirstControlPlane,
            EveryRun,
            labels::inputs,
            labels::run,
        )
        .after(&["join/control-plane", "join/worker"]),
        // Server-side apply answers `unchanged` for objects as applied, and an object deleted by
        // hand comes back.
        decl(
            "addons",
            FirstControlPlane,
            EveryRun,
            addons::inputs,
            addons::run,
        )
        .when(|s| !s.addons.is_empty())
        .after(&["cni", "join/worker"]),
        decl("images", All, Recorded, images::inputs, images::run)
            .when(|s| !s.preload_images.is_empty())
            .after(&["join/control-plane", "join/worker"]),
        decl(
            "wait-ready",
            FirstControlPlane,
            EveryRun,
            no_inputs,
            ready::run,
        )
        .after(&["cni", "join/control-plane", "join/worker"]),
        decl(
            "kubeconfig",
            FirstControlPlane,
            EveryRun,
            no_inputs,
            kubeconfig::run,
        )
        .after(&["init"]),
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_comes_after_what_it_names() {
        let rows = DECLARED;
        for (i, d) in rows.iter().enumerate() {
            for before in d.after {
                let at: Vec<usize> = rows
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.phase.name == *before)
                    .map(|(j, _)| j)
                    .collect();
                assert!(
                    !at.is_empty(),
                    "{} names an undeclared {before}",
                    d.phase.name
                );
                assert!(
                    at.iter().all(|j| *j < i),
                    "{} is declared before {before}, which must run first",
                    d.phase.name
                );
            }
        }
    }

    #[test]
    fn a_name_is_declared_twice_only_for_exclusive_variants() {
        // `runtime/*` and `cni` have one row per variant; their predicates never hold together.
        let rows = DECLARED;
        let names: Vec<&str> = rows.iter().map(|d| d.phase.name).collect();
        for n in &names {
            let count = names.iter().filter(|m| *m == n).count();
            assert!(count == 1 || *n == "cni", "{n} declared {count} times");
        }
        assert_eq!(names.iter().filter(|n| **n == "cni").count(), 3);
    }
}
