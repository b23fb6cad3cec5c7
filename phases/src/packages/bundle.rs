//! `packages.source: bundle`, the offline source of the `packages` phase: once the bundle's files for a
//! node are placed and installed (`.deb`s with `dpkg -i`, `.rpm`s with `rpm -U`, static binaries into
//! `/usr/local/bin`, archives with `extractTo` unpacked — [`crate::up::airgap::packages`]), the same
//! finishing steps as from a repository: the Kubernetes packages held, the kubelet enabled, and a
//! containerd unpacked from the bundle's release archive given its unit and enabled ([`finish`]).
//! [`bundle_containerd`] names the containerd version a bundle's release archive gives a node, so its
//! configuration is rendered for that version on the first `up` already.

use semver::Version;

use super::probe::{mismatch_message, pinned_mismatches, Installed};
use super::{table, Family, Settings, EXTRAS, PINNED};
use clusterctl_spec::model::RuntimeKind;

/// What is left to do on a node once the bundle's files are installed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Finish {
    /// Packages to hold (`apt-mark hold`; Debian/Ubuntu): the installed Kubernetes packages not held.
    pub hold: Vec<String>,
    /// `systemctl enable kubelet` is needed.
    pub enable_kubelet: bool,
    /// containerd came from a release archive (no unit of its own): its unit is placed.
    pub containerd_unit: bool,
    /// `systemctl enable containerd` is needed.
    pub enable_containerd: bool,
}

impl Finish {
    /// True when nothing is left to do.
    pub fn is_done(&self) -> bool {
        self.hold.is_empty()
            && !self.enable_kubelet
            && !self.containerd_unit
            && !self.enable_containerd
    }
}

