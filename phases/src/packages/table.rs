//! Where packages come from, per Kubernetes minor: the one table of versions and URLs `up`, `upgrade`
//! and `destroy --purge` use. Every entry names its source.
//!
//! Sources:
//! - [K] kubernetes.io, "Installing kubeadm" (`/docs/setup/production-environment/tools/kubeadm/install-kubeadm/`),
//!   Debian-based and Red Hat-based tabs: one repository per minor at
//!   `https://pkgs.k8s.io/core:/stable:/v1.XX/deb/` (`Release.key` there, `gpg --dearmor`ed into
//!   `/etc/apt/keyrings/kubernetes-apt-keyring.gpg`, `signed-by=` in
//!   `/etc/apt/sources.list.d/kubernetes.list`, `apt-mark hold kubelet kubeadm kubectl`) and
//!   `…/rpm/` (`repodata/repomd.xml.key`, `exclude=kubelet kubeadm kubectl cri-tools kubernetes-cni`
//!   in `/etc/yum.repos.d/kubernetes.repo`, `--disableexcludes=kubernetes` at install); and the
//!   pkgs.k8s.io announcement (kubernetes.io blog 2023-08-15, "pkgs.k8s.io: Introducing Kubernetes
//!   Community-Owned Package Repositories"): a repository per minor, package revisions such as
//!   `1.34.1-1.1` (deb) and `1.34.1-150500.1.1` (rpm), as in seed 004's `ls` of the downloaded RPMs.
//! - [R] kubernetes/release `cmd/krel/templates/latest/metadata.yaml` and the `kubelet`, `kubeadm`
//!   specs next to it: from 1.32 kubeadm depends on nothing, kubelet on `kubernetes-cni >= 1.2.0` and
//!   (deb) `mount`, `util-linux`; `kubernetes-cni` packages the CNI reference plugins into
//!   `/opt/cni/bin`, `cri-tools` crictl.
//! - [C] containerd `RELEASES.md`, "Kubernetes Support": the containerd versions recommended per
//!   Kubernetes minor (1.30 … 1.33 rows: e.g. 1.33 → 2.1.0+, 2.0.4+, 1.7.24+, 1.6.36+) and the
//!   release table (1.6 end of life 2025-07-23, 2.0 end of life 2025-11-07); containerd
//!   `docs/getting-started.md` ("Option 1: From the official binaries": the
//!   `containerd-<v>-linux-<arch>.tar.gz` archive with its `.sha256sum`, extracted under
//!   `/usr/local`; runc's `runc.<arch>` installed as `/usr/local/sbin/runc`).
//! - [N] Kubernetes v1.35 release notes ("v1.35 is the last release to support containerd 1.x"): from
//!   1.36 only containerd 2.x.
//! - [O] opencontainers/runc releases: `runc.<arch>` and `runc.sha256sum` on each release page.
//! - [P] cri-o/packaging `README.md`: CRI-O's repository per minor, moved from
//!   `https://pkgs.k8s.io/addons:/cri-o:/stable:/v1.XX/` to
//!   `https://download.opensuse.org/repositories/isv:/cri-o:/stable:/v1.XX/` ("We switched from
//!   pkgs.k8s.io/addons:/cri-o … to work independently from the pkgs.k8s.io CDN"), the same
//!   `deb/Release.key` and `rpm/repodata/repomd.xml.key` layout, keyring
//!   `/etc/apt/keyrings/cri-o-apt-keyring.gpg`; the CRI-O minor follows the Kubernetes minor. Seed 004
//!   uses exactly `https://download.opensuse.org/repositories/isv:/cri-o:/stable:/v1.34/rpm/`.
//!
//! The archive versions (containerd 2.2.1, runc 1.3.3) are the newest releases when this table was
//! written that the test bed builds from their Go modules and proves with a real kubelet
//! (docs/testbed-kubernetes.md); containerd 2.2 is within [C]'s support for every minor below.

/// The Kubernetes repository of `minor` (`1.34`), format `deb` or `rpm`, with a trailing `/` [K].
pub(crate) fn kubernetes_repo(minor: (u64, u64), format: &str) -> String {
    format!(
        "https://pkgs.k8s.io/core:/stable:/v{}.{}/{format}/",
        minor.0, minor.1
    )
}

/// The signing key of a repository at `repo` (a URL ending in `deb/` or `rpm/`) [K] [P].
pub(crate) fn key_url(repo: &str) -> String {
    if repo.ends_with("/rpm/") {
        format!("{repo}repodata/repomd.xml.key")
    } else {
        format!("{repo}Release.key")
    }
}

