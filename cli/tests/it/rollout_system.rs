//! Whole-system test of `up`'s day-2 rollout on the test bed: three control planes as systemd node
//! containers over real SSH with the recording stand-ins of `tests/standins/` (no `curl` on the nodes:
//! the health wait asks `kubectl get --raw /livez` with admin.conf), the Kubernetes API being the
//! recording HTTPS API server the stand-in's admin.conf points at. No Kubernetes runs here.
//!
//! Checks: the first `up` only records the applied configuration (no rollout step); after the OIDC
//! issuer and its CA change in the file (OIDC as apiserver flags, as in the seed), `up` uploads the
//! kubeadm-config, then regenerates the API server static pod on c1, c2, c3 in that order, each
//! waiting for `/livez` and finishing before the next starts, with each node's own advertise address,
//! and the new CA file lands on every control plane; a second `up` changes nothing; a kubelet setting rolls out node by node
//! (`kubelet-config` ConfigMap, `/var/lib/kubelet/config.yaml` rewritten, kubelet restarted); and a
//! file naming the next minor is refused by `up` with a pointer to `clusterctl upgrade`.

use std::path::Path;

use clusterctl_testbed::apiserver::{ApiServer, TEST_TOKEN};
use clusterctl_testbed::cli::StandinCluster;
use clusterctl_testbed::cli::{
    install_standins, ssh_cluster_yaml, standin_calls, Clusterctl, FileNode, Run,
};
use clusterctl_testbed::docker::{docker_available, TestNode};
use clusterctl_testbed::{is_root, require};
use serde_json::{json, Value};

const OIDC_CA: &str = "/etc/kubernetes/oidc/ca.crt";
const ROLLOUT: &str =
    "kubeadm init phase control-plane apiserver --config /etc/kubernetes/kubeadm/rollout.yaml";

fn sh(node: &TestNode, script: &str) -> String {
    node.sh(script).unwrap_or_else(|e| panic!("{e}"))
}

fn serve_nodes(api: &ApiServer, names: &[String]) {
    let items: Vec<Value> = names
        .iter()
        .map(|n| {
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n, "node-role.kubernetes.io/control-plane": ""}},
                "spec": {},
                "status": {"conditions": [{"type": "Ready", "status": "True"}],
                    "nodeInfo": {"kubeletVersion": "v1.34.1", "architecture": "amd64", "bootID": "",
                        "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "",
                        "machineID": "", "operatingSystem": "linux", "osImage": "", "systemUUID": ""}}})
        })
        .collect();
    for (n, item) in names.iter().zip(&items) {
        api.serve(&format!("/api/v1/nodes/{n}"), item.clone());
    }
    api.serve(
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items}),
    );
    // `cni: none`: wait-ready waits for the control planes' static pods, not for Ready Nodes.
    let cps: Vec<&str> = names.iter().map(String::as_str).collect();
    api.serve(
        "/api/v1/pods",
        clusterctl_testbed::cli::control_plane_pods(&cps),
    );
}

fn line_of(out: &str, needles: &[&str]) -> usize {
    out.lines()
        .position(|l| needles.iter().all(|n| l.contains(n)))
        .unwrap_or_else(|| panic!("no line with {needles:?} in:\n{out}"))
}

fn up(cc: &Clusterctl, file: &Path, known_hosts: &Path) -> Run {
    let r = cc
        .run(&[
            "up",
            "-f",
            &file.display().to_string(),
            "--known-hosts",
            &known_hosts.display().to_string(),
            "--ready-timeout",
            "30",
            // Node containers cannot load kernel modules; the test bed host may lack br_netfilter.
            "--ignore-preflight",
            "time-sync,module/br_netfilter,node-environment,resolv-conf",
        ])
        .expect("run clusterctl up");
    // Shown with --nocapture (docs/upgrade.md's example session is taken from it).
    eprintln!(
        "$ clusterctl up -f cluster.yaml\n{}(exit {})",
        r.all(),
        r.code
    );
    r
}

