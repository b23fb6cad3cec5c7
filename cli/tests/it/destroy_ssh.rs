//! `clusterctl destroy` on the test bed, SSH provider: two systemd node containers (a control plane and
//! a worker) with the recording kubeadm stand-in installed. What `up` leaves on a node is put there
//! (rendered files, the state record naming one more file, the CNI conflist, IPAM state, the VXLAN
//! device, the masquerade chain of the CNI agent's iptables fallback, the kube-vip VIP on the control
//! plane's interface, Calico's leftovers on the worker and Cilium's on the control plane (devices,
//! chains, files: a cluster whose file switched its CNI), the runtime config replaced after the real
//! undo code backed it up, the real
//! `--fix` of the swap check commenting swap out of fstab), then `destroy` must leave each node as it
//! was before: a listing of every path, link, address, iptables/nftables rule, fstab line and the
//! runtime config's digest, compared before and after — also kube-proxy's `KUBE-*` chains and the
//! empty directories kubeadm, the runtime and `up` leave (`/etc/kubernetes/pki`, `/var/lib/etcd`,
//! `/opt/containerd/bin`…; those there before, recorded by the real `undo::record_dirs`, are kept).
//! `--dry-run` first plans every node's reset and changes nothing. Also: `kubeadm reset -f --config` with the
//! rendered ResetConfiguration, the worker before the control plane, files that are not clusterctl's
//! kept, the kubeconfig context removed; packages kept unless `--purge` (a Debian package named
//! `cri-tools` installed before is purged by a second `destroy --purge`). Without `--yes`, an answer
//! other than `yes` changes nothing.

use std::sync::Arc;

use clusterctl_phases::{Mode, NodeCtx, QuietReporter, Secrets};
use clusterctl_render::{Purpose, RenderedFile};
use clusterctl_spec::model::Role;
use clusterctl_spec::ValidNode;
use clusterctl_testbed::cli::{
    install_standin, ssh_cluster_yaml, standin_calls, Clusterctl, FileNode, Run, KUBEADM_STANDIN,
};
use clusterctl_testbed::docker::{docker_available, TestCluster, TestNode};
use clusterctl_testbed::{is_root, require};

/// Every path, link, address, firewall rule and fstab line `destroy` may touch, and the runtime
/// config's digest, one per line, sorted. nftables by table name only: the tables iptables (nf_tables
/// backend) manages are in `iptables-save`'s lines, and its restore re-creates their empty built-in
/// chains, which `nft list ruleset` would show though iptables does not (nothing passes differently).
const LISTING: &str = "{ find /etc /opt /usr/local /var/lib/clusterctl /var/lib/cni /var/lib/etcd /var/lib/kubelet /run/clusterctl-cni /var/lib/calico /run/calico /run/cilium 2>/dev/null; \
    ip -o link show | awk -F': ' '{print \"link \" $2}' | sed 's/@.*//'; \
    ip -o addr show | awk '{print \"addr \" $2 \" \" $4}'; \
    iptables-save 2>/dev/null | grep -v '^#' | sed -E 's/\\[[0-9]+:[0-9]+\\]//; s/^/rule /'; \
    nft list tables 2>/dev/null | sed 's/^/nft /'; \
    sed 's/^/fstab /' /etc/fstab; \
    sha256sum /etc/containerd/config.toml | sed 's/^/sha /'; } | sort";

/// Shims so that no test touches the host's swap (a container's /proc/swaps is the host's).
const SWAP_SHIMS: &str = "mkdir -p /usr/local/sbin && for c in swapoff swapon; do \
    printf '#!/bin/sh\\necho \"%s $*\" >> /var/log/swap-shim.log\\n' $c > /usr/local/sbin/$c; chmod 755 /usr/local/sbin/$c; done";

/// A Debian package named `cri-tools` (one file under /usr/share), as the packages `up` needs are.
const DUMMY_PACKAGE: &str = "set -e; d=$(mktemp -d); mkdir -p $d/DEBIAN $d/usr/share/cri-tools-test; \
    printf 'Package: cri-tools\\nVersion: 0.0-test\\nArchitecture: all\\nMaintainer: test <t@example.org>\\nDescription: clusterctl destroy test package\\n' > $d/DEBIAN/control; \
    echo test > $d/usr/share/cri-tools-test/x; dpkg-deb --build $d /tmp/cri-tools.deb >/dev/null; dpkg -i /tmp/cri-tools.deb >/dev/null; rm -rf $d /tmp/cri-tools.deb";

