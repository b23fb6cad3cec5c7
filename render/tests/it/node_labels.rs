//! Node labels at registration: the kubelet-settable labels of a node reach the kubelet's
//! `node-labels` flag in `nodeRegistration.kubeletExtraArgs` of its Init/Join configuration, in both
//! kubeadm API shapes (v1beta4 `{name, value}` list, v1beta3 map), next to `node-ip` and never twice;
//! labels the kubelet may not set (e.g. `node-role.kubernetes.io/*`) are left out; the flag does not
//! depend on the order the file lists labels in.

use crate::common;

use clusterctl_render::{render_with_api, Facts};
use clusterctl_spec::{KubeadmApi, ValidCluster};
use serde_yaml::Value;

const INIT: &str = "/etc/kubernetes/kubeadm/init.yaml";
const JOIN: &str = "/etc/kubernetes/kubeadm/join.yaml";

/// The ha-crio-mirror fixture with its node lines for c1 and w1 replaced by `c1` and `w1`.
fn cluster(c1_labels: &str, w1_labels: &str) -> ValidCluster {
    let mut l = common::fixture("ha-crio-mirror");
    let text: Vec<String> = l
        .source_text
        .lines()
        .map(|line| {
            let t = line.trim_start();
            let indent = &line[..line.len() - t.len()];
            if t.starts_with("- {name: topgun-c1,") {
                format!("{indent}- {{name: topgun-c1, role: control-plane, address: 172.20.6.111/24, labels: {c1_labels}}}")
            } else if t.starts_with("- {name: topgun-w1,") {
                format!("{indent}- {{name: topgun-w1, role: worker, address: 172.20.6.114/24, labels: {w1_labels}}}")
            } else {
                line.to_string()
            }
        })
        .collect();
    l.source_text = text.join("\n") + "\n";
    common::valid("ha-crio-mirror+labels", &l)
}

/// `(name, value)` pairs of `nodeRegistration.kubeletExtraArgs` of the `kind` document in `path` of
/// `node`, in file order, whichever API shape the file has.
fn kubelet_args(
    c: &ValidCluster,
    api: KubeadmApi,
    node: &str,
    path: &str,
    kind: &str,
) -> Vec<(String, String)> {
    let r = render_with_api(c, &Facts::assumed(c), api).expect("renders");
    let f = r
        .node_file(node, path)
        .unwrap_or_else(|| panic!("{node} has no {path}"));
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&f.as_text())
        .map(|d| serde::Deserialize::deserialize(d).expect("yaml"))
        .collect();
    let doc = docs
        .iter()
        .find(|d| d["kind"] == Value::String(kind.into()))
        .unwrap_or_else(|| panic!("{path} has no {kind}"));
    let args = &doc["nodeRegistration"]["kubeletExtraArgs"];
    let text = |v: &Value| v.as_str().expect("string").to_string();
    match api {
        KubeadmApi::V1beta4 => args
            .as_sequence()
            .expect("v1beta4 extraArgs is a list")
            .iter()
            .map(|a| (text(&a["name"]), text(&a["value"])))
            .collect(),
        KubeadmApi::V1beta3 => args
            .as_mapping()
            .expect("v1beta3 extraArgs is a map")
            .iter()
            .map(|(k, v)| (text(k), text(v)))
            .collect(),
    }
}

fn values<'a>(args: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    args.iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

const APIS: [KubeadmApi; 2] = [KubeadmApi::V1beta4, KubeadmApi::V1beta3];

#[test]
fn allowed_labels_reach_node_labels_next_to_node_ip_in_both_apis() {
    let c = cluster(
        "{topology.kubernetes.io/zone: rack1, node.kubernetes.io/pool: a}",
        "{disktype: ssd, example.com/gpu: t4, node-role.kubernetes.io/worker: \"\"}",
    );
    for api in APIS {
        let init = kubelet_args(&c, api, "topgun-c1", INIT, "InitConfiguration");
        assert_eq!(values(&init, "node-ip"), ["172.20.6.111"], "{api:?}");
        assert_eq!(
            values(&init, "node-labels"),
            ["node.kubernetes.io/pool=a,topology.kubernetes.io/zone=rack1"],
            "{api:?}"
        );
        let join = kubelet_args(&c, api, "topgun-w1", JOIN, "JoinConfiguration");
        assert_eq!(values(&join, "node-ip"), ["172.20.6.114"], "{api:?}");
        assert_eq!(
            values(&join, "node-labels"),
            ["disktype=ssd,example.com/gpu=t4"],
            "{api:?}"
        );
        assert_eq!(join.len(), 2, "{api:?}: only node-ip and node-labels");
    }
}

#[test]
fn restricted_labels_are_absent_and_unlabelled_nodes_get_no_flag() {
    let c = cluster(
        "{node-role.kubernetes.io/control-plane: \"\", kubernetes.io/role: master}",
        "{node-role.kubernetes.io/worker: \"\", example.k8s.io/x: y}",
    );
    for api in APIS {
        for (node, path, kind) in [
            ("topgun-c1", INIT, "InitConfiguration"),
            ("topgun-w1", JOIN, "JoinConfiguration"),
            ("topgun-w2", JOIN, "JoinConfiguration"),
            ("topgun-c2", JOIN, "JoinConfiguration"),
        ] {
            let args = kubelet_args(&c, api, node, path, kind);
            assert!(
                values(&args, "node-labels").is_empty(),
                "{api:?} {node}: {args:?}"
            );
            assert_eq!(values(&args, "node-ip").len(), 1, "{api:?} {node}");
            for (_, v) in &args {
                assert!(!v.contains("kubernetes.io/role"), "{api:?} {node}: {v}");
                assert!(!v.contains("k8s.io/"), "{api:?} {node}: {v}");
            }
        }
    }
}

#[test]
fn node_labels_do_not_depend_on_file_order() {
    let a = cluster("{b: \"2\", a: \"1\", c: \"3\"}", "{z: last, m: mid}");
    let b = cluster("{c: \"3\", a: \"1\", b: \"2\"}", "{m: mid, z: last}");
    for api in APIS {
        let fa = kubelet_args(&a, api, "topgun-c1", INIT, "InitConfiguration");
        let fb = kubelet_args(&b, api, "topgun-c1", INIT, "InitConfiguration");
        assert_eq!(fa, fb, "{api:?}");
        assert_eq!(values(&fa, "node-labels"), ["a=1,b=2,c=3"], "{api:?}");
        let ja = kubelet_args(&a, api, "topgun-w1", JOIN, "JoinConfiguration");
        let jb = kubelet_args(&b, api, "topgun-w1", JOIN, "JoinConfiguration");
        assert_eq!(ja, jb, "{api:?}");
        assert_eq!(values(&ja, "node-labels"), ["m=mid,z=last"], "{api:?}");
    }
}
