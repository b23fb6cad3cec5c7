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
use clusterctl_spec::model::VXLAN_OVERHEAD;
use clusterctl_spec::ValidNode;
use ipnet::IpNet;
use minijinja::context;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The agent's settings file.
pub const AGENT_CONFIG_PATH: &str = "/etc/clusterctl/cni/agent.json";
/// The conflist template (podCIDR placeholder inside).
pub const CONFLIST_TEMPLATE_PATH: &str = "/etc/clusterctl/cni/10-clusterctl.conflist";
/// Where the agent installs the completed conflist.
pub(crate) const CONFLIST_PATH: &str = "/etc/cni/net.d/10-clusterctl.conflist";
/// The agent's kubeconfig (ServiceAccount token; written by the phases, mode 0600).
pub const AGENT_KUBECONFIG_PATH: &str = "/etc/clusterctl/cni/agent.kubeconfig";
/// The systemd unit.
pub const UNIT_PATH: &str = "/etc/systemd/system/clusterctl-cni-agent.service";
/// The installed clusterctl binary.
pub const BINARY_PATH: &str = "/usr/local/bin/clusterctl";
/// Cluster-relative path of the RBAC manifest.
pub const RBAC_PATH: &str = "cni/clusterctl-cni-rbac.yaml";
/// The CNI network name.
pub(crate) const NETWORK_NAME: &str = "clusterctl";
/// VXLAN network identifier (as the seed's overlay).
pub const VNI: u32 = 1;
/// VXLAN UDP port (Linux/flannel default 8472).
pub(crate) const VXLAN_PORT: u16 = 8472;
/// The agent's ServiceAccount (namespace `kube-system`).
pub const SERVICE_ACCOUNT: &str = "clusterctl-cni";

/// The VXLAN device the agent keeps.
pub(crate) const VXLAN_DEVICE: &str = "cc-vxlan";
/// Where the agent writes this node's podCIDR for the plugin (the plugin's default `podCIDRFile`).
pub(crate) const POD_CIDR_FILE: &str = "/run/clusterctl-cni/podcidr";
/// The plugin's IPAM data directory (`dataDir`; state in `<dataDir>/<network name>/state.json`).
pub(crate) const IPAM_DATA_DIR: &str = "/var/lib/cni/clusterctl";
/// cniVersion of the conflist for a runtime that stops at CNI 1.0.0: containerd 1.6/1.7 (libcni
/// v1.1) and CRI-O (ocicni on libcni v1.1 in the releases this tool installs).
pub(crate) const CONFLIST_CNI_VERSION: &str = "1.0.0";
/// cniVersion of the conflist for a runtime that speaks CNI 1.1.0 (STATUS and GC): containerd 2.x
/// (go-cni on libcni v1.2+, which calls STATUS on every plugin of a 1.1.0 list).
pub(crate) const CONFLIST_CNI_VERSION_1_1: &str = "1.1.0";
/// Where the runtime finds CNI plugins (containerd's and CRI-O's default `bin_dir`); the agent asks
/// the chained plugins there which CNI versions they support.
pub(crate) const CNI_BIN_DIR: &str = "/opt/cni/bin";
/// Seconds between full resyncs of the agent when nothing changed.
pub(crate) const RESYNC_SECONDS: u64 = 30;

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
    /// The cluster's podSubnet, a CIDR written as a string (`"10.244.0.0/16"`) and decoded once into
    /// an [`IpNet`]: pod traffic to destinations outside it is masqueraded. The agent accepts IPv4
    /// only (its `check_config`). `None`: no masquerade.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pod_subnet: Option<IpNet>,
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
    /// VXLAN device and pod MTU, bytes: render always sets the cluster's one MTU ([`overlay_mtu`]);
    /// `None` (hand-written settings): this node's underlay MTU − 50.
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

/// The underlay MTU assumed when no node's interface was looked at and the file states none (offline
/// `render`, `up --dry-run` without `--probe`): Ethernet's.
pub(crate) const ASSUMED_UNDERLAY_MTU: u32 = 1500;

