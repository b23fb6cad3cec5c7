//! Pinned third-party CNI versions: their images and the upstream files an install needs, each with
//! the sha256 it must have and where that digest was read.
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

use crate::output::RenderError;
use clusterctl_spec::model::CniPlugin;
use clusterctl_spec::ValidCluster;

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

/// The Calico images the operator runs for an `Installation` plus `APIServer` on Linux, all
/// `<quay.io|docker.io>/calico/<name>:<version>` (tigera/operator `pkg/components/calico.go`).
pub const CALICO_COMPONENTS: &[&str] = &[
    "apiserver",
    "cni",
    "csi",
    "kube-controllers",
    "node",
    "node-driver-registrar",
    "pod2daemon-flexvol",
    "typha",
];

/// Registry host of Calico's images for `version` (quay.io from v3.30, docker.io before).
fn calico_host(version: &str) -> &'static str {
    let minor = version
        .trim_start_matches("v3.")
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    match minor {
        Some(m) if version.starts_with("v3.") && m < 30 => "docker.io",
        _ => "quay.io",
    }
}

/// Registry path of flannel's images for `version` (ghcr.io/flannel-io from v0.27, docker.io/flannel before).
fn flannel_repo(version: &str) -> &'static str {
    let minor = version
        .trim_start_matches("v0.")
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    match minor {
        Some(m) if version.starts_with("v0.") && m < 27 => "docker.io/flannel",
        _ => "ghcr.io/flannel-io",
    }
}

/// An upstream file a CNI install needs: where it is downloaded from and the sha256 it must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamFile {
    /// The file's name, the key under which the cluster file may name another source
    /// (`cni.sources[].name`) and under which the air-gap bundle carries it: `operator-crds.yaml`,
    /// `tigera-operator.yaml`, `cilium.tgz`, `helm-linux-<arch>.tar.gz`, `kube-flannel.yml`.
    pub name: String,
    /// The upstream release address of the pinned version.
    pub url: String,
    /// The pinned sha256 (hex); `None` when no citable digest is known for this version (a download
    /// then needs the cluster file's digest or its acceptance of an unverified file).
    pub sha256: Option<String>,
    /// Where the digest was read, for messages and `docs/cni.md`.
    pub digest_source: String,
}

/// The resolved pin of the cluster's CNI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pins {
    /// Calico and its operator.
    Calico {
        /// Calico version, e.g. `v3.32.1`.
        version: String,
        /// tigera-operator version.
        operator: String,
    },
    /// Cilium.
    Cilium {
        /// Cilium version, e.g. `v1.20.0`.
        version: String,
    },
    /// flannel.
    Flannel {
        /// flannel version.
        version: String,
        /// flannel-cni-plugin tag.
        cni_plugin: String,
    },
}

/// The file name under which the Helm archive for `arch` is carried (`helm-linux-amd64.tar.gz`).
pub fn helm_file_name(arch: &str) -> String {
    format!("helm-linux-{arch}.tar.gz")
}

/// The pinned Helm archive for the nodes' `arch` (`amd64`, `arm64`; others get no digest).
pub fn helm_file(arch: &str) -> UpstreamFile {
    UpstreamFile {
        name: helm_file_name(arch),
        url: format!("https://get.helm.sh/helm-{HELM_VERSION}-linux-{arch}.tar.gz"),
        sha256: HELM_SHA256
            .iter()
            .find(|(a, _)| *a == arch)
            .map(|(_, d)| d.to_string()),
        digest_source: format!(
            "kubernetes-sigs/kubespray@{HELM_DIGESTS_COMMIT}:roles/kubespray_defaults/vars/main/checksums.yml (helm_archive_checksums.{arch}.{})",
            HELM_VERSION.trim_start_matches('v')
        ),
    }
}

impl Pins {
    /// (short name, upstream reference) of every image of this CNI.
    pub fn images(&self) -> Vec<(String, String)> {
        match self {
            Pins::Calico { version, operator } => {
                let mut v = vec![(
                    "tigera/operator".to_string(),
                    format!("quay.io/tigera/operator:{operator}"),
                )];
                let host = calico_host(version);
                for c in CALICO_COMPONENTS {
                    v.push((
                        format!("calico/{c}"),
                        format!("{host}/calico/{c}:{version}"),
                    ));
                }
                v
            }
            Pins::Cilium { version } => vec![
                (
                    "cilium/cilium".to_string(),
                    format!("quay.io/cilium/cilium:{version}"),
                ),
                (
                    "cilium/operator-generic".to_string(),
                    format!("quay.io/cilium/operator-generic:{version}"),
                ),
            ],
            Pins::Flannel {
                version,
                cni_plugin,
            } => {
                let repo = flannel_repo(version);
                vec![
                    (
                        "flannel/flannel".to_string(),
                        format!("{repo}/flannel:{version}"),
                    ),
                    (
                        "flannel/flannel-cni-plugin".to_string(),
                        format!("{repo}/flannel-cni-plugin:{cni_plugin}"),
                    ),
                ]
            }
        }
    }

