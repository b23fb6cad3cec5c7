//! The errors of `upgrade`: why it refused or stopped before any node changed ([`UpgradeError`],
//! whose message is the line the command prints), why an API step failed ([`NodeApiError`]), why the
//! air-gap bundle was refused ([`BundleError`]) or its packages could not be placed on a node
//! ([`BundleUploadError`]). Each keeps the error that caused it as its `source`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clusterctl_airgap::AirgapError;
use clusterctl_exec::ExecError;
use clusterctl_kubeapi::drain::DrainError;
use clusterctl_kubeapi::ApiError;
use semver::Version;

use super::images::BundleRefused;
use super::source::ClusterSource;
use crate::reach::ReachError;
use crate::version::VersionError;

/// Why `upgrade` refused (exit 2: [`UpgradeError::refused`]) or failed (exit 1) before its phases
/// ran. The message is the whole line the command prints, `upgrade: …` (one line per node for
/// [`UpgradeError::Unreachable`]).
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// `--to` is not the cluster file's `spec.kubernetesVersion`; the message says how to change it
    /// (edit the file, or write a built-in profile out first).
    #[error("{}", file_version_message(to, file, named))]
    FileVersion {
        /// The target version (`--to`).
        to: Version,
        /// The file's `spec.kubernetesVersion` (without pre-release or build parts).
        file: Version,
        /// How the command named the cluster.
        named: ClusterSource,
    },
    /// The file's air-gap bundle was refused (nothing was reached).
    #[error("upgrade: refused: {0}")]
    Bundle(#[source] BundleError),
    /// Some nodes could not be reached: node name → why.
    #[error("{}", .0.iter().map(|(n, e)| format!("upgrade: node {n}: {e}")).collect::<Vec<_>>().join("\n"))]
    Unreachable(BTreeMap<String, ReachError>),
    /// The first control plane was not among the reached nodes.
    #[error("upgrade: no connection to the first control plane {0}")]
    NoConnection(String),
    /// Reading the kube-apiserver manifest on the first control plane failed.
    #[error("upgrade: reading the control plane's version on {node}: {source}")]
    ControlPlaneVersion {
        /// The first control plane.
        node: String,
        /// The transport's error.
        #[source]
        source: ExecError,
    },
    /// The first control plane has no kube-apiserver static pod naming a version (the cluster is
    /// not up); `flag` names the cluster for the hint (`-f FILE` or `--profile NAME`).
    #[error("upgrade: {node} has no kube-apiserver static pod naming its version: is the cluster up? (run `clusterctl up {flag}`)")]
    NotUp {
        /// The first control plane.
        node: String,
        /// `-f FILE` or `--profile NAME`.
        flag: String,
    },
    /// A running version (the control plane's, or a node's kubelet) cannot go to the target in one
    /// step (exit 2).
    #[error("upgrade: refused: {0}")]
    Version(#[source] VersionError),
    /// No API client (`--kubeconfig` unusable, or `admin.conf` not read from the first control plane).
    #[error("upgrade: {0}")]
    Api(#[source] ReachError),
    /// Listing the Nodes failed.
    #[error("upgrade: reading the Nodes: {0}")]
    Nodes(#[source] ApiError),
    /// Rendering the UpgradeConfiguration failed.
    #[error("upgrade: rendering: {0}")]
    Render(#[source] clusterctl_render::RenderError),
}

impl UpgradeError {
    /// Whether this is a refused input (exit 2: a version that does not fit) rather than a failure
    /// (exit 1).
    pub fn refused(&self) -> bool {
        matches!(
            self,
            UpgradeError::FileVersion { .. } | UpgradeError::Version(_)
        )
    }
}

/// The refusal of a `--to` that is not the cluster file's version, with how to change that version:
/// edit the file, or — a built-in profile cannot be edited — write the profile out and go on with
/// that file.
fn file_version_message(to: &Version, file: &Version, named: &ClusterSource) -> String {
    match named {
        ClusterSource::Profile(p) => format!(
            "upgrade: --to {to} but profile {p} says kubernetesVersion {file}, and a built-in profile \
             cannot be edited: write it out (`clusterctl profile print {p} --output-dir {p}`), set \
             spec.kubernetesVersion to {to} in {p}/cluster.yaml, then run `clusterctl upgrade -f \
             {p}/cluster.yaml --to {to}` (and name this cluster with that file from now on)"
        ),
        ClusterSource::File(path) => format!(
            "upgrade: --to {to} but {} says kubernetesVersion {file}: set spec.kubernetesVersion to \
             {to} in it first (the file describes the cluster), then run this again",
            path.display()
        ),
    }
}

/// Why an API step of the upgrade ([`super::NodeApi`]) failed; the message is the API's own.
#[derive(Debug, thiserror::Error)]
pub enum NodeApiError {
    /// Draining, or waiting for the Node to be Ready, failed or timed out.
    #[error(transparent)]
    Drain(#[from] DrainError),
    /// An API call failed.
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// Why the air-gap bundle's packages could not be placed on a node ([`super::BundlePackages`]).
#[derive(Debug, thiserror::Error)]
pub enum BundleUploadError {
    /// Reading the node's OS family and architecture failed.
    #[error(transparent)]
    Probe(#[from] ExecError),
    /// Uploading the package files failed.
    #[error(transparent)]
    Upload(#[from] AirgapError),
}

/// Why the file's air-gap bundle was refused before any node was reached.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// No file where `airgap.bundle` points.
    #[error(
        "bundle {} not found: write it with `clusterctl airgap bundle` on a connected machine \
         (it must carry v{to}: as kubernetesVersion or in airgap.extraVersions) and put it where \
         airgap.bundle points",
        path.display()
    )]
    NotFound {
        /// Where the file says the bundle is.
        path: PathBuf,
        /// The target version.
        to: Version,
    },
    /// The bundle could not be read.
    #[error("bundle {}: {source}", path.display())]
    Read {
        /// The bundle.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bundle does not verify (a bad entry, named).
    #[error("bundle {}: {source}", path.display())]
    Verify {
        /// The bundle.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: AirgapError,
    },
    /// Another cluster's bundle, one without the images of the target, or one carrying packages
    /// but no kubeadm package for it.
    #[error(transparent)]
    Refused(#[from] Box<BundleRefused>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_version_that_is_not_the_files_is_refused_with_how_to_change_it() {
        let (to, file) = (Version::new(1, 35, 0), Version::new(1, 34, 2));
        let e = UpgradeError::FileVersion {
            to: to.clone(),
            file: file.clone(),
            named: ClusterSource::File("c.yaml".into()),
        };
        assert!(e.refused());
        assert_eq!(
            e.to_string(),
            "upgrade: --to 1.35.0 but c.yaml says kubernetesVersion 1.34.2: set \
             spec.kubernetesVersion to 1.35.0 in it first (the file describes the cluster), then \
             run this again"
        );
        let e = UpgradeError::FileVersion {
            to,
            file,
            named: ClusterSource::Profile("lab".into()),
        };
        assert!(e
            .to_string()
            .contains("`clusterctl profile print lab --output-dir lab`"));
    }

    #[test]
    fn failures_keep_their_cause_and_are_not_refusals() {
        let io = std::io::Error::other("disk gone");
        let e = UpgradeError::Bundle(BundleError::Read {
            path: "b.tar".into(),
            source: io,
        });
        assert!(!e.refused());
        assert_eq!(e.to_string(), "upgrade: refused: bundle b.tar: disk gone");
        let cause = e.source().expect("the bundle error");
        assert_eq!(
            cause.source().map(|s| s.to_string()).as_deref(),
            Some("disk gone")
        );
    }
}
