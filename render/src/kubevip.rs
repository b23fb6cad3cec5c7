//! The kube-vip static pod (`/etc/kubernetes/manifests/kube-vip.yaml`) on every control plane when a VIP
//! is set: the shape `kube-vip manifest pod --controlplane [--services] --arp|--bgp --leaderElection`
//! prints (kube-vip docs, "Static Pods"), a core/v1 Pod. The first control plane mounts
//! `/etc/kubernetes/super-admin.conf` on Kubernetes ≥ 1.29 (admin.conf has no rights before `kubeadm
//! init` binds them); the others mount `admin.conf`. Image from the mirror when there is one.

use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::yaml;
use clusterctl_spec::model::VipMode;
use clusterctl_spec::ValidNode;
use serde::Serialize;
use std::collections::BTreeMap;

/// Path of the manifest on control planes.
pub(crate) const MANIFEST_PATH: &str = "/etc/kubernetes/manifests/kube-vip.yaml";
/// kubeconfig of the first control plane on Kubernetes ≥ 1.29.
pub(crate) const SUPER_ADMIN_CONF: &str = "/etc/kubernetes/super-admin.conf";
/// kubeconfig everywhere else.
pub(crate) const ADMIN_CONF: &str = "/etc/kubernetes/admin.conf";

/// The kubeconfig kube-vip uses on `node`.
pub(crate) fn kubeconfig_for(cx: &Ctx, node: &ValidNode) -> &'static str {
    if cx.is_first(node) && cx.c.kubernetes_version().minor >= 29 {
        SUPER_ADMIN_CONF
    } else {
        ADMIN_CONF
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Pod {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: PodSpec,
}

#[derive(Serialize)]
struct Metadata {
    name: &'static str,
    namespace: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    containers: Vec<Container>,
    host_aliases: Vec<HostAlias>,
    host_network: bool,
    volumes: Vec<Volume>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Container {
    args: Vec<&'static str>,
    env: Vec<Env>,
    image: String,
    image_pull_policy: &'static str,
    name: &'static str,
    security_context: SecurityContext,
    volume_mounts: Vec<VolumeMount>,
}

#[derive(Serialize)]
struct Env {
    name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    #[serde(rename = "valueFrom", skip_serializing_if = "Option::is_none")]
    value_from: Option<BTreeMap<&'static str, BTreeMap<&'static str, &'static str>>>,
}

fn env(name: &'static str, value: impl Into<String>) -> Env {
    Env {
        name,
        value: Some(value.into()),
        value_from: None,
    }
}

#[derive(Serialize)]
struct SecurityContext {
    capabilities: Capabilities,
}

#[derive(Serialize)]
struct Capabilities {
    add: Vec<&'static str>,
    drop: Vec<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VolumeMount {
    mount_path: &'static str,
    name: &'static str,
}

#[derive(Serialize)]
struct HostAlias {
    hostnames: Vec<&'static str>,
    ip: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Volume {
    host_path: HostPath,
    name: &'static str,
}

#[derive(Serialize)]
struct HostPath {
    path: &'static str,
}

pub(crate) fn node_files(
    cx: &Ctx,
    node: &ValidNode,
    out: &mut Vec<RenderedFile>,
) -> Result<(), RenderError> {
    let (Some(vip_addr), Some(vip)) = (cx.c.vip(), cx.c.spec().control_plane.vip.as_ref()) else {
        return Ok(());
    };
    let kubeconfig = kubeconfig_for(cx, node);
    let mut e = Vec::new();
    match vip.mode {
        VipMode::Arp => e.push(env("vip_arp", "true")),
        VipMode::Bgp => e.push(env("vip_arp", "false")),
    }
    e.push(env("port", cx.c.endpoint().port.to_string()));
    let mut field = BTreeMap::new();
    field.insert("fieldRef", BTreeMap::from([("fieldPath", "spec.nodeName")]));
    e.push(Env {
        name: "vip_nodename",
        value: None,
        value_from: Some(field),
    });
    let iface = node
        .vip_interface
        .clone()
        .or_else(|| cx.facts.node(&node.name).vip_interface);
    if let Some(i) = iface {
        e.push(env("vip_interface", i));
    }
    e.push(env(
        "vip_subnet",
        if vip_addr.is_ipv4() { "32" } else { "128" },
    ));
    e.push(env("dns_mode", "first"));
    e.push(env("cp_enable", "true"));
    e.push(env("cp_namespace", "kube-system"));
    if vip.load_balancer_services {
        e.push(env("svc_enable", "true"));
        e.push(env("svc_leasename", "plndr-svcs-lock"));
    }
    e.push(env("vip_leaderelection", "true"));
    e.push(env("vip_leasename", "plndr-cp-lock"));
    e.push(env("vip_leaseduration", "5"));
    e.push(env("vip_renewdeadline", "3"));
    e.push(env("vip_retryperiod", "1"));
    if vip.mode == VipMode::Bgp {
        if let Some(b) = &vip.bgp {
            e.push(env("bgp_enable", "true"));
            let rid = b
                .router_id
                .clone()
                .or_else(|| node.address.map(|a| a.to_string()));
            if let Some(r) = rid {
                e.push(env("bgp_routerid", r));
            }
            e.push(env("bgp_as", b.local_as.to_string()));
            let peers: Vec<String> = b
                .peers
                .iter()
                .map(|p| format!("{}:{}::false", p.address, p.peer_as))
                .collect();
            e.push(env("bgp_peers", peers.join(",")));
        }
    }
    e.push(env("address", vip_addr.to_string()));
    e.push(env("prometheus_server", ":2112"));
    let pod = Pod {
        api_version: "v1",
        kind: "Pod",
        metadata: Metadata {
            name: "kube-vip",
            namespace: "kube-system",
        },
        spec: PodSpec {
            containers: vec![Container {
                args: vec!["manager"],
                env: e,
                image: cx.pull(cx.c.kube_vip_image()),
                image_pull_policy: "IfNotPresent",
                name: "kube-vip",
                security_context: SecurityContext {
                    capabilities: Capabilities {
                        add: vec!["NET_ADMIN", "NET_RAW"],
                        drop: vec!["ALL"],
                    },
                },
                volume_mounts: vec![VolumeMount {
                    mount_path: ADMIN_CONF,
                    name: "kubeconfig",
                }],
            }],
            host_aliases: vec![HostAlias {
                hostnames: vec!["kubernetes"],
                ip: "127.0.0.1",
            }],
            host_network: true,
            volumes: vec![Volume {
                host_path: HostPath { path: kubeconfig },
                name: "kubeconfig",
            }],
        },
    };
    out.push(RenderedFile::text(
        MANIFEST_PATH,
        0o600,
        yaml::doc("kube-vip Pod", &pod)?,
        Purpose::KubeVip,
    ));
    Ok(())
}
