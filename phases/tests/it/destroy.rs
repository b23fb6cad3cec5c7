//! `destroy` and `node remove` as phases, without nodes: a dry run plans every node's reset in
//! teardown order (workers, other control planes, the first control plane) and changes nothing on
//! this machine; `node remove --dry-run` plans the drain, reset, etcd check and Node deletion without
//! an API client; a node's reset attempts every step when some fail (best effort), each on its line.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clusterctl_phases::destroy::{self, reset_node, Teardown};
use clusterctl_phases::fake::{Concurrency, FakeNode};
use clusterctl_phases::steps::{StepLine, Steps};
use clusterctl_phases::{Mode, NodeCtx, PlanKind, QuietReporter, Secrets};
use clusterctl_spec::model::Role;
use clusterctl_spec::ValidCluster;
use clusterctl_spec::ValidNode;

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: clusterctl-lab\n  cluster: {server: 'https://10.0.0.1:6443'}\nusers:\n- name: clusterctl-lab\n  user: {token: t}\ncontexts:\n- name: clusterctl-lab\n  context: {cluster: clusterctl-lab, user: clusterctl-lab}\ncurrent-context: clusterctl-lab\n";

/// An SSH cluster `lab` of two control planes and a worker at unroutable addresses (never contacted).
fn cluster(dir: &Path) -> ValidCluster {
    let file = dir.join("cluster.yaml");
    std::fs::write(
        &file,
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {name: lab}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  networking: {podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/16}\n  ssh: {user: root, port: 22}\n  nodes:\n    - {name: c1, role: control-plane, address: 192.0.2.1}\n    - {name: c2, role: control-plane, address: 192.0.2.2}\n    - {name: w1, role: worker, address: 192.0.2.3}\n",
    )
    .expect("cluster file");
    let loaded = clusterctl_spec::load(&file).expect("load");
    clusterctl_spec::validate(&loaded).expect("valid").cluster
}

#[test]
fn a_dry_run_plans_every_nodes_reset_in_teardown_order_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = cluster(dir.path());
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, KUBECONFIG).expect("kubeconfig");
    let shown = Mutex::new(Vec::new());
    let report = destroy::run(
        &c,
        &destroy::Options {
            kubeconfig: Some(kc.clone()),
            purge: true,
            dry_run: true,
            ..Default::default()
        },
        &|l: &StepLine| shown.lock().unwrap().push(l.to_string()),
    )
    .report;
    assert_eq!(report.failures(), 0, "{:?}", report.lines);
    // Steps end in teardown order (the plan itself is grouped per node).
    let shown = shown.into_inner().unwrap();
    let reset_at = |node: &str| {
        shown
            .iter()
            .position(|l| l.starts_with(&format!("{node}: kubeadm reset: planned")))
            .unwrap_or_else(|| panic!("{node}: {shown:#?}"))
    };
    assert!(reset_at("w1") < reset_at("c2") && reset_at("c2") < reset_at("c1"));
    for (node, phase) in [
        ("w1", "reset/workers"),
        ("c2", "reset/control-planes"),
        ("c1", "reset/first-control-plane"),
    ] {
        let steps: Vec<&str> = report
            .plan
            .iter()
            .filter(|e| e.node == node && e.kind == PlanKind::Run)
            .map(|e| e.text.as_str())
            .collect();
        assert!(
            report
                .plan
                .iter()
                .any(|e| e.node == node && e.phase == phase),
            "{phase}"
        );
        for planned in [
            "systemctl disable --now",
            "KUBE-",
            "rm -rf --",
            "rmdir",
            "dpkg --purge",
            "daemon-reload",
        ] {
            assert!(
                steps.iter().any(|s| s.contains(planned)),
                "{node}: {planned}: {steps:#?}"
            );
        }
    }
    assert!(report.plan.iter().any(|e| e.kind == PlanKind::Local
        && e.text == format!("remove context clusterctl-lab from {}", kc.display())));
    assert_eq!(
        std::fs::read_to_string(&kc).expect("kubeconfig"),
        KUBECONFIG,
        "unchanged"
    );
    assert!(report.changes > 0);
}

#[test]
fn node_remove_dry_run_plans_without_an_api_client() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = cluster(dir.path());
    let opts = clusterctl_phases::node_remove::Options {
        node: "c2".into(),
        timeout: Duration::from_secs(60),
        retry_interval: Duration::from_secs(1),
        kubeconfig: Some(dir.path().join("absent-kubeconfig")),
        known_hosts: None,
        dry_run: true,
    };
    let report = clusterctl_phases::node_remove::run(&c, &opts, &|_: &StepLine| {}).expect("run");
    assert_eq!(report.failures(), 0, "{:?}", report.lines);
    let phases: Vec<(&str, &str, PlanKind)> = report
        .plan
        .iter()
        .map(|e| (e.node.as_str(), e.phase.as_str(), e.kind))
        .collect();
    let at = |node: &str, phase: &str, kind: PlanKind| {
        phases
            .iter()
            .position(|p| *p == (node, phase, kind))
            .unwrap_or_else(|| panic!("{node} {phase}: {phases:?}"))
    };
    assert!(at("local", "drain", PlanKind::Api) < at("local", "node-object", PlanKind::Api));
    at("c2", "reset", PlanKind::Run);
    at("c1", "etcd", PlanKind::Check);
    // The first control plane is refused before anything.
    let first = clusterctl_phases::node_remove::Options {
        node: "c1".into(),
        ..opts
    };
    assert!(clusterctl_phases::node_remove::run(&c, &first, &|_: &StepLine| {}).is_err());
}

#[test]
fn a_reset_attempts_every_step_when_some_fail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = cluster(dir.path());
    // The fake node runs none of the reset's scripts (exit 127): every step fails, and every one is tried.
    let fake = Arc::new(FakeNode::new(
        "w1",
        Duration::ZERO,
        Arc::new(Concurrency::default()),
    ));
    let mut ctx = NodeCtx::new(
        ValidNode::new("w1", Role::Worker, "192.0.2.3".parse().ok()),
        Some(fake.clone()),
        Mode::default(),
        Arc::new(QuietReporter),
        Secrets::default(),
    );
    let steps = Steps::new(&|_: &StepLine| {});
    let node = c.node("w1").expect("w1");
    reset_node(&mut ctx, "lab", &[], &Teardown::of(&c, node, true), &steps);
    let names: Vec<String> = steps
        .lines()
        .iter()
        .map(|l| l.step.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        [
            "kubeadm reset",
            "units",
            "network",
            "kube-proxy",
            "restore",
            "files",
            "packages",
            "systemd"
        ]
    );
    assert!(
        steps.lines().iter().skip(1).all(StepLine::failed),
        "{:?}",
        steps.lines()
    );
}
