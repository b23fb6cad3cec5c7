//! The whole cluster for real (root + Docker + the test bed's Kubernetes build): `clusterctl up -f` a file
//! with 3 control planes and 2 workers, a kube-vip VIP (kube-vip v1.0.0 built from its Go module), the
//! builtin CNI and containerd, on unprivileged systemd node containers over SSH, with the upstream
//! kubeadm, kubelet and kubectl of v1.34.4 placed on the nodes (`K8sNodeImage`) and every image pulled
//! by the nodes' containerd from the cluster file's `registry.mirror` (a registry on the test network's
//! gateway serving the images `scripts/k8s/images.sh` built; its CA in the file). On the fresh cluster
//! `up` is first killed (SIGKILL, with the node's `kubeadm`; `real_lifecycle::up_killed_when`) inside
//! `kubeadm init` and inside the second and third control planes' joins (the kubelet started but the
//! etcd learner not promoted; static pods written, no kubelet; the Node registered but not marked),
//! then run until it converges. Asserts the kubeconfig names the VIP, one etcd member per control plane
//! and all three marked, every node Ready through our CNI, CoreDNS running, a pod on each worker,
//! pod-to-pod traffic across nodes over the VXLAN device, a ClusterIP Service reached through kube-proxy,
//! the Service name resolved through CoreDNS, the API server reached through the VIP, `status` healthy,
//! and a second `up` that changes nothing; then (`real_support::vip`) a LoadBalancer Service answering on
//! an address of the file's `loadBalancerPool`, and the VIP's control plane stopped and started again;
//! then upstream's conformance focus and NetworkPolicy focus on it; then (`control_planes`) a fourth
//! control plane — a sixth container, out of the file until then — joined with `node join`, a control
//! plane that is not the first removed with `node remove`, and the first one removed after another was
//! put first in the file and `up` ran, then that first one joined again (a control plane re-created on
//! its wiped host), with the API through the VIP and a ClusterIP probed during each; encryption at rest
//! is on, and a Secret written before the joins is stored encrypted and read back through every control
//! plane's own API server at the end. By hand, every upstream NetworkPolicy spec: `CLUSTERCTL_NETPOL=netpol`
//! on this test, or `scripts/conformance.sh netpol` against any cluster `up` built.

use std::time::{Duration, Instant};

use clusterctl_testbed::docker::TestNode;

mod control_planes;

use crate::real_lifecycle::{up_killed_when, DELAYED_KUBELET, REAL_KUBELET};
use crate::real_support::{self, wait_for, FileOptions, Kube, RealCluster};

/// Web pods (busybox httpd on 8080 answering `hello-from-<pod>`), `web-<i>` pinned to `hosts[i]`
/// (tolerating every taint), and the ClusterIP Service `web` (80 → 8080) in front of them.
pub(crate) fn web_workload(c: &dyn Kube, hosts: &[String]) -> String {
    let image = c.workload_image();
    let mut y = String::new();
    for (i, w) in hosts.iter().enumerate() {
        y.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: web-{i}, labels: {{app: web}}}}\nspec:\n  nodeName: {w}\n  tolerations: [{{operator: Exists}}]\n  containers:\n  - name: web\n    image: {image}\n    command: [\"sh\", \"-c\", \"echo hello-from-$(hostname) > /tmp/index.html; exec httpd -f -p 8080 -h /tmp\"]\n---\n"
        ));
    }
    y.push_str("apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80, targetPort: 8080}]\n");
    y
}

/// Every node of the file registered and Ready (JSONPath over `kubectl get nodes`).
pub(crate) fn all_ready(c: &dyn Kube) -> Result<(), String> {
    let out = c.kubectl(
        "get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}'",
    );
    for name in c.node_names() {
        if !out.lines().any(|l| l.trim() == format!("{name} True")) {
            return Err(format!("{name} not Ready:\n{out}"));
        }
    }
    Ok(())
}

