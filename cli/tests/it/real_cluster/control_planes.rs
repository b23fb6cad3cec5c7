//! Control planes in and out of the real 3 + 2 HA cluster behind the kube-vip VIP (issue 26 item 1),
//! at the end of `ha_cluster_over_ssh_for_real`. The test starts one node container more than the file
//! lists ([`set_aside_spare`]: the fourth control plane's line is taken out before the first `up`).
//! Then:
//!
//! 1. [`join_control_plane`] of the spare: its line back in the file, `node join`: etcd has 4 members, all healthy; the
//!    Node is labelled as a control plane; its kube-vip static pod runs.
//! 2. [`remove_not_first`]: `node remove` of the control plane holding the VIP (the new one when the
//!    first holds it): the output says kube-vip was handed over first (static pod stopped, its leases
//!    released) and that `kubeadm reset` removed its etcd member itself (the `etcd` step finds it gone,
//!    nothing left to remove after the reset); the Node is deleted, etcd back to 3 healthy members,
//!    the VIP on a control plane still in the file.
//! 3. [`remove_first`]: the first control plane (the one `up` ran `kubeadm init` on) removed as
//!    docs/lifecycle.md tells a user: another control plane put first in the file, `up` (its changes
//!    printed), then `node remove` of the former first: etcd 2 healthy members, the VIP held, `status`
//!    healthy, the cluster checks pass and a last `up` changes nothing.
//! 4. The former first, wiped by `kubeadm reset` in its removal, back in the file and joined again
//!    ([`join_control_plane`], as in step 1; then [`rejoined_converged`]): a control plane re-created
//!    on the same host with the same name; etcd 3 healthy members, the cluster checks, `status`, and
//!    `up` changes nothing. The file has `apiServer.encryption` on: a Secret written before step 1 is
//!    stored encrypted and read back through each control plane's own API server, with one key file on
//!    all of them (`real_support::encryption::Kept`, issue 27 item 8).
//!
//! During each operation ([`during`]) the API is probed through the VIP every 500 ms (`kubectl get
//! --raw /readyz` with the local kubeconfig, `real_day2::ApiProbe`) and the `web` ClusterIP every
//! second from the first worker's network namespace (`real_upgrade::probe`); the results are printed
//! per operation, the API's longest gap must be at most kube-vip's `vip_leaseduration` (read from the
//! rendered manifest on a control plane), and no ClusterIP probe may fail.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clusterctl_testbed::cli::Run;
use clusterctl_testbed::docker::docker;

use super::{all_ready, check_cluster, status_healthy};
use crate::real_day2::ApiProbe;
use crate::real_support::vip::{holder, livez};
use crate::real_support::{wait_for, RealCluster, NOT_IN_FILE};
use crate::real_upgrade::probe;

/// The file's line of control plane `name` (as `real_support::cluster_yaml` writes it).
fn line(c: &RealCluster, name: &str) -> String {
    let n = c.node(name);
    format!(
        "    - {{name: {}, role: control-plane, address: {}}}\n",
        n.name, n.address
    )
}

fn edit_file(c: &RealCluster, edit: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(&c.file).expect("cluster file");
    std::fs::write(&c.file, edit(text)).expect("cluster file");
}

fn without_line(c: &RealCluster, name: &str) {
    let l = line(c, name);
    edit_file(c, |t| {
        assert!(t.contains(&l), "{name} in the file:\n{t}");
        t.replace(&l, "")
    });
}

/// Takes the last control plane's line out of the file before the first `up`; returns its name.
pub(super) fn set_aside_spare(c: &mut RealCluster) -> String {
    let name = c
        .control_planes()
        .last()
        .expect("control planes")
        .name
        .clone();
    without_line(c, &name);
    c.set_role(&name, NOT_IN_FILE);
    name
}

/// The `web` ClusterIP probed every second from a worker's network namespace until stopped.
struct ServiceProbe {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<(f64, Result<(), String>)>>,
}

