//! The kind `kind.x-k8s.io/v1alpha4` Cluster for the docker provider (kubernetes-sigs/kind
//! pkg/apis/config/v1alpha4/types.go), so the same lab can also be created with `kind create cluster
//! --config`: nodes with roles, image, labels, port mappings and mounts; podSubnet, serviceSubnet,
//! kubeProxyMode (`none` when disabled); `disableDefaultCNI: true` unless the CNI is `kindnet`; with a
//! mirror, a containerd patch pointing the CRI registry at `/etc/containerd/certs.d`.

use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::yaml;
use clusterctl_spec::model::{CniPlugin, KubeProxyMode, Provider, Role};
use serde::Serialize;
use std::collections::BTreeMap;

/// Cluster-relative path of the kind config.
pub const KIND_CONFIG_PATH: &str = "kind-config.yaml";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Cluster {
    api_version: &'static str,
    kind: &'static str,
    name: String,
    networking: Networking,
    nodes: Vec<Node>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    containerd_config_patches: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Networking {
    #[serde(skip_serializing_if = "Option::is_none")]
    ip_family: Option<&'static str>,
    pod_subnet: String,
    service_subnet: String,
    #[serde(rename = "disableDefaultCNI")]
    disable_default_cni: bool,
    kube_proxy_mode: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Node {
    role: &'static str,
    image: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    extra_port_mappings: Vec<PortMapping>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    extra_mounts: Vec<Mount>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PortMapping {
    container_port: u16,
    host_port: u16,
    listen_address: String,
    protocol: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Mount {
    host_path: String,
    container_path: String,
    read_only: bool,
}

/// The containerd patch kind merges into its nodes' config.toml when a mirror is set.
pub const MIRROR_PATCH: &str =
    "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n";

pub(crate) fn cluster_files(cx: &Ctx, out: &mut Vec<RenderedFile>) -> Result<(), RenderError> {
    let spec = cx.c.spec();
    if spec.provider != Provider::Docker {
        return Ok(());
    }
    let image = cx.c.docker_node_image();
    let mounts = &spec.docker.run_options.extra_mounts;
    let nodes =
        cx.c.nodes()
            .iter()
            .map(|n| Node {
                role: match n.role {
                    Role::ControlPlane => "control-plane",
                    Role::Worker => "worker",
                },
                image: image.clone(),
                labels: n.labels.clone(),
                extra_port_mappings: n
                    .port_mappings
                    .iter()
                    .map(|p| PortMapping {
                        container_port: p.container_port,
                        host_port: p.host_port,
                        listen_address: p.listen_address.clone().unwrap_or_else(|| {
                            clusterctl_spec::model::DEFAULT_PORT_LISTEN_ADDRESS.to_string()
                        }),
                        protocol: p.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
                    })
                    .collect(),
                extra_mounts: mounts
                    .iter()
                    .map(|m| Mount {
                        host_path: m.host_path.clone(),
                        container_path: m.container_path.clone(),
                        read_only: m.read_only,
                    })
                    .collect(),
            })
            .collect();
    let cfg = Cluster {
        api_version: "kind.x-k8s.io/v1alpha4",
        kind: "Cluster",
        name: cx.c.name().to_string(),
        networking: Networking {
            ip_family: cx.c.pod_subnet().addr().is_ipv6().then_some("ipv6"),
            pod_subnet: cx.c.pod_subnet().to_string(),
            service_subnet: cx.c.service_subnet().to_string(),
            disable_default_cni: spec.networking.cni.plugin != CniPlugin::Kindnet,
            kube_proxy_mode: match spec.networking.kube_proxy {
                KubeProxyMode::Iptables => "iptables",
                KubeProxyMode::Ipvs => "ipvs",
                KubeProxyMode::Nftables => "nftables",
                KubeProxyMode::Disabled => "none",
            },
        },
        nodes,
        containerd_config_patches: if cx.c.mirror().is_some() {
            vec![MIRROR_PATCH.to_string()]
        } else {
            Vec::new()
        },
    };
    out.push(RenderedFile::text(
        KIND_CONFIG_PATH,
        0o644,
        yaml::doc("kind Cluster", &cfg)?,
        Purpose::KindConfig,
    ));
    Ok(())
}
