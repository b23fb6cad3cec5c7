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

/// The VXLAN device the agent keeps.
pub const VXLAN_DEVICE: &str = "cc-vxlan";
/// Where the agent writes this node's podCIDR for the plugin (the plugin's default `podCIDRFile`).
pub const POD_CIDR_FILE: &str = "/run/clusterctl-cni/podcidr";
/// The plugin's IPAM data directory (`dataDir`; state in `<dataDir>/<network name>/state.json`).
pub const IPAM_DATA_DIR: &str = "/var/lib/cni/clusterctl";
/// cniVersion of the conflist for a runtime that stops at CNI 1.0.0: containerd 1.6/1.7 (libcni
/// v1.1) and CRI-O (ocicni on libcni v1.1 in the releases this tool installs).
pub const CONFLIST_CNI_VERSION: &str = "1.0.0";
/// cniVersion of the conflist for a runtime that speaks CNI 1.1.0 (STATUS and GC): containerd 2.x
/// (go-cni on libcni v1.2+, which calls STATUS on every plugin of a 1.1.0 list).
pub const CONFLIST_CNI_VERSION_1_1: &str = "1.1.0";
/// Where the runtime finds CNI plugins (containerd's and CRI-O's default `bin_dir`); the agent asks
/// the chained plugins there which CNI versions they support.
pub const CNI_BIN_DIR: &str = "/opt/cni/bin";
/// Seconds between full resyncs of the agent when nothing changed.
pub const RESYNC_SECONDS: u64 = 30;

fn default_device() -> String {
    VXLAN_DEVICE.to_string()
}
fn default_pod_cidr_file() -> String {
    POD_CIDR_FILE.to_string()
}
fn default_resync() -> u64 {
    RESYNC_SECONDS
}
fn default_cni_bin_dir() -> String {
    CNI_BIN_DIR.to_string()
}
fn is_default_cni_bin_dir(d: &str) -> bool {
    d == CNI_BIN_DIR
}

/// The newest CNI version the node's runtime speaks, declared as the conflist's `cniVersion`:
/// [`CONFLIST_CNI_VERSION_1_1`] for containerd 2.x, [`CONFLIST_CNI_VERSION`] for containerd 1.x and
/// CRI-O. The agent lowers it further when a chained plugin installed on the node is older.
pub fn conflist_cni_version(
    runtime: clusterctl_spec::model::RuntimeKind,
    containerd_major: u32,
) -> &'static str {
    match runtime {
        clusterctl_spec::model::RuntimeKind::Containerd if containerd_major >= 2 => {
            CONFLIST_CNI_VERSION_1_1
        }
        _ => CONFLIST_CNI_VERSION,
    }
}

/// The agent's settings, JSON (`/etc/clusterctl/cni/agent.json`): the one description of them.
/// `clusterctl cni agent --config FILE` decodes the file with this very type (unknown keys are
/// refused), so render and agent cannot drift apart. Paths are absolute paths on the node.
///
/// ```json
/// {"nodeName": "node1", "podSubnet": "10.244.0.0/16", "vni": 1, "vxlanPort": 8472,
///  "vxlanDevice": "cc-vxlan", "mtu": 1450,
///  "conflistTemplate": "/etc/clusterctl/cni/10-clusterctl.conflist",
///  "conflistPath": "/etc/cni/net.d/10-clusterctl.conflist",
///  "podCIDRFile": "/run/clusterctl-cni/podcidr",
///  "kubeconfig": "/etc/clusterctl/cni/agent.kubeconfig", "resyncSeconds": 30}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentConfig {
    /// This node's name: its Node object (or its line in a peers file), whose podCIDR and
    /// InternalIP the agent uses.
    pub node_name: String,
    /// The cluster's podSubnet, IPv4 CIDR (`10.244.0.0/16`): pod traffic to destinations outside
    /// it is masqueraded. `None`: no masquerade.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pod_subnet: Option<String>,
    /// VXLAN network identifier (VNI), 24 bits.
    pub vni: u32,
    /// VXLAN UDP destination port.
    pub vxlan_port: u16,
    /// Name of the VXLAN device (default [`VXLAN_DEVICE`]).
    #[serde(default = "default_device")]
    pub vxlan_device: String,
    /// Underlay interface name; `None`: the interface holding this node's InternalIP.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub underlay_interface: Option<String>,
    /// VXLAN device and pod MTU, bytes; `None`: underlay MTU − 50.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mtu: Option<u32>,
    /// The conflist template to complete ([`crate::placeholders::POD_CIDR`] replaced by the
    /// node's podCIDR; `mtu` added to the `clusterctl-cni` entry when absent).
    pub conflist_template: String,
    /// Where to install the completed conflist.
    pub conflist_path: String,
    /// Where to write this node's podCIDR (one line) for the plugin (default [`POD_CIDR_FILE`]).
    #[serde(rename = "podCIDRFile", default = "default_pod_cidr_file")]
    pub pod_cidr_file: String,
    /// kubeconfig of the agent's ServiceAccount; `None`: in-cluster or default configuration.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kubeconfig: Option<String>,
    /// Static peers file (`name address podCIDR` per line) used instead of the Kubernetes Nodes,
    /// for labs and tests.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub peers_file: Option<String>,
    /// Seconds between full resyncs when nothing changed (default [`RESYNC_SECONDS`]).
    #[serde(default = "default_resync")]
    pub resync_seconds: u64,
    /// Where the runtime finds the chained plugins (default [`CNI_BIN_DIR`]); the agent asks each
    /// for its supported CNI versions and lowers the conflist's `cniVersion` to fit them all.
    #[serde(
        rename = "cniBinDir",
        default = "default_cni_bin_dir",
        skip_serializing_if = "is_default_cni_bin_dir"
    )]
    pub cni_bin_dir: String,
}

