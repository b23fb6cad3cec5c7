//! `clusterctl node join` on the test bed: four systemd node containers over real SSH with the recording
//! kubeadm/kubelet/kubectl stand-ins, and the recording API server the stand-ins' `admin.conf` points at
//! (the Nodes it serves are the cluster: two, then four once `node join` has checked which are
//! registered). `up` builds a 1 control plane + 1 worker cluster; the join credentials on the first control plane are aged past their
//! lifetimes (token 24 h, certificate upload 2 h); a control plane and a worker with labels and taints
//! are added to the file and joined with `node join`. Checks: `kubeadm join` ran once on exactly the two
//! new nodes, the control plane's before the worker's (control planes join first, one at a time), a
//! fresh token and a fresh certificate upload were made on the first control plane before the joins,
//! nothing ran on the existing worker, the new Nodes got the file's labels and taints (the worker's join
//! configuration's `taints`, and the PATCHes the labels step sent), and a node that is
//! already in the cluster or not in the file is refused with exit code 2.

use std::time::Duration;

use clusterctl_testbed::cli::StandinCluster;
use clusterctl_testbed::cli::{
    install_standins, ssh_cluster_yaml, standin_calls, Clusterctl, FileNode, StandinApi,
};
use clusterctl_testbed::docker::{docker_available, TestNode};
use clusterctl_testbed::{is_root, require};

const PREFLIGHT: &[&str] = &[
    "--ready-timeout",
    "30",
    "--ignore-preflight",
    "time-sync,module/br_netfilter,node-environment,resolv-conf",
];

fn line_of(out: &str, needle: &str) -> usize {
    out.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{out}"))
}

fn count(calls: &[String], prefix: &str) -> usize {
    calls.iter().filter(|l| l.starts_with(prefix)).count()
}

