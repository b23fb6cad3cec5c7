//! The file's air-gap bundle for `upgrade`: verified completely before any node is reached
//! ([`airgap_bundle`]), with where the target's images come from ([`UpgradeImages`]) and its
//! packages uploaded per node ([`Bundle`], the [`BundlePackages`] over
//! `clusterctl_airgap::node::upload_packages`).

use std::path::Path;
use std::sync::Arc;

use clusterctl_airgap::bundle::VerifiedBundle;
use clusterctl_airgap::AirgapError;
use clusterctl_exec::{Cmd, Transport};
use clusterctl_spec::ValidCluster;
use semver::Version;

use super::error::{BundleError, BundleUploadError};
use super::images::{check_bundle, UpgradeImages};
use super::BundlePackages;
use crate::up::from_file;

/// The air-gap bundle of `cluster` (`airgap.bundle`, relative to `file`), verified completely, with
/// the images of `to` each role needs ([`from_file::role_images`] of the file, which already says
/// `to`): where the packages come from, and where the images do (pushed to the mirror when one is
/// set, else loaded into each node). `Ok(None)` without a bundle. Errors ([`BundleError`]): no
/// bundle file, an unreadable or bad entry (named), another cluster's bundle, a bundle without the
/// images of `to`, or one carrying packages but no kubeadm package for `to`.
pub(crate) fn airgap_bundle(
    cluster: &ValidCluster,
    file: &Path,
    to: &Version,
) -> Result<Option<(Bundle, UpgradeImages)>, BundleError> {
    let Some(a) = cluster.spec().airgap.as_ref() else {
        return Ok(None);
    };
    let path = file.parent().unwrap_or(Path::new(".")).join(&a.bundle);
    if !path.exists() {
        return Err(BundleError::NotFound {
            path,
            to: to.clone(),
        });
    }
    let vb = Arc::new(
        clusterctl_airgap::bundle::verify_bundle(&path).map_err(|e| match e {
            AirgapError::Io { source, .. } => BundleError::Read {
                path: path.clone(),
                source,
            },
            source => BundleError::Verify {
                path: path.clone(),
                source,
            },
        })?,
    );
    let wanted = from_file::role_images(cluster);
    let (control_plane, worker) = check_bundle(&vb.manifest, &path, cluster.name(), to, &wanted)?;
    // Loaded under the names the file's nodes pull, whatever mirror the bundle recorded.
    let names = clusterctl_airgap::plan::pull_names(cluster);
    let (control_plane, worker) = (
        clusterctl_airgap::plan::renamed(control_plane, &names),
        clusterctl_airgap::plan::renamed(worker, &names),
    );
    let images = if let Some(mirror) = from_file::mirror_push(cluster) {
        UpgradeImages::Mirror {
            bundle: vb.clone(),
            mirror,
            record: clusterctl_airgap::import::ImportState::default_path(&path),
        }
    } else {
        UpgradeImages::Nodes {
            bundle: vb.clone(),
            runtime: cluster.spec().runtime.kind,
            control_plane,
            worker,
        }
    };
    let packages = Bundle {
        bundle: vb,
        version: clusterctl_spec::versions::tag(to),
    };
    Ok(Some((packages, images)))
}

/// The air-gap bundle's packages of the target version (the bundle verified before the upgrade
/// started), uploaded per node.
pub(crate) struct Bundle {
    bundle: Arc<VerifiedBundle>,
    /// The target version, `vX.Y.Z`: untagged packages and those tagged with it are uploaded.
    version: String,
}

impl BundlePackages for Bundle {
    fn upload(&self, transport: &dyn Transport) -> Result<(), BundleUploadError> {
        let out = transport.run(&Cmd::new(
            ". /etc/os-release; echo \"$ID\"; echo \"$ID_LIKE\"; uname -m",
        ))?;
        let text = out.stdout_str();
        let lines: Vec<&str> = text.lines().collect();
        let line = |i: usize| lines.get(i).copied().unwrap_or_default();
        let family = clusterctl_airgap::node::os_family(line(0), line(1));
        let arch = clusterctl_airgap::node::oci_arch(line(2));
        clusterctl_airgap::node::upload_packages(
            transport,
            &self.bundle,
            family,
            &arch,
            super::packages::BUNDLE_DIR,
            &self.version,
        )?;
        Ok(())
    }
}
