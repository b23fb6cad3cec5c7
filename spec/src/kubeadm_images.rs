//! kubeadm's images: the one list of what kubeadm pulls for a Kubernetes version, with or without the
//! registry mirror. Computed from the version table ([`crate::versions`]) with kubeadm's own naming
//! rules (cmd/kubeadm/app/images/images.go: `GetKubernetesImage`, `GetEtcdImage`, `GetDNSImage` — the
//! `coredns/` sub-path is added only for the default registry), and used by validation (mirror
//! collisions), by render (the kubeadm config and the image list) and by airgap (extra versions), so
//! none of them can drift.

use crate::valid::ValidCluster;
use crate::versions::VersionInfo;

/// kubeadm's default registry (`registry.k8s.io`).
pub const DEFAULT_REGISTRY: &str = "registry.k8s.io";

/// The image settings of the kubeadm ClusterConfiguration and what kubeadm derives from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeadmImages {
    /// `imageRepository` (the mirror prefix), `None` = kubeadm's default registry.
    pub image_repository: Option<String>,
    /// `dns.imageRepository` (`<mirror>/coredns`), `None` without a mirror.
    pub dns_image_repository: Option<String>,
    /// `kubernetesVersion` / control-plane image tag, e.g. `v1.34.1`.
    pub version_tag: String,
    /// `etcd.local.imageTag`, pinned from the version table.
    pub etcd_tag: String,
    /// `dns.imageTag`, pinned from the version table.
    pub dns_tag: String,
    /// The pause tag of this version.
    pub pause_tag: String,
}

impl KubeadmImages {
    /// The values for `cluster`: its version, under its mirror when it has one.
    pub fn new(cluster: &ValidCluster) -> KubeadmImages {
        let prefix = cluster.mirror_prefix().map(str::to_string);
        KubeadmImages {
            dns_image_repository: prefix.as_ref().map(|p| format!("{p}/coredns")),
            image_repository: prefix,
            ..KubeadmImages::upstream(cluster.version_info())
        }
    }

    /// The values of version `v` without a mirror (kubeadm's defaults).
    pub fn upstream(v: &VersionInfo) -> KubeadmImages {
        KubeadmImages {
            image_repository: None,
            dns_image_repository: None,
            version_tag: v.tag(),
            etcd_tag: v.etcd.to_string(),
            dns_tag: v.coredns.to_string(),
            pause_tag: v.pause.to_string(),
        }
    }

    /// The same repositories (mirror or not) at version `v` (an `airgap.extraVersions` entry).
    pub fn at_version(&self, v: &VersionInfo) -> KubeadmImages {
        KubeadmImages {
            image_repository: self.image_repository.clone(),
            dns_image_repository: self.dns_image_repository.clone(),
            ..KubeadmImages::upstream(v)
        }
    }

    fn repo(&self) -> &str {
        self.image_repository.as_deref().unwrap_or(DEFAULT_REGISTRY)
    }

    /// kubeadm `GetKubernetesImage`: `<imageRepository>/<name>:<version>`.
    pub fn kubernetes_image(&self, name: &str) -> String {
        format!("{}/{}:{}", self.repo(), name, self.version_tag)
    }

    /// kubeadm `GetEtcdImage`: `<imageRepository>/etcd:<etcd tag>`.
    pub fn etcd_image(&self) -> String {
        format!("{}/etcd:{}", self.repo(), self.etcd_tag)
    }

    /// kubeadm `GetDNSImage`: `dns.imageRepository` if set, else `imageRepository`, plus `/coredns` when
    /// that is the default registry; then `/coredns:<tag>`.
    pub fn dns_image(&self) -> String {
        let repo = match (&self.dns_image_repository, &self.image_repository) {
            (Some(d), _) => d.clone(),
            (None, Some(r)) => r.clone(),
            (None, None) => format!("{DEFAULT_REGISTRY}/coredns"),
        };
        format!("{repo}/coredns:{}", self.dns_tag)
    }

    /// kubeadm `GetPauseImage`: `<imageRepository>/pause:<pause tag>` (also the sandbox image).
    pub fn pause_image(&self) -> String {
        format!("{}/pause:{}", self.repo(), self.pause_tag)
    }

    /// (component, upstream source, what kubeadm pulls) in `kubeadm config images list` order.
    pub fn list(&self, kube_proxy: bool) -> Vec<(&'static str, String, String)> {
        let up = KubeadmImages {
            image_repository: None,
            dns_image_repository: None,
            ..self.clone()
        };
        let mut out = Vec::new();
        for name in [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ] {
            out.push((name, up.kubernetes_image(name), self.kubernetes_image(name)));
        }
        if kube_proxy {
            out.push((
                "kube-proxy",
                up.kubernetes_image("kube-proxy"),
                self.kubernetes_image("kube-proxy"),
            ));
        }
        out.push(("coredns", up.dns_image(), self.dns_image()));
        out.push(("pause", up.pause_image(), self.pause_image()));
        out.push(("etcd", up.etcd_image(), self.etcd_image()));
        out
    }
}

// The version table's own view of the list, here so that `versions` needs nothing of this module.
impl VersionInfo {
    /// The upstream images kubeadm pulls for this version, as full references under `registry.k8s.io`, in
    /// the order of `kubeadm config images list`: kube-apiserver, kube-controller-manager,
    /// kube-scheduler, kube-proxy, coredns/coredns, pause, etcd (the one list,
    /// [`KubeadmImages`], without a mirror).
    pub fn kubeadm_images(&self) -> Vec<String> {
        KubeadmImages::upstream(self)
            .list(true)
            .into_iter()
            .map(|(_, source, _)| source)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::versions::{lookup, parse_version};

    fn info(v: &str) -> VersionInfo {
        parse_version(v)
            .and_then(|v| lookup(&v))
            .expect("supported")
    }

    #[test]
    fn kubeadm_naming_with_and_without_a_mirror() {
        let up = KubeadmImages::upstream(&info("v1.34.1"));
        assert_eq!(up.dns_image(), "registry.k8s.io/coredns/coredns:v1.12.1");
        let mirrored = KubeadmImages {
            image_repository: Some("m.example/lib".into()),
            dns_image_repository: Some("m.example/lib/coredns".into()),
            ..up.clone()
        };
        let list = mirrored.at_version(&info("v1.35.0")).list(false);
        assert!(!list.iter().any(|(c, _, _)| *c == "kube-proxy"));
        assert!(list.contains(&(
            "coredns",
            "registry.k8s.io/coredns/coredns:v1.13.1".to_string(),
            "m.example/lib/coredns/coredns:v1.13.1".to_string()
        )));
        assert!(list.contains(&(
            "kube-apiserver",
            "registry.k8s.io/kube-apiserver:v1.35.0".to_string(),
            "m.example/lib/kube-apiserver:v1.35.0".to_string()
        )));
        assert_eq!(
            info("v1.34.1").kubeadm_images(),
            up.list(true)
                .into_iter()
                .map(|(_, s, _)| s)
                .collect::<Vec<_>>()
        );
    }
}