/// The one overlay MTU of the whole cluster (VXLAN device, agent settings and every conflist), so that
/// no node sends a packet another node's underlay cannot carry:
///
/// * `cni.mtu` when the file sets it — refused ([`RenderError::MtuTooLarge`]) when a node's
///   underlay interface cannot carry it plus the VXLAN overhead;
/// * else the smallest of every looked-at node's underlay interface MTU and `networking.underlayMTU`,
///   minus [`VXLAN_OVERHEAD`]. When some nodes were not looked at (`node join` reaches only the
///   first control plane and the joining nodes), the overlay MTU installed on the nodes that were
///   stands for the others; when none was, [`ASSUMED_UNDERLAY_MTU`] (or `underlayMTU`) is used.
///
/// A node whose interface would lower the MTU a running cluster uses (installed on its nodes) is
/// refused ([`RenderError::MtuWouldLower`]) unless the file sets `cni.mtu`: lowering it is a change of
/// every node, which the file has to say.
pub(crate) fn overlay_mtu(
    c: &clusterctl_spec::ValidCluster,
    facts: &crate::facts::Facts,
) -> Result<u32, RenderError> {
    let net = &c.spec().networking;
    let per_node: Vec<(&str, Option<&crate::facts::NodeFacts>)> = c
        .nodes()
        .iter()
        .map(|n| (n.name.as_str(), facts.nodes.get(&n.name)))
        .collect();
    let underlays: Vec<(&str, &str, u32)> = per_node
        .iter()
        .filter_map(|(n, f)| {
            f.and_then(|f| f.underlay.as_ref())
                .map(|(i, m)| (*n, i.as_str(), *m))
        })
        .collect();
    if let Some(mtu) = net.cni.mtu {
        if let Some((node, interface, nic)) = underlays
            .iter()
            .filter(|(_, _, nic)| *nic < mtu + VXLAN_OVERHEAD)
            .min_by_key(|(_, _, nic)| *nic)
        {
            return Err(RenderError::MtuTooLarge {
                node: node.to_string(),
                interface: interface.to_string(),
                nic: *nic,
                mtu,
                fits: nic.saturating_sub(VXLAN_OVERHEAD),
            });
        }
        return Ok(mtu);
    }
    let running = per_node
        .iter()
        .filter_map(|(_, f)| f.and_then(|f| f.installed_overlay_mtu))
        .min();
    if let Some(running) = running {
        if let Some((node, interface, nic)) = underlays
            .iter()
            .filter(|(_, _, nic)| nic.saturating_sub(VXLAN_OVERHEAD) < running)
            .min_by_key(|(_, _, nic)| *nic)
        {
            return Err(RenderError::MtuWouldLower {
                node: node.to_string(),
                interface: interface.to_string(),
                nic: *nic,
                lowered: nic.saturating_sub(VXLAN_OVERHEAD),
                running,
                needed: running + VXLAN_OVERHEAD,
            });
        }
    }
    let all_seen = underlays.len() == per_node.len();
    let smallest = underlays
        .iter()
        .map(|(_, _, m)| *m)
        .chain(net.underlay_mtu)
        .min();
    let derived = smallest.map(|m| m.saturating_sub(VXLAN_OVERHEAD));
    Ok(match (derived, running) {
        (Some(d), Some(r)) if !all_seen => d.min(r),
        (Some(d), _) => d,
        (None, Some(r)) => r,
        (None, None) => ASSUMED_UNDERLAY_MTU - VXLAN_OVERHEAD,
    })
}

