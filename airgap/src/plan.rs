//! From a validated cluster file to what a bundle carries: the image list (taken from
//! `clusterctl_render::images`, the same plan `up` uses, plus kubeadm's images of every
//! `airgap.extraVersions` entry), the platforms, and the packages of `airgap.packages`; and back from
//! a bundle to what one node needs: the images of the cluster's current version its role runs
//! ([`node_images`]) matched to the bundle's entries by source reference ([`select`]).

use crate::bundle::{BundleImage, BundleManifest};
use crate::error::{AirgapError, Result};
use crate::oci::Platform;
use crate::pull::ImageRequest;
use crate::reference;
use clusterctl_spec::kubeadm_images::KubeadmImages;
use clusterctl_spec::model::KubeProxyMode;
use clusterctl_spec::ValidCluster;
use serde::Serialize;

/// One line of `clusterctl airgap images` (JSON: `{component, source, pull, controlPlaneOnly}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedImage {
    /// What uses it (`kube-apiserver`, `coredns`, `kube-vip`, `preload`, `v1.35.0 etcd` for an
    /// `airgap.extraVersions` entry…).
    pub component: String,
    /// Upstream reference.
    pub source: String,
    /// Reference nodes pull (mirror reference, or the source without a mirror).
    pub pull: String,
    /// True when only control-plane nodes need it (`clusterctl_render::images::CONTROL_PLANE_ONLY`:
    /// kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kube-vip); a worker needs the
    /// others.
    pub control_plane_only: bool,
}

/// What `clusterctl airgap images` lists: [`list_images`] with `source` and `pull` fully qualified
/// (`cka-api:v4` → `docker.io/library/cka-api:v4`, the name the bundle stores and containerd pulls),
/// then, for the docker provider, the node image (component `node-image`: pulled by this machine's
/// Docker engine, never by the nodes, so it is not mirrored) and, when the cluster has one, the API
/// load balancer's image (component `load-balancer`, pulled by this machine's Docker engine too). A
/// reference that does not parse is listed as written.
pub fn listed_images(cluster: &ValidCluster) -> Vec<ListedImage> {
    let qualified = |r: &str| {
        reference::ImageRef::parse(r)
            .map(|r| r.to_string())
            .unwrap_or_else(|_| r.to_string())
    };
    let mut list: Vec<ListedImage> = list_images(cluster)
        .into_iter()
        .map(|mut i| {
            i.source = qualified(&i.source);
            i.pull = qualified(&i.pull);
            i
        })
        .collect();
    if cluster.provider() == clusterctl_spec::model::Provider::Docker {
        let node = qualified(&cluster.docker_node_image());
        list.push(ListedImage {
            component: "node-image".into(),
            pull: node.clone(),
            source: node,
            control_plane_only: false,
        });
    }
    if let Some(lb) = cluster.load_balancer() {
        let image = qualified(&lb.image);
        list.push(ListedImage {
            component: "load-balancer".into(),
            pull: image.clone(),
            source: image,
            control_plane_only: false,
        });
    }
    list
}

/// Why a source-registry override (`FROM=TO`) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    /// It is not `FROM=TO` with both sides given.
    #[error("expected FROM=TO, e.g. registry.k8s.io=127.0.0.1:5000")]
    Malformed {
        /// The override as given.
        given: String,
    },
    /// No image of the plan comes from `FROM` (a typo would otherwise silently pull from the
    /// internet).
    #[error("no image of the plan comes from {from:?} (registries: {}); give a registry host[:port] without scheme", registries.join(", "))]
    Unused {
        /// The override as given.
        given: String,
        /// Its `FROM`.
        from: String,
        /// The registries the plan's images come from.
        registries: Vec<String>,
    },
}

impl OverrideError {
    /// The override as given.
    pub fn given(&self) -> &str {
        match self {
            OverrideError::Malformed { given } | OverrideError::Unused { given, .. } => given,
        }
    }
}

/// Reads the source-registry overrides `given` (`FROM=TO`: fetch images of registry `FROM` from
/// `TO`) as `(FROM, TO)` pairs, in order. Errors: the first that is not `FROM=TO`, or whose `FROM` is
/// no registry the plan's images come from.
pub fn source_overrides(
    cluster: &ValidCluster,
    given: &[String],
) -> std::result::Result<Vec<(String, String)>, OverrideError> {
    let used: std::collections::BTreeSet<String> = list_images(cluster)
        .iter()
        .filter_map(|i| reference::ImageRef::parse(&i.source).ok())
        .map(|r| r.registry)
        .collect();
    let mut out = Vec::new();
    for o in given {
        let Some((from, to)) = o
            .split_once('=')
            .filter(|(f, t)| !f.is_empty() && !t.is_empty())
        else {
            return Err(OverrideError::Malformed { given: o.clone() });
        };
        if !used.contains(from) {
            return Err(OverrideError::Unused {
                given: o.clone(),
                from: from.to_string(),
                registries: used.iter().cloned().collect(),
            });
        }
        out.push((from.to_string(), to.to_string()));
    }
    Ok(out)
}

