//! The pinned third-party CNI versions (Calico with its tigera-operator, Cilium's chart and the Helm
//! that installs it, flannel): each release with the sha256 its upstream files must have and where
//! that digest was read. Validation refuses a `spec.networking.cni.version` outside these tables
//! (Calico, flannel) or, for Cilium, one without a pinned chart digest unless the file gives one
//! (`cni.sources`) or accepts it unverified; `clusterctl_render::cni::versions` turns a release into
//! its download addresses and images.
//!
//! Defaults: Calico v3.32.1 (tigera-operator v1.42.3), Cilium chart 1.20.0 installed with Helm v3.18.4,
//! flannel v0.28.4 (flannel-cni-plugin v1.9.1-flannel1). The files are never copied into this
//! repository: `up` downloads them from the addresses below (or takes them from the air-gap bundle, or
//! from the cluster file's own `cni.sources`) and refuses any whose sha256 differs.
//!
//! Where each digest was read (every one is the sha256 of a file kept in a project's git at the
//! commit named; the download address serves that very file):
//! * Calico CRDs and `tigera-operator.yaml`: `manifests/` of projectcalico/calico at the release tag,
//!   served by `raw.githubusercontent.com/projectcalico/calico/<tag>/manifests/…` — the addresses
//!   Calico's operator install documents from v3.30 (CRDs in their own file from v3.30: `operator-crds.yaml`,
//!   in v3.32 `v1_crd_projectcalico_org.yaml`, see [`CalicoRelease::crds_file`]). The v3.32.1 digests
//!   are also the ones independent public install scripts record for those two files at commit
//!   0ca9d1b9; the v3.31.7 and v3.30.7 digests were not cross-checked this way.
//!   Image names: the Deployment in `tigera-operator.yaml` (the operator) and the operator's own
//!   component table (tigera/operator `pkg/components/calico.go` at the operator tag; registry `quay.io/`,
//!   path `calico/`).
//! * Cilium chart `cilium-<version>.tgz`: cilium/charts (the repository behind `helm.cilium.io`) at commit
//!   009b5e9582173785abfdedb3fda7a26d85ab7aca, whose `index.yaml` lists the same digest.
//! * Helm `helm-<version>-linux-<arch>.tar.gz` (get.helm.sh): kubernetes-sigs/kubespray
//!   `roles/kubespray_defaults/vars/main/checksums.yml` (`helm_archive_checksums`) at commit
//!   46dbdd3994b32640bcd806b0097f50e8fdf1d514.
//! * flannel `kube-flannel.yml`: `Documentation/kube-flannel.yml` of flannel-io/flannel at the release
//!   tag (served by `raw.githubusercontent.com/flannel-io/flannel/<tag>/Documentation/kube-flannel.yml`;
//!   the same bytes are in the Go module `github.com/flannel-io/flannel@<tag>`). The release page's
//!   `kube-flannel.yml` is made by `kubectl kustomize` at release time and kept in no repository, so its
//!   digest cannot be read from a citable source: the git copy at the tag is used instead.

/// One pinned Calico release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CalicoRelease {
    /// Calico version, e.g. `v3.32.1`.
    pub version: &'static str,
    /// The tigera-operator version its `tigera-operator.yaml` runs.
    pub operator: &'static str,
    /// The release's file of CRDs (operator.tigera.io and crd.projectcalico.org) under `manifests/`:
    /// `operator-crds.yaml` from v3.30, `v1_crd_projectcalico_org.yaml` in v3.32 (its first line:
    /// "crd.projectcalico.org/v1 and operator.tigera.io/v1 APIs"). Carried and named in
    /// `cni.sources` as `operator-crds.yaml` whatever the release calls it.
    pub crds_file: &'static str,
    /// sha256 of `manifests/<crds_file>` at the tag.
    pub crds_sha256: &'static str,
    /// sha256 of `manifests/tigera-operator.yaml` at the tag.
    pub operator_sha256: &'static str,
    /// The commit of the tag (where the digests were read).
    pub commit: &'static str,
}

/// Calico releases, newest first (the first is the default). From v3.30 the CRDs are in their own file.
pub const CALICO: &[CalicoRelease] = &[
    CalicoRelease {
        version: "v3.32.1",
        operator: "v1.42.3",
        crds_file: "v1_crd_projectcalico_org.yaml",
        crds_sha256: "192f8b2d934ef24b62e86b7e1a6e1762d1c8af26a916f78057bc13fa5ed60f71",
        operator_sha256: "f18e073794207d372606bc3ea6f8fd73972f86d6828f4ba666dfe0d4aa8ab07f",
        commit: "0ca9d1b93644778cafdf1812f3dda02ac0c361e8",
    },
    CalicoRelease {
        version: "v3.31.7",
        operator: "v1.40.15",
        crds_file: "operator-crds.yaml",
        crds_sha256: "380414d5756e9a1af29ddb1ad70cada07aa344ae7a2680ba7355248621f8adbf",
        operator_sha256: "092c10b3d0cb73617aca51367ca59755348f4647e6d2e63fa4e5b81266203214",
        commit: "94bd1d5b0e04459d4d1c83653e0335a9201248b8",
    },
    CalicoRelease {
        version: "v3.30.7",
        operator: "v1.38.13",
        crds_file: "operator-crds.yaml",
        crds_sha256: "53b2e2791915809db8016b72d4ceac9d1dd529d053984eb203c06b94c6639ee3",
        operator_sha256: "bcc9f89c1847ee5237c29c1b7e4a67c86296cb0139619093df6ca98ec14abf18",
        commit: "74485ea40911c4868ae83ddb5da489c1533d1dba",
    },
];