/// Pods of `selector` in `namespace` all Running and Ready (at least `min`).
pub(crate) fn pods_ready(
    c: &dyn Kube,
    namespace: &str,
    selector: &str,
    min: usize,
) -> Result<(), String> {
    let out = c.kubectl(&format!(
        "-n {namespace} get pods -l {selector} -o jsonpath='{{range .items[*]}}{{.metadata.name}} {{.status.phase}} {{.status.conditions[?(@.type==\"Ready\")].status}}{{\"\\n\"}}{{end}}'"
    ));
    let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() < min || lines.iter().any(|l| !l.ends_with("Running True")) {
        let why = if out.contains(" Failed") {
            c.kubectl(&format!(
                "-n {namespace} describe pods -l {selector} | grep -E '^Name:|Reason|Message|Warning' || true"
            ))
        } else {
            String::new()
        };
        return Err(format!("{namespace}/{selector}: {out}\n{why}"));
    }
    Ok(())
}

/// What the checks expect of the cluster's CNI: the only file in `/etc/cni/net.d` of every node and the
/// VXLAN device the route from one node's pod to another node's pod leaves through.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Overlay {
    /// The CNI configuration file, alone in `/etc/cni/net.d`.
    pub(crate) conflist: &'static str,
    /// The VXLAN device between nodes.
    pub(crate) device: &'static str,
}

/// The builtin CNI: `10-clusterctl.conflist`, `cc-vxlan`.
pub(crate) const BUILTIN: Overlay = Overlay {
    conflist: "10-clusterctl.conflist",
    device: "cc-vxlan",
};

/// The traffic checks from `web-0` (first worker): pod-to-pod across nodes over `overlay`'s VXLAN
/// device, the ClusterIP through kube-proxy, the Service name through CoreDNS, the API server through
/// the VIP.
pub(crate) fn traffic_over(c: &dyn Kube, overlay: &Overlay) {
    let exec = |cmd: &str| c.kubectl(&format!("exec web-0 -- {cmd}"));
    let ip1 = c.kubectl("get pod web-1 -o jsonpath='{.status.podIP}'");
    let host0 = c.kubectl("get pod web-0 -o jsonpath='{.spec.nodeName}'");
    // Across nodes: the route to the other worker's pod leaves the first worker through our VXLAN device.
    let route = c.node_sh(&host0, &format!("ip route get {ip1}"));
    assert!(
        route.contains(&format!("dev {}", overlay.device)),
        "route to {ip1} on {host0}: {route}"
    );
    let page = exec(&format!("wget -q -O- http://{ip1}:8080/index.html"));
    assert_eq!(page, "hello-from-web-1", "pod-to-pod across nodes");
    let ping = exec(&format!("ping -c 1 -W 2 {ip1}"));
    assert!(ping.contains("1 packets received"), "{ping}");
    // A ClusterIP Service through kube-proxy (iptables rules in the node).
    let cluster_ip = c.kubectl("get service web -o jsonpath='{.spec.clusterIP}'");
    let via_ip = exec(&format!("wget -q -O- http://{cluster_ip}/index.html"));
    assert!(
        via_ip.starts_with("hello-from-web-"),
        "ClusterIP {cluster_ip}: {via_ip}"
    );
    // The Service name through CoreDNS.
    let ns = exec("nslookup web.default.svc.cluster.local");
    assert!(ns.contains(&cluster_ip), "nslookup: {ns}");
    let via_name = exec("wget -q -O- http://web.default.svc.cluster.local/index.html");
    assert!(
        via_name.starts_with("hello-from-web-"),
        "by name: {via_name}"
    );
    // The API server through kube-vip's VIP.
    if let Some(vip) = &c.vip() {
        let livez = exec(&format!(
            "wget -q -O- --no-check-certificate https://{vip}:6443/livez"
        ));
        assert_eq!(livez, "ok", "API server through the VIP {vip}");
    }
}

/// Nodes Ready, CoreDNS running, the web workload running on the workers, then [`traffic_over`].
pub(crate) fn check_cluster(c: &RealCluster) {
    let workers: Vec<String> = c.workers().iter().map(|n| n.name.clone()).collect();
    check_cluster_on(c, &workers);
}

/// Nodes Ready through our CNI, CoreDNS running, the web pods running on `hosts` (two, on two nodes),
/// then [`traffic_over`] from the first to the second.
pub(crate) fn check_cluster_on(c: &dyn Kube, hosts: &[String]) {
    check_cluster_over(c, hosts, &BUILTIN);
}