/// One supported Kubernetes minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MinorRow {
    /// `(1, 34)`.
    pub minor: (u64, u64),
    /// The oldest containerd accepted on a node, per release line ([C], [N]): a version is accepted when
    /// it is at least the entry of its own `x.y` line, or newer than every line listed.
    pub containerd_min: &'static [&'static str],
    /// The containerd release archive installed when the node has no accepted containerd and its
    /// distribution offers none ([C]).
    pub containerd_archive: &'static str,
    /// The runc release installed with the containerd archive ([O]).
    pub runc: &'static str,
    /// CRI-O's repository for this minor, without the `deb/`/`rpm/` part [P].
    pub crio_repo: &'static str,
}

/// The table, oldest minor first. Sources per column in the module documentation.
pub(crate) const MINORS: &[MinorRow] = &[
    // [C] row 1.31: 2.1.0+, 2.0.0+, 1.7.20+, 1.6.34+.
    MinorRow {
        minor: (1, 31),
        containerd_min: &["1.6.34", "1.7.20", "2.0.0"],
        containerd_archive: "2.2.1",
        runc: "1.3.3",
        crio_repo: "https://download.opensuse.org/repositories/isv:/cri-o:/stable:/v1.31/",
    },
    // [C] row 1.32: 2.1.0+, 2.0.1+, 1.7.24+, 1.6.36+.
    MinorRow {
        minor: (1, 32),
        containerd_min: &["1.6.36", "1.7.24", "2.0.1"],
        containerd_archive: "2.2.1",
        runc: "1.3.3",
        crio_repo: "https://download.opensuse.org/repositories/isv:/cri-o:/stable:/v1.32/",
    },
    // [C] row 1.33: 2.1.0+, 2.0.4+, 1.7.24+, 1.6.36+.
    MinorRow {
        minor: (1, 33),
        containerd_min: &["1.6.36", "1.7.24", "2.0.4"],
        containerd_archive: "2.2.1",
        runc: "1.3.3",
        crio_repo: "https://download.opensuse.org/repositories/isv:/cri-o:/stable:/v1.33/",
    },
    // 1.34 (released 2025-08-27): 1.33's lines without 1.6, which reached end of life on 2025-07-23 [C].
    MinorRow {
        minor: (1, 34),
        containerd_min: &["1.7.24", "2.0.4"],
        containerd_archive: "2.2.1",
        runc: "1.3.3",
        crio_repo: "https://download.opensuse.org/repositories/isv:/cri-o:/stable:/v1.34/",
    },
    // 1.35: the last minor with containerd 1.x [N].
    MinorRow {
        minor: (1, 35),
        containerd_min: &["1.7.24", "2.0.4"],
        containerd_archive: "2.2.1",
        runc: "1.3.3",
        crio_repo: "https://download.opensuse.org/repositories/isv:/cri-o:/stable:/v1.35/",
    },
    // 1.36: containerd 2.x only [N]; 2.0 reached end of life before 1.36 was released [C].
    MinorRow {
        minor: (1, 36),
        containerd_min: &["2.1.0"],
        containerd_archive: "2.2.1",
        runc: "1.3.3",
        crio_repo: "https://download.opensuse.org/repositories/isv:/cri-o:/stable:/v1.36/",
    },
];

/// The row of `minor`, when supported.
pub(crate) fn row(minor: (u64, u64)) -> Option<&'static MinorRow> {
    MINORS.iter().find(|r| r.minor == minor)
}

/// The containerd release archive for `arch` (`amd64`, `arm64`) and its published sha256 file [C].
pub(crate) fn containerd_archive(version: &str, arch: &str) -> (String, String) {
    let url = format!(
        "https://github.com/containerd/containerd/releases/download/v{version}/containerd-{version}-linux-{arch}.tar.gz"
    );
    let sum = format!("{url}.sha256sum");
    (url, sum)
}

/// runc's static binary for `arch` and the release's sha256 file (one line per file) [O].
pub(crate) fn runc_binary(version: &str, arch: &str) -> (String, String) {
    let base = format!("https://github.com/opencontainers/runc/releases/download/v{version}");
    (
        format!("{base}/runc.{arch}"),
        format!("{base}/runc.sha256sum"),
    )
}

/// `(major, minor, patch)` of the leading `x.y.z` of a package or program version
/// (`1.6.20~ds1-1+deb12u3`, `v2.2.1`, `1.7.24-1`); `None` when it does not start so.
pub(crate) fn triple(v: &str) -> Option<(u64, u64, u64)> {
    let v = v.trim().trim_start_matches('v');
    let mut it = v.splitn(3, '.');
    let a = it.next()?.parse().ok()?;
    let b = it.next()?.parse().ok()?;
    let rest = it.next()?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some((a, b, digits.parse().ok()?))
}

