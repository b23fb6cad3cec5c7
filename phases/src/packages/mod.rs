//! The packages of a node: kubeadm, kubelet and kubectl at exactly the cluster's Kubernetes version
//! (with cri-tools and kubernetes-cni), held afterwards, and the container runtime. `up` uses it in its
//! `packages` phase ([`crate::up::packages`]), `upgrade` its repository, pin and hold steps for the
//! target version ([`crate::upgrade::packages`]: [`script::kubernetes_repo_file`] of the target minor,
//! [`script::install`], [`script::hold`]); `destroy --purge` has [`script::purge`] (the node's package
//! state as it was before `up`, from [`script::record`]).
//!
//! - [`table`]: the one table of versions and URLs (pkgs.k8s.io per minor, CRI-O's repository per
//!   minor, the containerd and runc release archives, which containerd each minor accepts), with its
//!   sources.
//! - [`probe`]: one read-only command reading what a node has ([`probe::Installed`]), and
//!   [`probe::decide`]: what `up` does about it ([`probe::Plan`]) or why it refuses the node (another
//!   version installed and `replaceInstalled` not set; an OS family or architecture it cannot serve).
//! - [`script`]: the repository files and the commands (apt on Debian/Ubuntu, dnf on EL 8/9), each a
//!   short script the phases run through `NodeCtx`, so a dry run lists them.
//! - [`bundle`]: the offline source (`packages.source: bundle`): what is left once the bundle's files
//!   are installed (holds, the kubelet and containerd enabled, the archive containerd's unit).
//!
//! A node that already has exactly these versions (held, kubelet enabled, an accepted runtime) is left
//! alone: the check is one query, nothing is downloaded and nothing restarted.

pub mod bundle;
pub mod probe;
pub mod script;
pub(crate) mod table;

use clusterctl_spec::model::RuntimeKind;

/// Where the packages come from (the cluster file's `packages.source`, resolved).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Source {
    /// pkgs.k8s.io, CRI-O's repository, the containerd and runc release archives.
    Upstream,
    /// The same paths under a site mirror's URL prefix, with its CA when given.
    Mirror {
        /// `https://repo.example.com/k8s`: replaces the scheme and host of every upstream URL.
        url: String,
        /// The mirror's CA (PEM certificates), placed on each node and trusted for the mirror only.
        ca_pem: Option<String>,
    },
    /// The air-gap bundle's packages (streamed from the bundle and installed from files).
    Bundle,
    /// Installed by someone else: only checked.
    #[default]
    Preinstalled,
}

impl Source {
    /// The mirror prefix, for a mirror source.
    pub fn mirror(&self) -> Option<&str> {
        match self {
            Source::Mirror { url, .. } => Some(url),
            _ => None,
        }
    }

    /// True when packages are installed from repositories and downloads (upstream or mirror).
    pub fn from_repositories(&self) -> bool {
        matches!(self, Source::Upstream | Source::Mirror { .. })
    }

    /// The name in the cluster file (`upstream`, `mirror`, `bundle`, `preinstalled`).
    pub fn name(&self) -> &'static str {
        match self {
            Source::Upstream => "upstream",
            Source::Mirror { .. } => "mirror",
            Source::Bundle => "bundle",
            Source::Preinstalled => "preinstalled",
        }
    }
}

/// What the packages of a cluster are (built by the CLI from the cluster file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Where they come from.
    pub source: Source,
    /// Replace Kubernetes packages or a runtime of other versions (`packages.replaceInstalled`).
    pub replace: bool,
    /// The runtime to install.
    pub runtime: RuntimeKind,
}

impl Default for Settings {
    /// Preinstalled packages and containerd: only checks.
    fn default() -> Self {
        Settings {
            source: Source::Preinstalled,
            replace: false,
            runtime: RuntimeKind::Containerd,
        }
    }
}

/// An OS family `up` installs packages on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Debian, Ubuntu and their derivatives: apt, `.deb`.
    Debian,
    /// RHEL, Rocky, AlmaLinux, CentOS Stream 8/9: dnf, `.rpm`.
    El,
}