    /// The upstream files an install of this CNI needs, in the order they are used (Cilium's chart;
    /// the Helm archive is [`helm_file`], chosen by the nodes' architecture).
    pub fn files(&self) -> Vec<UpstreamFile> {
        match self {
            Pins::Calico { version, .. } => {
                let rel = CALICO.iter().find(|r| r.version == version);
                ["operator-crds.yaml", "tigera-operator.yaml"]
                    .iter()
                    .map(|name| {
                        // The CRDs file is named per release; it is carried as operator-crds.yaml.
                        let file = match rel {
                            Some(r) if *name == "operator-crds.yaml" => r.crds_file,
                            _ => name,
                        };
                        (name, file)
                    })
                    .map(|(name, file)| UpstreamFile {
                        name: name.to_string(),
                        url: format!("https://raw.githubusercontent.com/projectcalico/calico/{version}/manifests/{file}"),
                        sha256: rel.map(|r| {
                            if *name == "operator-crds.yaml" {
                                r.crds_sha256.to_string()
                            } else {
                                r.operator_sha256.to_string()
                            }
                        }),
                        digest_source: match rel {
                            Some(r) => format!("projectcalico/calico@{} ({version}):manifests/{file}", r.commit),
                            None => "none known".to_string(),
                        },
                    })
                    .collect()
            }
            Pins::Cilium { version } => {
                let v = version.trim_start_matches('v');
                let chart = CILIUM.iter().find(|c| c.version == version);
                vec![UpstreamFile {
                    name: "cilium.tgz".to_string(),
                    url: format!("https://helm.cilium.io/cilium-{v}.tgz"),
                    sha256: chart.map(|c| c.sha256.to_string()),
                    digest_source: match chart {
                        Some(_) => format!(
                            "cilium/charts@{CILIUM_CHARTS_COMMIT}:cilium-{v}.tgz (index.yaml lists the same digest)"
                        ),
                        None => "none known".to_string(),
                    },
                }]
            }
            Pins::Flannel { version, .. } => {
                let rel = FLANNEL.iter().find(|r| r.version == version);
                vec![UpstreamFile {
                    name: "kube-flannel.yml".to_string(),
                    url: format!("https://raw.githubusercontent.com/flannel-io/flannel/{version}/Documentation/kube-flannel.yml"),
                    sha256: rel.map(|r| r.manifest_sha256.to_string()),
                    digest_source: match rel {
                        Some(r) => format!(
                            "flannel-io/flannel@{} ({version}):Documentation/kube-flannel.yml",
                            r.commit
                        ),
                        None => "none known".to_string(),
                    },
                }]
            }
        }
    }
}

/// `f` as the cluster file has it: replaced by the `spec.networking.cni.sources` entry of the same
/// name — its address, and its sha256 when given (else the pinned one) — or `f` itself.
pub fn with_sources(cluster: &ValidCluster, f: UpstreamFile) -> UpstreamFile {
    let cni = &cluster.spec().networking.cni;
    match cni.sources.iter().find(|s| s.name == f.name) {
        Some(s) => UpstreamFile {
            url: s.url.clone(),
            sha256: s
                .sha256
                .as_ref()
                .map(|h| h.to_ascii_lowercase())
                .or(f.sha256),
            digest_source: if s.sha256.is_some() {
                "spec.networking.cni.sources".to_string()
            } else {
                f.digest_source
            },
            ..f
        },
        None => f,
    }
}

