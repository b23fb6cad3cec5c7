//! The render context: values several renderers share, computed once from the `ValidCluster` and the
//! facts (kubeadm API, image settings, CRI socket, endpoint, certSANs, CNI pins).

use crate::cni::versions::{self, Pins};
use crate::facts::Facts;
use crate::images;
use crate::output::{RenderError, RenderedFile};
use clusterctl_spec::kubeadm_images::KubeadmImages;
use clusterctl_spec::model::{KubeProxyMode, RuntimeKind};
use clusterctl_spec::{KubeadmApi, ValidCluster};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// containerd's CRI socket (kubeadm `criSocket`).
pub(crate) const CONTAINERD_SOCKET: &str = "unix:///run/containerd/containerd.sock";
/// CRI-O's CRI socket (kubeadm `criSocket`).
pub(crate) const CRIO_SOCKET: &str = "unix:///var/run/crio/crio.sock";

/// Shared values of one render run.
pub(crate) struct Ctx<'a> {
    /// The cluster.
    pub c: &'a ValidCluster,
    /// Per-node facts.
    pub facts: &'a Facts,
    /// kubeadm config API.
    pub api: KubeadmApi,
    /// kubeadm image settings.
    pub kimg: KubeadmImages,
    /// CRI socket URL.
    pub cri_socket: &'static str,
    /// `host:port` of the control-plane endpoint.
    pub endpoint: String,
    /// apiserver certSANs: the user's, then the endpoint host, then (docker load balancer) `127.0.0.1`
    /// and `localhost`, then the VIP, deduplicated.
    pub cert_sans: Vec<String>,
    /// kube-proxy disabled.
    pub no_kube_proxy: bool,
    /// CNI pins.
    pub pins: Option<Pins>,
    /// Source registries routed through the mirror (computed once).
    pub registries: Vec<String>,
    /// Files identical on many nodes, rendered once per key.
    cache: RefCell<BTreeMap<String, Vec<RenderedFile>>>,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        c: &'a ValidCluster,
        facts: &'a Facts,
        api: KubeadmApi,
    ) -> Result<Ctx<'a>, RenderError> {
        let spec = c.spec();
        let mut cert_sans: Vec<String> = Vec::new();
        let mut add = |s: String| {
            if !cert_sans.contains(&s) {
                cert_sans.push(s);
            }
        };
        for s in &spec.api_server.cert_sans {
            add(s.clone());
        }
        add(c.endpoint().host.clone());
        // The docker lab's load balancer is published on this machine's loopback (kind's certSANs).
        if c.load_balancer().is_some() {
            add("127.0.0.1".into());
            add("localhost".into());
        }
        if let Some(v) = c.vip() {
            add(v.to_string());
        }
        Ok(Ctx {
            c,
            facts,
            api,
            kimg: KubeadmImages::new(c),
            cri_socket: match spec.runtime.kind {
                RuntimeKind::Containerd => CONTAINERD_SOCKET,
                RuntimeKind::Crio => CRIO_SOCKET,
            },
            endpoint: c.endpoint().to_string(),
            cert_sans,
            no_kube_proxy: spec.networking.kube_proxy == KubeProxyMode::Disabled,
            pins: versions::pins(c)?,
            registries: images::source_registries(c),
            cache: RefCell::new(BTreeMap::new()),
        })
    }

    /// The files `make` renders, rendered once per `key` for the whole run and cloned afterwards.
    pub(crate) fn cached(
        &self,
        key: &str,
        make: impl FnOnce() -> Result<Vec<RenderedFile>, RenderError>,
    ) -> Result<Vec<RenderedFile>, RenderError> {
        if let Some(v) = self.cache.borrow().get(key) {
            return Ok(v.clone());
        }
        let v = make()?;
        self.cache.borrow_mut().insert(key.to_string(), v.clone());
        Ok(v)
    }

    /// True when this node is the first control plane (runs `kubeadm init`).
    pub(crate) fn is_first(&self, node: &clusterctl_spec::ValidNode) -> bool {
        self.c.first_control_plane().name == node.name
    }

    /// Where nodes pull `image` from (mirror-rewritten when a mirror is set).
    pub(crate) fn pull(&self, image: &str) -> String {
        self.c.image(image)
    }
}
