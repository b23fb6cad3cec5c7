//! The supported Kubernetes versions and the images kubeadm pairs with each: etcd, CoreDNS (upstream path
//! `coredns/coredns`) and pause. Values are those of kubeadm's `cmd/kubeadm/app/constants/constants.go`
//! (`SupportedEtcdVersion[minor]`, `CoreDNSVersion`, `PauseVersion`) at the release tags of
//! kubernetes/kubernetes. etcd is bumped inside a minor by patch releases, so the table is keyed by patch
//! ranges. A version outside the table is refused by validation rather than guessed.

use semver::Version;

/// One row: a patch range of one minor and its images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRow {
    /// Minor version (`1.<minor>`).
    pub minor: u64,
    /// First patch of the range, inclusive.
    pub first_patch: u64,
    /// Last patch of the range, inclusive (the newest patch we know of for the last range of a minor).
    pub last_patch: u64,
    /// etcd image tag, e.g. `3.5.15-0` (`registry.k8s.io/etcd:<tag>`).
    pub etcd: &'static str,
    /// CoreDNS image tag, e.g. `v1.11.3` (`registry.k8s.io/coredns/coredns:<tag>`).
    pub coredns: &'static str,
    /// pause image tag, e.g. `3.10` (`registry.k8s.io/pause:<tag>`).
    pub pause: &'static str,
}

/// The table, oldest first. Source: kubeadm `constants.go` at the release tags.
pub const SUPPORTED: &[VersionRow] = &[
    row(31, 0, 8, "3.5.15-0", "v1.11.3", "3.10"),
    row(31, 9, 13, "3.5.21-0", "v1.11.3", "3.10"),
    row(31, 14, 14, "3.5.24-0", "v1.11.3", "3.10"),
    row(32, 0, 4, "3.5.16-0", "v1.11.3", "3.10"),
    row(32, 5, 9, "3.5.21-0", "v1.11.3", "3.10"),
    row(32, 10, 11, "3.5.24-0", "v1.11.3", "3.10"),
    row(33, 0, 5, "3.5.21-0", "v1.12.0", "3.10"),
    row(33, 6, 7, "3.5.24-0", "v1.12.0", "3.10"),
    row(34, 0, 1, "3.6.4-0", "v1.12.1", "3.10.1"),
    row(34, 2, 3, "3.6.5-0", "v1.12.1", "3.10.1"),
    row(35, 0, 0, "3.6.6-0", "v1.13.1", "3.10.1"),
    row(35, 1, 2, "3.6.8-0", "v1.13.1", "3.10.1"),
    row(36, 0, 0, "3.6.8-0", "v1.13.1", "3.10.1"),
];

const fn row(
    minor: u64,
    first_patch: u64,
    last_patch: u64,
    etcd: &'static str,
    coredns: &'static str,
    pause: &'static str,
) -> VersionRow {
    VersionRow {
        minor,
        first_patch,
        last_patch,
        etcd,
        coredns,
        pause,
    }
}

/// kubeadm config API versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeadmApi {
    /// `kubeadm.k8s.io/v1beta3` (Kubernetes < 1.31).
    V1beta3,
    /// `kubeadm.k8s.io/v1beta4` (Kubernetes ≥ 1.31).
    V1beta4,
}

impl KubeadmApi {
    /// The `apiVersion` string, e.g. `kubeadm.k8s.io/v1beta4`.
    pub fn api_version(self) -> &'static str {
        match self {
            KubeadmApi::V1beta3 => "kubeadm.k8s.io/v1beta3",
            KubeadmApi::V1beta4 => "kubeadm.k8s.io/v1beta4",
        }
    }
}

/// The resolved facts of one exact Kubernetes version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionInfo {
    /// The Kubernetes version, e.g. `1.34.1` (no `v`; use [`VersionInfo::tag`] for `v1.34.1`).
    pub version: Version,
    /// etcd image tag.
    pub etcd: &'static str,
    /// CoreDNS image tag (with `v`).
    pub coredns: &'static str,
    /// pause image tag.
    pub pause: &'static str,
    /// kubeadm config API: v1beta4 for ≥ 1.31, else v1beta3.
    pub kubeadm_api: KubeadmApi,
}

impl VersionInfo {
    /// The version as Kubernetes writes it, `v1.34.1` (kubeadm `kubernetesVersion`, image tags).
    pub fn tag(&self) -> String {
        format!("v{}", self.version)
    }

