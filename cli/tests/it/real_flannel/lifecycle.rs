//! The later steps of `real_flannel`'s lifecycle test, on its 1 + 2 flannel cluster: `node join` of a
//! worker added to the file ([`join_worker`]), `node remove` of it ([`remove_worker`]), the switch to
//! the builtin CNI refused by `up` ([`switch_refused`]) and done by `up --recreate`
//! ([`recreate_builtin`]), then `destroy` leaving every node as it was before the first `up`
//! ([`NodeListings`]). The joined worker is in the file only between `node join` and `node remove`;
//! the test marks it [`NOT_IN_FILE`](crate::real_support::NOT_IN_FILE) in the cluster's roles otherwise,
//! so the shared checks ask only the nodes the file declares.

use std::time::Duration;

use clusterctl_testbed::docker::TestNode;

use super::{FLANNEL, FLANNEL_LEFT};
use crate::real_cluster::{all_ready, check_cluster_over, pods_ready};
use crate::real_support::{wait_for, Kube, RealCluster};

/// The preloaded image of `images.preload` in the node's containerd.
fn has_preloaded(n: &TestNode) -> bool {
    n.sh("ctr -n k8s.io images ls -q")
        .expect("images")
        .contains("busybox:1")
}

/// `node join` of `w2` (the file already declares it) on the flannel cluster: flannel's pod on it
/// Ready, then the web pods placed again (`web-0` on `w2`, `web-1` on `cp`) and the shared checks over
/// flannel (every node Ready with flannel's conflist alone, CoreDNS, traffic from `w2`'s pod across to
/// the control plane's through `flannel.1`), and the preloaded image on `w2`.
pub(crate) fn join_worker(c: &RealCluster, w2: &TestNode, cp: &TestNode) {
    let f = c.file.to_string_lossy().into_owned();
    let j = c.clusterctl(&["node", "join", "-f", &f, &w2.name]);
    assert_eq!(j.code, 0, "node join:\n{}", j.all());
    wait_for(
        "flannel's pod on the joined worker Ready",
        Duration::from_secs(180),
        || {
            let out = c.kubectl(&format!(
                "-n kube-flannel get pods -l app=flannel --field-selector spec.nodeName={} -o jsonpath='{{range .items[*]}}{{.status.phase}} {{.status.conditions[?(@.type==\"Ready\")].status}}{{end}}'",
                w2.name
            ));
            (out == "Running True").then_some(()).ok_or(out)
        },
    );
    wait_for("three flannel pods Ready", Duration::from_secs(60), || {
        pods_ready(c, "kube-flannel", "app=flannel", 3)
    });
    // The web pods again, web-0 on the joined worker (node remove's drain evicts it).
    c.kubectl("delete pod -l app=web --grace-period=1");
    check_cluster_over(c, &[w2.name.clone(), cp.name.clone()], &FLANNEL);
    assert!(has_preloaded(w2), "preloaded image on the joined node");
}

/// `node remove` of `w2`: drained (`web-0` runs there), the Node deleted, the node reset — with none
/// of flannel's devices, chains or files left on it.
pub(crate) fn remove_worker(c: &RealCluster, w2: &TestNode) {
    let f = c.file.to_string_lossy().into_owned();
    let r = c.clusterctl(&[
        "node",
        "remove",
        "-f",
        &f,
        "--timeout",
        "120",
        "--retry-interval",
        "1",
        &w2.name,
    ]);
    assert_eq!(r.code, 0, "node remove:\n{}", r.all());
    let nodes = c.kubectl("get nodes -o name");
    assert!(!nodes.contains(&w2.name), "{nodes}");
    assert!(
        c.kubectl("get pod web-0 --ignore-not-found -o name")
            .is_empty(),
        "web-0 evicted"
    );
    assert!(
        w2.sh("test ! -e /etc/kubernetes/kubelet.conf && ! systemctl is-active -q kubelet")
            .is_ok(),
        "w2 reset"
    );
    let left = w2.sh(FLANNEL_LEFT).expect("listing");
    assert!(
        left.is_empty(),
        "{}: flannel left after node remove:\n{left}",
        w2.name
    );
}