impl ServiceProbe {
    fn start(c: &RealCluster) -> ServiceProbe {
        let worker = c.workers()[0].name.clone();
        let pid = docker(&["inspect", "-f", "{{.State.Pid}}", &worker]).expect("docker inspect");
        let pid = pid.trim().to_string();
        let ip = c.kubectl("get service web -o jsonpath='{.spec.clusterIP}'");
        let page = |pid: &str, ip: &str| {
            probe(pid, ip).and_then(|b| {
                b.starts_with("hello-from-web-")
                    .then_some(())
                    .ok_or(format!("unexpected page {b:?}"))
            })
        };
        wait_for(
            "the web ClusterIP from a worker",
            Duration::from_secs(60),
            || page(&pid, &ip),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let t = Instant::now();
            let mut seen = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let tick = Instant::now();
                let r = page(&pid, &ip);
                seen.push((t.elapsed().as_secs_f64(), r));
                if let Some(rest) = Duration::from_secs(1).checked_sub(tick.elapsed()) {
                    std::thread::sleep(rest);
                }
            }
            seen
        });
        ServiceProbe { stop, handle }
    }

    /// Stops; returns the summary line and how many failed.
    fn finish(self) -> (String, usize) {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.handle.join().expect("service probe");
        let failed: Vec<String> = seen
            .iter()
            .filter_map(|(at, r)| r.as_ref().err().map(|e| format!("{at:.0}s {e}")))
            .collect();
        let line = format!(
            "{} probes, {} failed{}",
            seen.len(),
            failed.len(),
            if failed.is_empty() {
                String::new()
            } else {
                format!(": {}", failed.join("; "))
            }
        );
        (line, failed.len())
    }
}

/// kube-vip's `vip_leaseduration` (seconds) in the rendered static pod manifest on `node`.
fn lease_secs(c: &RealCluster, node: &str) -> f64 {
    let out = c
        .node(node)
        .sh("grep -A1 'name: vip_leaseduration' /etc/kubernetes/manifests/kube-vip.yaml")
        .expect("kube-vip manifest");
    let value: String = out
        .lines()
        .find(|l| l.contains("value:"))
        .unwrap_or("")
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    value.parse().unwrap_or_else(|_| panic!("lease: {out}"))
}

/// Runs `op` with the API probed through the VIP and the ClusterIP from a worker; prints both and
/// asserts the API's longest gap is at most kube-vip's lease duration and no ClusterIP probe failed.
fn during(c: &RealCluster, kubectl: &Path, what: &str, op: impl FnOnce() -> Run) -> Run {
    let lease = lease_secs(c, &c.first().name);
    let svc = ServiceProbe::start(c);
    let api = ApiProbe::start(c, kubectl.to_path_buf());
    let t = Instant::now();
    let r = op();
    let took = t.elapsed().as_secs_f64();
    // A few seconds more: what the operation set going (a lease moving) shows after it returns.
    std::thread::sleep(Duration::from_secs(5));
    let (api_line, longest) = api.finish();
    let (svc_line, failed) = svc.finish();
    eprintln!(
        "[real] probes during {what} ({took:.0}s): API through the VIP: {api_line}; the web ClusterIP from a worker: {svc_line}"
    );
    assert!(
        longest <= lease,
        "{what}: the API through the VIP was away {longest:.1}s, more than kube-vip's lease {lease}s"
    );
    assert_eq!(failed, 0, "{what}: ClusterIP probes failed: {svc_line}");
    r
}