fn sh(n: &TestNode, script: &str) -> String {
    n.sh(script).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn node_join_adds_a_control_plane_and_a_worker_after_up() {
    if !require("root and a Docker engine", is_root() && docker_available()) {
        return;
    }
    let sc = StandinCluster::start("nj", 4).expect("node containers");
    let (store, tc) = (&sc.store, &sc.cluster);
    for n in &tc.nodes {
        install_standins(n).expect("stand-ins");
    }
    let (c1, w1, c2, w2) = (&tc.nodes[0], &tc.nodes[1], &tc.nodes[2], &tc.nodes[3]);
    let home = tempfile::tempdir().expect("home");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), home.path());
    let kh = c1.known_hosts.to_string_lossy().into_owned();
    let key = &tc.key.private;
    let file = home.path().join("cluster.yaml");
    let api = StandinApi::start(&tc.gateway, store.path()).expect("api server");
    api.serve_nodes(&[&c1.name, &w1.name]);
    // `cni: none`: wait-ready waits for the control plane's static pods, not for Ready Nodes.
    api.serve_control_plane_pods(&[&c1.name]);

    // 1. `up` with one control plane and one worker.
    let first = [
        FileNode::control_plane(c1),
        FileNode::worker(w1).label("tier", "app"),
    ];
    std::fs::write(
        &file,
        ssh_cluster_yaml("joinlab", key, "none", None, "", &first),
    )
    .expect("file");
    let mut up = vec!["up", "-f", "cluster.yaml", "--known-hosts", &kh];
    up.extend_from_slice(PREFLIGHT);
    let r = cli.run(&up).expect("up");
    assert_eq!(r.code, 0, "{}", r.all());

    // Age the credentials `up` stored: the token and the certificate upload have both expired.
    sh(
        c1,
        "sed -i -E 's/\"token_created\":[0-9]+/\"token_created\":1/; s/\"key_uploaded\":[0-9]+/\"key_uploaded\":1/' /var/lib/clusterctl/join.json",
    );
    let c1_before = standin_calls(c1).expect("calls");
    let w1_before = standin_calls(w1).expect("calls");

    // 2. The file gains a control plane and a worker (with labels and taints).
    let mut second = first.to_vec();
    second.push(FileNode::control_plane(c2).label("zone", "b"));
    second.push(FileNode::worker(w2).label("disktype", "ssd").taint(
        "dedicated",
        "edge",
        "NoSchedule",
    ));
    // And a worker that is down (an address of the nodes' network no container has): never named to
    // join, so never contacted — it must not stop the others' joins.
    let down = format!(
        "{}.249",
        tc.gateway
            .rsplit_once('.')
            .map(|(a, _)| a)
            .unwrap_or("172.30.0")
    );
    second.push(FileNode {
        name: "down9".into(),
        role: "worker",
        address: down,
        labels: Vec::new(),
        taints: Vec::new(),
    });
    std::fs::write(
        &file,
        ssh_cluster_yaml("joinlab", key, "none", None, "", &second),
    )
    .expect("file");

    // Refused: a node not in the file, a node already in the cluster (nothing runs).
    let r = cli
        .run(&[
            "node",
            "join",
            "-f",
            "cluster.yaml",
            "--known-hosts",
            &kh,
            "nope",
        ])
        .expect("join");
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(
        r.stderr.contains("nope") && r.stderr.contains("not in the cluster file"),
        "{}",
        r.all()
    );
    let r = cli
        .run(&[
            "node",
            "join",
            "-f",
            "cluster.yaml",
            "--known-hosts",
            &kh,
            &w1.name,
            &w2.name,
        ])
        .expect("join");
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(
        r.stderr
            .contains(&format!("{} already in the cluster", w1.name)),
        "{}",
        r.all()
    );
    assert_eq!(count(&standin_calls(w2).expect("calls"), "kubeadm"), 0);

    // 2b. The dry run plans both joins and changes nothing on any node.
    let before: Vec<Vec<String>> = tc
        .nodes
        .iter()
        .map(|n| standin_calls(n).expect("calls"))
        .collect();
    let writes_before = api
        .server
        .recorded()
        .iter()
        .filter(|r| r.method != "GET")
        .count();
    let mut dry = vec![
        "node",
        "join",
        "--dry-run",
        "-f",
        "cluster.yaml",
        "--known-hosts",
        &kh,
    ];
    dry.extend_from_slice(PREFLIGHT);
    dry.push(&w2.name);
    dry.push(&c2.name);
    let r = cli.run(&dry).expect("dry run");
    assert_eq!(r.code, 0, "{}", r.all());
    for n in [c2, w2] {
        let start = r
            .stdout
            .find(&format!("\nnode {} (", n.name))
            .unwrap_or_else(|| panic!("no plan for {}:\n{}", n.name, r.stdout));
        let section = &r.stdout[start + 1..];
        let section = &section[..section.find("\n\n").unwrap_or(section.len())];
        assert!(
            section.contains("kubeadm join --config /etc/kubernetes/kubeadm/join.yaml"),
            "{}: {section}",
            n.name
        );
    }
    assert!(
        r.stdout
            .contains("change(s) planned; nothing was changed (dry run)."),
        "{}",
        r.stdout
    );
    // The same plan as one document (`-o json`).
    dry.extend_from_slice(&["-o", "json"]);
    let r = cli.run(&dry).expect("dry run");
    assert_eq!(r.code, 0, "{}", r.all());
    let v = crate::cli_conventions::plan_document("json", &r.stdout, "joinlab");
    for n in [c2, w2] {
        assert!(
            crate::cli_conventions::has_step(
                &v,
                &n.name,
                "run",
                "kubeadm join --config /etc/kubernetes/kubeadm/join.yaml"
            ),
            "{}: {v}",
            n.name
        );
    }
    let after: Vec<Vec<String>> = tc
        .nodes
        .iter()
        .map(|n| standin_calls(n).expect("calls"))
        .collect();
    assert_eq!(before, after, "the dry run called a stand-in");
    assert_eq!(
        api.server
            .recorded()
            .iter()
            .filter(|r| r.method != "GET")
            .count(),
        writes_before,
        "the dry run wrote through the API"
    );

    // 3. Join both (named worker first: the order comes from the roles, not the command line).
    let mut join = vec!["node", "join", "-f", "cluster.yaml", "--known-hosts", &kh];
    join.extend_from_slice(PREFLIGHT);
    join.push(&w2.name);
    join.push(&c2.name);
    let lists = |a: &StandinApi| {
        a.server
            .recorded()
            .iter()
            .filter(|r| r.method == "GET" && r.path == "/api/v1/nodes")
            .count()
    };
    let lists_before = lists(&api);
    let patches_before = api.server.recorded().len();
    let r = std::thread::scope(|s| {
        let run = s.spawn(|| cli.run(&join));
        // Once `node join` has listed the Nodes (its check, before any phase runs), the new nodes are
        // part of the cluster the API serves: the labels and wait-ready steps, seconds later, find them.
        while lists(&api) == lists_before && !run.is_finished() {
            std::thread::sleep(Duration::from_millis(20));
        }
        api.serve_nodes(&[&c1.name, &w1.name, &c2.name, &w2.name]);
        api.serve_control_plane_pods(&[&c1.name, &c2.name]);
        run.join().expect("thread")
    })
    .expect("join");
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    eprintln!("--- session output ---\n{out}");
    assert!(
        !out.contains("down9"),
        "the node that is down was contacted:\n{out}"
    );

    // kubeadm join ran once on each new node, nowhere else; nothing at all on the existing worker.
    for n in [c2, w2] {
        let c = standin_calls(n).expect("calls");
        assert_eq!(
            count(
                &c,
                "kubeadm join --config /etc/kubernetes/kubeadm/join.yaml"
            ),
            1,
            "{}: {c:?}",
            n.name
        );
        assert_eq!(count(&c, "kubeadm init"), 0, "{}: {c:?}", n.name);
    }
    assert_eq!(
        standin_calls(w1).expect("calls"),
        w1_before,
        "the existing worker was touched"
    );
    let c1_after = standin_calls(c1).expect("calls");
    let c1_new: Vec<&String> = c1_after[c1_before.len()..]
        .iter()
        .filter(|l| l.starts_with("kubeadm"))
        .collect();
    assert_eq!(
        c1_new,
        [
            "kubeadm token create --ttl 24h0m0s",
            "kubeadm init phase upload-certs --upload-certs --config /etc/kubernetes/kubeadm/init.yaml"
        ],
        "fresh credentials on the first control plane, nothing else"
    );

    // Order: the control plane's join ends before the worker's starts.
    let cp_done = line_of(&out, &format!("[{}] join/control-plane: done", c2.name));
    let w_run = line_of(
        &out,
        &format!("[{}] join/worker: run: kubeadm join", w2.name),
    );
    assert!(cp_done < w_run, "{out}");

    // The join configurations: the control plane's carries the fresh certificate key, the worker's none.
    let cfg = |n: &TestNode| {
        sh(
            n,
            "grep -l JoinConfiguration /var/log/clusterctl-standin/*-kubeadm.yaml | head -n1 | xargs cat",
        )
    };
    let fresh_key = {
        let j: serde_json::Value =
            serde_json::from_str(&sh(c1, "cat /var/lib/clusterctl/join.json")).expect("join.json");
        assert!(j["key_uploaded"].as_u64().unwrap_or(0) > 1, "{j}");
        assert!(j["token_created"].as_u64().unwrap_or(0) > 1, "{j}");
        j["certificate_key"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(fresh_key.len(), 64);
    let c2_cfg = cfg(c2);
    assert!(
        c2_cfg.contains("controlPlane:") && c2_cfg.contains(&fresh_key),
        "{c2_cfg}"
    );
    let w2_cfg = cfg(w2);
    assert!(!w2_cfg.contains("certificateKey"), "{w2_cfg}");
    assert!(
        !out.contains(&fresh_key),
        "the certificate key was shown:\n{out}"
    );

    // Taints at registration (the join configuration); labels and taints through the API.
    assert!(
        w2_cfg.contains("key: dedicated") && w2_cfg.contains("effect: NoSchedule"),
        "{w2_cfg}"
    );
    let after: Vec<_> = api.server.recorded()[patches_before..].to_vec();
    let patched = |n: &TestNode| -> String {
        after
            .iter()
            .filter(|r| r.method == "PATCH" && r.path == format!("/api/v1/nodes/{}", n.name))
            .map(|r| r.json().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let w2_patch = patched(w2);
    assert!(w2_patch.contains("\"disktype\":\"ssd\""), "{w2_patch}");
    assert!(
        w2_patch.contains("\"dedicated\"") && w2_patch.contains("\"edge\""),
        "{w2_patch}"
    );
    assert!(patched(c2).contains("\"zone\":\"b\""), "{}", patched(c2));

    // 4. Joining again is refused: both are in the cluster now.
    let r = cli
        .run(&[
            "node",
            "join",
            "-f",
            "cluster.yaml",
            "--known-hosts",
            &kh,
            &c2.name,
        ])
        .expect("join");
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(r.stderr.contains("already in the cluster"), "{}", r.all());
}
