//! `kubeadm.k8s.io/v1beta3` documents (kubernetes/kubernetes cmd/kubeadm/app/apis/kubeadm/v1beta3/types.go):
//! extraArgs as maps, `apiServer.timeoutForControlPlane`, `discovery.timeout`; no `proxy` (kube-proxy is
//! skipped with `skipPhases: [addon/kube-proxy]`), no `timeouts`, no Reset/Upgrade kinds.

use super::common::{self, Taint};
use crate::apiserver;
use crate::ctx::Ctx;
use crate::kubelet;
use crate::output::RenderError;
use crate::placeholders;
use crate::yaml;
use clusterctl_spec::ValidNode;
use serde::Serialize;
use std::collections::BTreeMap;

const API: &str = "kubeadm.k8s.io/v1beta3";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeRegistration {
    name: String,
    cri_socket: &'static str,
    taints: Option<Vec<Taint>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    kubelet_extra_args: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ignore_preflight_errors: Vec<String>,
    image_pull_policy: &'static str,
}

fn node_registration(cx: &Ctx, node: &ValidNode) -> NodeRegistration {
    NodeRegistration {
        name: node.name.clone(),
        cri_socket: cx.cri_socket,
        taints: common::taints(cx, node),
        kubelet_extra_args: common::kubelet_args(node),
        ignore_preflight_errors: cx.c.spec().kubeadm.ignored_checks(),
        image_pull_policy: "IfNotPresent",
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApiEndpoint {
    #[serde(skip_serializing_if = "Option::is_none")]
    advertise_address: Option<String>,
    bind_port: i32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InitConfiguration {
    api_version: &'static str,
    kind: &'static str,
    node_registration: NodeRegistration,
    #[serde(rename = "localAPIEndpoint")]
    local_api_endpoint: ApiEndpoint,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    skip_phases: Vec<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HostPathMount {
    name: String,
    host_path: String,
    mount_path: String,
    read_only: bool,
    path_type: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApiServer {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    extra_args: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    extra_volumes: Vec<HostPathMount>,
    #[serde(rename = "certSANs")]
    cert_sans: Vec<String>,
    timeout_for_control_plane: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Component {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    extra_args: BTreeMap<String, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LocalEtcd {
    image_tag: String,
    data_dir: &'static str,
}

#[derive(Serialize)]
struct Etcd {
    local: LocalEtcd,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Networking {
    service_subnet: String,
    pod_subnet: String,
    dns_domain: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Dns {
    #[serde(skip_serializing_if = "Option::is_none")]
    image_repository: Option<String>,
    image_tag: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterConfiguration {
    api_version: &'static str,
    kind: &'static str,
    cluster_name: String,
    kubernetes_version: String,
    control_plane_endpoint: String,
    certificates_dir: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_repository: Option<String>,
    networking: Networking,
    etcd: Etcd,
    api_server: ApiServer,
    controller_manager: Component,
    scheduler: Component,
    dns: Dns,
}

/// init.yaml (v1beta3).
pub(crate) fn init(cx: &Ctx, node: &ValidNode) -> Result<String, RenderError> {
    let x = apiserver::extras(cx);
    let spec = cx.c.spec();
    let init = InitConfiguration {
        api_version: API,
        kind: "InitConfiguration",
        node_registration: node_registration(cx, node),
        local_api_endpoint: ApiEndpoint {
            advertise_address: common::advertise_address(node),
            bind_port: common::bind_port(cx),
        },
        skip_phases: if cx.no_kube_proxy {
            vec!["addon/kube-proxy"]
        } else {
            Vec::new()
        },
    };
    let cluster = ClusterConfiguration {
        api_version: API,
        kind: "ClusterConfiguration",
        cluster_name: cx.c.name().to_string(),
        kubernetes_version: cx.kimg.version_tag.clone(),
        control_plane_endpoint: cx.endpoint.clone(),
        certificates_dir: "/etc/kubernetes/pki",
        image_repository: cx.kimg.image_repository.clone(),
        networking: Networking {
            service_subnet: cx.c.service_subnet().to_string(),
            pod_subnet: cx.c.pod_subnet().to_string(),
            dns_domain: spec.networking.dns_domain.clone(),
        },
        etcd: Etcd {
            local: LocalEtcd {
                image_tag: cx.kimg.etcd_tag.clone(),
                data_dir: "/var/lib/etcd",
            },
        },
        api_server: ApiServer {
            extra_args: x.args.clone(),
            extra_volumes: x
                .mounts
                .iter()
                .map(|m| HostPathMount {
                    name: m.name.clone(),
                    host_path: m.host_path.clone(),
                    mount_path: m.mount_path.clone(),
                    read_only: m.read_only,
                    path_type: m.path_type,
                })
                .collect(),
            cert_sans: cx.cert_sans.clone(),
            timeout_for_control_plane: common::timeout(cx, "controlPlaneComponentHealthCheck"),
        },
        controller_manager: Component {
            extra_args: common::controller_manager_args(cx),
        },
        scheduler: Component {
            extra_args: BTreeMap::new(),
        },
        dns: Dns {
            image_repository: cx.kimg.dns_image_repository.clone(),
            image_tag: cx.kimg.dns_tag.clone(),
        },
    };
    let mut parts = vec![
        yaml::doc("InitConfiguration", &init)?,
        yaml::doc("ClusterConfiguration", &cluster)?,
        kubelet::kubelet_configuration(cx)?,
    ];
    if !cx.no_kube_proxy {
        parts.push(kubelet::kube_proxy_configuration(cx)?);
    }
    Ok(yaml::docs(&parts))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BootstrapTokenDiscovery {
    token: &'static str,
    #[serde(rename = "apiServerEndpoint")]
    api_server_endpoint: String,
    ca_cert_hashes: Vec<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Discovery {
    bootstrap_token: BootstrapTokenDiscovery,
    timeout: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JoinControlPlane {
    #[serde(rename = "localAPIEndpoint")]
    local_api_endpoint: ApiEndpoint,
    certificate_key: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JoinConfiguration {
    api_version: &'static str,
    kind: &'static str,
    node_registration: NodeRegistration,
    ca_cert_path: &'static str,
    discovery: Discovery,
    #[serde(skip_serializing_if = "Option::is_none")]
    control_plane: Option<JoinControlPlane>,
}

/// join.yaml (v1beta3), secrets as placeholders.
pub(crate) fn join(cx: &Ctx, node: &ValidNode) -> Result<String, RenderError> {
    let j = JoinConfiguration {
        api_version: API,
        kind: "JoinConfiguration",
        node_registration: node_registration(cx, node),
        ca_cert_path: "/etc/kubernetes/pki/ca.crt",
        discovery: Discovery {
            bootstrap_token: BootstrapTokenDiscovery {
                token: placeholders::JOIN_TOKEN,
                api_server_endpoint: cx.endpoint.clone(),
                ca_cert_hashes: vec![placeholders::CA_CERT_HASH],
            },
            timeout: common::timeout(cx, "discovery"),
        },
        control_plane: node.is_control_plane().then(|| JoinControlPlane {
            local_api_endpoint: ApiEndpoint {
                advertise_address: common::advertise_address(node),
                bind_port: common::bind_port(cx),
            },
            certificate_key: placeholders::CERTIFICATE_KEY,
        }),
    };
    yaml::doc("JoinConfiguration", &j)
}