    /// The upstream images kubeadm pulls for this version, as full references under `registry.k8s.io`, in
    /// the order of `kubeadm config images list`: kube-apiserver, kube-controller-manager,
    /// kube-scheduler, kube-proxy, coredns/coredns, pause, etcd.
    pub fn kubeadm_images(&self) -> Vec<String> {
        let tag = self.tag();
        vec![
            format!("registry.k8s.io/kube-apiserver:{tag}"),
            format!("registry.k8s.io/kube-controller-manager:{tag}"),
            format!("registry.k8s.io/kube-scheduler:{tag}"),
            format!("registry.k8s.io/kube-proxy:{tag}"),
            format!("registry.k8s.io/coredns/coredns:{}", self.coredns),
            format!("registry.k8s.io/pause:{}", self.pause),
            format!("registry.k8s.io/etcd:{}", self.etcd),
        ]
    }
}

/// Parses `v1.34.1` or `1.34.1` (exact patch, no pre-release) into a [`Version`].
/// Errors: `None` when the text is not `[v]MAJOR.MINOR.PATCH`.
pub fn parse_version(text: &str) -> Option<Version> {
    let t = text.strip_prefix('v').unwrap_or(text);
    let v = Version::parse(t).ok()?;
    if !v.pre.is_empty() || !v.build.is_empty() {
        return None;
    }
    Some(v)
}

/// Looks up an exact version. Returns `None` when it is not in [`SUPPORTED`].
pub fn lookup(version: &Version) -> Option<VersionInfo> {
    if version.major != 1 {
        return None;
    }
    SUPPORTED
        .iter()
        .find(|r| {
            r.minor == version.minor && (r.first_patch..=r.last_patch).contains(&version.patch)
        })
        .map(|r| VersionInfo {
            version: version.clone(),
            etcd: r.etcd,
            coredns: r.coredns,
            pause: r.pause,
            kubeadm_api: if version.minor >= 31 {
                KubeadmApi::V1beta4
            } else {
                KubeadmApi::V1beta3
            },
        })
}

/// Every supported exact version, oldest first (e.g. for `--help` texts and error help lines).
pub fn all() -> Vec<Version> {
    SUPPORTED
        .iter()
        .flat_map(|r| (r.first_patch..=r.last_patch).map(move |p| Version::new(1, r.minor, p)))
        .collect()
}

/// The newest supported patch of a minor, if the minor is supported.
pub fn newest_patch(minor: u64) -> Option<Version> {
    SUPPORTED
        .iter()
        .filter(|r| r.minor == minor)
        .map(|r| Version::new(1, minor, r.last_patch))
        .max()
}

/// A short human list of the supported ranges, e.g. `v1.31.0–v1.31.14, v1.32.0–v1.32.11, …`.
pub fn ranges_text() -> String {
    let mut out: Vec<String> = Vec::new();
    let mut minors: Vec<u64> = SUPPORTED.iter().map(|r| r.minor).collect();
    minors.dedup();
    for m in minors {
        if let Some(newest) = newest_patch(m) {
            out.push(format!("v1.{m}.0–v{newest}"));
        }
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_contiguous_and_cover_31_to_36() {
        for m in 31..=36u64 {
            let rows: Vec<_> = SUPPORTED.iter().filter(|r| r.minor == m).collect();
            assert!(!rows.is_empty(), "minor {m} missing");
            assert_eq!(rows[0].first_patch, 0, "minor {m} must start at .0");
            for w in rows.windows(2) {
                assert_eq!(w[0].last_patch + 1, w[1].first_patch, "gap in minor {m}");
            }
        }
    }

    #[test]
    fn lookup_per_patch() {
        let v = parse_version("v1.31.0").expect("parses");
        assert_eq!(lookup(&v).map(|i| i.etcd), Some("3.5.15-0"));
        let v = parse_version("1.34.1").expect("parses");
        let i = lookup(&v).expect("known");
        assert_eq!(
            (i.etcd, i.coredns, i.pause),
            ("3.6.4-0", "v1.12.1", "3.10.1")
        );
        assert_eq!(i.kubeadm_api, KubeadmApi::V1beta4);
        assert_eq!(i.tag(), "v1.34.1");
        assert!(i
            .kubeadm_images()
            .contains(&"registry.k8s.io/coredns/coredns:v1.12.1".to_string()));
        assert!(lookup(&Version::new(1, 30, 0)).is_none());
        assert!(lookup(&Version::new(1, 34, 99)).is_none());
        assert!(parse_version("v1.34").is_none());
        assert!(parse_version("v1.34.0-rc.1").is_none());
    }
}