/// The file (flannel) switched to the builtin CNI: `up` refuses in preflight, before changing any
/// node, naming flannel's conflist and `up --recreate`; nothing of the builtin CNI is placed on the
/// file's nodes.
pub(crate) fn switch_refused(c: &RealCluster) {
    let flannel_file = std::fs::read_to_string(&c.file).expect("cluster file");
    let builtin_file: String = flannel_file
        .lines()
        .filter(|l| !l.starts_with("      sources:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(
        &c.file,
        builtin_file.replace("      plugin: flannel\n", "      plugin: builtin\n"),
    )
    .expect("cluster file");
    let f = c.file.to_string_lossy().into_owned();
    let switch = c.clusterctl(&["up", "-f", &f]);
    let out = switch.all();
    assert_ne!(
        switch.code, 0,
        "a CNI switch in place must be refused:\n{out}"
    );
    let flat: String = out
        .chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '│' | '×' | '╰' | '─' | '├'))
        .collect();
    assert!(
        flat.contains("cni-switch")
            && flat.contains("/etc/cni/net.d/10-flannel.conflist")
            && flat.contains("clusterctlup--recreate"),
        "{out}"
    );
    for n in &c.node_names() {
        assert_eq!(
            c.node_sh(
                n,
                "ls /etc/cni/net.d; systemctl is-enabled clusterctl-cni-agent 2>/dev/null || true"
            ),
            "10-flannel.conflist",
            "{n}: the refused up changed nothing"
        );
    }
}

/// `up --recreate` with the file naming the builtin CNI (the nodes still have flannel's conflist) and
/// without `w2`, `w1`'s runtime having lost the preloaded image (as a rebuilt node's would): destroy
/// takes flannel's devices, chains and files off every node; the new cluster has the same nodes
/// (`cp`, `w1`, not `w2`), the builtin CNI's conflist alone, `w1`'s label and taint, the image on both.
pub(crate) fn recreate_builtin(c: &RealCluster, cp: &TestNode, w1: &TestNode, w2: &TestNode) {
    w1.sh("ctr -n k8s.io images ls -q | grep busybox:1 | xargs -r ctr -n k8s.io images rm")
        .expect("rm image");
    let r = c.up(&["--recreate"]);
    assert!(r.all().contains("destroyed"), "{}", r.all());
    wait_for(
        "nodes Ready after recreate",
        Duration::from_secs(180),
        || all_ready(c),
    );
    let nodes = c.kubectl("get nodes -o name");
    assert!(
        nodes.contains(&cp.name) && nodes.contains(&w1.name) && !nodes.contains(&w2.name),
        "{nodes}"
    );
    for n in &c.nodes.nodes {
        let left = n.sh(FLANNEL_LEFT).expect("listing");
        assert!(
            left.is_empty(),
            "{}: flannel left after --recreate:\n{left}",
            n.name
        );
    }
    for n in &c.node_names() {
        assert_eq!(
            c.node_sh(n, "ls /etc/cni/net.d"),
            "10-clusterctl.conflist",
            "{n}"
        );
    }
    let lt = c.kubectl(&format!(
        "get node {} -o jsonpath='{{.metadata.labels.disktype}} {{.spec.taints}}'",
        w1.name
    ));
    assert!(
        lt.starts_with("ssd ") && lt.contains("\"dedicated\""),
        "{lt}"
    );
    for n in [cp, w1] {
        assert!(
            has_preloaded(n),
            "{}: preloaded image after recreate",
            n.name
        );
    }
}

/// What `destroy` must leave as it found it on a node: every regular file under the directories `up`
/// writes (kubeadm's, the runtime's, the CNI's, clusterctl's), the network links and addresses (the
/// VXLAN device, the VIP) and clusterctl's own iptables rules, sorted.
const NODE_FILES: &str = "{ find /etc /opt /usr/local /var/lib/clusterctl /var/lib/cni /var/lib/kubelet /var/lib/etcd /run/clusterctl-cni -type f 2>/dev/null | grep -v -e '^/etc/ssh/' -e '^/etc/machine-id' -e '^/etc/mtab'; \
    ip -o link show | awk -F': ' '{print \"link \" $2}' | sed 's/@.*//'; \
    ip -o addr show | awk '{print \"addr \" $2 \" \" $4}'; \
    iptables-save 2>/dev/null | grep -i clusterctl | sed -E 's/\\[[0-9]+:[0-9]+\\]//; s/^/rule /'; } | sort";