/// For a node whose bundle files are installed (`installed` read after that): what is left to do, or
/// every reason the node is refused — kubeadm or kubelet not there (the bundle did not provide them),
/// a pinned package of another version without `replaceInstalled`, no containerd at all or one
/// Kubernetes `version` does not support.
pub fn finish(
    settings: &Settings,
    installed: &Installed,
    version: &Version,
) -> Result<Finish, Vec<String>> {
    let mut problems = Vec::new();
    let missing: Vec<&str> = [
        ("kubeadm", &installed.kubeadm_path),
        ("kubelet", &installed.kubelet_path),
    ]
    .iter()
    .filter(|(_, p)| p.is_empty())
    .map(|(n, _)| *n)
    .collect();
    if !missing.is_empty() {
        problems.push(format!(
            "{} not installed: the bundle's packages did not provide it (list kubeadm, kubelet and kubectl {version} under airgap.packages and write the bundle again)",
            missing.join(" and ")
        ));
    }
    if !settings.replace {
        for (p, v) in pinned_mismatches(installed, version) {
            problems.push(mismatch_message(&p, &v, version));
        }
    }
    let mut out = Finish::default();
    if installed.family() == Some(Family::Debian) {
        out.hold = PINNED
            .iter()
            .chain(EXTRAS.iter())
            .filter(|p| installed.packages.contains_key(**p) && !installed.held.contains(**p))
            .map(|p| p.to_string())
            .collect();
    }
    out.enable_kubelet =
        !installed.kubelet_path.is_empty() && installed.kubelet_enabled != "enabled";
    if settings.runtime == RuntimeKind::Containerd {
        let row = table::row(super::minor_of(version));
        match (installed.containerd(), row) {
            (None, _) => problems.push(format!(
                "no containerd on this node and none from the bundle: add containerd's release archive (containerd-<version>-linux-<arch>.tar.gz with `extractTo: /usr/local`) and runc to airgap.packages, or install a containerd Kubernetes {}.{} supports yourself",
                version.major, version.minor
            )),
            (Some(v), Some(row)) if !table::containerd_accepted(row, &v) => problems.push(format!(
                "containerd {v} is installed; Kubernetes {}.{} needs containerd {} or newer in its line: carry containerd's release archive {} in the bundle (`extractTo: /usr/local`)",
                version.major,
                version.minor,
                row.containerd_min.join(", "),
                row.containerd_archive
            )),
            (Some(_), _) => {
                let packaged = ["containerd", "containerd.io"]
                    .iter()
                    .any(|p| installed.packages.contains_key(*p));
                out.containerd_unit = installed.containerd_enabled.is_empty() && !packaged;
                out.enable_containerd = installed.containerd_enabled != "enabled";
            }
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The containerd version of a release archive file name (`containerd-2.2.1-linux-amd64.tar.gz` →
/// `2.2.1`), when it is one.
pub fn archive_version(file_name: &str) -> Option<String> {
    let rest = file_name.strip_prefix("containerd-")?;
    let (v, tail) = rest.split_once("-linux-")?;
    (table::triple(v).is_some() && (tail.ends_with(".tar.gz") || tail.ends_with(".tgz")))
        .then(|| v.to_string())
}

/// The containerd a bundle's release archive gives a node: the version of the first package file
/// (bundle paths, e.g. `packages/debian-amd64/containerd-2.2.1-linux-amd64.tar.gz`, with their
/// `extractTo`) that is a containerd release archive unpacked somewhere.
pub fn bundle_containerd<'a>(
    files: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Option<String> {
    files.into_iter().find_map(|(path, extract_to)| {
        extract_to?;
        archive_version(path.rsplit('/').next().unwrap_or(path))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packages::Source;

    fn settings() -> Settings {
        Settings {
            source: Source::Bundle,
            replace: false,
            runtime: RuntimeKind::Containerd,
        }
    }

    fn node(extra: &str) -> Installed {
        Installed::parse(&format!(
            "id=debian\nlike=\nversion_id=12\narch=x86_64\n{extra}"
        ))
    }

    #[test]
    fn after_the_bundles_files_the_packages_are_held_and_the_units_enabled() {
        let v = Version::new(1, 34, 4);
        let i = node(
            "pkg=kubeadm 1.34.4-1.1\npkg=kubelet 1.34.4-1.1\npkg=kubectl 1.34.4-1.1\npkg=cri-tools 1.34.0-1.1\npkg=kubernetes-cni 1.10.0-1.1\nheld=\nkubeadm_path=/usr/bin/kubeadm\nkubelet_path=/usr/bin/kubelet\nkubelet_enabled=disabled\ncontainerd_bin=v2.2.1\ncontainerd_enabled=\n",
        );
        let f = finish(&settings(), &i, &v).unwrap();
        assert_eq!(
            f.hold,
            [
                "kubeadm",
                "kubelet",
                "kubectl",
                "cri-tools",
                "kubernetes-cni"
            ]
        );
        assert!(f.enable_kubelet && f.containerd_unit && f.enable_containerd);
        // Once done: nothing left.
        let done = node(
            "pkg=kubeadm 1.34.4-1.1\npkg=kubelet 1.34.4-1.1\npkg=kubectl 1.34.4-1.1\nheld=kubeadm kubelet kubectl\nkubeadm_path=/usr/bin/kubeadm\nkubelet_path=/usr/bin/kubelet\nkubelet_enabled=enabled\ncontainerd_bin=v2.2.1\ncontainerd_enabled=enabled\n",
        );
        assert!(finish(&settings(), &done, &v).unwrap().is_done());
    }

    #[test]
    fn a_bundle_without_a_usable_runtime_or_programs_is_explained() {
        let v = Version::new(1, 34, 4);
        let e = finish(&settings(), &node(""), &v).unwrap_err();
        assert!(
            e[0].starts_with("kubeadm and kubelet not installed"),
            "{e:?}"
        );
        assert!(e[1].starts_with("no containerd on this node"), "{e:?}");
        let old = node("kubeadm_path=/usr/bin/kubeadm\nkubelet_path=/usr/bin/kubelet\npkg=containerd 1.6.20~ds1-1+deb12u3\n");
        let e = finish(&settings(), &old, &v).unwrap_err();
        assert!(
            e[0].contains("containerd 1.6.20~ds1-1+deb12u3 is installed"),
            "{e:?}"
        );
        let other = node("kubeadm_path=/usr/bin/kubeadm\nkubelet_path=/usr/bin/kubelet\npkg=kubeadm 1.33.13-1.1\ncontainerd_bin=v2.2.1\n");
        assert!(finish(&settings(), &other, &v).unwrap_err()[0]
            .contains("kubeadm 1.33.13-1.1 is installed"));
    }

    #[test]
    fn the_bundles_containerd_archive_names_its_version() {
        assert_eq!(
            archive_version("containerd-2.2.1-linux-amd64.tar.gz").as_deref(),
            Some("2.2.1")
        );
        assert_eq!(archive_version("containerd-shim.tar.gz"), None);
        assert_eq!(archive_version("cni-plugins-linux-amd64-v1.6.2.tgz"), None);
        let files = [
            ("packages/any-amd64/runc", None),
            (
                "packages/debian-amd64/containerd-2.2.1-linux-amd64.tar.gz",
                None,
            ),
            (
                "packages/any-amd64/containerd-2.1.4-linux-amd64.tar.gz",
                Some("/usr/local"),
            ),
        ];
        assert_eq!(
            bundle_containerd(files).as_deref(),
            Some("2.1.4"),
            "only an unpacked one"
        );
    }
}
