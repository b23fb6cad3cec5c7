//! `clusterctl destroy` on the test bed, SSH provider: two systemd node containers (a control plane and
//! a worker) with the recording kubeadm stand-in installed. What `up` leaves on a node is put there
//! (rendered files, the state record naming one more file, the CNI conflist, IPAM state, the VXLAN
//! device), then `destroy` must leave each node as it was before (a listing of every path and link it
//! touches, compared before and after), call `kubeadm reset -f --config` with the rendered
//! ResetConfiguration, the worker before the control plane, keep files that are not its own, and remove
//! the kubeconfig context. Without `--yes`, an answer other than `yes` changes nothing.

use std::path::Path;
use std::process::{Command, Stdio};

use clusterctl_testbed::docker::{docker_available, TestCluster, TestNode};
use clusterctl_testbed::{is_root, require};
use std::io::Write;

const STANDIN: &str = include_str!("../../tests/standins/kubeadm-standin.sh");

/// Every path and link `destroy` may touch, one per line, sorted.
const LISTING: &str = "{ find /etc /opt /usr/local /var/lib/clusterctl /var/lib/cni /run/clusterctl-cni 2>/dev/null; \
    ip -o link show | awk -F': ' '{print \"link \" $2}' | sed 's/@.*//'; } | sort";