pub(crate) fn node_files(
    cx: &Ctx,
    node: &ValidNode,
    out: &mut Vec<RenderedFile>,
) -> Result<(), RenderError> {
    let mtu = cx.c.spec().networking.cni.mtu;
    let cfg = AgentConfig {
        node_name: node.name.clone(),
        pod_subnet: Some(cx.c.pod_subnet().to_string()),
        vni: VNI,
        vxlan_port: VXLAN_PORT,
        vxlan_device: VXLAN_DEVICE.to_string(),
        underlay_interface: None,
        mtu,
        conflist_template: CONFLIST_TEMPLATE_PATH.to_string(),
        conflist_path: CONFLIST_PATH.to_string(),
        pod_cidr_file: POD_CIDR_FILE.to_string(),
        kubeconfig: Some(AGENT_KUBECONFIG_PATH.to_string()),
        peers_file: None,
        resync_seconds: RESYNC_SECONDS,
        cni_bin_dir: CNI_BIN_DIR.to_string(),
    };
    out.push(RenderedFile::text(
        AGENT_CONFIG_PATH,
        0o644,
        yaml::json("agent.json", &cfg)?,
        Purpose::CniAgentConfig,
    ));
    let version = conflist_cni_version(
        cx.c.spec().runtime.kind,
        cx.facts.node(&node.name).containerd_major,
    );
    out.extend(cx.cached(&format!("builtin-cni/{version}"), || {
        shared_files(mtu, version)
    })?);
    Ok(())
}

/// The conflist template and the unit: the same on every node of one runtime version. The template
/// is our plugin (CNI spec 1.1.0 "Plugin configuration objects" plus our keys `podCIDR`, `dataDir`,
/// `mtu`), followed by the reference `portmap` plugin with the `portMappings` capability, declaring
/// `cni_version`.
fn shared_files(mtu: Option<u32>, cni_version: &str) -> Result<Vec<RenderedFile>, RenderError> {
    let mut out = Vec::new();
    let mut plugin = json!({
        "type": "clusterctl-cni",
        "podCIDR": placeholders::POD_CIDR,
        "dataDir": IPAM_DATA_DIR,
    });
    if let (Some(m), Some(obj)) = (mtu, plugin.as_object_mut()) {
        obj.insert("mtu".to_string(), json!(m));
    }
    let conflist = json!({
        "cniVersion": cni_version,
        "name": NETWORK_NAME,
        "plugins": [
            plugin,
            {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
        ],
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

#[cfg(test)]
mod tests {
    use super::*;
    use clusterctl_spec::model::RuntimeKind;

    #[test]
    fn conflist_version_is_the_newest_the_runtime_speaks() {
        assert_eq!(conflist_cni_version(RuntimeKind::Containerd, 2), "1.1.0");
        assert_eq!(conflist_cni_version(RuntimeKind::Containerd, 3), "1.1.0");
        assert_eq!(conflist_cni_version(RuntimeKind::Containerd, 1), "1.0.0");
        assert_eq!(conflist_cni_version(RuntimeKind::Crio, 2), "1.0.0");
    }

    #[test]
    fn cni_bin_dir_defaults_and_is_written_only_when_changed() {
        let text = r#"{"nodeName":"n","vni":1,"vxlanPort":8472,"conflistTemplate":"/t","conflistPath":"/p"}"#;
        let mut cfg: AgentConfig = serde_json::from_str(text).expect("decodes");
        assert_eq!(cfg.cni_bin_dir, CNI_BIN_DIR);
        assert!(!serde_json::to_string(&cfg)
            .expect("json")
            .contains("cniBinDir"));
        cfg.cni_bin_dir = "/x".into();
        assert!(serde_json::to_string(&cfg)
            .expect("json")
            .contains(r#""cniBinDir":"/x""#));
    }
}