fn exec(n: &TestNode, script: &str) {
    let (st, _, err) = n.exec(script, b"").expect("exec");
    assert_eq!(st, 0, "{} on {}: {err}", script, n.name);
}

/// `clusterctl destroy -f cluster.yaml --known-hosts KH ARGS…`.
fn destroy(cli: &Clusterctl, kh: &str, args: &[&str]) -> Run {
    let mut all = vec!["destroy", "-f", "cluster.yaml", "--known-hosts", kh];
    all.extend_from_slice(args);
    cli.run(&all).expect("destroy")
}

/// Asserts each of `nodes` lists ([`LISTING`]) as `want[i]`; `when` names the moment.
fn assert_listings(nodes: &[&TestNode], want: &[String], when: &str) {
    for (n, want) in nodes.iter().zip(want) {
        assert_eq!(&n.sh(LISTING).expect("listing"), want, "{} {when}", n.name);
    }
}

/// What `up` would have left on `n` (files, state record, VXLAN device, masquerade chain, the CNI
/// agent's NetworkPolicy table, replaced
/// runtime config, swap fix; the VIP when given).
/// What calico-node leaves on a node (`destroy::cni_leftovers::CALICO`): its conflist, kubeconfig,
/// plugins and state, its VXLAN device, a pod's host-side veth and a Felix chain with its jump.
const CALICO_TRACES: &str = "set -e; mkdir -p /etc/cni/net.d /opt/cni/bin /var/lib/calico /run/calico; \
    echo '{}' > /etc/cni/net.d/10-calico.conflist; echo kubeconfig > /etc/cni/net.d/calico-kubeconfig; \
    cp /usr/bin/true /opt/cni/bin/calico; cp /usr/bin/true /opt/cni/bin/calico-ipam; \
    hostname > /var/lib/calico/nodename; touch /run/calico/cni-ready; \
    ip link add vxlan.calico type vxlan id 4096 dstport 4789 dev eth0; \
    ip link add cali0123456789a type veth peer name eth0c; \
    iptables -w -t filter -N cali-FORWARD; iptables -w -t filter -A FORWARD -j cali-FORWARD";

/// What cilium-agent leaves on a node (`destroy::cni_leftovers::CILIUM`): its conflist, plugin and
/// state directory, `cilium_host`/`cilium_net`, its VXLAN device and a chain with its jump.
const CILIUM_TRACES: &str = "set -e; mkdir -p /etc/cni/net.d /opt/cni/bin /run/cilium/state; \
    echo '{}' > /etc/cni/net.d/05-cilium.conflist; cp /usr/bin/true /opt/cni/bin/cilium-cni; \
    ip link add cilium_host type veth peer name cilium_net; \
    ip link add cilium_vxlan type vxlan id 2 dstport 8472 dev eth0; \
    iptables -w -t nat -N CILIUM_POST_nat; iptables -w -t nat -A POSTROUTING -j CILIUM_POST_nat";

