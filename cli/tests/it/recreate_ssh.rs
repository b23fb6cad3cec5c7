//! `clusterctl up --recreate` on the test bed: two systemd node containers over real SSH with the
//! recording kubeadm/kubelet/kubectl stand-ins, the recording API server the stand-ins' `admin.conf`
//! points at, and an image built in the local Docker engine that the file preloads. `up` builds the
//! cluster; the worker's runtime then loses the image (as a rebuilt node's would); `up --recreate`
//! must reset every node first (worker, then control plane), then build again from scratch — `kubeadm
//! init` and `kubeadm join` run again (no recorded phase skipped) — and the new cluster carries the
//! file's labels and taints (the taint in the join configuration, labels and taints patched through
//! the API after the re-create) and the preloaded
//! image on every node.

use clusterctl_testbed::cli::StandinCluster;
use clusterctl_testbed::cli::{
    install_standins, ssh_cluster_yaml, standin_calls, Clusterctl, FileNode, LocalImage, StandinApi,
};
use clusterctl_testbed::docker::{docker_available, TestNode};
use clusterctl_testbed::{is_root, require, unique_name};

const UP: &[&str] = &[
    "--ready-timeout",
    "30",
    "--ignore-preflight",
    "time-sync,module/br_netfilter,node-environment,resolv-conf",
];

fn has_image(n: &TestNode, full: &str) -> bool {
    n.sh("ctr -n k8s.io images ls -q")
        .expect("ctr")
        .lines()
        .any(|l| l == full)
}

fn positions(calls: &[String], prefix: &str) -> Vec<usize> {
    (0..calls.len())
        .filter(|i| calls[*i].starts_with(prefix))
        .collect()
}

#[test]
fn up_recreate_rebuilds_with_labels_taints_and_images() {
    if !require("root and a Docker engine", is_root() && docker_available()) {
        return;
    }
    let sc = StandinCluster::start("rc", 2).expect("node containers");
    let (store, tc) = (&sc.store, &sc.cluster);
    for n in &tc.nodes {
        install_standins(n).expect("stand-ins");
    }
    let (c1, w1) = (&tc.nodes[0], &tc.nodes[1]);
    let home = tempfile::tempdir().expect("home");
    let image = LocalImage::import(
        home.path(),
        &format!("clusterctl-test/app:{}", unique_name("r")),
    )
    .expect("image");
    let full = format!("docker.io/{}", image.name);
    let api = StandinApi::start(&tc.gateway, store.path()).expect("api server");
    api.serve_nodes(&[&c1.name, &w1.name]);
    // `cni: none`: wait-ready waits for the control plane's static pods, not for Ready Nodes.
    api.serve_control_plane_pods(&[&c1.name]);
    let nodes = [
        FileNode::control_plane(c1),
        FileNode::worker(w1)
            .label("disktype", "ssd")
            .taint("dedicated", "db", "NoSchedule"),
    ];
    let extra = format!("  images:\n    preload: [\"{}\"]\n", image.name);
    std::fs::write(
        home.path().join("cluster.yaml"),
        ssh_cluster_yaml("rclab", &tc.key.private, "none", None, &extra, &nodes),
    )
    .expect("file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), home.path());
    let kh = c1.known_hosts.to_string_lossy().into_owned();
    let mut up = vec!["up", "-f", "cluster.yaml", "--known-hosts", &kh];
    up.extend_from_slice(UP);

    let r = cli.run(&up).expect("up");
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(has_image(c1, &full) && has_image(w1, &full));
    // The rebuilt worker's runtime has lost the image.
    w1.sh(&format!("ctr -n k8s.io images rm {full}"))
        .expect("rm");
    assert!(!has_image(w1, &full));
    let recorded_before = api.server.recorded().len();

    up.push("--recreate");
    let r = cli.run(&up).expect("up --recreate");
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    eprintln!("--- session output ---\n{out}");

    // Torn down first, worker before control plane, then built again.
    let w_reset = out
        .find(&format!("{}: kubeadm reset: done", w1.name))
        .expect("worker reset");
    let c_reset = out
        .find(&format!("{}: kubeadm reset: done", c1.name))
        .expect("cp reset");
    let rebuilt = out.find("recreate: cluster rclab destroyed").expect("said");
    let init = out
        .find(&format!("[{}] init: run: kubeadm init", c1.name))
        .expect("init again");
    assert!(
        w_reset < c_reset && c_reset < rebuilt && rebuilt < init,
        "{out}"
    );
    let c = standin_calls(c1).expect("calls");
    let inits = positions(&c, "kubeadm init --config");
    let resets = positions(&c, "kubeadm reset");
    assert_eq!(inits.len(), 2, "{c:?}");
    assert_eq!(resets.len(), 1, "{c:?}");
    assert!(inits[0] < resets[0] && resets[0] < inits[1], "{c:?}");
    let w = standin_calls(w1).expect("calls");
    let joins = positions(&w, "kubeadm join --config");
    let wresets = positions(&w, "kubeadm reset");
    assert_eq!((joins.len(), wresets.len()), (2, 1), "{w:?}");
    assert!(joins[0] < wresets[0] && wresets[0] < joins[1], "{w:?}");

    // The new cluster: labels and taints at registration and through the API, the image everywhere.
    let cfg = w1
        .sh("cd /var/log/clusterctl-standin && for f in $(ls *-kubeadm.yaml | sort -n); do grep -q JoinConfiguration $f && last=$f; done; cat $last")
        .expect("join config");
    assert!(
        cfg.contains("key: dedicated") && cfg.contains("value: db"),
        "{cfg}"
    );
    let patches: Vec<String> = api.server.recorded()[recorded_before..]
        .iter()
        .filter(|r| r.method == "PATCH" && r.path == format!("/api/v1/nodes/{}", w1.name))
        .map(|r| r.json().to_string())
        .collect();
    let all = patches.join("\n");
    assert!(
        all.contains("\"disktype\":\"ssd\"") && all.contains("\"dedicated\""),
        "{all}"
    );
    assert!(has_image(c1, &full) && has_image(w1, &full));
    let kc = std::fs::read_to_string(cli.kubeconfig()).expect("kubeconfig");
    assert!(kc.contains("name: clusterctl-rclab"), "{kc}");
}
