//! The builtin CNI (clusterctl's own plugin and VXLAN agent, see docs/cni.md). Per node: the agent's
//! settings (`/etc/clusterctl/cni/agent.json`, [`AgentConfig`]), the conflist template the agent
//! completes with the node's podCIDR and installs as `/etc/cni/net.d/10-clusterctl.conflist` (CNI spec
//! 1.1.0 network configuration list; the podCIDR is [`crate::placeholders::POD_CIDR`] until then), and
//! the systemd unit running `clusterctl cni agent`. Cluster-wide: the agent's ServiceAccount, a
//! ClusterRole to get/list/watch Nodes (a kubelet may read only its own Node) and the binding.

use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::placeholders;
use crate::templates;
use crate::yaml;
use clusterctl_spec::ValidNode;
use minijinja::context;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The agent's settings file.
pub const AGENT_CONFIG_PATH: &str = "/etc/clusterctl/cni/agent.json";
/// The conflist template (podCIDR placeholder inside).
pub const CONFLIST_TEMPLATE_PATH: &str = "/etc/clusterctl/cni/10-clusterctl.conflist";
/// Where the agent installs the completed conflist.
pub const CONFLIST_PATH: &str = "/etc/cni/net.d/10-clusterctl.conflist";
/// The agent's kubeconfig (ServiceAccount token; written by the phases, mode 0600).
pub const AGENT_KUBECONFIG_PATH: &str = "/etc/clusterctl/cni/agent.kubeconfig";
/// The systemd unit.
pub const UNIT_PATH: &str = "/etc/systemd/system/clusterctl-cni-agent.service";
/// The installed clusterctl binary.
pub const BINARY_PATH: &str = "/usr/local/bin/clusterctl";
/// Cluster-relative path of the RBAC manifest.
pub const RBAC_PATH: &str = "cni/clusterctl-cni-rbac.yaml";
/// The CNI network name.
pub const NETWORK_NAME: &str = "clusterctl";
/// VXLAN network identifier (as the seed's overlay).
pub const VNI: u32 = 1;
/// VXLAN UDP port (Linux/flannel default 8472).
pub const VXLAN_PORT: u16 = 8472;
/// The agent's ServiceAccount (namespace `kube-system`).
pub const SERVICE_ACCOUNT: &str = "clusterctl-cni";

/// The agent's settings, JSON (`/etc/clusterctl/cni/agent.json`). The agent may deserialize it with this
/// very type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentConfig {
    /// This node's name (the Node object to read podCIDR from).
    pub node_name: String,
    /// This node's address (underlay, VTEP source), when known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub node_address: Option<String>,
    /// The cluster's podSubnet (masquerade boundary).
    pub pod_subnet: String,
    /// Prefix length of each node's podCIDR.
    pub node_cidr_mask_size: u8,
    /// VXLAN VNI.
    pub vni: u32,
    /// VXLAN UDP port.
    pub vxlan_port: u16,
    /// Pod MTU; `None` = underlay MTU − 50.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mtu: Option<u32>,
    /// The conflist template to complete.
    pub conflist_template: String,
    /// Where to install the completed conflist.
    pub conflist_path: String,
    /// kubeconfig of the agent's ServiceAccount.
    pub kubeconfig: String,
}

pub(crate) fn node_files(
    cx: &Ctx,
    node: &ValidNode,
    out: &mut Vec<RenderedFile>,
) -> Result<(), RenderError> {
    let mtu = cx.c.spec().networking.cni.mtu;
    let cfg = AgentConfig {
        node_name: node.name.clone(),
        node_address: node.address.map(|a| a.to_string()),
        pod_subnet: cx.c.pod_subnet().to_string(),
        node_cidr_mask_size: cx.c.node_cidr_mask_size(),
        vni: VNI,
        vxlan_port: VXLAN_PORT,
        mtu,
        conflist_template: CONFLIST_TEMPLATE_PATH.to_string(),
        conflist_path: CONFLIST_PATH.to_string(),
        kubeconfig: AGENT_KUBECONFIG_PATH.to_string(),
    };
    out.push(RenderedFile::text(
        AGENT_CONFIG_PATH,
        0o644,
        yaml::json("agent.json", &cfg)?,
        Purpose::CniAgentConfig,
    ));
    out.extend(cx.cached("builtin-cni", || shared_files(mtu))?);
    Ok(())
}

/// The conflist template and the unit: the same on every node.
fn shared_files(mtu: Option<u32>) -> Result<Vec<RenderedFile>, RenderError> {
    let mut out = Vec::new();
    let mut plugin = json!({
        "type": "clusterctl-cni",
        "ipam": { "subnet": placeholders::POD_CIDR, "dataDir": "/var/lib/clusterctl/cni/ipam" },
    });
    if let (Some(m), Some(obj)) = (mtu, plugin.as_object_mut()) {
        obj.insert("mtu".to_string(), json!(m));
    }
    let conflist = json!({
        "cniVersion": "1.1.0",
        "name": NETWORK_NAME,
        "plugins": [plugin],
    });
    out.push(RenderedFile::text(
        CONFLIST_TEMPLATE_PATH,
        0o644,
        yaml::json("conflist", &conflist)?,
        Purpose::CniConfig,
    ));
    let unit = templates::render(
        "clusterctl-cni-agent.service.j2",
        context! { binary => BINARY_PATH, config => AGENT_CONFIG_PATH },
    )?;
    out.push(RenderedFile::text(
        UNIT_PATH,
        0o644,
        unit,
        Purpose::CniAgentUnit,
    ));
    Ok(out)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ServiceAccount {
    api_version: &'static str,
    kind: &'static str,
    metadata: Meta,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    api_groups: Vec<&'static str>,
    resources: Vec<&'static str>,
    verbs: Vec<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterRole {
    api_version: &'static str,
    kind: &'static str,
    metadata: Meta,
    rules: Vec<Rule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Subject {
    kind: &'static str,
    name: &'static str,
    namespace: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RoleRef {
    api_group: &'static str,
    kind: &'static str,
    name: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterRoleBinding {
    api_version: &'static str,
    kind: &'static str,
    metadata: Meta,
    role_ref: RoleRef,
    subjects: Vec<Subject>,
}

pub(crate) fn cluster_files(_cx: &Ctx, out: &mut Vec<RenderedFile>) -> Result<(), RenderError> {
    let sa = ServiceAccount {
        api_version: "v1",
        kind: "ServiceAccount",
        metadata: Meta {
            name: SERVICE_ACCOUNT,
            namespace: Some("kube-system"),
        },
    };
    let role = ClusterRole {
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: Meta {
            name: "clusterctl-cni-agent",
            namespace: None,
        },
        rules: vec![Rule {
            api_groups: vec![""],
            resources: vec!["nodes"],
            verbs: vec!["get", "list", "watch"],
        }],
    };
    let binding = ClusterRoleBinding {
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: Meta {
            name: "clusterctl-cni-agent",
            namespace: None,
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io",
            kind: "ClusterRole",
            name: "clusterctl-cni-agent",
        },
        subjects: vec![Subject {
            kind: "ServiceAccount",
            name: SERVICE_ACCOUNT,
            namespace: "kube-system",
        }],
    };
    let text = yaml::docs(&[
        yaml::doc("ServiceAccount", &sa)?,
        yaml::doc("ClusterRole", &role)?,
        yaml::doc("ClusterRoleBinding", &binding)?,
    ]);
    out.push(RenderedFile::text(
        RBAC_PATH,
        0o644,
        text,
        Purpose::ClusterManifest,
    ));
    Ok(())
}
