//! What a kind-style lab gets besides its nodes (issue 27): the default StorageClass
//! (`spec.storage.defaultClass`, local-path-provisioner) and the local registry beside the node
//! containers (`spec.registry.local`), and the API server load balancer in front of several control
//! planes (`spec.docker.loadBalancer`, kind's `<cluster>-external-load-balancer`). The serde types,
//! their defaults and the pinned upstream releases; validation is `validate::rules_lab`, the resolved
//! forms are [`crate::ValidCluster`]'s `local_path`, `local_registry` and `load_balancer`. Imports
//! nothing of the crate (the model embeds these types).

use serde::{Deserialize, Serialize};

/// `spec.storage.defaultClass: local-path`: local-path-provisioner as the default StorageClass.
pub const LOCAL_PATH: &str = "local-path";
/// `spec.storage.defaultClass: none`: no StorageClass is installed.
pub const NO_STORAGE_CLASS: &str = "none";
/// The values `spec.storage.defaultClass` accepts.
pub const STORAGE_CLASSES: [&str; 2] = [LOCAL_PATH, NO_STORAGE_CLASS];

/// The pinned local-path-provisioner release (github.com/rancher/local-path-provisioner).
pub const LOCAL_PATH_VERSION: &str = "v0.0.30";
/// Its image, as upstream's `deploy/local-path-storage.yaml` of [`LOCAL_PATH_VERSION`] names it
/// (written with its registry, `docker.io`). The helper pods that create and remove volume
/// directories run the same image (upstream's is `FROM alpine`: `sh`, `mkdir`, `rm`).
pub const LOCAL_PATH_IMAGE: &str = "docker.io/rancher/local-path-provisioner:v0.0.30";
/// The directory on each node under which local-path volumes are created (upstream's default).
pub const LOCAL_PATH_DIR: &str = "/opt/local-path-provisioner";

/// The host port of the local registry when `spec.registry.local.port` is unset (kind's recipe).
pub const DEFAULT_LOCAL_REGISTRY_PORT: u16 = 5001;
/// The port the registry listens on inside its container (registry:2's `http.addr`).
pub const LOCAL_REGISTRY_CONTAINER_PORT: u16 = 5000;
/// The local registry's image when `spec.registry.local.image` is unset: upstream's `registry:2`
/// (2.8.3) pinned by digest.
pub const DEFAULT_LOCAL_REGISTRY_IMAGE: &str =
    "docker.io/library/registry:2@sha256:a3d8aaa63ed8681a604f1dea0aa03f100d5895b6a58ace528858a7b332415373";
/// The suffix of the registry container's name, `<cluster>-registry`; a node may not be named so.
pub const LOCAL_REGISTRY_NAME: &str = "registry";

/// The load balancer's image when `spec.docker.loadBalancer.image` is unset: kind's HAProxy image
/// (`kindest/haproxy`, kind v0.20–v0.23's `loadbalancer.Image`) pinned by digest. Its contract, which
/// the test bed's equivalent keeps: `haproxy -W -db -f /usr/local/etc/haproxy/haproxy.cfg` as the
/// entrypoint, the configuration replaced in place and reloaded on `SIGHUP`.
pub const DEFAULT_LOAD_BALANCER_IMAGE: &str = "docker.io/kindest/haproxy:v20230606-42a2262b@sha256:001a06433666046dea44567c7d7c6adfc2ac0edb556576f6da507ff0b0f063d3";
/// The suffix of the load balancer container's name, `<cluster>-external-load-balancer` (kind's); a
/// node may not be named so.
pub const LOAD_BALANCER_NAME: &str = "external-load-balancer";
/// The port the load balancer listens on inside its container, and the API server port of every
/// control plane behind it (kind's `APIServerInternalPort`).
pub const LOAD_BALANCER_PORT: u16 = 6443;