/// Everything else `up` changes that a node as it was before would not have: directories, links,
/// every iptables rule (kube-proxy's too). After `destroy` only the iptables tables the kubelet and
/// kube-proxy made may stay, empty (their built-in chains accepting, no rule): `destroy` deletes them
/// where the node has `nft`, which the test-bed node images have only since issue 28 (docs/testing.md,
/// "Real clusters").
const NODE_REST: &str = "{ find /etc /opt /usr/local /var/lib/clusterctl /var/lib/cni /var/lib/kubelet /var/lib/etcd /run/clusterctl-cni ! -type f 2>/dev/null; \
    iptables-save 2>/dev/null | grep -v '^#' | sed -E 's/\\[[0-9]+:[0-9]+\\]//; s/^/rule /'; } | sort";

/// Every node's [`NODE_FILES`] and [`NODE_REST`] listings, taken before the first `up`.
pub(crate) struct NodeListings(Vec<(String, String)>);

impl NodeListings {
    /// The listings of every node container of `c`.
    pub(crate) fn take(c: &RealCluster) -> NodeListings {
        NodeListings(
            c.nodes
                .nodes
                .iter()
                .map(|n| {
                    (
                        n.sh(NODE_FILES).expect("listing"),
                        n.sh(NODE_REST).expect("listing"),
                    )
                })
                .collect(),
        )
    }

    /// `destroy`, then every node as these listings found it before the first `up` (`w2` was reset by
    /// `node remove`): no regular file, link, address or clusterctl rule added or gone, no unit of
    /// clusterctl's left enabled, no directory or rule added but the empty iptables tables.
    pub(crate) fn destroy_leaves_nodes_as_before(&self, c: &RealCluster) {
        let f = c.file.to_string_lossy().into_owned();
        let d = c.clusterctl(&["destroy", "-f", &f, "--yes"]);
        assert_eq!(d.code, 0, "destroy:\n{}", d.all());
        for (n, (files, rest)) in c.nodes.nodes.iter().zip(&self.0) {
            let diff = similar_lines(files, &n.sh(NODE_FILES).expect("listing"));
            assert!(
                diff.is_empty(),
                "{}: left after destroy:\n{}",
                n.name,
                diff.join("\n")
            );
            // The units `up` enables are disabled before their files go: no `*.wants/` link of theirs
            // is left (the test image's own clusterctl-hostkeys.service was there before `up`).
            let links = n
                .sh("find /etc/systemd/system -name 'clusterctl-cni-agent.service' -o -name 'clusterctl-node-environment.service' 2>/dev/null")
                .expect("listing");
            assert_eq!(
                links.trim(),
                "",
                "{}: clusterctl units left enabled",
                n.name
            );
            let residue = similar_lines(rest, &n.sh(NODE_REST).expect("listing"));
            eprintln!(
                "[real] {}: destroy left {} lines not there before (empty iptables tables, docs/testing.md):\n{}",
                n.name,
                residue.len(),
                residue.join("\n")
            );
            let empty_table = |l: &str| {
                l.starts_with("+ rule *")
                    || (l.starts_with("+ rule :") && l.trim_end().ends_with(" ACCEPT"))
            };
            let left: Vec<&String> = residue.iter().filter(|l| !empty_table(l)).collect();
            assert!(
                left.is_empty(),
                "{}: destroy left directories, links or rules (KUBE-* chains, empty directories):\n{left:#?}",
                n.name
            );
        }
    }
}

/// Lines only in `a` (`- `) or only in `b` (`+ `).
fn similar_lines(a: &str, b: &str) -> Vec<String> {
    let (sa, sb): (
        std::collections::BTreeSet<&str>,
        std::collections::BTreeSet<&str>,
    ) = (a.lines().collect(), b.lines().collect());
    sa.difference(&sb)
        .map(|l| format!("- {l}"))
        .chain(sb.difference(&sa).map(|l| format!("+ {l}")))
        .collect()
}
