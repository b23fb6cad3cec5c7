//! The image steps of an air-gapped `upgrade --to V` (the cluster file names a bundle): without a
//! registry mirror, `upgrade/images` loads into each node the images of version V its role needs and
//! its runtime lacks, straight from the verified bundle (the same check and load as `up`'s
//! `airgap/images`, [`crate::up::airgap::ensure_images`]), on every node in parallel before any
//! node is drained, so before each node's `kubeadm upgrade` step; with a mirror, `upgrade/mirror`
//! pushes the bundle to it once, on this machine, before the first node (as `up`'s `airgap/mirror`,
//! [`crate::up::airgap::push_to_mirror`]). [`check_bundle`] refuses, before any node is touched, a
//! bundle that was made for another cluster, does not carry V's images, or carries packages but no
//! kubeadm package for V.

use std::path::PathBuf;
use std::sync::Arc;

use clusterctl_airgap::bundle::{BundleImage, BundleManifest, VerifiedBundle};
use clusterctl_airgap::node::versions::has_kubeadm_for;
use clusterctl_spec::versions::tag;
use semver::Version;

use super::UpgradeData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::up::airgap::{ensure_images, image_digests, push_to_mirror, MirrorPush, RoleImages};
use clusterctl_spec::model::RuntimeKind;
use clusterctl_spec::ValidNode;

/// Where the images of the target version come from during an air-gapped upgrade.
#[derive(Clone)]
pub enum UpgradeImages {
    /// No mirror: each node's runtime is loaded from the bundle (`upgrade/images`).
    Nodes {
        /// The verified bundle.
        bundle: Arc<VerifiedBundle>,
        /// The nodes' container runtime.
        runtime: RuntimeKind,
        /// The bundle's images of the target version a control plane needs.
        control_plane: Vec<BundleImage>,
        /// The bundle's images of the target version a worker needs (no control-plane-only image).
        worker: Vec<BundleImage>,
    },
    /// A registry mirror is set: the bundle is pushed to it once (`upgrade/mirror`).
    Mirror {
        /// The verified bundle.
        bundle: Arc<VerifiedBundle>,
        /// The file's mirror and its client options.
        mirror: MirrorPush,
        /// The import record, `<bundle>.imported.json`.
        record: PathBuf,
    },
}

/// The bundle's images of version `to` for each role, `(control plane, worker)`, after checking that
/// Why a bundle cannot serve an upgrade (each message says how to get one that can).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleRefused {
    /// The bundle was made for another cluster.
    #[error("bundle {} was made for cluster {made_for}, not {cluster}", path.display())]
    OtherCluster {
        /// The bundle.
        path: PathBuf,
        /// The cluster it was made for.
        made_for: String,
        /// This cluster.
        cluster: String,
    },
    /// Images of the target version are missing.
    #[error("bundle {} does not carry the images of v{to} ({} missing: {}); it was made for {made_for} with extraVersions [{}]. Add v{to} to airgap.extraVersions in the cluster file, write the bundle again with `clusterctl airgap bundle` on a connected machine, and carry it here", path.display(), missing.len(), missing.join(", "), extra_versions.join(", "))]
    MissingImages {
        /// The bundle.
        path: PathBuf,
        /// The target version.
        to: Version,
        /// The upstream references missing.
        missing: Vec<String>,
        /// The Kubernetes version the bundle was made for.
        made_for: String,
        /// Its `airgap.extraVersions`.
        extra_versions: Vec<String>,
    },
    /// The bundle carries packages, but no kubeadm package of the target version.
    #[error("bundle {} carries no kubeadm package for v{to} (it has {packages} package(s), none of them kubeadm tagged v{to} or named kubeadm_{to}-*.deb / kubeadm-{to}-*.rpm), so the nodes could not be upgraded. Add the kubeadm, kubelet and kubectl packages of v{to} to airgap.packages in the cluster file, each with `kubernetesVersion: v{to}` (and v{to} in airgap.extraVersions), write the bundle again with `clusterctl airgap bundle` on a connected machine, and carry it here", path.display())]
    NoKubeadm {
        /// The bundle.
        path: PathBuf,
        /// The target version.
        to: Version,
        /// How many packages it carries.
        packages: usize,
    },
}