impl Family {
    /// The family of an `/etc/os-release` `ID` and `ID_LIKE`, when supported.
    pub fn of(os_id: &str, os_like: &str) -> Option<Family> {
        match clusterctl_airgap::node::os_family(os_id, os_like) {
            "debian" => Some(Family::Debian),
            "rhel" => Some(Family::El),
            _ => None,
        }
    }

    /// The repository format (`deb`, `rpm`).
    pub fn format(self) -> &'static str {
        match self {
            Family::Debian => "deb",
            Family::El => "rpm",
        }
    }

    /// The name of the family as docs and messages write it.
    pub fn label(self) -> &'static str {
        match self {
            Family::Debian => "Debian/Ubuntu (apt)",
            Family::El => "EL 8/9 (dnf)",
        }
    }
}

/// The Kubernetes packages pinned to the cluster's version.
pub const PINNED: [&str; 3] = ["kubeadm", "kubelet", "kubectl"];
/// The Kubernetes repository's other packages `up` installs (unpinned: the minor's repository ships
/// the matching ones) and holds: crictl, and the CNI reference plugins in `/opt/cni/bin` (which the
/// kubelet package depends on, containerd runs `loopback` from for every pod and the builtin CNI
/// chains `portmap` from).
pub const EXTRAS: [&str; 2] = ["cri-tools", "kubernetes-cni"];

/// The apt source of the Kubernetes repository.
pub const APT_LIST: &str = "/etc/apt/sources.list.d/kubernetes.list";
/// Its keyring, as upstream documents it.
pub const APT_KEYRING: &str = "/etc/apt/keyrings/kubernetes-apt-keyring.gpg";
/// The apt source of CRI-O's repository.
pub const CRIO_APT_LIST: &str = "/etc/apt/sources.list.d/cri-o.list";
/// Its keyring.
pub const CRIO_APT_KEYRING: &str = "/etc/apt/keyrings/cri-o-apt-keyring.gpg";
/// The yum repository of Kubernetes.
pub const YUM_REPO: &str = "/etc/yum.repos.d/kubernetes.repo";
/// The yum repository of CRI-O.
pub const CRIO_YUM_REPO: &str = "/etc/yum.repos.d/cri-o.repo";
/// apt's per-host CA setting for the site mirror.
pub const APT_MIRROR_CONF: &str = "/etc/apt/apt.conf.d/90clusterctl-package-mirror";
/// The site mirror's CA on the nodes (kept by `destroy` without `--purge`, as the repositories are).
pub const MIRROR_CA: &str = "/etc/clusterctl-packages/mirror-ca.crt";
/// What the node's packages were before the first `up` changed them ([`script::record`]), and the
/// marker of the containerd archive; kept by `destroy` without `--purge`.
pub const RECORD_DIR: &str = "/var/lib/clusterctl-packages";
/// The unit of the containerd release archive (where containerd's getting-started guide puts it).
pub const CONTAINERD_ARCHIVE_UNIT: &str = "/usr/local/lib/systemd/system/containerd.service";
/// The files a containerd release archive and runc place (removed by `destroy --purge` when `up`
/// placed them).
pub const ARCHIVE_FILES: &[&str] = &[
    "/usr/local/bin/containerd",
    "/usr/local/bin/containerd-shim-runc-v2",
    "/usr/local/bin/containerd-stress",
    "/usr/local/bin/ctr",
    "/usr/local/sbin/runc",
    CONTAINERD_ARCHIVE_UNIT,
];

/// `(major, minor)` of a Kubernetes version (`1.34.4` or `v1.34.4`).
pub fn minor_of(version: &semver::Version) -> (u64, u64) {
    (version.major, version.minor)
}

/// The Debian/OCI architecture of `uname -m` (`x86_64` → `amd64`), when packages exist for it.
pub fn arch_of(uname_m: &str) -> Option<&'static str> {
    match uname_m.trim() {
        "x86_64" | "amd64" => Some("amd64"),
        "aarch64" | "arm64" => Some("arm64"),
        "ppc64le" => Some("ppc64le"),
        "s390x" => Some("s390x"),
        _ => None,
    }
}
