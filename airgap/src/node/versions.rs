//! Which of the bundle's packages belong to which Kubernetes version: a package entry tagged with
//! `kubernetesVersion` (`airgap.packages[].kubernetesVersion`) belongs to that version only, an
//! untagged one to every version. `up` places the packages of the cluster's version, `upgrade --to V`
//! those of `V`, and the upgrade's up-front check asks [`has_kubeadm_for`] whether the bundle has a
//! kubeadm package for `V` at all. Versions compare without a leading `v` (`1.34.2` = `v1.34.2`).

use super::{files_for, NodeFile};
use crate::bundle::{BundleFile, BundleManifest, VerifiedBundle};

/// `version` without its leading `v` and surrounding blanks: `v1.34.2` → `1.34.2`.
fn bare(version: &str) -> &str {
    clusterctl_spec::versions::untagged(version.trim())
}

/// True when package entry `f` is to be installed at Kubernetes `version` (`v1.34.2` or `1.34.2`):
/// it carries no `kubernetes_version` (it belongs to every version), or that same version.
pub fn for_version(f: &BundleFile, version: &str) -> bool {
    f.kubernetes_version
        .as_deref()
        .is_none_or(|v| bare(v) == bare(version))
}

/// True when the file name `name` of package `package` is the upstream (pkgs.k8s.io) name of its
/// `version` package: `<package>_<version>-*.deb` or `<package>-<version>-*.rpm` (the names the
/// upgrade's install script looks for).
pub fn named_for_version(name: &str, package: &str, version: &str) -> bool {
    let v = bare(version);
    [("_", ".deb"), ("-", ".rpm")].iter().any(|(sep, ext)| {
        name.strip_prefix(&format!("{package}{sep}{v}-"))
            .is_some_and(|rest| rest.ends_with(ext) && rest.len() > ext.len())
    })
}

/// The file name of bundle entry `f` (last component of its path).
fn file_name(f: &BundleFile) -> &str {
    f.path.rsplit('/').next().unwrap_or(&f.path)
}

/// True when `manifest` carries a kubeadm package for Kubernetes `version`: an entry named
/// `kubeadm` tagged with `version`, or an untagged one whose file name is the upstream name of
/// that version (`kubeadm_<version>-*.deb`, `kubeadm-<version>-*.rpm`).
pub fn has_kubeadm_for(manifest: &BundleManifest, version: &str) -> bool {
    manifest.packages.iter().any(|p| {
        p.name == "kubeadm"
            && match &p.kubernetes_version {
                Some(v) => bare(v) == bare(version),
                None => named_for_version(file_name(p), "kubeadm", version),
            }
    })
}

/// [`files_for`] narrowed to Kubernetes `version` ([`for_version`]; binaries always), under their
/// bundle file names: what `up`'s `airgap/packages` places and installs at the cluster's version.
pub fn files_at_version(
    bundle: &VerifiedBundle,
    os_family: &str,
    arch: &str,
    remote_dir: &str,
    version: &str,
) -> Vec<NodeFile> {
    files_for(bundle, os_family, arch, remote_dir)
        .into_iter()
        .filter(|f| f.binary || for_version(&f.file, version))
        .collect()
}

/// [`files_at_version`] as `upgrade --to <version>` uploads them: a package tagged with `version`
/// whose file name is not its upstream name ([`named_for_version`]) is placed under one that is —
/// `<name>_<version>-<file>` (`.deb`) or `<name>-<version>-<file>` (`.rpm`) — so the upgrade's
/// install script, which looks for those names, finds it.
pub fn files_for_version(
    bundle: &VerifiedBundle,
    os_family: &str,
    arch: &str,
    remote_dir: &str,
    version: &str,
) -> Vec<NodeFile> {
    files_at_version(bundle, os_family, arch, remote_dir, version)
        .into_iter()
        .map(|f| under_version_name(f, version))
        .collect()
}