/// One pinned Cilium chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CiliumChart {
    /// Cilium version, e.g. `v1.20.0` (chart version without the `v`).
    pub version: &'static str,
    /// sha256 of `cilium-<version>.tgz`.
    pub sha256: &'static str,
}

/// Cilium charts with a pinned digest, newest first (the first is the default). Other versions are
/// accepted with a digest given in the cluster file (`cni.sources`), or unverified when the file
/// accepts that (`cni.acceptUnverified`).
pub const CILIUM: &[CiliumChart] = &[
    CiliumChart {
        version: "v1.20.0",
        sha256: "c5f013912360d1a334f44ef25f36da59ba3414cdb48f466ee12d0c4fdff27883",
    },
    CiliumChart {
        version: "v1.19.6",
        sha256: "21c43cf53841f9ab0375047d95aa4c64051ea52bbd2c679416e6408f5f1c9179",
    },
    CiliumChart {
        version: "v1.18.2",
        sha256: "39b62a72f0892dd16548bd08ee97d5db2e975f7c1f57155578a144186e22992f",
    },
    CiliumChart {
        version: "v1.17.6",
        sha256: "96f6def2c6e913f0160a0d7296f2dae78c16aef0cb4c099384f3c72b2f5a6db2",
    },
];
/// The default Cilium version.
pub const CILIUM_DEFAULT: &str = "v1.20.0";
/// The commit of cilium/charts where the chart digests were read.
pub const CILIUM_CHARTS_COMMIT: &str = "009b5e9582173785abfdedb3fda7a26d85ab7aca";

/// The Helm release `up` runs to install Cilium.
pub const HELM_VERSION: &str = "v3.18.4";
/// sha256 of `helm-v3.18.4-linux-<arch>.tar.gz` per architecture (kubespray's checksums, see module doc).
pub const HELM_SHA256: &[(&str, &str)] = &[
    (
        "amd64",
        "f8180838c23d7c7d797b208861fecb591d9ce1690d8704ed1e4cb8e2add966c1",
    ),
    (
        "arm64",
        "c0a45e67eef0c7416a8a8c9e9d5d2d30d70e4f4d3f7bea5de28241fffa8f3b89",
    ),
];
/// The commit of kubernetes-sigs/kubespray where the Helm digests were read.
pub const HELM_DIGESTS_COMMIT: &str = "46dbdd3994b32640bcd806b0097f50e8fdf1d514";

/// One pinned flannel release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlannelRelease {
    /// flannel version, e.g. `v0.28.4`.
    pub version: &'static str,
    /// The flannel-cni-plugin tag its manifest runs.
    pub cni_plugin: &'static str,
    /// sha256 of `Documentation/kube-flannel.yml` at the tag.
    pub manifest_sha256: &'static str,
    /// The commit of the tag.
    pub commit: &'static str,
}

/// flannel releases, newest first (the first is the default).
pub const FLANNEL: &[FlannelRelease] = &[
    FlannelRelease {
        version: "v0.28.4",
        cni_plugin: "v1.9.1-flannel1",
        manifest_sha256: "0bd380eb4954227c903bdea96dc9254650badd2d45ebe31978a47c3ffe2e9727",
        commit: "3adfe3e04407869b9f84be0a68a6cebb73df9c6e",
    },
    FlannelRelease {
        version: "v0.27.4",
        cni_plugin: "v1.8.0-flannel1",
        manifest_sha256: "2242ee218f3c3e724e4efe5f31826a3e38cfdabf334de41aee2b12b48fd4818d",
        commit: "20bdda0b238784fbfa623a1cf4c469645f531efa",
    },
    FlannelRelease {
        version: "v0.26.2",
        cni_plugin: "v1.6.0-flannel1",
        manifest_sha256: "8dc9145865eac5ba710b6cc4be52518195548a8122ea56a4a7ee25d83a812a6f",
        commit: "e810d96f557a0dc39125800f3d1ab56a0b9c40d1",
    },
];

/// A CNI version as the tables write it, with its `v` (`3.32.1` → `v3.32.1`; `v3.32.1` as it is): the
/// one place the file's `cni.version` is compared in.
pub fn tagged(version: &str) -> String {
    if version.starts_with('v') {
        version.to_string()
    } else {
        format!("v{version}")
    }
}
