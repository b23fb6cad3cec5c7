//! Pinned CNI versions and their images. Defaults: Calico v3.32.2 (tigera-operator v1.42.6), Cilium
//! v1.18.2 (agent + operator-generic; Envoy embedded in the agent, `envoy.enabled: false`; any Cilium
//! version works, the image names do not change), flannel v0.27.4 (flannel-cni-plugin v1.8.0-flannel1).
//! Image names from the projects' release manifests: projectcalico/calico `manifests/tigera-operator.yaml`
//! (Calico images on quay.io from v3.30, docker.io before), cilium/cilium
//! `install/kubernetes/cilium/values.yaml`, flannel-io/flannel `Documentation/kube-flannel.yml` (ghcr.io
//! from v0.27, docker.io before).

use crate::output::RenderError;
use clusterctl_spec::model::CniPlugin;
use clusterctl_spec::ValidCluster;

/// Calico versions with their tigera-operator version.
pub const CALICO: &[(&str, &str)] = &[
    ("v3.32.2", "v1.42.6"),
    ("v3.31.3", "v1.40.3"),
    ("v3.31.2", "v1.40.2"),
    ("v3.29.1", "v1.36.2"),
];
/// The default Cilium version (agent and operator share the tag; any version is accepted).
pub const CILIUM_DEFAULT: &str = "v1.18.2";
/// flannel versions with their flannel-cni-plugin tag.
pub const FLANNEL: &[(&str, &str)] = &[
    ("v0.27.4", "v1.8.0-flannel1"),
    ("v0.26.2", "v1.6.0-flannel1"),
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

/// The Calico images besides the operator, all `<quay.io|docker.io>/calico/<name>:<version>`.
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

/// The resolved pin of the cluster's CNI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pins {
    /// Calico and its operator.
    Calico {
        /// Calico version, e.g. `v3.29.1`.
        version: String,
        /// tigera-operator version.
        operator: String,
    },
    /// Cilium.
    Cilium {
        /// Cilium version, e.g. `v1.16.5`.
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
}

fn norm(v: &str) -> String {
    if v.starts_with('v') {
        v.to_string()
    } else {
        format!("v{v}")
    }
}

/// The pins of `cluster`'s CNI: `None` for builtin, kindnet and none (no images pulled by clusterctl).
/// Errors: [`RenderError::UnknownCniVersion`] for a version outside the tables above.
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
            let v = want.unwrap_or_else(|| CALICO[0].0.to_string());
            match CALICO.iter().find(|(c, _)| *c == v) {
                Some((c, o)) => Ok(Some(Pins::Calico {
                    version: c.to_string(),
                    operator: o.to_string(),
                })),
                None => Err(unknown("calico", v, CALICO.iter().map(|x| x.0).collect())),
            }
        }
        CniPlugin::Cilium => Ok(Some(Pins::Cilium {
            version: want.unwrap_or_else(|| CILIUM_DEFAULT.to_string()),
        })),
        CniPlugin::Flannel => {
            let v = want.unwrap_or_else(|| FLANNEL[0].0.to_string());
            match FLANNEL.iter().find(|(f, _)| *f == v) {
                Some((f, p)) => Ok(Some(Pins::Flannel {
                    version: f.to_string(),
                    cni_plugin: p.to_string(),
                })),
                None => Err(unknown("flannel", v, FLANNEL.iter().map(|x| x.0).collect())),
            }
        }
        CniPlugin::Builtin | CniPlugin::Kindnet | CniPlugin::None => Ok(None),
    }
}