/// `f` with its node path renamed to the upstream name of `version` when it is a `.deb`/`.rpm`
/// tagged with a version whose file name is not that name (see [`files_for_version`]).
fn under_version_name(mut f: NodeFile, version: &str) -> NodeFile {
    let name = file_name(&f.file).to_string();
    let sep = if name.ends_with(".deb") {
        "_"
    } else if name.ends_with(".rpm") {
        "-"
    } else {
        return f;
    };
    if f.binary
        || f.file.kubernetes_version.is_none()
        || named_for_version(&name, &f.file.name, version)
    {
        return f;
    }
    if let Some((dir, _)) = f.remote.rsplit_once('/') {
        f.remote = format!("{dir}/{}{sep}{}-{name}", f.file.name, bare(version));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;

    fn pkg(name: &str, path: &str, version: Option<&str>) -> BundleFile {
        BundleFile {
            name: name.into(),
            path: path.into(),
            os: Some("rhel".into()),
            arch: Some("amd64".into()),
            size: 1,
            sha256: Digest::of(path.as_bytes()),
            extract_to: None,
            kubernetes_version: version.map(str::to_string),
        }
    }

    fn manifest(packages: Vec<BundleFile>) -> BundleManifest {
        BundleManifest {
            format: crate::bundle::BUNDLE_FORMAT.into(),
            cluster: "prod".into(),
            kubernetes_version: "v1.34.1".into(),
            extra_versions: vec!["v1.34.2".into()],
            platforms: Vec::new(),
            images: Vec::new(),
            packages,
            binaries: Vec::new(),
            upstream: Vec::new(),
        }
    }

    #[test]
    fn tagged_packages_belong_to_their_version_only() {
        let untagged = pkg("cri-tools", "packages/rhel-amd64/cri-tools.rpm", None);
        let old = pkg("kubeadm", "packages/rhel-amd64/a.rpm", Some("v1.34.1"));
        let new = pkg("kubeadm", "packages/rhel-amd64/b.rpm", Some("1.34.2"));
        for v in ["v1.34.1", "1.34.1", " v1.34.1 "] {
            assert!(for_version(&untagged, v) && for_version(&old, v) && !for_version(&new, v));
        }
        assert!(for_version(&new, "v1.34.2") && !for_version(&old, "v1.34.2"));
    }

    #[test]
    fn upstream_names_per_version() {
        assert!(named_for_version(
            "kubeadm_1.35.0-1.1_all.deb",
            "kubeadm",
            "v1.35.0"
        ));
        assert!(named_for_version(
            "kubeadm-1.34.2-150500.1.1.x86_64.rpm",
            "kubeadm",
            "1.34.2"
        ));
        assert!(!named_for_version(
            "kubeadm-1.34.1-150500.1.1.x86_64.rpm",
            "kubeadm",
            "1.34.2"
        ));
        assert!(!named_for_version(
            "kubeadm-1.34.20-1.x86_64.rpm",
            "kubeadm",
            "1.34.2"
        ));
        assert!(!named_for_version(
            "kubelet_1.35.0-1.1_all.deb",
            "kubeadm",
            "1.35.0"
        ));
        assert!(!named_for_version(
            "kubeadm_1.35.0-.deb",
            "kubeadm",
            "1.35.0"
        ));
    }

    #[test]
    fn kubeadm_for_a_version_by_tag_or_by_name() {
        let by_name = manifest(vec![pkg(
            "kubeadm",
            "packages/rhel-amd64/kubeadm-1.34.2-150500.1.1.x86_64.rpm",
            None,
        )]);
        assert!(has_kubeadm_for(&by_name, "v1.34.2"));
        assert!(!has_kubeadm_for(&by_name, "v1.34.1"));
        let by_tag = manifest(vec![pkg(
            "kubeadm",
            "packages/rhel-amd64/k.rpm",
            Some("v1.34.2"),
        )]);
        assert!(has_kubeadm_for(&by_tag, "1.34.2"));
        assert!(!has_kubeadm_for(&by_tag, "1.34.1"));
        // Tagged with another version: its name does not make it V's.
        let mislabelled = manifest(vec![pkg(
            "kubeadm",
            "packages/rhel-amd64/kubeadm-1.34.2-1.x86_64.rpm",
            Some("v1.34.1"),
        )]);
        assert!(!has_kubeadm_for(&mislabelled, "v1.34.2"));
        let only_kubelet = manifest(vec![pkg(
            "kubelet",
            "packages/rhel-amd64/kubelet-1.34.2-1.x86_64.rpm",
            Some("v1.34.2"),
        )]);
        assert!(!has_kubeadm_for(&only_kubelet, "v1.34.2"));
    }

    #[test]
    fn tagged_files_are_placed_under_their_upstream_name() {
        let node = |f: BundleFile| NodeFile {
            remote: format!("/b/packages/{}", file_name(&f)),
            file: f,
            mode: 0o644,
            binary: false,
        };
        let odd = node(pkg(
            "kubeadm",
            "packages/rhel-amd64/kubeadm.rpm",
            Some("v1.34.2"),
        ));
        assert_eq!(
            under_version_name(odd, "v1.34.2").remote,
            "/b/packages/kubeadm-1.34.2-kubeadm.rpm"
        );
        let deb = node(pkg(
            "kubelet",
            "packages/debian-amd64/kl.deb",
            Some("v1.35.0"),
        ));
        let placed = under_version_name(deb, "v1.35.0").remote;
        assert_eq!(placed, "/b/packages/kubelet_1.35.0-kl.deb");
        assert!(
            named_for_version(&placed[12..], "kubelet", "1.35.0"),
            "{placed}"
        );
        for kept in [
            pkg(
                "kubeadm",
                "packages/rhel-amd64/kubeadm-1.34.2-1.x86_64.rpm",
                Some("v1.34.2"),
            ),
            pkg("cri-tools", "packages/rhel-amd64/cri-tools.rpm", None),
            pkg("crictl", "packages/any-amd64/crictl.tgz", Some("v1.34.2")),
        ] {
            let f = node(kept);
            let before = f.remote.clone();
            assert_eq!(under_version_name(f, "v1.34.2").remote, before);
        }
    }
}
