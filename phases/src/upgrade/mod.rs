//! The phases of `clusterctl upgrade -f FILE --to VERSION` (kubeadm's upgrade procedure, kubernetes.io
//! "Upgrading kubeadm clusters"), run in this order:
//!
//! 1. [`prepare_phases`] over every node: with an air-gap bundle and a registry mirror,
//!    `upgrade/mirror` first pushes the bundle to the mirror (once, on this machine); `upgrade/kubeadm`
//!    installs the target kubeadm on each node (in parallel; with the packages machinery of `up`, from
//!    the target minor's repository, pinned and held — or from the air-gap bundle when the file names
//!    one: [`packages`]); with a bundle and no mirror, `upgrade/images` loads into each node the target version's
//!    images its role needs (in parallel, so before any node's kubeadm upgrade step, see [`images`]);
//!    then `upgrade/etcd-snapshot` saves an etcd snapshot on the first control plane before anything
//!    in the cluster changes;
//! 2. [`node_phases`] once per node, ONE NODE AT A TIME, the first control plane first, then the other
//!    control planes, then the workers (file order): `upgrade/drain` (cordon and evict through the API),
//!    `upgrade/apply` (`kubeadm upgrade plan` + `kubeadm upgrade apply --config`, first control plane)
//!    or `upgrade/node` (`kubeadm upgrade node`, the others), `upgrade/kubelet` (target kubelet and
//!    kubectl, kubelet restarted), `upgrade/uncordon` (uncordon, then wait until the Node is Ready with
//!    the target kubelet version).
//!
//! Every phase is recorded in the node's state record with the target version as its input, so a run
//! that stopped (the failing node stays cordoned) resumes where it stopped, and a finished upgrade run
//! again changes nothing. The Kubernetes API is reached through a [`NodeApi`] (`api.rs`: over
//! `kubeapi`).
//!
//! The command's one entry point is [`run()`] (`run.rs`): the version checks (`checks.rs`), the
//! air-gap bundle (`bundle.rs`), the API client (`api.rs`), then these phases; its errors are in
//! `error.rs`, how the command named the cluster in `source.rs` (read by all of them; `run.rs` is
//! imported by none).

mod api;
mod bundle;
mod checks;
pub(crate) mod error;
pub(crate) mod images;
pub(crate) mod packages;
mod run;
mod source;
pub(crate) mod steps;
pub use crate::version;
pub use error::{BundleError, BundleUploadError, NodeApiError, UpgradeError};
pub use run::{run, Options, Report, Stopped};
pub use source::ClusterSource;

use std::sync::Arc;

use clusterctl_exec::Transport;
use semver::Version;

use crate::engine::{Phase, Targets};
use clusterctl_spec::ValidNode;

/// Where the rendered UpgradeConfiguration is placed on the first control plane (kubeadm v1beta4).
pub const UPGRADE_CONFIG: &str = "/etc/kubernetes/kubeadm/upgrade.yaml";
/// Where the pre-upgrade etcd snapshots are kept on the first control plane (directory 0700).
pub const SNAPSHOT_DIR: &str = "/var/lib/clusterctl/etcd-snapshots";

/// The Kubernetes API calls an upgrade makes, blocking. Errors: the API's ([`NodeApiError`]).
pub trait NodeApi: Send + Sync {
    /// Cordons `node` and evicts its pods (not mirror or DaemonSet pods), waiting until they are gone.
    /// Returns a one-line summary (e.g. `2 pod(s) evicted`).
    fn drain(&self, node: &str) -> Result<String, NodeApiError>;
    /// Marks `node` schedulable again.
    fn uncordon(&self, node: &str) -> Result<(), NodeApiError>;
    /// Waits until `node` is Ready and its kubelet reports `version` (e.g. `v1.35.0`).
    fn wait_ready(&self, node: &str, version: &str) -> Result<(), NodeApiError>;
}

/// Places the air-gap bundle's package files on a node under
/// [`packages::BUNDLE_DIR`]`/packages` (`bundle.rs` wraps `clusterctl_airgap::node::upload_packages`).
pub trait BundlePackages: Send + Sync {
    /// Uploads the packages for the node behind `transport`. Errors: reading the node's OS or the
    /// upload ([`BundleUploadError`]).
    fn upload(&self, transport: &dyn Transport) -> Result<(), BundleUploadError>;
}

/// The upgrade as its phases need it.
#[derive(Clone)]
pub struct UpgradeSpec {
    /// `metadata.name`.
    pub cluster: String,
    /// The target version (the file's kubernetesVersion, equal to `--to`).
    pub to: Version,
    /// Nodes in file order.
    pub nodes: Vec<ValidNode>,
    /// The rendered UpgradeConfiguration (kubeadm v1beta4), when the kubeadm API has one; `None`:
    /// `kubeadm upgrade apply v<to>` with flags (v1beta3).
    pub upgrade_config: Option<Vec<u8>>,
    /// Where the packages come from (`spec.packages`; an air-gap bundle named by the file wins).
    pub packages: crate::packages::Settings,
    /// The kubeadm preflight checks the file ignores (`spec.kubeadm.ignorePreflightErrors`, check
    /// names). The UpgradeConfiguration carries them; without one (v1beta3) they become
    /// `--ignore-preflight-errors` of `kubeadm upgrade plan`, `apply` and `node`.
    pub ignore_preflight_errors: Vec<String>,
}