pub(crate) fn node_files(
    cx: &Ctx,
    node: &ValidNode,
    out: &mut Vec<RenderedFile>,
) -> Result<(), RenderError> {
    let mtu = Some(overlay_mtu(cx.c, cx.facts)?);
    let cfg = AgentConfig {
        node_name: node.name.clone(),
        pod_subnet: Some(cx.c.pod_subnet()),
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
        rules: vec![
            Rule {
                api_groups: vec![""],
                resources: vec!["nodes"],
                verbs: vec!["get", "list", "watch"],
            },
            // NetworkPolicy enforcement: the policies and what they select.
            Rule {
                api_groups: vec![""],
                resources: vec!["namespaces", "pods"],
                verbs: vec!["list", "watch"],
            },
            Rule {
                api_groups: vec!["networking.k8s.io"],
                resources: vec!["networkpolicies"],
                verbs: vec!["list", "watch"],
            },
            // A policy it cannot program, or a node that cannot enforce: reported as Events.
            Rule {
                api_groups: vec![""],
                resources: vec!["events"],
                verbs: vec!["create"],
            },
        ],
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

    use crate::facts::{Facts, NodeFacts};

    /// The builtin profile with its `mtu: 1450` line replaced by `mtu` (none when empty) and
    /// `underlay` added to `networking`.
    fn cluster(mtu: &str, underlay: &str) -> clusterctl_spec::ValidCluster {
        let p = clusterctl_spec::from_profile("builtin").expect("profile");
        let text = p.source_text.replace("      mtu: 1450\n", mtu).replace(
            "    nodeCidrMaskSize: 25\n",
            &format!("    nodeCidrMaskSize: 25\n{underlay}"),
        );
        let l = clusterctl_spec::Loaded::from_text("c.yaml", text);
        clusterctl_spec::validate(&l).expect("valid").cluster
    }

    /// One node in a test: its name, its underlay NIC and MTU, and the installed overlay MTU.
    type TestNode<'a> = (&'a str, Option<(&'a str, u32)>, Option<u32>);

    fn facts(nodes: &[TestNode<'_>]) -> Facts {
        let mut f = Facts::default();
        for (n, u, i) in nodes {
            f.nodes.insert(
                n.to_string(),
                NodeFacts {
                    underlay: u.map(|(i, m)| (i.to_string(), m)),
                    installed_overlay_mtu: *i,
                    ..NodeFacts::default()
                },
            );
        }
        f
    }

    /// Issue 15 item 2: one MTU for the whole cluster — the smallest NIC MTU minus 50, not each
    /// node's own (1450 on a 1500 NIC next to 8951 on a 9001 NIC dropped large packets).
    #[test]
    fn one_overlay_mtu_for_the_cluster_from_the_smallest_underlay() {
        let c = cluster("", "");
        let mixed = facts(&[
            ("cp1", Some(("ens5", 9001)), None),
            ("node1", Some(("eth0", 1500)), None),
            ("node2", Some(("ens5", 9001)), None),
        ]);
        assert_eq!(overlay_mtu(&c, &mixed).expect("mtu"), 1450);
        let rendered = crate::render(&c, &mixed).expect("render");
        for n in ["cp1", "node1", "node2"] {
            let agent: AgentConfig = serde_json::from_slice(
                &rendered
                    .node_file(n, AGENT_CONFIG_PATH)
                    .expect("agent")
                    .content,
            )
            .expect("json");
            assert_eq!(agent.mtu, Some(1450), "{n}");
            let conflist: serde_json::Value = serde_json::from_slice(
                &rendered
                    .node_file(n, CONFLIST_TEMPLATE_PATH)
                    .expect("conflist")
                    .content,
            )
            .expect("json");
            assert_eq!(conflist["plugins"][0]["mtu"], 1450, "{n}");
        }
        // Nothing looked at: the usual 1500 underlay; the file's path MTU wins when smaller.
        assert_eq!(overlay_mtu(&c, &Facts::default()).expect("mtu"), 1450);
        let tunnel = cluster("", "    underlayMTU: 1400\n");
        assert_eq!(overlay_mtu(&tunnel, &Facts::default()).expect("mtu"), 1350);
        assert_eq!(overlay_mtu(&tunnel, &mixed).expect("mtu"), 1350);
        // The file's value, when every NIC carries it.
        let set = cluster("      mtu: 8000\n", "");
        let jumbo = facts(&[
            ("cp1", Some(("ens5", 9001)), None),
            ("node1", Some(("ens5", 9001)), None),
            ("node2", Some(("ens5", 9001)), None),
        ]);
        assert_eq!(overlay_mtu(&set, &jumbo).expect("mtu"), 8000);
        match overlay_mtu(&set, &mixed) {
            Err(e @ RenderError::MtuTooLarge { .. }) => {
                let m = e.to_string();
                assert!(
                    m.contains("node node1: its interface eth0 has MTU 1500"),
                    "{m}"
                );
                assert!(m.contains("cni.mtu: 1450"), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// A node joining a running cluster (the first control plane's agent runs with 1450) with a
    /// 1400 NIC is refused, saying what to set; with `cni.mtu` set it is not. A node with a larger
    /// NIC joins at the cluster's MTU, also when other nodes were not looked at.
    #[test]
    fn a_join_that_would_lower_the_running_mtu_is_refused_unless_the_file_sets_it() {
        let c = cluster("", "");
        let join_small = facts(&[
            ("cp1", Some(("eth0", 1500)), Some(1450)),
            ("node2", Some(("eth0", 1400)), None),
        ]);
        match overlay_mtu(&c, &join_small) {
            Err(e @ RenderError::MtuWouldLower { .. }) => {
                let m = e.to_string();
                assert!(
                    m.contains("node node2: its interface eth0 has MTU 1400"),
                    "{m}"
                );
                assert!(m.contains("below the 1450 the running cluster"), "{m}");
                assert!(m.contains("`spec.networking.cni.mtu: 1350`"), "{m}");
                assert!(m.contains("at least 1500"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        let set = cluster("      mtu: 1350\n", "");
        assert_eq!(overlay_mtu(&set, &join_small).expect("mtu"), 1350);
        // node1 (not looked at) runs 1400 − 50: a 9001 node joins at the running 1350.
        let join_big = facts(&[
            ("cp1", Some(("eth0", 1500)), Some(1350)),
            ("node2", Some(("ens5", 9001)), None),
        ]);
        assert_eq!(overlay_mtu(&c, &join_big).expect("mtu"), 1350);
        // Every node looked at (up): derived from the NICs again, e.g. after a small node left.
        let all = facts(&[
            ("cp1", Some(("eth0", 1500)), Some(1350)),
            ("node1", Some(("eth0", 1500)), Some(1350)),
            ("node2", Some(("eth0", 1500)), None),
        ]);
        assert_eq!(overlay_mtu(&c, &all).expect("mtu"), 1450);
    }

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