fn leave_up_traces(n: &TestNode, cluster: &str, vip: Option<&str>) {
    // The runtime phase's backup, by the real code, then the replacement it precedes.
    let transport: Arc<dyn clusterctl_exec::Transport> = Arc::new(n.transport().expect("ssh"));
    let mut ctx = NodeCtx::new(
        ValidNode::new(n.name.clone(), Role::Worker, n.address.parse().ok()),
        Some(transport),
        Mode::default(),
        Arc::new(QuietReporter),
        Secrets::default(),
    );
    // The directories the node has before `up` places anything, by the real code.
    clusterctl_phases::undo::record_dirs(&mut ctx).expect("record dirs");
    let config = RenderedFile::text(
        "/etc/containerd/config.toml",
        0o644,
        "version = 2\n# written by clusterctl up (test)\n".to_string(),
        Purpose::ContainerdConfig,
    );
    clusterctl_phases::undo::backup_before_overwrite(&mut ctx, std::slice::from_ref(&config))
        .expect("backup");
    // Run twice, the second finds its backup and does nothing (never backs up clusterctl's own file).
    let changes = ctx.changes;
    clusterctl_phases::undo::backup_before_overwrite(&mut ctx, std::slice::from_ref(&config))
        .expect("backup again");
    assert_eq!(ctx.changes, changes, "a second backup was made");
    let (st, _, err) = n
        .exec("cat > /etc/containerd/config.toml", &config.content)
        .expect("exec");
    assert_eq!(st, 0, "{err}");
    // The real `--fix` of the swap check (swapoff/swapon are shims here).
    exec(n, clusterctl_phases::undo::SWAP_FIX);
    assert!(
        !n.sh("grep -E '^/swapfile' /etc/fstab || true")
            .expect("fstab")
            .contains("/swapfile"),
        "the fix commented swap out"
    );
    let state = format!(
        "{{\"version\":1,\"cluster\":\"{cluster}\",\"node\":\"{}\",\"phases\":{{}},\"files\":{{\"/etc/clusterctl/recorded-only.conf\":\"00\",\"/etc/containerd/config.toml\":\"00\"}}}}",
        n.name
    );
    let mut script = format!(
        "set -e; mkdir -p /etc/clusterctl/cni /etc/cni/net.d /var/lib/clusterctl/cni/ipam /etc/kubernetes/kubeadm /opt/cni/bin
         echo '{{}}' > /etc/clusterctl/cni/agent.json
         echo recorded > /etc/clusterctl/recorded-only.conf
         echo '{{\"cniVersion\":\"1.1.0\"}}' > /etc/cni/net.d/10-clusterctl.conflist
         echo 10.244.0.5 > /var/lib/clusterctl/cni/ipam/last
         cp /usr/bin/true /opt/cni/bin/clusterctl-cni
         echo 'net.ipv4.ip_forward = 1' > /etc/sysctl.d/99-kubernetes.conf
         echo 'net.ipv4.ip_forward = 1' > /etc/sysctl.d/99-clusterctl.conf
         printf 'overlay\\nbr_netfilter\\n' > /etc/modules-load.d/kubernetes.conf
         printf '%s' '{state}' > /var/lib/clusterctl/state.json
         ip link add cc-vxlan type vxlan id 1 dstport 8472 dev eth0
         iptables -w -t nat -N CLUSTERCTL-CNI-MASQ
         iptables -w -t nat -A CLUSTERCTL-CNI-MASQ -s 10.244.0.0/16 ! -d 10.244.0.0/16 -j MASQUERADE
         iptables -w -t nat -A POSTROUTING -m comment --comment clusterctl-cni -j CLUSTERCTL-CNI-MASQ
         mkdir -p /etc/kubernetes/pki/etcd /etc/containerd/certs.d/registry.example:5000 /opt/containerd/bin /opt/containerd/lib /var/lib/etcd /var/lib/kubelet/pods /usr/local/lib/clusterctl /var/lib/cni/results
         iptables -w -t nat -N KUBE-SERVICES
         iptables -w -t nat -A KUBE-SERVICES -d 10.96.0.1/32 -p tcp --dport 443 -j RETURN
         iptables -w -t nat -A PREROUTING -m comment --comment 'kubernetes service portals' -j KUBE-SERVICES
         iptables -w -t filter -N KUBE-FIREWALL
         iptables -w -t filter -A INPUT -j KUBE-FIREWALL
         iptables -w -t mangle -N KUBE-IPTABLES-HINT
         printf 'table inet clusterctl-netpol {{\n  set ingress_isolated {{ type ipv4_addr; }}\n}}\n' | nft -f -"
    );
    if let Some(v) = vip {
        script.push_str(&format!("\n ip addr add {v}/32 dev eth0"));
    }
    exec(n, &script);
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
    let vip = format!(
        "{}.250",
        tc.gateway
            .rsplit_once('.')
            .map(|(a, _)| a)
            .unwrap_or("172.30.0")
    );
    // What the node had before `up`: the kubeadm stand-in, the directories the kubelet and CNI plugin
    // packages make, a package, a swap line in fstab, the runtime's own config; and a file that is not
    // clusterctl's.
    for n in [cp, w] {
        install_standin(n, KUBEADM_STANDIN, "/usr/local/bin/kubeadm").expect("stand-in");
        exec(n, "set -e; mkdir -p /etc/kubernetes/manifests /var/log/clusterctl-standin /etc/cni/net.d /opt/cni/bin; echo keep > /etc/not-clusterctl.conf; echo '/swapfile none swap sw 0 0' >> /etc/fstab; test -f /etc/containerd/config.toml");
        // The tables a real node already has (docker, the kubelet): made by creating a chain once.
        exec(
            n,
            "for t in nat filter mangle; do iptables -w -t $t -N PRE-UP && iptables -w -t $t -X PRE-UP; done",
        );
        exec(n, SWAP_SHIMS);
        exec(n, DUMMY_PACKAGE);
    }
    let before: Vec<String> = [cp, w]
        .iter()
        .map(|n| n.sh(LISTING).expect("listing"))
        .collect();
    assert!(
        before[0].contains("fstab /swapfile none swap"),
        "{}",
        before[0]
    );
    leave_up_traces(cp, name, Some(&vip));
    leave_up_traces(w, name, None);
    // The file says builtin, but the nodes still show another CNI (a cluster whose file switched
    // its CNI): the worker Calico's, the control plane Cilium's; destroy detects and removes them.
    exec(w, CALICO_TRACES);
    exec(cp, CILIUM_TRACES);
    let traced = cp.sh(LISTING).expect("listing");
    for trace in [
        "rule :CLUSTERCTL-CNI-MASQ",
        "nft table inet clusterctl-netpol",
        &format!("addr eth0 {vip}/32"),
        "fstab #/swapfile",
        "/var/lib/clusterctl/undo/backup/etc/containerd/config.toml",
        "rule :KUBE-SERVICES",
        "rule -A INPUT -j KUBE-FIREWALL",
        "/etc/kubernetes/pki/etcd",
        "/opt/containerd/bin",
        "/var/lib/etcd",
    ] {
        assert!(traced.contains(trace), "{trace} shows in:\n{traced}");
    }

    let mut nodes = [FileNode::control_plane(cp), FileNode::worker(w)];
    for n in nodes.iter_mut() {
        n.address.push_str("/16");
    }
    let extra = format!("  controlPlane:\n    vip: {{address: {vip}, interface: eth0}}\n");
    std::fs::write(
        dir.path().join("cluster.yaml"),
        ssh_cluster_yaml(name, &tc.key.private, "builtin", None, &extra, &nodes),
    )
    .expect("cluster file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), dir.path());
    std::fs::write(
        cli.kubeconfig(),
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: clusterctl-{name}\n  cluster: {{server: 'https://{}:6443'}}\n- name: keep\n  cluster: {{server: 'https://10.9.9.9:6443'}}\nusers:\n- name: clusterctl-{name}\n  user: {{token: t}}\n- name: keep-admin\n  user: {{token: u}}\ncontexts:\n- name: clusterctl-{name}\n  context: {{cluster: clusterctl-{name}, user: clusterctl-{name}}}\n- name: keep\n  context: {{cluster: keep, user: keep-admin}}\ncurrent-context: clusterctl-{name}\n", cp.address),
    )
    .expect("kubeconfig");
    let kh = cp.known_hosts.to_string_lossy().into_owned();

    // --dry-run: every node's reset planned, in teardown order; nothing changes.
    let r = destroy(&cli, &kh, &["--dry-run"]);
    let plan = r.all();
    assert_eq!(r.code, 0, "{plan}");
    for planned in [
        "reset/workers",
        "reset/first-control-plane",
        "kubeadm reset -f --config /etc/kubernetes/kubeadm/reset.yaml",
        "KUBE-",
        &format!("remove context clusterctl-{name} from"),
        "change(s) planned; nothing was changed (dry run).",
    ] {
        assert!(plan.contains(planned), "{planned}:\n{plan}");
    }
    let (wpos, cpos) = (
        plan.find(&format!("node {} (worker", w.name)),
        plan.find(&format!("node {} (control-plane", cp.name)),
    );
    assert!(wpos.is_some() && cpos.is_some(), "{plan}");
    assert_listings(&[cp], std::slice::from_ref(&traced), "after a dry run");
    assert!(std::fs::read_to_string(cli.kubeconfig())
        .expect("kubeconfig")
        .contains(&format!("clusterctl-{name}")));

    // Not confirmed: nothing changes.
    let r = cli
        .run_with_stdin(
            &["destroy", "-f", "cluster.yaml", "--known-hosts", &kh],
            "no\n",
        )
        .expect("destroy");
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(r.stderr.contains("Type yes"), "{}", r.all());
    assert_listings(&[cp], std::slice::from_ref(&traced), "when not confirmed");

    let r = destroy(&cli, &kh, &["--yes"]);
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    eprintln!("--- session output ---\n{out}");

    // Each node as before.
    assert_listings(&[cp, w], &before, "differs from before up");
    for n in [cp, w] {
        assert_eq!(
            n.sh("cat /etc/not-clusterctl.conf").expect("sh").trim(),
            "keep"
        );
        let calls = standin_calls(n).expect("calls");
        assert_eq!(
            calls,
            ["kubeadm reset -f --config /etc/kubernetes/kubeadm/reset.yaml"],
            "{}",
            n.name
        );
        let cfg = n
            .sh("cat /var/log/clusterctl-standin/1-kubeadm.yaml")
            .expect("reset config");
        assert!(cfg.contains("kind: ResetConfiguration"), "{cfg}");
        assert!(cfg.contains("kubeadm.k8s.io/v1beta4"), "{cfg}");
        assert!(
            n.sh("dpkg -s cri-tools >/dev/null && echo installed")
                .expect("dpkg")
                .contains("installed"),
            "packages are kept without --purge"
        );
        assert_eq!(
            n.sh("systemctl is-active containerd").expect("sh"),
            "active"
        );
    }
    // The worker first, the first control plane last.
    let wpos = out
        .find(&format!("{}: kubeadm reset: done", w.name))
        .expect("worker reset reported");
    let cpos = out
        .find(&format!("{}: kubeadm reset: done", cp.name))
        .expect("cp reset reported");
    assert!(wpos < cpos, "{out}");
    for said in [
        "link cc-vxlan deleted",
        "iptables chain CLUSTERCTL-CNI-MASQ deleted",
        "nft table inet clusterctl-netpol deleted",
        &format!("address {vip}/32 removed from eth0"),
        "restored /etc/containerd/config.toml",
        "fstab restored",
        "containerd restarted",
        "iptables nat: 1 KUBE-* chain(s) deleted",
        "iptables filter: 1 KUBE-* chain(s) deleted",
        "empty directories removed",
    ] {
        assert!(out.contains(said), "{said}:\n{out}");
    }

    // The kubeconfig keeps only the other cluster.
    let kc = std::fs::read_to_string(cli.kubeconfig()).expect("kubeconfig");
    assert!(!kc.contains(&format!("clusterctl-{name}")), "{kc}");
    assert!(kc.contains("keep-admin"), "{kc}");

    // A second destroy, with --purge, finds nothing of clusterctl's left and purges the package.
    let r = destroy(&cli, &kh, &["-y", "--purge"]);
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    // Only the reset configuration it uploaded for its own `kubeadm reset` is removed again.
    assert!(out.contains("1 path(s) removed"), "{out}");
    assert!(
        out.contains(&format!("{}: packages: purged: cri-tools", w.name)),
        "{out}"
    );
    assert_listings(&[cp, w], &before, "after a second destroy");
    for n in [cp, w] {
        assert!(n
            .sh("dpkg -s cri-tools >/dev/null 2>&1 && echo installed || echo gone")
            .expect("dpkg")
            .contains("gone"));
    }
}

/// A `destroy --yes` that could not reset a node (here the only node refuses SSH connections) keeps
/// the kubeconfig context and the local state cache, says so, and exits 1: the cluster may still run,
/// and they are what reach it. No root needed.
#[test]
fn a_destroy_that_could_not_reset_a_node_keeps_the_context_and_the_cache() {
    // A local address and a port nothing listens on: the connection is refused at once.
    let Some((addr, port)) = clusterctl_testbed::refusing_address() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "dstkeep";
    std::fs::write(
        dir.path().join("cluster.yaml"),
        format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  ssh: {{user: ops, port: {port}, connectAttempts: 1}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: {addr}}}\n"),
    )
    .expect("cluster file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), dir.path());
    let kubeconfig = format!("apiVersion: v1\nkind: Config\nclusters:\n- name: clusterctl-{name}\n  cluster: {{server: 'https://{addr}:6443'}}\nusers:\n- name: clusterctl-{name}\n  user: {{token: t}}\ncontexts:\n- name: clusterctl-{name}\n  context: {{cluster: clusterctl-{name}, user: clusterctl-{name}}}\ncurrent-context: clusterctl-{name}\n");
    std::fs::write(cli.kubeconfig(), &kubeconfig).expect("kubeconfig");
    let cache = dir.path().join(".cache/clusterctl").join(name);
    std::fs::create_dir_all(&cache).expect("cache");
    std::fs::write(cache.join("state.json"), "{}").expect("state");

    let r = cli
        .run(&["destroy", "-f", "cluster.yaml", "--yes"])
        .expect("destroy");
    let out = r.all();
    assert_eq!(r.code, 1, "{out}");
    assert!(out.contains("cp1: FAILED: cannot reach"), "{out}");
    for kept in [
        format!(
            "kubeconfig: context clusterctl-{name} in {} kept: cp1 not torn down",
            cli.kubeconfig().display()
        ),
        "cache: the local state cache kept: cp1 not torn down".to_string(),
    ] {
        assert!(out.contains(&kept), "{kept}:\n{out}");
    }
    assert_eq!(
        std::fs::read_to_string(cli.kubeconfig()).expect("kubeconfig"),
        kubeconfig
    );
    assert!(cache.join("state.json").is_file());
}