/// etcd lists exactly `want` (names), every member's endpoint healthy.
fn etcd_is(c: &RealCluster, want: &[String]) {
    let mut want = want.to_vec();
    want.sort();
    wait_for(
        &format!("etcd members {want:?}"),
        Duration::from_secs(120),
        || {
            let m = c.etcd_members();
            (m == want).then_some(()).ok_or(format!("{m:?}"))
        },
    );
    let first = c.first().name.clone();
    let health = wait_for("every etcd member healthy", Duration::from_secs(60), || {
        let out = c
            .first()
            .sh(&format!(
                "kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system exec etcd-{first} -- \
                 etcdctl --endpoints https://127.0.0.1:2379 --cacert /etc/kubernetes/pki/etcd/ca.crt \
                 --cert /etc/kubernetes/pki/etcd/server.crt --key /etc/kubernetes/pki/etcd/server.key \
                 endpoint health --cluster 2>&1"
            ))
            .map_err(|e| format!("{e:#}"))?;
        let healthy = out.lines().filter(|l| l.contains("is healthy")).count();
        (healthy == want.len()).then_some(out.clone()).ok_or(out)
    });
    eprintln!("[real] etcd {want:?}:\n{health}");
}

fn file_arg(c: &RealCluster) -> String {
    c.file.to_string_lossy().into_owned()
}

/// Steps 1 and 4: control plane `name`'s line back in the file (at its end), `node join` of it: one
/// etcd member more, all healthy; the Node labelled as a control plane; its kube-vip static pod runs;
/// every node Ready. `what` names the operation in the probes' report.
pub(super) fn join_control_plane(c: &mut RealCluster, name: &str, what: &str, kubectl: &Path) {
    let before = c.control_planes().len();
    let l = line(c, name);
    edit_file(c, |t| t + &l);
    c.set_role(name, "control-plane");
    let f = file_arg(c);
    let j = during(c, kubectl, what, || {
        c.clusterctl(&["node", "join", "-f", &f, name])
    });
    assert_eq!(j.code, 0, "{what}:\n{}", j.all());
    let cps: Vec<String> = c.control_planes().iter().map(|n| n.name.clone()).collect();
    assert_eq!(cps.len(), before + 1, "{cps:?}");
    etcd_is(c, &cps);
    let labels = c.kubectl(&format!(
        "get node {name} -o jsonpath='{{.metadata.labels}}'"
    ));
    assert!(
        labels.contains("node-role.kubernetes.io/control-plane"),
        "{name}: {labels}"
    );
    wait_for(
        "kube-vip running on the new control plane",
        Duration::from_secs(120),
        || {
            let phase = c
                .first()
                .sh(&format!("kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get pod kube-vip-{name} -o jsonpath='{{.status.phase}}'"))
                .map_err(|e| format!("{e:#}"))?;
            (phase == "Running").then_some(()).ok_or(phase)
        },
    );
    wait_for("every node Ready", Duration::from_secs(180), || {
        all_ready(c)
    });
}

/// `node remove` of `name`: exit 0, drained, its etcd member gone after `kubeadm reset` (the `etcd`
/// step had nothing left to remove), the Node deleted, the file without it. Returns the output.
fn remove(c: &mut RealCluster, name: &str, what: &str, kubectl: &Path) -> String {
    let f = file_arg(c);
    let r = during(c, kubectl, what, || {
        c.clusterctl(&["node", "remove", "-f", &f, name])
    });
    let out = r.all();
    eprintln!("{out}");
    assert_eq!(r.code, 0, "node remove {name}:\n{out}");
    assert!(
        out.contains(&format!("member {name} not in the member list")),
        "the reset removed the etcd member itself:\n{out}"
    );
    // kube-vip handed over before the reset: stopped, its leases taken by another control plane.
    assert!(
        out.contains(&format!(
            "{name}: kube-vip: static pod stopped; its leases released after"
        )),
        "the kube-vip handover:\n{out}"
    );
    let nodes = c.kubectl("get nodes -o name");
    assert!(
        !nodes.contains(&format!("node/{name}\n")) && !nodes.ends_with(&format!("node/{name}")),
        "the Node {name} deleted: {nodes}"
    );
    without_line(c, name);
    c.set_role(name, NOT_IN_FILE);
    out
}