fn count(calls: &[String], prefix: &str) -> usize {
    calls.iter().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn changed_oidc_rolls_out_one_control_plane_at_a_time() {
    if !require("root", is_root()) || !require("docker", docker_available()) {
        return;
    }
    let sc = StandinCluster::start("rollout", 3).expect("node containers");
    let (store, cluster) = (&sc.store, &sc.cluster);
    let nodes = &cluster.nodes;
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let api =
        ApiServer::start_on(cluster.gateway.parse().expect("gateway address")).expect("api server");
    serve_nodes(&api, &names);
    let api_dir = store.path().join("api");
    std::fs::create_dir_all(&api_dir).expect("api dir");
    std::fs::write(api_dir.join("url"), api.url()).expect("url");
    std::fs::write(api_dir.join("ca.crt"), api.ca_pem()).expect("ca");
    std::fs::write(api_dir.join("token"), TEST_TOKEN).expect("token");
    for n in nodes {
        install_standins(n).expect("stand-ins");
    }

    let home = tempfile::tempdir().expect("home");
    let cc = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), home.path());
    let file = home.path().join("cluster.yaml");
    let profiles = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
    let ca_a = std::fs::read_to_string(profiles.join("keycloak-ca.crt")).expect("ca a");
    let ca_b = std::fs::read_to_string(profiles.join("harbor-ca.crt")).expect("ca b");
    std::fs::write(home.path().join("ca-a.crt"), &ca_a).expect("write ca");
    std::fs::write(home.path().join("ca-b.crt"), &ca_b).expect("write ca");
    // OIDC as the seed sets it: apiserver flags (extraArgs) and the issuer's CA file.
    let write_file = |issuer: &str, ca: &str, max_pods: u32, version: &str| {
        let extra = format!(
            "  apiServer:\n    oidc: {{issuerURL: \"{issuer}\", clientID: kube-apiserver, caFile: {ca}}}\n  kubelet: {{maxPods: {max_pods}}}\n"
        );
        let text = ssh_cluster_yaml(
            "roll",
            &cluster.key.private,
            "none",
            Some(&format!("{}:6443", nodes[0].address)),
            &extra,
            &nodes
                .iter()
                .map(FileNode::control_plane)
                .collect::<Vec<_>>(),
        )
        .replace(
            "kubernetesVersion: v1.34.1",
            &format!("kubernetesVersion: v{version}"),
        );
        std::fs::write(&file, text).expect("write cluster file");
    };
    let known_hosts = nodes[0].known_hosts.clone();

    // 1. The cluster is built; the rollout phases only record what init/join applied.
    write_file("https://issuer-a.example.com", "ca-a.crt", 110, "1.34.1");
    let r = up(&cc, &file, &known_hosts);
    assert_eq!(r.code, 0, "{}", r.all());
    for n in nodes {
        let calls = standin_calls(n).expect("calls");
        assert_eq!(
            count(&calls, "kubeadm init phase control-plane"),
            0,
            "{calls:?}"
        );
        assert_eq!(sh(n, &format!("cat {OIDC_CA}")), ca_a.trim_end());
    }

    // 2. The OIDC issuer changes: kubeadm-config once, then c1, c2, c3, one at a time.
    write_file("https://issuer-b.example.com", "ca-b.crt", 110, "1.34.1");
    let r = up(&cc, &file, &known_hosts);
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    let c1 = standin_calls(&nodes[0]).expect("calls");
    assert_eq!(
        count(
            &c1,
            "kubeadm init phase upload-config kubeadm --config /etc/kubernetes/kubeadm/rollout.yaml"
        ),
        1,
        "{c1:?}"
    );
    for n in nodes {
        let calls = standin_calls(n).expect("calls");
        assert_eq!(count(&calls, ROLLOUT), 1, "{}: {calls:?}", n.name);
        let at = calls
            .iter()
            .position(|l| l.starts_with(ROLLOUT))
            .unwrap_or(0);
        assert!(
            calls[at..].iter().any(|l| l.starts_with("kubectl")
                && l.contains(&format!("--server https://{}:6443", n.address))
                && l.contains("get --raw /livez")),
            "{}: /livez asked after the static pod: {calls:?}",
            n.name
        );
        assert_eq!(
            count(&calls, "kubeadm upgrade node phase kubelet-config"),
            0,
            "{calls:?}"
        );
        assert_eq!(
            sh(n, &format!("cat {OIDC_CA}")),
            ca_b.trim_end(),
            "{}",
            n.name
        );
        let cfg = sh(n, "cat /etc/kubernetes/kubeadm/rollout.yaml");
        assert!(
            cfg.contains("https://issuer-b.example.com"),
            "{}: {cfg}",
            n.name
        );
        assert!(
            cfg.contains(&format!("advertiseAddress: {}", n.address)),
            "{}: {cfg}",
            n.name
        );
        assert!(
            !cfg.contains("token:") && !cfg.contains("certificateKey"),
            "{cfg}"
        );
        assert_eq!(
            sh(n, "stat -c %a /etc/kubernetes/kubeadm/rollout.yaml"),
            "600"
        );
    }
    let upload = line_of(
        &out,
        &[&format!("[{}] rollout/kubeadm-config: run:", names[0])],
    );
    let mut last_done = upload;
    for n in &names {
        let start = line_of(&out, &[&format!("[{n}] rollout/apiserver: run: {ROLLOUT}")]);
        let healthy = line_of(
            &out,
            &[&format!("[{n}] rollout/apiserver: API server healthy")],
        );
        let done = line_of(&out, &[&format!("[{n}] rollout/apiserver: done")]);
        assert!(
            last_done < start && start < healthy && healthy < done,
            "{n}:\n{out}"
        );
        last_done = done;
    }

    // 3. Again: nothing to do.
    let before: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| standin_calls(n).expect("calls"))
        .collect();
    let r = up(&cc, &file, &known_hosts);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        !r.all().contains(": run: ") && !r.all().contains(": write "),
        "second run changed something:\n{}",
        r.all()
    );
    let after: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| standin_calls(n).expect("calls"))
        .collect();
    let mutating = |v: &Vec<Vec<String>>| -> Vec<Vec<String>> {
        v.iter()
            .map(|c| {
                c.iter()
                    .filter(|l| !l.starts_with("kubectl"))
                    .cloned()
                    .collect()
            })
            .collect()
    };
    assert_eq!(mutating(&before), mutating(&after));

    // 4. A kubelet setting: the kubelet-config ConfigMap, then node by node.
    write_file("https://issuer-b.example.com", "ca-b.crt", 150, "1.34.1");
    let r = up(&cc, &file, &known_hosts);
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    let mut last_done = line_of(
        &out,
        &[&format!("[{}] rollout/kubelet-config: run:", names[0])],
    );
    for n in nodes {
        let calls = standin_calls(n).expect("calls");
        assert_eq!(
            count(&calls, "kubeadm upgrade node phase kubelet-config"),
            1,
            "{calls:?}"
        );
        assert_eq!(
            count(&calls, ROLLOUT),
            1,
            "no API server rollout for a kubelet change"
        );
        assert!(sh(n, "cat /var/lib/kubelet/config.yaml").contains("maxPods: 150"));
        let start = line_of(
            &out,
            &[&format!(
                "[{}] rollout/kubelet: run: kubeadm upgrade node phase kubelet-config",
                n.name
            )],
        );
        let done = line_of(&out, &[&format!("[{}] rollout/kubelet: done", n.name)]);
        assert!(last_done < start && start < done, "{}:\n{out}", n.name);
        last_done = done;
    }

    // 5. The next minor in the file: refused by `up`, pointing to `clusterctl upgrade`.
    write_file("https://issuer-b.example.com", "ca-b.crt", 150, "1.35.0");
    let before: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| standin_calls(n).expect("calls"))
        .collect();
    let r = up(&cc, &file, &known_hosts);
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.all()
            .contains("the control plane runs v1.34.1 and the file says kubernetesVersion 1.35.0")
            && r.all()
                .contains("clusterctl upgrade -f FILE --to 1.35.0` (or `--profile NAME`"),
        "{}",
        r.all()
    );
    let after: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| standin_calls(n).expect("calls"))
        .collect();
    assert_eq!(mutating(&before), mutating(&after), "nothing ran");
}
