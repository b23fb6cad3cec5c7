//! The bundle manifest (`manifest.json` in the bundle): what the bundle was made for and everything
//! it carries — each image with its source reference, mirror reference and manifest digest, each
//! package and binary with its size and sha256 (and, for archives, the directory it is unpacked into;
//! for a version's packages, the Kubernetes version). Field names are camelCase like the cluster file.

use crate::digest::Digest;
use serde::{Deserialize, Serialize};

/// Identifies this manifest format.
pub const BUNDLE_FORMAT: &str = "clusterctl.io/airgap-bundle/v1";

/// The top-level bundle manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleManifest {
    /// Always [`BUNDLE_FORMAT`].
    pub format: String,
    /// `metadata.name` of the cluster the bundle was made for.
    pub cluster: String,
    /// `spec.kubernetesVersion`, e.g. `v1.34.1`.
    pub kubernetes_version: String,
    /// Further Kubernetes versions whose images are included (for a later `upgrade --to`).
    #[serde(default)]
    pub extra_versions: Vec<String>,
    /// Platforms images were narrowed to (`os/arch[/variant]`); empty means all.
    #[serde(default)]
    pub platforms: Vec<String>,
    /// Every image, sorted by source reference.
    pub images: Vec<BundleImage>,
    /// Packages (`airgap.packages`), sorted by path.
    #[serde(default)]
    pub packages: Vec<BundleFile>,
    /// Binaries (the clusterctl binary itself), sorted by path.
    #[serde(default)]
    pub binaries: Vec<BundleFile>,
    /// The pinned upstream files of the cluster's CNI (`upstream/<name>`: manifests, the Cilium chart,
    /// the Helm archives; `name` is the file's name in `spec.networking.cni.sources`), sorted by path.
    /// Absent (and left out of `manifest.json`) when the CNI needs none, so bundles written before
    /// this field still read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream: Vec<BundleFile>,
}

impl BundleManifest {
    /// True when the bundle carries Kubernetes `version` (`vX.Y.Z`): as its `kubernetesVersion`, or
    /// among its `extraVersions` (once an upgrade moved the cluster file on).
    pub fn carries_version(&self, version: &str) -> bool {
        self.kubernetes_version == version || self.extra_versions.iter().any(|v| v == version)
    }
}

/// One image in the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleImage {
    /// Upstream reference, e.g. `registry.k8s.io/pause:3.10.1`.
    pub source: String,
    /// Reference on the site mirror, e.g. `harbor.example.com/library/pause:3.10.1`.
    pub mirror: String,
    /// Digest of the manifest or index carried (what the mirror will serve).
    pub digest: Digest,
    /// Digest the source served; differs from `digest` only when an index was narrowed.
    pub source_digest: Digest,
    /// Media type of the top-level document.
    pub media_type: String,
    /// Size of the top-level document in bytes.
    pub size: u64,
    /// Platforms carried.
    #[serde(default)]
    pub platforms: Vec<String>,
}

/// A package or binary carried in the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleFile {
    /// Logical name, e.g. `kubeadm`.
    pub name: String,
    /// Path of the entry in the bundle, e.g. `packages/debian-amd64/kubeadm_1.34.1_amd64.deb`.
    pub path: String,
    /// OS family (`debian`, `rhel`, …) for packages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// Architecture (`amd64`, `arm64`) for packages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// Size in bytes.
    pub size: u64,
    /// sha256 of the content.
    pub sha256: Digest,
    /// For archives (`.tgz`, `.tar.gz`, `.tar`): the absolute directory on the node it is unpacked
    /// into (`airgap.packages[].extractTo`). Absent (and left out of `manifest.json`) when the file
    /// is only carried, so bundles written before this field still read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract_to: Option<String>,
    /// The Kubernetes version the package belongs to, `vX.Y.Z` (`airgap.packages[].kubernetesVersion`):
    /// `up` installs untagged packages and those of the cluster's version, `upgrade --to V` those of
    /// `V`. Absent (and left out of `manifest.json`) for packages of every version, so bundles written
    /// before this field still read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_carries_its_version_and_its_extra_versions_only() {
        let m = BundleManifest {
            format: BUNDLE_FORMAT.into(),
            cluster: "lab".into(),
            kubernetes_version: "v1.34.1".into(),
            extra_versions: vec!["v1.34.2".into()],
            platforms: vec![],
            images: vec![],
            packages: vec![],
            binaries: vec![],
            upstream: vec![],
        };
        assert!(m.carries_version("v1.34.1"));
        assert!(m.carries_version("v1.34.2"));
        assert!(!m.carries_version("v1.34.3"));
    }

    #[test]
    fn extract_to_is_optional_both_ways() {
        let d = Digest::of(b"cni");
        let old = format!(
            r#"{{"name":"cni","path":"packages/any-amd64/cni.tgz","os":"any","arch":"amd64","size":3,"sha256":"{d}"}}"#
        );
        let f: BundleFile =
            serde_json::from_str(&old).expect("an entry written before extractTo reads");
        assert_eq!(f.extract_to, None);
        assert_eq!(f.kubernetes_version, None);
        assert_eq!(
            serde_json::to_string(&f).expect("json"),
            old,
            "absent stays absent"
        );
        let with = BundleFile {
            extract_to: Some("/opt/cni/bin".into()),
            ..f
        };
        let text = serde_json::to_string(&with).expect("json");
        assert!(text.ends_with(r#","extractTo":"/opt/cni/bin"}"#), "{text}");
        assert_eq!(
            serde_json::from_str::<BundleFile>(&text).expect("read back"),
            with
        );
        let tagged = BundleFile {
            kubernetes_version: Some("v1.34.2".into()),
            ..with
        };
        let text = serde_json::to_string(&tagged).expect("json");
        assert!(
            text.ends_with(r#","kubernetesVersion":"v1.34.2"}"#),
            "{text}"
        );
        assert_eq!(
            serde_json::from_str::<BundleFile>(&text).expect("read back"),
            tagged
        );
    }
}
