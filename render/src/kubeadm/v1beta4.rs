//! `kubeadm.k8s.io/v1beta4` documents (kubernetes/kubernetes cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go):
//! extraArgs as `{name, value}` lists, `timeouts` on Init/Join/Reset/Upgrade, `proxy.disabled`,
//! `dns.imageRepository`/`imageTag`, `etcd.local.imageTag`; no `apiServer.timeoutForControlPlane`.

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

const API: &str = "kubeadm.k8s.io/v1beta4";

/// `{name, value}`: v1beta4's extraArgs item.
#[derive(Serialize)]
struct Arg {
    name: String,
    value: String,
}

fn args(m: &BTreeMap<String, String>) -> Vec<Arg> {
    m.iter()
        .map(|(k, v)| Arg {
            name: k.clone(),
            value: v.clone(),
        })
        .collect()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeRegistration {
    name: String,
    cri_socket: &'static str,
    /// Upstream has no omitempty: `null` means "kubeadm's default".
    taints: Option<Vec<Taint>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    kubelet_extra_args: Vec<Arg>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ignore_preflight_errors: Vec<String>,
    image_pull_policy: &'static str,
    image_pull_serial: bool,
}

fn node_registration(cx: &Ctx, node: &ValidNode) -> NodeRegistration {
    NodeRegistration {
        name: node.name.clone(),
        cri_socket: cx.cri_socket,
        taints: common::taints(cx, node),
        kubelet_extra_args: args(&common::kubelet_args(node)),
        ignore_preflight_errors: cx.c.spec().kubeadm.ignored_checks(),
        image_pull_policy: "IfNotPresent",
        image_pull_serial: true,
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApiEndpoint {
    #[serde(skip_serializing_if = "Option::is_none")]
    advertise_address: Option<String>,
    bind_port: i32,
}

/// v1beta4 `Timeouts`, every field written out: the file's `kubeadm.timeouts`, else kubeadm's
/// defaults ([`common::timeouts`]); the keys are kubeadm's, in its order.
type Timeouts = serde_yaml::Mapping;

fn timeouts(cx: &Ctx) -> Timeouts {
    common::timeouts(cx)
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InitConfiguration {
    api_version: &'static str,
    kind: &'static str,
    node_registration: NodeRegistration,
    #[serde(rename = "localAPIEndpoint")]
    local_api_endpoint: ApiEndpoint,
    timeouts: Timeouts,
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    extra_args: Vec<Arg>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    extra_volumes: Vec<HostPathMount>,
    #[serde(rename = "certSANs")]
    cert_sans: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Component {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    extra_args: Vec<Arg>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LocalEtcd {
    #[serde(skip_serializing_if = "Option::is_none")]
    image_repository: Option<String>,
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
struct Proxy {
    disabled: bool,
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
    proxy: Proxy,
}

fn cluster_configuration(cx: &Ctx) -> ClusterConfiguration {
    let x = apiserver::extras(cx);
    let spec = cx.c.spec();
    ClusterConfiguration {
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
                image_repository: None,
                image_tag: cx.kimg.etcd_tag.clone(),
                data_dir: "/var/lib/etcd",
            },
        },
        api_server: ApiServer {
            extra_args: args(&x.args),
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
        },
        controller_manager: Component {
            extra_args: args(&common::controller_manager_args(cx)),
        },
        scheduler: Component {
            extra_args: Vec::new(),
        },
        dns: Dns {
            image_repository: cx.kimg.dns_image_repository.clone(),
            image_tag: cx.kimg.dns_tag.clone(),
        },
        proxy: Proxy {
            disabled: cx.no_kube_proxy,
        },
    }
}

/// init.yaml: Init + Cluster + Kubelet [+ KubeProxy] configuration for the first control plane.
pub(crate) fn init(cx: &Ctx, node: &ValidNode) -> Result<String, RenderError> {
    let init = InitConfiguration {
        api_version: API,
        kind: "InitConfiguration",
        node_registration: node_registration(cx, node),
        local_api_endpoint: ApiEndpoint {
            advertise_address: common::advertise_address(node),
            bind_port: common::bind_port(cx),
        },
        timeouts: timeouts(cx),
    };
    let mut parts = vec![
        yaml::doc("InitConfiguration", &init)?,
        yaml::doc("ClusterConfiguration", &cluster_configuration(cx))?,
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
    timeouts: Timeouts,
}

/// join.yaml for a further control plane or a worker, with the token, CA hash and certificate key as
/// placeholders.
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
        },
        control_plane: node.is_control_plane().then(|| JoinControlPlane {
            local_api_endpoint: ApiEndpoint {
                advertise_address: common::advertise_address(node),
                bind_port: common::bind_port(cx),
            },
            certificate_key: placeholders::CERTIFICATE_KEY,
        }),
        timeouts: timeouts(cx),
    };
    yaml::doc("JoinConfiguration", &j)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResetConfiguration {
    api_version: &'static str,
    kind: &'static str,
    cri_socket: &'static str,
    certificates_dir: &'static str,
    cleanup_tmp_dir: bool,
    /// No confirmation prompt. Real kubeadm refuses `kubeadm reset -f --config …` ("can not mix
    /// '--config' with arguments [force]"): with a configuration file, `force` is said here.
    force: bool,
    timeouts: Timeouts,
}

/// reset.yaml.
pub(crate) fn reset(cx: &Ctx) -> Result<String, RenderError> {
    yaml::doc(
        "ResetConfiguration",
        &ResetConfiguration {
            api_version: API,
            kind: "ResetConfiguration",
            cri_socket: cx.cri_socket,
            certificates_dir: "/etc/kubernetes/pki",
            cleanup_tmp_dir: true,
            force: true,
            timeouts: timeouts(cx),
        },
    )
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UpgradeApply {
    kubernetes_version: String,
    certificate_renewal: bool,
    etcd_upgrade: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ignore_preflight_errors: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UpgradeNode {
    certificate_renewal: bool,
    etcd_upgrade: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ignore_preflight_errors: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UpgradePlan {
    kubernetes_version: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ignore_preflight_errors: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UpgradeConfiguration {
    api_version: &'static str,
    kind: &'static str,
    apply: UpgradeApply,
    node: UpgradeNode,
    plan: UpgradePlan,
    timeouts: Timeouts,
}

/// upgrade.yaml: the target is this file's kubernetesVersion; `kubeadm.ignorePreflightErrors` in
/// `apply`, `node` and `plan`.
pub(crate) fn upgrade(cx: &Ctx) -> Result<String, RenderError> {
    let ignored = cx.c.spec().kubeadm.ignored_checks();
    yaml::doc(
        "UpgradeConfiguration",
        &UpgradeConfiguration {
            api_version: API,
            kind: "UpgradeConfiguration",
            apply: UpgradeApply {
                kubernetes_version: cx.kimg.version_tag.clone(),
                certificate_renewal: true,
                etcd_upgrade: true,
                ignore_preflight_errors: ignored.clone(),
            },
            node: UpgradeNode {
                certificate_renewal: true,
                etcd_upgrade: true,
                ignore_preflight_errors: ignored.clone(),
            },
            plan: UpgradePlan {
                kubernetes_version: cx.kimg.version_tag.clone(),
                ignore_preflight_errors: ignored,
            },
            timeouts: timeouts(cx),
        },
    )
}