/// `spec.docker.loadBalancer`: a load balancer container (HAProxy) in front of the control planes'
/// API servers. Made by default for a docker cluster with more than one control plane and neither a
/// VIP nor `controlPlane.endpoint`; writing the block (even `{}`) makes it for one control plane too, so
/// control planes joined later are behind the same endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LoadBalancer {
    /// Host port on 127.0.0.1 for the load balancer's 6443, 0–65535; 0 or unset: a port Docker
    /// chooses (kind's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// The load balancer's image. Default [`DEFAULT_LOAD_BALANCER_IMAGE`] (kindest/haproxy by digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// The load balancer, resolved ([`crate::ValidCluster::load_balancer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabLoadBalancer {
    /// Host port on 127.0.0.1; 0: Docker chooses.
    pub port: u16,
    /// The load balancer's image.
    pub image: String,
    /// The container's name, `<cluster>-external-load-balancer`, which nodes resolve on the cluster
    /// network: the `controlPlaneEndpoint` host.
    pub container: String,
}

/// Whether a docker cluster gets the load balancer: the provider runs node containers, the file asks
/// for no VIP and no `controlPlane.endpoint`, and it has more than one control plane or writes
/// `spec.docker.loadBalancer`.
pub fn load_balancer_enabled(
    docker_provider: bool,
    vip_or_endpoint: bool,
    control_planes: usize,
    written: bool,
) -> bool {
    docker_provider && !vip_or_endpoint && (control_planes > 1 || written)
}

/// `spec.storage`: the cluster's default StorageClass.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Storage {
    /// `local-path` (local-path-provisioner, a hostPath volume per claim on the node that runs the
    /// pod, StorageClass `local-path` marked default) or `none`. Default: `local-path` for the
    /// `docker` provider, `none` for `ssh`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_class: Option<String>,
}

impl Storage {
    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        self.default_class.is_none()
    }
}

/// `spec.registry.local`: a registry container beside the docker provider's node containers, published
/// on `127.0.0.1:<port>` and reached by every node's containerd as `localhost:<port>` (kind's local
/// registry recipe).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LocalRegistry {
    /// Host port on 127.0.0.1, 1–65535. Default [`DEFAULT_LOCAL_REGISTRY_PORT`] (5001).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// The registry's image. Default [`DEFAULT_LOCAL_REGISTRY_IMAGE`] (registry:2 by digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// The local registry, resolved ([`crate::ValidCluster::local_registry`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabRegistry {
    /// Host port on 127.0.0.1; nodes and this machine name the registry `localhost:<port>`.
    pub port: u16,
    /// The registry's image.
    pub image: String,
    /// The registry container's name, `<cluster>-registry`, which nodes resolve on the cluster network.
    pub container: String,
}

impl LabRegistry {
    /// `localhost:<port>`: the registry's name in image references.
    pub fn host(&self) -> String {
        format!("localhost:{}", self.port)
    }

    /// The address containerd on a node pulls from: `http://<container>:5000`.
    pub fn endpoint(&self) -> String {
        format!("http://{}:{LOCAL_REGISTRY_CONTAINER_PORT}", self.container)
    }
}

/// Whether local-path-provisioner is installed: `defaultClass` as written, else by provider (on for the
/// docker provider, off for SSH).
pub fn local_path_enabled(storage: &Storage, docker_provider: bool) -> bool {
    match storage.default_class.as_deref() {
        Some(c) => c == LOCAL_PATH,
        None => docker_provider,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_path_is_on_for_docker_labs_unless_turned_off() {
        let unset = Storage::default();
        assert!(local_path_enabled(&unset, true));
        assert!(!local_path_enabled(&unset, false));
        let off = Storage {
            default_class: Some("none".into()),
        };
        assert!(!local_path_enabled(&off, true));
        let on = Storage {
            default_class: Some("local-path".into()),
        };
        assert!(local_path_enabled(&on, false));
    }

    #[test]
    fn the_load_balancer_is_for_docker_clusters_with_several_control_planes_and_no_vip() {
        assert!(load_balancer_enabled(true, false, 3, false));
        assert!(load_balancer_enabled(true, false, 1, true));
        assert!(!load_balancer_enabled(true, false, 1, false));
        assert!(!load_balancer_enabled(true, true, 3, false));
        assert!(!load_balancer_enabled(false, false, 3, true));
    }

    #[test]
    fn the_registry_is_localhost_to_nodes_and_its_container_on_the_network() {
        let r = LabRegistry {
            port: 5001,
            image: DEFAULT_LOCAL_REGISTRY_IMAGE.into(),
            container: "lab-registry".into(),
        };
        assert_eq!(r.host(), "localhost:5001");
        assert_eq!(r.endpoint(), "http://lab-registry:5000");
    }
}