/// After a removal: etcd one member per control plane left, healthy; the VIP on one of them and the
/// API answering through it; every node Ready. Returns the VIP's holder.
fn left_healthy(c: &RealCluster, removed: &str, held_before: &str) -> String {
    let cps: Vec<String> = c.control_planes().iter().map(|n| n.name.clone()).collect();
    etcd_is(c, &cps);
    let vip = c.vip.clone().expect("vip");
    let now = wait_for(
        "the VIP on a control plane",
        Duration::from_secs(60),
        || {
            holder(c, &vip)
                .map(|n| n.name.clone())
                .ok_or("on none".to_string())
        },
    );
    assert!(cps.contains(&now), "the VIP on {now}, not one of {cps:?}");
    livez(&vip).expect("the API through the VIP");
    eprintln!(
        "[real] after removing {removed}: the VIP on {now} (before: {held_before}{})",
        if held_before == removed {
            ", moved"
        } else {
            ""
        }
    );
    wait_for("every node Ready", Duration::from_secs(180), || {
        all_ready(c)
    });
    now
}

/// Step 2: `node remove` of a control plane that is not the first — the VIP's holder, or the spare
/// when the first holds it.
pub(super) fn remove_not_first(c: &mut RealCluster, spare: &str, kubectl: &Path) {
    let vip = c.vip.clone().expect("vip");
    let held = holder(c, &vip).expect("the VIP held").name.clone();
    let target = if held == c.first().name {
        spare.to_string()
    } else {
        held.clone()
    };
    eprintln!("[real] the VIP is on {held}; removing {target}");
    remove(c, &target, &format!("node remove of {target}"), kubectl);
    left_healthy(c, &target, &held);
}

/// Step 3: another control plane first in the file, `up`, then `node remove` of the former first.
/// Returns the former first's name.
pub(super) fn remove_first(c: &mut RealCluster, kubectl: &Path) -> String {
    let old = c.first().name.clone();
    let new = c
        .control_planes()
        .iter()
        .find(|n| n.name != old)
        .expect("another control plane")
        .name
        .clone();
    let l = line(c, &new);
    edit_file(c, |t| {
        t.replace(&l, "")
            .replace("  nodes:\n", &format!("  nodes:\n{l}"))
    });
    let f = file_arg(c);
    let up = during(c, kubectl, &format!("up with {new} first"), || {
        c.clusterctl(&["up", "-f", &f])
    });
    let out = up.all();
    assert_eq!(up.code, 0, "up with {new} first:\n{out}");
    // The builtin CNI's RBAC manifest is placed and applied on the new first control plane; its
    // agent, which reads nothing of it, keeps running.
    assert!(
        !out.contains("systemctl restart clusterctl-cni-agent.service"),
        "the CNI agent restarted:\n{out}"
    );
    let changed: Vec<&str> = out
        .lines()
        .filter(|l| !l.contains("nothing to change") && !l.contains("skipped"))
        .collect();
    eprintln!(
        "[real] up with {new} first, what it did:\n{}",
        changed.join("\n")
    );
    // The new first control plane leads the harness's kubectl and etcd checks from here.
    let i = c.roles.iter().position(|(n, _)| *n == new).expect("new");
    c.roles.swap(0, i);
    c.nodes.nodes.swap(0, i);
    let vip = c.vip.clone().expect("vip");
    let held = holder(c, &vip).expect("the VIP held").name.clone();
    remove(
        c,
        &old,
        &format!("node remove of the former first {old}"),
        kubectl,
    );
    left_healthy(c, &old, &held);
    check_cluster(c);
    status_healthy(c);
    let again = c.up(&[]);
    assert!(
        again.all().contains("is up to date; nothing changed"),
        "up after the removals:\n{}",
        again.all()
    );
    old
}

/// After step 4 (the former first, reset by its removal, joined again: a control plane re-created):
/// the cluster checks pass, `status` is healthy and `up` changes nothing.
pub(super) fn rejoined_converged(c: &RealCluster) {
    check_cluster(c);
    status_healthy(c);
    let again = c.up(&[]);
    assert!(
        again.all().contains("is up to date; nothing changed"),
        "up after the rejoin:\n{}",
        again.all()
    );
}