/// The images of the cluster's current version, in render order (no extra versions).
fn current_images(cluster: &ValidCluster) -> Vec<ListedImage> {
    clusterctl_render::images(cluster)
        .into_iter()
        .map(|i| ListedImage {
            pull: i.pull_ref().to_string(),
            component: i.component,
            source: i.source,
            control_plane_only: i.control_plane_only,
        })
        .collect()
}

/// Every image the cluster needs, in render order, then the extra versions' kubeadm images
/// (duplicates by source dropped).
pub fn list_images(cluster: &ValidCluster) -> Vec<ListedImage> {
    let mut out = current_images(cluster);
    let base = KubeadmImages::new(cluster);
    let kube_proxy = cluster.spec().networking.kube_proxy != KubeProxyMode::Disabled;
    for v in cluster.extra_versions() {
        for (component, source, pull) in base.at_version(v).list(kube_proxy) {
            out.push(ListedImage {
                component: format!("{} {component}", v.tag()),
                source,
                pull,
                control_plane_only: clusterctl_render::images::control_plane_only(component),
            });
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|i| seen.insert(i.source.clone()));
    out
}

/// The images a node of the cluster needs at the cluster's CURRENT version (`spec.kubernetesVersion`;
/// never the `airgap.extraVersions` images, which wait for `upgrade --to`), in render order: every
/// image for a control plane (`control_plane` true), only those not [`ListedImage::control_plane_only`]
/// for a worker (kube-proxy unless disabled, CoreDNS, pause, the CNI's images, preloads).
pub fn node_images(cluster: &ValidCluster, control_plane: bool) -> Vec<ListedImage> {
    let mut out = current_images(cluster);
    out.retain(|i| control_plane || !i.control_plane_only);
    out
}

/// The reference nodes pull each image of `cluster`'s plan by (every version: `airgap images`' `pull`
/// column), keyed by the normalised source reference: the file's mirror prefix applied, or the
/// source itself without a mirror.
pub fn pull_names(cluster: &ValidCluster) -> std::collections::BTreeMap<String, String> {
    list_images(cluster)
        .into_iter()
        .map(|i| (normalised(&i.source), i.pull))
        .collect()
}

/// `images` (bundle entries) renamed to what the nodes pull: an entry whose normalised source is in
/// `names` (from [`pull_names`]) gets that name as its `mirror`, so a bundle written under another
/// mirror setting than the file's loads under the names kubelet and kubeadm ask for. Entries not in
/// `names` keep their name.
pub fn renamed(
    images: Vec<BundleImage>,
    names: &std::collections::BTreeMap<String, String>,
) -> Vec<BundleImage> {
    images
        .into_iter()
        .map(|mut i| {
            if let Some(n) = names.get(&normalised(&i.source)) {
                // As the runtime stores it (`cka-api:v4` → `docker.io/library/cka-api:v4`).
                i.mirror = normalised(n);
            }
            i
        })
        .collect()
}

/// `s` normalised as an image reference (`nginx` → `docker.io/library/nginx:latest`), or `s` itself
/// when it does not parse.
fn normalised(s: &str) -> String {
    reference::parse(s)
        .map(|r| r.to_string())
        .unwrap_or_else(|_| s.to_string())
}

/// The bundle's entries for the upstream references `sources`, matched by normalised source
/// reference, in the order of `sources` (duplicates once). Errors: `Err(missing)` with every source
/// the bundle does not carry, in the order given.
pub fn select(
    manifest: &BundleManifest,
    sources: &[String],
) -> std::result::Result<Vec<BundleImage>, Vec<String>> {
    let by_source: std::collections::BTreeMap<String, &BundleImage> = manifest
        .images
        .iter()
        .map(|i| (normalised(&i.source), i))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for s in sources {
        let key = normalised(s);
        if !seen.insert(key.clone()) {
            continue;
        }
        match by_source.get(&key) {
            Some(i) => found.push((*i).clone()),
            None => missing.push(s.clone()),
        }
    }
    if missing.is_empty() {
        Ok(found)
    } else {
        Err(missing)
    }
}

/// The pull requests for `images`. Errors: a reference that does not parse.
pub fn requests(images: &[ListedImage]) -> Result<Vec<ImageRequest>> {
    images
        .iter()
        .map(|i| {
            Ok(ImageRequest {
                source: reference::parse(&i.source)?,
                mirror: reference::parse(&i.pull)?,
            })
        })
        .collect()
}

/// `airgap.platforms` parsed (default `linux/amd64`). Errors: an entry that is not `os/arch[/variant]`.
pub fn platforms(cluster: &ValidCluster) -> Result<Vec<Platform>> {
    let list = cluster
        .spec()
        .airgap
        .as_ref()
        .map(|a| a.platforms.clone())
        .unwrap_or_else(clusterctl_spec::model::default_platforms);
    list.iter()
        .map(|p| {
            Platform::parse(p).ok_or_else(|| AirgapError::Manifest {
                what: "airgap.platforms".into(),
                reason: format!("{p:?} is not os/arch[/variant]"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;

    fn profile(name: &str) -> ValidCluster {
        let loaded = clusterctl_spec::from_profile(name)
            .unwrap_or_else(|d| panic!("profile {name}: {}", d.summary()));
        clusterctl_spec::validate(&loaded)
            .unwrap_or_else(|d| panic!("profile {name}: {}", d.summary()))
            .cluster
    }

    fn entry(source: &str) -> BundleImage {
        BundleImage {
            source: source.into(),
            mirror: format!("mirror.example.com/{source}"),
            digest: Digest::of(source.as_bytes()),
            source_digest: Digest::of(source.as_bytes()),
            media_type: crate::oci::OCI_MANIFEST.into(),
            size: 1,
            platforms: vec![],
        }
    }

    #[test]
    fn workers_get_no_control_plane_only_image_and_nobody_the_extra_versions() {
        let c = profile("ha-airgap");
        let tag = c.version_info().tag();
        let extra: Vec<String> = c.extra_versions().iter().map(|v| v.tag()).collect();
        assert!(!extra.is_empty(), "ha-airgap carries an extra version");
        let all = list_images(&c);
        // The listing marks control-plane-only images, of the extra versions too.
        for i in &all {
            let base = i.component.rsplit(' ').next().unwrap_or_default();
            assert_eq!(
                i.control_plane_only,
                clusterctl_render::images::control_plane_only(base),
                "{i:?}"
            );
        }
        assert!(all
            .iter()
            .any(|i| i.control_plane_only && i.component.starts_with(&extra[0])));
        let json = serde_json::to_value(&all[0]).expect("json");
        assert_eq!(json["controlPlaneOnly"], serde_json::json!(true), "{json}");

        let cp = node_images(&c, true);
        let worker = node_images(&c, false);
        let cp_components: Vec<&str> = cp.iter().map(|i| i.component.as_str()).collect();
        for want in ["kube-apiserver", "etcd", "kube-vip", "coredns", "pause"] {
            assert!(cp_components.contains(&want), "{cp_components:?}");
        }
        assert!(worker.iter().all(|i| !i.control_plane_only), "{worker:?}");
        let w: Vec<&str> = worker.iter().map(|i| i.component.as_str()).collect();
        assert!(w.contains(&"coredns") && w.contains(&"pause"), "{w:?}");
        assert!(w.iter().any(|c| c.starts_with("cni:")), "{w:?}");
        for bad in [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "etcd",
            "kube-vip",
        ] {
            assert!(!w.contains(&bad), "{bad} on a worker: {w:?}");
        }
        // Current version only: every kubeadm image carries the current tag, none an extra one.
        for i in cp.iter().chain(&worker) {
            assert!(!i.component.starts_with('v'), "{i:?}");
            for e in &extra {
                if e != &tag {
                    assert!(!i.source.ends_with(&format!(":{e}")), "{i:?}");
                }
            }
        }
        assert!(cp.len() > worker.len() && cp.len() < all.len());
    }

    #[test]
    fn select_matches_normalised_sources_and_names_what_is_missing() {
        let manifest = BundleManifest {
            format: crate::bundle::BUNDLE_FORMAT.into(),
            cluster: "c".into(),
            kubernetes_version: "v1.34.1".into(),
            extra_versions: vec![],
            platforms: vec![],
            images: vec![
                entry("docker.io/library/nginx:1.27"),
                entry("registry.k8s.io/pause:3.10.1"),
            ],
            packages: vec![],
            binaries: vec![],
            upstream: vec![],
        };
        let got = select(
            &manifest,
            &[
                "registry.k8s.io/pause:3.10.1".to_string(),
                "nginx:1.27".to_string(),
                "docker.io/nginx:1.27".to_string(),
            ],
        )
        .expect("all carried");
        let sources: Vec<&str> = got.iter().map(|i| i.source.as_str()).collect();
        assert_eq!(
            sources,
            [
                "registry.k8s.io/pause:3.10.1",
                "docker.io/library/nginx:1.27"
            ]
        );
        let missing = select(
            &manifest,
            &[
                "registry.k8s.io/etcd:3.6.4-0".to_string(),
                "nginx:1.27".to_string(),
                "registry.k8s.io/kube-apiserver:v1.35.0".to_string(),
            ],
        )
        .expect_err("two missing");
        assert_eq!(
            missing,
            [
                "registry.k8s.io/etcd:3.6.4-0",
                "registry.k8s.io/kube-apiserver:v1.35.0"
            ]
        );
    }
}