/// What the upgrade phases share.
pub struct UpgradeData {
    /// The upgrade.
    pub spec: UpgradeSpec,
    /// The API (drain, uncordon, wait Ready).
    pub api: Arc<dyn NodeApi>,
    /// The air-gap bundle's packages, when the file names a bundle; `None`: the package manager.
    pub bundle: Option<Arc<dyn BundlePackages>>,
    /// Where the target version's images come from when the file names a bundle (loaded into each
    /// node, or pushed to the mirror); `None`: the nodes pull them as usual.
    pub images: Option<images::UpgradeImages>,
}

fn to_input(d: &UpgradeData, _: &ValidNode) -> String {
    clusterctl_spec::versions::tag(&d.spec.to)
}

fn apply_input(d: &UpgradeData, _: &ValidNode) -> String {
    let cfg = d
        .spec
        .upgrade_config
        .as_deref()
        .map(crate::util::sha256_hex)
        .unwrap_or_default();
    format!("{} {cfg}", clusterctl_spec::versions::tag(&d.spec.to))
}

fn phase(
    name: &'static str,
    targets: Targets,
    inputs: crate::engine::InputsFn<UpgradeData>,
    run: crate::engine::PhaseFn<UpgradeData>,
) -> Phase<UpgradeData> {
    Phase {
        name,
        targets,
        serial: false,
        record: true,
        required: false,
        inputs,
        run,
    }
}

/// `upgrade/mirror` (this machine, once; only when `images` pushes to a mirror), `upgrade/kubeadm`
/// (every node, in parallel), `upgrade/images` (every node, in parallel; only when `images` loads the
/// nodes) and `upgrade/etcd-snapshot` (first control plane).
pub fn prepare_phases(images: Option<&images::UpgradeImages>) -> Vec<Phase<UpgradeData>> {
    let mut v = Vec::new();
    if let Some(images::UpgradeImages::Mirror { .. }) = images {
        let mut p = phase("upgrade/mirror", Targets::Local, to_input, images::mirror);
        p.record = false;
        v.push(p);
    }
    v.push(phase(
        "upgrade/kubeadm",
        Targets::All,
        to_input,
        steps::kubeadm,
    ));
    if let Some(images::UpgradeImages::Nodes { .. }) = images {
        v.push(phase(
            "upgrade/images",
            Targets::All,
            images::images_input,
            images::images,
        ));
    }
    v.push(phase(
        "upgrade/etcd-snapshot",
        Targets::FirstControlPlane,
        to_input,
        steps::etcd_snapshot,
    ));
    v
}

/// The phases of one node, for an engine over that node alone (targets `All`): drain, `upgrade/apply`
/// (`first`: the first control plane) or `upgrade/node`, kubelet, uncordon.
pub fn node_phases(first: bool) -> Vec<Phase<UpgradeData>> {
    let kubeadm_step = if first {
        phase("upgrade/apply", Targets::All, apply_input, steps::apply)
    } else {
        phase("upgrade/node", Targets::All, to_input, steps::node)
    };
    vec![
        phase("upgrade/drain", Targets::All, to_input, steps::drain),
        kubeadm_step,
        phase("upgrade/kubelet", Targets::All, to_input, steps::kubelet),
        phase("upgrade/uncordon", Targets::All, to_input, steps::uncordon),
    ]
}

/// Every phase name of an upgrade, in order, the optional air-gap ones included (for `--dry-run`
/// output and docs).
pub fn phase_names() -> Vec<&'static str> {
    let mut v = vec!["upgrade/mirror"];
    v.extend(prepare_phases(None).iter().map(|p| p.name));
    v.insert(2, "upgrade/images");
    // After `upgrade/drain` and `upgrade/apply`: the other nodes' kubeadm step.
    let node_step = v.len() + 2;
    v.extend(node_phases(true).iter().map(|p| p.name));
    v.insert(node_step, "upgrade/node");
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_names_in_order_with_the_air_gap_steps() {
        assert_eq!(
            phase_names(),
            [
                "upgrade/mirror",
                "upgrade/kubeadm",
                "upgrade/images",
                "upgrade/etcd-snapshot",
                "upgrade/drain",
                "upgrade/apply",
                "upgrade/node",
                "upgrade/kubelet",
                "upgrade/uncordon"
            ]
        );
        let plain: Vec<&str> = prepare_phases(None).iter().map(|p| p.name).collect();
        assert_eq!(plain, ["upgrade/kubeadm", "upgrade/etcd-snapshot"]);
    }
}