/// Every upstream file an install of `cluster`'s CNI needs on nodes of the Debian-style
/// architectures `arches` (`amd64`, `arm64`), after the file's `cni.sources`: the pinned files
/// ([`Pins::files`]) and, for Cilium, the Helm archive of each architecture. What `airgap bundle`
/// carries. Empty for builtin, kindnet and none. Errors: as [`pins`].
pub fn cluster_files(
    cluster: &ValidCluster,
    arches: &[&str],
) -> Result<Vec<UpstreamFile>, RenderError> {
    let Some(p) = pins(cluster)? else {
        return Ok(Vec::new());
    };
    let mut v: Vec<UpstreamFile> = p.files();
    if matches!(p, Pins::Cilium { .. }) {
        let mut seen = std::collections::BTreeSet::new();
        for a in arches {
            if seen.insert(*a) {
                v.push(helm_file(a));
            }
        }
    }
    Ok(v.into_iter().map(|f| with_sources(cluster, f)).collect())
}

fn norm(v: &str) -> String {
    if v.starts_with('v') {
        v.to_string()
    } else {
        format!("v{v}")
    }
}

/// The pins of `cluster`'s CNI: `None` for builtin, kindnet and none (no upstream files or images
/// pulled by clusterctl). Errors: [`RenderError::UnknownCniVersion`] for a Calico or flannel version
/// outside the tables above (their operator / CNI-plugin image tags are only known for those).
pub fn pins(cluster: &ValidCluster) -> Result<Option<Pins>, RenderError> {
    let cni = &cluster.spec().networking.cni;
    let want = cni.version.as_deref().map(norm);
    let unknown =
        |plugin: &'static str, version: String, list: Vec<&str>| RenderError::UnknownCniVersion {
            plugin,
            version,
            supported: list.join(", "),
        };
    match cni.plugin {
        CniPlugin::Calico => {
            let v = want.unwrap_or_else(|| CALICO[0].version.to_string());
            match CALICO.iter().find(|r| r.version == v) {
                Some(r) => Ok(Some(Pins::Calico {
                    version: r.version.to_string(),
                    operator: r.operator.to_string(),
                })),
                None => Err(unknown(
                    "calico",
                    v,
                    CALICO.iter().map(|x| x.version).collect(),
                )),
            }
        }
        CniPlugin::Cilium => Ok(Some(Pins::Cilium {
            version: want.unwrap_or_else(|| CILIUM_DEFAULT.to_string()),
        })),
        CniPlugin::Flannel => {
            let v = want.unwrap_or_else(|| FLANNEL[0].version.to_string());
            match FLANNEL.iter().find(|r| r.version == v) {
                Some(r) => Ok(Some(Pins::Flannel {
                    version: r.version.to_string(),
                    cni_plugin: r.cni_plugin.to_string(),
                })),
                None => Err(unknown(
                    "flannel",
                    v,
                    FLANNEL.iter().map(|x| x.version).collect(),
                )),
            }
        }
        CniPlugin::Builtin | CniPlugin::Kindnet | CniPlugin::None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pinned_digest_is_64_hex_digits_and_every_table_has_a_default() {
        let all = CALICO
            .iter()
            .flat_map(|r| [r.crds_sha256, r.operator_sha256])
            .chain(CILIUM.iter().map(|c| c.sha256))
            .chain(HELM_SHA256.iter().map(|(_, d)| *d))
            .chain(FLANNEL.iter().map(|r| r.manifest_sha256));
        for d in all {
            assert!(
                d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()),
                "{d}"
            );
        }
        assert_eq!(CILIUM[0].version, CILIUM_DEFAULT);
        assert!(!CALICO.is_empty() && !FLANNEL.is_empty());
    }

    #[test]
    fn files_name_the_release_addresses_and_unknown_versions_have_no_digest() {
        let p = Pins::Calico {
            version: "v3.32.1".into(),
            operator: "v1.42.3".into(),
        };
        let f = p.files();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].name, "operator-crds.yaml");
        assert_eq!(
            f[0].url,
            "https://raw.githubusercontent.com/projectcalico/calico/v3.32.1/manifests/v1_crd_projectcalico_org.yaml"
        );
        assert!(f.iter().all(|x| x.sha256.is_some()));
        let c = Pins::Cilium {
            version: "v1.20.2".into(),
        }
        .files();
        assert_eq!(c[0].url, "https://helm.cilium.io/cilium-1.20.2.tgz");
        assert_eq!(c[0].sha256, None);
        let h = helm_file("arm64");
        assert_eq!(h.url, "https://get.helm.sh/helm-v3.18.4-linux-arm64.tar.gz");
        assert!(h.sha256.is_some());
        assert_eq!(helm_file("s390x").sha256, None);
    }
}
