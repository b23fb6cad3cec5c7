//! Pinned third-party CNI versions: their images and the upstream files an install needs, each with
//! the sha256 it must have and where that digest was read.
//!
//! The tables themselves (releases, digests, the commits they were read at) are spec's
//! ([`clusterctl_spec::cni_versions`], so validation checks a version against them); this module maps
//! a release to its download addresses, files and images.

use crate::output::RenderError;
pub use clusterctl_spec::cni_versions::{
    CalicoRelease, CiliumChart, FlannelRelease, CALICO, CILIUM, CILIUM_CHARTS_COMMIT,
    CILIUM_DEFAULT, FLANNEL, HELM_DIGESTS_COMMIT, HELM_SHA256, HELM_VERSION,
};
use clusterctl_spec::model::CniPlugin;
use clusterctl_spec::ValidCluster;

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

/// The pins of `cluster`'s CNI: `None` for builtin, kindnet and none (no upstream files or images
/// pulled by clusterctl). Errors: [`RenderError::UnknownCniVersion`] for a Calico or flannel version
/// outside the tables above (their operator / CNI-plugin image tags are only known for those).
pub fn pins(cluster: &ValidCluster) -> Result<Option<Pins>, RenderError> {
    let cni = &cluster.spec().networking.cni;
    let want = cni
        .version
        .as_deref()
        .map(clusterctl_spec::cni_versions::tagged);
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