/// The images of each role (control planes, workers) for the upgrade, after checking that
/// `manifest` (of the bundle at `path`) was made for `cluster` and carries every image `wanted` names
/// (upstream references, from `clusterctl_airgap::plan::node_images` of the file at `to`). Errors:
/// another cluster's bundle; images of `to` the bundle lacks, naming `to` and the way to a bundle
/// that carries them (`airgap.extraVersions`, `clusterctl airgap bundle`); no kubeadm package of `to`.
pub(crate) fn check_bundle(
    manifest: &BundleManifest,
    path: &std::path::Path,
    cluster: &str,
    to: &Version,
    wanted: &RoleImages,
) -> Result<(Vec<BundleImage>, Vec<BundleImage>), Box<BundleRefused>> {
    if manifest.cluster != cluster {
        return Err(Box::new(BundleRefused::OtherCluster {
            path: path.to_path_buf(),
            made_for: manifest.cluster.clone(),
            cluster: cluster.to_string(),
        }));
    }
    let pick = |control_plane: bool| {
        clusterctl_airgap::plan::select(manifest, wanted.for_role(control_plane)).map_err(
            |missing| {
                Box::new(BundleRefused::MissingImages {
                    path: path.to_path_buf(),
                    to: to.clone(),
                    missing,
                    made_for: manifest.kubernetes_version.clone(),
                    extra_versions: manifest.extra_versions.clone(),
                })
            },
        )
    };
    let roles = (pick(true)?, pick(false)?);
    check_kubeadm_package(manifest, path, to)?;
    Ok(roles)
}

/// Refuses a bundle that carries packages but no kubeadm package for `to` (tagged `to`, or named
/// `kubeadm_<to>-*.deb` / `kubeadm-<to>-*.rpm`; see `clusterctl_airgap::node::versions`). A bundle
/// without any package passes: the upgrade then goes on as before this check existed.
fn check_kubeadm_package(
    manifest: &BundleManifest,
    path: &std::path::Path,
    to: &Version,
) -> Result<(), Box<BundleRefused>> {
    let v = tag(to);
    if manifest.packages.is_empty() || has_kubeadm_for(manifest, &v) {
        return Ok(());
    }
    Err(Box::new(BundleRefused::NoKubeadm {
        path: path.to_path_buf(),
        to: to.clone(),
        packages: manifest.packages.len(),
    }))
}

/// Digest material of `upgrade/images`: the target version, the runtime and the name and manifest
/// digest of every image the node's role needs.
pub(crate) fn images_input(d: &UpgradeData, node: &ValidNode) -> String {
    match &d.images {
        Some(UpgradeImages::Nodes {
            runtime,
            control_plane,
            worker,
            ..
        }) => {
            let list = if node.is_control_plane() {
                control_plane
            } else {
                worker
            };
            format!("{}\n{}", tag(&d.spec.to), image_digests(*runtime, list))
        }
        _ => tag(&d.spec.to),
    }
}

/// `upgrade/images` (every node, no mirror): loads the images of the target version the node's role
/// needs and its runtime lacks (name and manifest digest checked first), from the bundle.
pub(crate) fn images(ctx: &mut NodeCtx, data: &UpgradeData) -> Result<(), PhaseError> {
    let Some(UpgradeImages::Nodes {
        bundle,
        runtime,
        control_plane,
        worker,
    }) = &data.images
    else {
        return Ok(());
    };
    let list = if ctx.node.is_control_plane() {
        control_plane
    } else {
        worker
    };
    ensure_images(ctx, bundle, *runtime, list)
}

