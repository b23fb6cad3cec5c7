//! The kind `kind.x-k8s.io/v1alpha4` Cluster for the docker provider (kubernetes-sigs/kind
//! pkg/apis/config/v1alpha4/types.go), so the same lab can also be created with `kind create cluster
//! --config`: nodes with roles, image, labels, port mappings and mounts; podSubnet, serviceSubnet,
//! kubeProxyMode (`none` when disabled); `disableDefaultCNI: true` unless the CNI is `kindnet`; with a
//! mirror, a containerd patch pointing the CRI registry at `/etc/containerd/certs.d`; the file's kubeadm
//! settings as `kubeadmConfigPatches` ([`patches`]), and on control planes the files the API server reads
//! (audit policy, OIDC CA, authentication config, encryption config) mounted from the render output.

mod patches;

use crate::apiserver;
use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::yaml;
use clusterctl_spec::model::{CniPlugin, KubeProxyMode, OidcMode, Provider, Role};
use clusterctl_spec::{KubeadmApi, ValidNode};
use semver::Version;
use serde::Serialize;
use std::collections::BTreeMap;

/// Cluster-relative path of the kind config.
pub const KIND_CONFIG_PATH: &str = "kind-config.yaml";

/// The kind release the config targets (and the test bed loads it with: scripts/k8s/kind-check.sh).
pub const KIND_VERSION: &str = "v0.33.0";

/// The kubeadm config API kind [`KIND_VERSION`] generates for a node image of Kubernetes `version`
/// (kind pkg/cluster/internal/kubeadm/config.go `Config`: v1beta4 from 1.36.0, v1beta3 from 1.23.0 up
/// to 1.35; kind v0.30/v0.31 used v1beta3 for every version from 1.23). It differs from what clusterctl's
/// own kubeadm configs use (v1beta4 from 1.31) for 1.31–1.35, so the versioned patches follow kind's.
pub fn kubeadm_api(version: &Version) -> KubeadmApi {
    if (version.major, version.minor) >= (1, 36) {
        KubeadmApi::V1beta4
    } else {
        KubeadmApi::V1beta3
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Cluster {
    api_version: &'static str,
    kind: &'static str,
    name: String,
    networking: Networking,
    nodes: Vec<Node>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    kubeadm_config_patches: Vec<String>,
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    kubeadm_config_patches: Vec<String>,
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
    let api = kubeadm_api(cx.c.kubernetes_version());
    let nodes =
        cx.c.nodes()
            .iter()
            .map(|n| node(cx, n, &image, api))
            .collect::<Result<Vec<_>, _>>()?;
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
        kubeadm_config_patches: patches::cluster(cx, api)?,
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

fn node(cx: &Ctx, n: &ValidNode, image: &str, api: KubeadmApi) -> Result<Node, RenderError> {
    let mut extra_mounts: Vec<Mount> =
        cx.c.spec()
            .docker
            .run_options
            .extra_mounts
            .iter()
            .map(|m| Mount {
                host_path: m.host_path.clone(),
                container_path: m.container_path.clone(),
                read_only: m.read_only,
            })
            .collect();
    if n.is_control_plane() {
        extra_mounts.extend(apiserver_files(cx).into_iter().map(|path| Mount {
            host_path: format!("{}{}", n.name, path),
            container_path: path.to_string(),
            read_only: true,
        }));
    }
    Ok(Node {
        role: match n.role {
            Role::ControlPlane => "control-plane",
            Role::Worker => "worker",
        },
        image: image.to_string(),
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
        extra_mounts,
        kubeadm_config_patches: patches::node(cx, n, api)?,
    })
}

/// The files render writes for control planes that the API server reads through a flag (the audit
/// policy, the OIDC issuer CA, the structured authentication config, the encryption config): kind does not place them, so
/// each control plane mounts them from the render output, `<node>/<path>`, a path relative to the
/// output directory (kind resolves a relative `hostPath` against its working directory: run `kind
/// create cluster --config cluster/kind-config.yaml` inside the output directory).
fn apiserver_files(cx: &Ctx) -> Vec<&'static str> {
    let spec = cx.c.spec();
    let mut out = Vec::new();
    if spec.api_server.audit.is_some() && cx.c.audit_policy().is_some() {
        out.push(apiserver::AUDIT_POLICY_PATH);
    }
    match spec.api_server.oidc.as_ref().map(|o| o.mode) {
        Some(OidcMode::Flags) if cx.c.oidc_ca_pem().is_some() => out.push(apiserver::OIDC_CA_PATH),
        Some(OidcMode::Structured) => out.push(apiserver::AUTHN_CONFIG_PATH),
        _ => {}
    }
    // With the key still a placeholder: render never writes a secret (docs/render.md says how to put
    // a key in before `kind create cluster`).
    if spec.api_server.encryption.is_some() {
        out.push(apiserver::ENCRYPTION_CONFIG_PATH);
    }
    out
}