/// True when containerd `version` is accepted for `row` (see [`MinorRow::containerd_min`]).
pub(crate) fn containerd_accepted(row: &MinorRow, version: &str) -> bool {
    let Some(v) = triple(version) else {
        return false;
    };
    let mins: Vec<(u64, u64, u64)> = row
        .containerd_min
        .iter()
        .filter_map(|m| triple(m))
        .collect();
    let newest = mins.iter().max().copied();
    mins.iter().any(|m| (m.0, m.1) == (v.0, v.1) && v >= *m)
        || newest.is_some_and(|n| (v.0, v.1) > (n.0, n.1))
}

/// Replaces the scheme and host of `url` with `mirror` (a URL prefix, trailing `/` ignored), keeping
/// the path: `https://pkgs.k8s.io/core:/stable:/v1.34/deb/` under `https://repo.site/k8s` is
/// `https://repo.site/k8s/core:/stable:/v1.34/deb/`. Without a mirror, `url` unchanged.
pub(crate) fn locate(url: &str, mirror: Option<&str>) -> String {
    let Some(m) = mirror else {
        return url.to_string();
    };
    let after_scheme = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let path = after_scheme
        .find('/')
        .map(|i| &after_scheme[i..])
        .unwrap_or("/");
    format!("{}{path}", m.trim_end_matches('/'))
}

/// The host (with port) of `url`.
pub(crate) fn host_of(url: &str) -> &str {
    let after = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    after.split('/').next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_minor_has_a_row_and_the_urls_follow_upstream() {
        for m in 31..=36 {
            let r = row((1, m)).expect("row");
            assert!(r
                .crio_repo
                .ends_with(&format!("/isv:/cri-o:/stable:/v1.{m}/")));
        }
        assert_eq!(
            kubernetes_repo((1, 34), "deb"),
            "https://pkgs.k8s.io/core:/stable:/v1.34/deb/"
        );
        assert_eq!(
            key_url(&kubernetes_repo((1, 34), "deb")),
            "https://pkgs.k8s.io/core:/stable:/v1.34/deb/Release.key"
        );
        assert_eq!(
            key_url(&kubernetes_repo((1, 35), "rpm")),
            "https://pkgs.k8s.io/core:/stable:/v1.35/rpm/repodata/repomd.xml.key"
        );
        assert_eq!(
            containerd_archive("2.2.1", "amd64"),
            (
                "https://github.com/containerd/containerd/releases/download/v2.2.1/containerd-2.2.1-linux-amd64.tar.gz".to_string(),
                "https://github.com/containerd/containerd/releases/download/v2.2.1/containerd-2.2.1-linux-amd64.tar.gz.sha256sum".to_string()
            )
        );
        assert_eq!(
            runc_binary("1.3.3", "arm64").0,
            "https://github.com/opencontainers/runc/releases/download/v1.3.3/runc.arm64"
        );
    }

    #[test]
    fn containerd_lines_and_the_end_of_1x() {
        let r34 = row((1, 34)).unwrap();
        assert!(
            !containerd_accepted(r34, "1.6.20~ds1-1+deb12u3"),
            "bookworm's"
        );
        assert!(containerd_accepted(r34, "1.7.24~ds1-6"), "trixie's");
        assert!(!containerd_accepted(r34, "1.7.12-0ubuntu4"));
        assert!(containerd_accepted(r34, "2.2.1"));
        assert!(!containerd_accepted(r34, "2.0.3"));
        assert!(containerd_accepted(r34, "v2.1.0"));
        let r36 = row((1, 36)).unwrap();
        assert!(!containerd_accepted(r36, "1.7.28"));
        assert!(containerd_accepted(r36, "2.2.1"));
        let r31 = row((1, 31)).unwrap();
        assert!(containerd_accepted(r31, "1.6.34"));
        assert!(!containerd_accepted(r31, "garbage"));
    }

    #[test]
    fn a_mirror_keeps_the_upstream_path() {
        let u = kubernetes_repo((1, 34), "deb");
        assert_eq!(locate(&u, None), u);
        assert_eq!(
            locate(&u, Some("https://repo.site:8443/k8s/")),
            "https://repo.site:8443/k8s/core:/stable:/v1.34/deb/"
        );
        assert_eq!(host_of("https://repo.site:8443/k8s/x"), "repo.site:8443");
        assert_eq!(triple("v1.34.4"), Some((1, 34, 4)));
        assert_eq!(triple("1.34.4-1.1"), Some((1, 34, 4)));
    }
}