/// [`check_cluster_on`] for the CNI `overlay` describes.
pub(crate) fn check_cluster_over(c: &dyn Kube, hosts: &[String], overlay: &Overlay) {
    let t = Instant::now();
    wait_for("every node Ready", Duration::from_secs(180), || {
        all_ready(c)
    });
    // Through the CNI: the only CNI configuration on every node is its own.
    for n in c.node_names() {
        let confs = c.node_sh(&n, "ls /etc/cni/net.d");
        assert_eq!(confs, overlay.conflist, "{n}");
    }
    wait_for("CoreDNS Ready", Duration::from_secs(240), || {
        pods_ready(c, "kube-system", "k8s-app=kube-dns", 2)
    });
    if c.kubectl("get pods -l app=web -o name").is_empty() {
        c.apply(&web_workload(c, hosts));
    }
    wait_for("web pods Ready", Duration::from_secs(180), || {
        pods_ready(c, "default", "app=web", hosts.len())
    });
    traffic_over(c, overlay);
    eprintln!(
        "[real] cluster checks passed in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}

/// `up` of the fresh HA file killed (with the node's `kubeadm`) inside `kubeadm init` (admin.conf
/// written), inside the second control plane's join (its kubelet started: the etcd learner not promoted,
/// the node not marked), inside the third's (certificates and static pods written, no kubelet — held
/// open by [`DELAYED_KUBELET`]) and, joining again, once its Node is registered.
fn up_killed_inside_init_and_control_plane_joins(c: &RealCluster) {
    let t = Instant::now();
    let cps: Vec<TestNode> = c.control_planes().into_iter().cloned().collect();
    // Inside kubeadm init: admin.conf written.
    up_killed_when(
        c,
        "kubeadm init wrote admin.conf",
        |_| cps[0].sh("test -f /etc/kubernetes/admin.conf").is_ok(),
        &[&cps[0]],
    );
    // Inside the second control plane's join: kubeadm started its kubelet (which writes kubelet.conf at
    // once and bootstraps in the background) — before its etcd learner is promoted and it is marked.
    up_killed_when(
        c,
        "second control plane's kubelet started (kubelet.conf)",
        |_| cps[1].sh("test -f /etc/kubernetes/kubelet.conf").is_ok(),
        &[&cps[1]],
    );
    // Inside the third control plane's join: its certificates and static pods written, its kubelet
    // not yet started (a half-done join: reset, then joined again) ... That window is short (kubeadm
    // starts the kubelet right after writing the manifests), so the node's kubelet starts 30 s late
    // for this run ([`DELAYED_KUBELET`]); the real one is back before the join is redone.
    cps[2].sh(DELAYED_KUBELET).expect("delay the kubelet");
    up_killed_when(
        c,
        "third control plane's API server manifest, no kubelet.conf",
        |_| {
            cps[2]
                .sh("test -f /etc/kubernetes/manifests/kube-apiserver.yaml && ! test -f /etc/kubernetes/kubelet.conf")
                .is_ok()
        },
        &[&cps[2]],
    );
    cps[2].sh(REAL_KUBELET).expect("restore the kubelet");
    // ... then, joining again, killed once its Node is registered (etcd joined, kubelet bootstrapped),
    // before or while kubeadm marks it as a control plane.
    let third = cps[2].name.clone();
    up_killed_when(
        c,
        "third control plane's Node registered",
        |_| {
            cps[0]
                .sh(&format!(
                    "kubectl --kubeconfig /etc/kubernetes/admin.conf get node {third} -o name"
                ))
                .is_ok()
        },
        &[&cps[2]],
    );
    eprintln!(
        "[real] HA kill points done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}

/// One etcd member per control plane (waited for: a killed join's member may still be settling) and
/// every control plane's Node labelled as one.
fn control_planes_whole(c: &RealCluster) {
    let mut want: Vec<String> = c.control_planes().iter().map(|n| n.name.clone()).collect();
    want.sort();
    wait_for(
        "one etcd member per control plane",
        Duration::from_secs(120),
        || {
            let m = c.etcd_members();
            (m == want).then_some(()).ok_or(format!("{m:?}"))
        },
    );
    for n in c.control_planes() {
        let labels = c.kubectl(&format!(
            "get node {} -o jsonpath='{{.metadata.labels}}'",
            n.name
        ));
        assert!(
            labels.contains("node-role.kubernetes.io/control-plane"),
            "{}: {labels}",
            n.name
        );
    }
}

/// `status` reports the cluster healthy: every node of the file registered and Ready, nothing stuck,
/// no label or taint drift.
fn status_healthy(c: &RealCluster) {
    let f = c.file.to_string_lossy().into_owned();
    let status = c.clusterctl(&["status", "-f", &f]);
    assert_eq!(status.code, 0, "status:\n{}", status.all());
    let s = status.all();
    assert!(
        s.contains(&format!(
            "; {n} of {n} registered node(s) Ready",
            n = c.node_names().len()
        )) && s.contains("no stuck pods")
            && !s.contains("not registered")
            && !s.contains("missing on the node"),
        "status:\n{s}"
    );
}

#[test]
fn ha_cluster_over_ssh_for_real() {
    // The conformance suite first: images.sh writes its images only once e2e.test is built.
    let suite = real_support::conformance::require_suite();
    let Some(env) = real_support::available() else {
        return;
    };
    let Some(bins) =
        clusterctl_testbed::k8sbin::require_programs(real_support::VERSION, &["kubectl"])
    else {
        return;
    };
    let t = Instant::now();
    // Four control-plane containers, the fourth out of the file until `node join` adds it.
    let mut c = real_support::start(
        "rha",
        4,
        2,
        FileOptions {
            vip: true,
            lb_pool: true,
            extra_spec: "  apiServer:\n    encryption: {}\n".into(),
        },
        &env,
    );
    let spare = control_planes::set_aside_spare(&mut c);
    // The kill points need the fresh cluster: `up` killed inside init and the control-plane joins.
    up_killed_inside_init_and_control_plane_joins(&c);
    // Then `up` converges.
    let up = c.up(&[]);
    let out = up.all();
    assert!(
        out.contains("up: cluster") && out.contains("converged"),
        "{out}"
    );
    eprintln!(
        "[real] HA up converged after {:.1}s",
        t.elapsed().as_secs_f64()
    );
    // The kubeconfig names the VIP.
    let kubeconfig = std::fs::read_to_string(c.cc.kubeconfig()).expect("kubeconfig");
    let vip = c.vip.clone().expect("vip");
    assert!(
        kubeconfig.contains(&format!("server: https://{vip}:6443")),
        "{kubeconfig}"
    );
    control_planes_whole(&c);
    check_cluster(&c);
    let mut want: Vec<String> = c.control_planes().iter().map(|n| n.name.clone()).collect();
    want.sort();
    assert_eq!(c.etcd_members(), want, "one etcd member per control plane");
    status_healthy(&c);
    // A second `up` changes nothing.
    let again = c.up(&[]);
    assert!(
        again.all().contains("is up to date; nothing changed"),
        "{}",
        again.all()
    );
    // kube-vip: a LoadBalancer Service from the file's pool, then the VIP's node stopped and started.
    let lb_ip = real_support::vip::load_balancer_service(&c);
    real_support::vip::vip_failover(&c, &lb_ip);
    // Kubernetes' own conformance tests, the CI focus (scripts/conformance.sh ci), on this cluster.
    // And upstream's NetworkPolicy e2e tests (issue 28), the netpol-ci focus, enforced by the builtin
    // CNI agent's nftables table.
    if suite {
        real_support::conformance::run_ci_focus(&c);
        real_support::conformance::run_netpol_focus(&c);
    }
    // Control planes in and out (issue 26 item 1), the API through the VIP and the ClusterIP probed.
    let kubectl = bins.path("kubectl").to_path_buf();
    let tc = Instant::now();
    let kept = real_support::encryption::Kept::create(&c);
    let what = format!("node join of {spare}");
    control_planes::join_control_plane(&mut c, &spare, &what, &kubectl);
    control_planes::remove_not_first(&mut c, &spare, &kubectl);
    let former = control_planes::remove_first(&mut c, &kubectl);
    let what = format!("node join of the removed {former}");
    control_planes::join_control_plane(&mut c, &former, &what, &kubectl);
    control_planes::rejoined_converged(&c);
    kept.check_on_every_control_plane(&c);
    eprintln!(
        "[real] control planes in and out: {:.1}s",
        tc.elapsed().as_secs_f64()
    );
    eprintln!("[real] HA test done in {:.1}s", t.elapsed().as_secs_f64());
}