/// `upgrade/mirror` (this machine, a mirror is set): pushes the bundle to the mirror, skipping what
/// the import record and the mirror already have.
pub(crate) fn mirror(ctx: &mut NodeCtx, data: &UpgradeData) -> Result<(), PhaseError> {
    let Some(UpgradeImages::Mirror {
        bundle,
        mirror,
        record,
    }) = &data.images
    else {
        return Ok(());
    };
    push_to_mirror(ctx, bundle, mirror, record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clusterctl_airgap::bundle::BundleFile;
    use clusterctl_airgap::digest::Digest;

    fn entry(source: &str) -> BundleImage {
        BundleImage {
            source: source.into(),
            mirror: source.into(),
            digest: Digest::of(source.as_bytes()),
            source_digest: Digest::of(source.as_bytes()),
            media_type: "application/vnd.oci.image.manifest.v1+json".into(),
            size: 1,
            platforms: vec![],
        }
    }

    fn manifest(images: &[&str]) -> BundleManifest {
        BundleManifest {
            format: clusterctl_airgap::bundle::BUNDLE_FORMAT.into(),
            cluster: "prod".into(),
            kubernetes_version: "v1.34.1".into(),
            extra_versions: vec!["v1.35.0".into()],
            platforms: vec![],
            images: images.iter().map(|s| entry(s)).collect(),
            packages: vec![],
            binaries: vec![],
            upstream: vec![],
        }
    }

    #[test]
    fn picks_each_roles_images_and_refuses_a_bundle_without_the_target() {
        let wanted = RoleImages {
            control_plane: vec![
                "registry.k8s.io/kube-apiserver:v1.35.0".into(),
                "registry.k8s.io/pause:3.10.1".into(),
            ],
            worker: vec!["registry.k8s.io/pause:3.10.1".into()],
        };
        let path = std::path::Path::new("site.tar");
        let to = Version::new(1, 35, 0);
        let m = manifest(&[
            "registry.k8s.io/kube-apiserver:v1.34.1",
            "registry.k8s.io/kube-apiserver:v1.35.0",
            "registry.k8s.io/pause:3.10.1",
        ]);
        let (cp, w) = check_bundle(&m, path, "prod", &to, &wanted).expect("carried");
        assert_eq!(cp.len(), 2);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].source, "registry.k8s.io/pause:3.10.1");

        let old = manifest(&[
            "registry.k8s.io/kube-apiserver:v1.34.1",
            "registry.k8s.io/pause:3.10.1",
        ]);
        let e = check_bundle(&old, path, "prod", &to, &wanted)
            .expect_err("no v1.35.0")
            .to_string();
        assert!(
            e.contains("does not carry the images of v1.35.0")
                && e.contains("registry.k8s.io/kube-apiserver:v1.35.0")
                && e.contains("airgap.extraVersions")
                && e.contains("clusterctl airgap bundle"),
            "{e}"
        );
        let e = check_bundle(&m, path, "staging", &to, &wanted)
            .expect_err("other cluster")
            .to_string();
        assert!(e.contains("made for cluster prod, not staging"), "{e}");
    }

    fn package(name: &str, file: &str, version: Option<&str>) -> BundleFile {
        BundleFile {
            name: name.into(),
            path: format!("packages/rhel-amd64/{file}"),
            os: Some("rhel".into()),
            arch: Some("amd64".into()),
            size: 1,
            sha256: Digest::of(file.as_bytes()),
            extract_to: None,
            kubernetes_version: version.map(str::to_string),
        }
    }

    #[test]
    fn refuses_a_bundle_with_packages_but_no_kubeadm_for_the_target() {
        let wanted = RoleImages {
            control_plane: vec!["registry.k8s.io/pause:3.10.1".into()],
            worker: vec!["registry.k8s.io/pause:3.10.1".into()],
        };
        let path = std::path::Path::new("site.tar");
        let to = Version::new(1, 35, 0);
        let mut m = manifest(&["registry.k8s.io/pause:3.10.1"]);
        // No packages at all: as before.
        check_bundle(&m, path, "prod", &to, &wanted).expect("no packages");
        m.packages = vec![
            package("kubeadm", "kubeadm-1.34.1-1.x86_64.rpm", Some("v1.34.1")),
            package("kubelet", "kubelet-1.35.0-1.x86_64.rpm", Some("v1.35.0")),
        ];
        let e = check_bundle(&m, path, "prod", &to, &wanted)
            .expect_err("no kubeadm 1.35.0")
            .to_string();
        assert!(
            e.contains("no kubeadm package for v1.35.0")
                && e.contains("kubernetesVersion: v1.35.0")
                && e.contains("clusterctl airgap bundle"),
            "{e}"
        );
        m.packages
            .push(package("kubeadm", "kubeadm.rpm", Some("v1.35.0")));
        check_bundle(&m, path, "prod", &to, &wanted).expect("tagged");
        m.packages.pop();
        m.packages
            .push(package("kubeadm", "kubeadm-1.35.0-1.x86_64.rpm", None));
        check_bundle(&m, path, "prod", &to, &wanted).expect("by name");
    }
}