fn clusterctl(dir: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run clusterctl");
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What `up` would have left on `n` (files, state record, VXLAN device).
fn leave_up_traces(n: &TestNode, cluster: &str) {
    let state = format!(
        "{{\"version\":1,\"cluster\":\"{cluster}\",\"node\":\"{}\",\"phases\":{{}},\"files\":{{\"/etc/clusterctl/recorded-only.conf\":\"00\"}}}}",
        n.name
    );
    let script = format!(
        "set -e; mkdir -p /etc/clusterctl/cni /etc/cni/net.d /var/lib/clusterctl/cni/ipam /etc/kubernetes/kubeadm /opt/cni/bin
         echo '{{}}' > /etc/clusterctl/cni/agent.json
         echo recorded > /etc/clusterctl/recorded-only.conf
         echo '{{\"cniVersion\":\"1.1.0\"}}' > /etc/cni/net.d/10-clusterctl.conflist
         echo 10.244.0.5 > /var/lib/clusterctl/cni/ipam/last
         cp /usr/bin/true /opt/cni/bin/clusterctl-cni
         echo 'net.ipv4.ip_forward = 1' > /etc/sysctl.d/99-kubernetes.conf
         printf 'overlay\\nbr_netfilter\\n' > /etc/modules-load.d/kubernetes.conf
         printf '%s' '{state}' > /var/lib/clusterctl/state.json
         ip link add cc-vxlan type vxlan id 1 dstport 8472 dev eth0"
    );
    let (st, _, err) = n.exec(&script, b"").expect("exec");
    assert_eq!(st, 0, "seeding {}: {err}", n.name);
}

#[test]
fn destroy_leaves_each_node_as_before_up() {
    if !require("root and a Docker engine", is_root() && docker_available()) {
        return;
    }
    let tc = TestCluster::start("dst", 2).expect("test nodes");
    let dir = tempfile::tempdir().expect("tempdir");
    let (cp, w) = (&tc.nodes[0], &tc.nodes[1]);
    let name = "dstlab";
    // The packages `up` would find: the kubeadm stand-in, the directories the kubelet and CNI plugin
    // packages make; and a file that is not clusterctl's.
    for n in [cp, w] {
        let (st, _, err) = n
            .exec(
                "set -e; cat > /usr/local/bin/kubeadm; chmod 755 /usr/local/bin/kubeadm; mkdir -p /etc/kubernetes/manifests /var/log/clusterctl-standin /etc/cni/net.d /opt/cni/bin; echo keep > /etc/not-clusterctl.conf",
                STANDIN.as_bytes(),
            )
            .expect("exec");
        assert_eq!(st, 0, "{err}");
    }
    let before: Vec<String> = [cp, w]
        .iter()
        .map(|n| n.sh(LISTING).expect("listing"))
        .collect();
    for n in [cp, w] {
        leave_up_traces(n, name);
    }
    assert_ne!(
        cp.sh(LISTING).expect("listing"),
        before[0],
        "the traces show in the listing"
    );

    let file = format!(
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  networking: {{podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/16, cni: {{plugin: builtin}}}}\n  ssh: {{user: root, keyFile: {key}, port: 22, hostKeyPolicy: strict}}\n  nodes:\n    - {{name: {a}, role: control-plane, address: {aa}}}\n    - {{name: {b}, role: worker, address: {ba}}}\n",
        key = cp.key_file.display(),
        a = cp.name,
        aa = cp.address,
        b = w.name,
        ba = w.address
    );
    std::fs::write(dir.path().join("cluster.yaml"), file).expect("cluster file");
    std::fs::write(
        dir.path().join("kubeconfig"),
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster: {{server: 'https://{}:6443'}}\n- name: keep\n  cluster: {{server: 'https://10.9.9.9:6443'}}\nusers:\n- name: {name}-admin\n  user: {{token: t}}\n- name: keep-admin\n  user: {{token: u}}\ncontexts:\n- name: {name}\n  context: {{cluster: {name}, user: {name}-admin}}\n- name: keep\n  context: {{cluster: keep, user: keep-admin}}\ncurrent-context: {name}\n", cp.address),
    )
    .expect("kubeconfig");
    let kh = cp.known_hosts.to_string_lossy().into_owned();

    // Not confirmed: nothing changes.
    let (code, _, err) = clusterctl(
        dir.path(),
        &["destroy", "-f", "cluster.yaml", "--known-hosts", &kh],
        "no\n",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("Type yes"), "{err}");
    assert!(cp
        .sh("test -f /var/lib/clusterctl/state.json && echo present")
        .expect("sh")
        .contains("present"));

    let (code, out, err) = clusterctl(
        dir.path(),
        &[
            "destroy",
            "-f",
            "cluster.yaml",
            "--known-hosts",
            &kh,
            "--yes",
        ],
        "",
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");

    // Each node as before.
    for (i, n) in [cp, w].iter().enumerate() {
        let after = n.sh(LISTING).expect("listing");
        assert_eq!(after, before[i], "node {} differs from before up", n.name);
        assert_eq!(
            n.sh("cat /etc/not-clusterctl.conf").expect("sh").trim(),
            "keep"
        );
        let calls = n
            .sh("cat /var/log/clusterctl-standin/calls.log")
            .expect("calls");
        assert_eq!(
            calls.trim(),
            "kubeadm reset -f --config /etc/kubernetes/kubeadm/reset.yaml",
            "{}",
            n.name
        );
        let cfg = n
            .sh("cat /var/log/clusterctl-standin/1-kubeadm.yaml")
            .expect("reset config");
        assert!(cfg.contains("kind: ResetConfiguration"), "{cfg}");
        assert!(cfg.contains("kubeadm.k8s.io/v1beta4"), "{cfg}");
    }
    // The worker first, the first control plane last.
    let wpos = out
        .find(&format!("{}: kubeadm reset: done", w.name))
        .expect("worker reset reported");
    let cpos = out
        .find(&format!("{}: kubeadm reset: done", cp.name))
        .expect("cp reset reported");
    assert!(wpos < cpos, "{out}");
    assert!(out.contains("link cc-vxlan deleted"), "{out}");

    // The kubeconfig keeps only the other cluster.
    let kc = std::fs::read_to_string(dir.path().join("kubeconfig")).expect("kubeconfig");
    assert!(!kc.contains(&format!("{name}-admin")), "{kc}");
    assert!(kc.contains("keep-admin"), "{kc}");

    // A second destroy finds nothing left and still succeeds.
    let (code, out, err) = clusterctl(
        dir.path(),
        &["destroy", "-f", "cluster.yaml", "--known-hosts", &kh, "-y"],
        "",
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    // Only the reset configuration it uploaded for its own `kubeadm reset` is removed again.
    assert!(out.contains("1 path(s) removed"), "{out}");
    for (i, n) in [cp, w].iter().enumerate() {
        assert_eq!(n.sh(LISTING).expect("listing"), before[i], "{} after a second destroy", n.name);
    }
}
