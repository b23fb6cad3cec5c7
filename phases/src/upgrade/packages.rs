//! Installing an exact version of the Kubernetes packages (`kubeadm`, or `kubelet` and `kubectl`) on a
//! node, as the kubeadm upgrade guide does: from the pkgs.k8s.io repository of the target minor (its
//! apt source / yum repo is switched to `/v1.<minor>/` first, since each minor has its own repository),
//! `apt-mark unhold` → `apt-get install pkg='<version>-*'` → `apt-mark hold` on Debian/Ubuntu, `dnf
//! install pkg-'<version>-*' --disableexcludes=kubernetes` on EL; or, air-gapped, from the package files
//! the bundle placed under [`BUNDLE_DIR`] (`dpkg -i`/`rpm -U --oldpackage`). Scripts only: the phases
//! run them through `NodeCtx`.

use semver::Version;

/// Where the air-gap bundle's package files are uploaded on a node (`packages/` under it), the
/// directory `clusterctl_airgap::node::upload_packages` is given.
pub const BUNDLE_DIR: &str = "/var/lib/clusterctl/bundle";

/// Where the packages come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The node's package manager and the pkgs.k8s.io repositories.
    PackageManager,
    /// Package files uploaded from the air-gap bundle to [`BUNDLE_DIR`]`/packages`.
    Bundle,
}

/// The shell script installing exactly `version` of `packages` (e.g. `["kubeadm"]`). It exits non-zero
/// when no supported package manager is found or the install fails.
pub fn install_script(source: Source, packages: &[&str], version: &Version) -> String {
    let minor = format!("v{}.{}", version.major, version.minor);
    let names = packages.join(" ");
    match source {
        Source::PackageManager => {
            let apt: Vec<String> = packages
                .iter()
                .map(|p| format!("{p}='{version}-*'"))
                .collect();
            let dnf: Vec<String> = packages
                .iter()
                .map(|p| format!("{p}-'{version}-*'"))
                .collect();
            format!(
                "set -e\n\
                 if command -v apt-get >/dev/null 2>&1; then\n\
                 \x20 for f in /etc/apt/sources.list.d/kubernetes.list /etc/apt/sources.list.d/kubernetes.sources; do\n\
                 \x20   [ -f \"$f\" ] && sed -i -E 's#/v1\\.[0-9]+/deb/#/{minor}/deb/#' \"$f\"\n\
                 \x20 done\n\
                 \x20 apt-get update -q\n\
                 \x20 apt-mark unhold {names} >/dev/null 2>&1 || true\n\
                 \x20 DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-change-held-packages {apt}\n\
                 \x20 apt-mark hold {names}\n\
                 elif command -v dnf >/dev/null 2>&1; then\n\
                 \x20 [ -f /etc/yum.repos.d/kubernetes.repo ] && sed -i -E 's#/v1\\.[0-9]+/rpm/#/{minor}/rpm/#' /etc/yum.repos.d/kubernetes.repo\n\
                 \x20 dnf install -y {dnf} --disableexcludes=kubernetes\n\
                 else\n\
                 \x20 echo 'no apt-get or dnf on this node: install {names} {version} by hand' >&2; exit 1\n\
                 fi\n",
                apt = apt.join(" "),
                dnf = dnf.join(" "),
            )
        }
        Source::Bundle => {
            let deb: Vec<String> = packages
                .iter()
                .map(|p| format!("{BUNDLE_DIR}/packages/{p}_{version}-*.deb"))
                .collect();
            let rpm: Vec<String> = packages
                .iter()
                .map(|p| format!("{BUNDLE_DIR}/packages/{p}-{version}-*.rpm"))
                .collect();
            format!(
                "set -e\n\
                 if command -v dpkg >/dev/null 2>&1 && ls {deb} >/dev/null 2>&1; then\n\
                 \x20 apt-mark unhold {names} >/dev/null 2>&1 || true\n\
                 \x20 dpkg -i {deb}\n\
                 \x20 apt-mark hold {names} >/dev/null 2>&1 || true\n\
                 elif command -v rpm >/dev/null 2>&1 && ls {rpm} >/dev/null 2>&1; then\n\
                 \x20 rpm -U --oldpackage --replacepkgs {rpm}\n\
                 else\n\
                 \x20 echo 'the bundle has no {names} {version} package for this node' >&2; exit 1\n\
                 fi\n",
                deb = deb.join(" "),
                rpm = rpm.join(" "),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_manager_script_pins_the_version_and_switches_the_minor_repository() {
        let s = install_script(
            Source::PackageManager,
            &["kubelet", "kubectl"],
            &Version::new(1, 35, 0),
        );
        assert!(s.contains("kubelet='1.35.0-*' kubectl='1.35.0-*'"), "{s}");
        assert!(s.contains("s#/v1\\.[0-9]+/deb/#/v1.35/deb/#"), "{s}");
        assert!(s.contains("apt-mark hold kubelet kubectl"), "{s}");
        assert!(
            s.contains("dnf install -y kubelet-'1.35.0-*' kubectl-'1.35.0-*'"),
            "{s}"
        );
    }

    #[test]
    fn bundle_script_installs_the_uploaded_files() {
        let s = install_script(Source::Bundle, &["kubeadm"], &Version::new(1, 35, 0));
        assert!(
            s.contains("dpkg -i /var/lib/clusterctl/bundle/packages/kubeadm_1.35.0-*.deb"),
            "{s}"
        );
        assert!(s.contains("rpm -U --oldpackage"), "{s}");
    }
}
