//! `clusterctl image load` on the test bed: two systemd node containers (SSH provider, containerd
//! running inside), an image built locally in the Docker engine (no registry), loaded like
//! `kind load docker-image` — first to one node with `--nodes`, then to every node, then from an
//! `--archive` — and checked in each node's containerd (`ctr -n k8s.io images ls`); `--dry-run` first,
//! which plans the save, upload and import and loads nothing. Then `status` is
//! run against a real control plane (`clusterctl_testbed::envtest`) holding the two Nodes and a pod that
//! cannot pull that image, and must name both nodes as holding it (asked of the node runtimes over SSH).

use clusterctl_testbed::cli::{ssh_cluster_yaml, Clusterctl, FileNode, LocalImage};
use clusterctl_testbed::docker::{docker, docker_available, TestCluster};
use clusterctl_testbed::envtest::Envtest;
use clusterctl_testbed::{is_root, require, unique_name};
use serde_json::{json, Value};

fn run(cli: &Clusterctl, args: &[&str]) -> (i32, String, String) {
    let r = cli.run(args).expect("run clusterctl");
    (r.code, r.stdout, r.stderr)
}

fn images_on(cluster: &TestCluster, i: usize) -> String {
    cluster.nodes[i]
        .sh("ctr -n k8s.io images ls -q")
        .expect("ctr images ls")
}

/// `clusterctl image load -f cluster.yaml --known-hosts KH ARGS…`.
fn load(cli: &Clusterctl, kh: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["image", "load", "-f", "cluster.yaml", "--known-hosts", kh];
    all.extend_from_slice(args);
    run(cli, &all)
}

/// [`load`], required to exit 0; its stdout.
fn load_ok(cli: &Clusterctl, kh: &str, args: &[&str]) -> String {
    let (code, out, err) = load(cli, kh, args);
    assert_eq!(code, 0, "{args:?}\nstdout:\n{out}\nstderr:\n{err}");
    out
}

/// Asserts which nodes' containerd holds `image` (a full reference): node `i` iff `held[i]`.
fn assert_held(cluster: &TestCluster, image: &str, held: [bool; 2]) {
    for (i, want) in held.into_iter().enumerate() {
        let listed = images_on(cluster, i);
        assert_eq!(
            listed.lines().any(|l| l == image),
            want,
            "node {i}, {image}:\n{listed}"
        );
    }
}

#[test]
fn image_load_puts_local_images_into_node_runtimes() {
    if !require("root and a Docker engine", is_root() && docker_available()) {
        return;
    }
    let cluster = TestCluster::start("img", 2).expect("test nodes");
    let dir = tempfile::tempdir().expect("tempdir");
    let tag = unique_name("t");
    let one = format!("clusterctl-test/cka-api:{tag}");
    let two = format!("clusterctl-test/worker:{tag}");
    let _one = LocalImage::import(dir.path(), &one).expect("image");
    let _two = LocalImage::import(dir.path(), &two).expect("image");

    let n0 = &cluster.nodes[0];
    let n1 = &cluster.nodes[1];
    std::fs::write(
        dir.path().join("cluster.yaml"),
        ssh_cluster_yaml(
            "imglab",
            &n0.key_file,
            "builtin",
            None,
            "",
            &[FileNode::control_plane(n0), FileNode::worker(n1)],
        ),
    )
    .expect("cluster file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), dir.path());
    let kh = n0.known_hosts.to_string_lossy().into_owned();
    let full_one = format!("docker.io/{one}");

    // --dry-run: the plan, no image on any node.
    let out = load_ok(&cli, &kh, &["--dry-run", &one]);
    for planned in [
        "docker save -o",
        "ctr -n k8s.io images import /var/lib/clusterctl/images/load-",
        "ctr -n k8s.io images ls -q",
        "change(s) planned; nothing was changed (dry run).",
    ] {
        assert!(out.contains(planned), "{planned}:\n{out}");
    }
    // The same plan as one document (`-o json`).
    let out = load_ok(&cli, &kh, &["--dry-run", "-o", "json", &one]);
    let v = crate::cli_conventions::plan_document("json", &out, "imglab");
    for n in [n0, n1] {
        assert!(
            crate::cli_conventions::has_step(&v, &n.name, "run", "ctr -n k8s.io images import"),
            "{}: {v}",
            n.name
        );
    }
    assert_held(&cluster, &full_one, [false, false]);

    // Only the first node: --nodes limits the load; the staged archive is removed.
    let out = load_ok(&cli, &kh, &["--nodes", &n0.name, &one]);
    assert!(out.contains(&format!("{}: loaded {one}", n0.name)), "{out}");
    assert_held(&cluster, &full_one, [true, false]);
    assert_eq!(
        n0.sh("ls /var/lib/clusterctl/images | wc -l")
            .expect("ls")
            .trim(),
        "0",
        "the staged archive is removed"
    );

    // Every node.
    load_ok(&cli, &kh, &[&one]);
    assert_held(&cluster, &full_one, [true, true]);

    // From an archive.
    let archive = dir.path().join("two.tar");
    docker(&["save", "-o", &archive.to_string_lossy(), &two]).expect("docker save");
    load_ok(&cli, &kh, &["--archive", &archive.to_string_lossy(), &two]);
    assert_held(&cluster, &format!("docker.io/{two}"), [true, true]);

    // An image Docker does not have: refused, naming it.
    let (code, _, err) = load(&cli, &kh, &["clusterctl-test/absent:nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("clusterctl-test/absent:nope"), "{err}");

    // `status` asks the node runtimes which nodes hold the image a pod cannot pull; the Nodes and the
    // pod are real objects on a real control plane (its own: it holds these node names).
    let Some(api) = Envtest::require_own() else {
        return;
    };
    for n in [n0, n1] {
        api.create_node(
            &n.name,
            &Default::default(),
            json!({}),
            json!({"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}],
                   "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "",
                                "containerRuntimeVersion": "containerd://1.6", "kubeletVersion": "v1.34.1",
                                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}}),
        )
        .expect("node");
    }
    let ns = api.create_namespace("app").expect("namespace");
    let short = one.clone();
    api.create(
        &format!("/api/v1/namespaces/{ns}/pods"),
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "api-0"},
                "spec": {"nodeName": n1.name,
                         "containers": [{"name": "api", "image": short, "imagePullPolicy": "Always"}]}}),
    )
    .expect("pod");
    api.merge_patch(
        &format!("/api/v1/namespaces/{ns}/pods/api-0/status"),
        &json!({"status": {"phase": "Pending", "containerStatuses": [{"name": "api", "image": short,
                "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ErrImagePull", "message": "pull access denied"}}}]}}),
    )
    .expect("pod status");
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, api.kubeconfig("imglab")).expect("kubeconfig");
    let (code, out, err) = run(
        &cli,
        &[
            "status",
            "-f",
            "cluster.yaml",
            "-o",
            "json",
            "--known-hosts",
            &kh,
            "--kubeconfig",
            &kc.to_string_lossy(),
        ],
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    let p = &v["stuck"][0];
    assert_eq!(p["layer"], "image");
    let mut expected = vec![n0.name.clone(), n1.name.clone()];
    expected.sort();
    assert_eq!(p["nodesWithImage"], json!(expected));
    assert!(
        p["next"][0]
            .as_str()
            .unwrap_or("")
            .contains("imagePullPolicy is Always"),
        "loaded everywhere, so the pull policy is what is left: {p}"
    );
}
