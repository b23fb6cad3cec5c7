//! `etcd snapshot save|restore` without nodes (their SSH addresses are unroutable and never contacted):
//! a restore of a damaged or hash-less file is refused before anything is reached; a dry run of the
//! restore plans every phase on every control plane — the full member list in each member's
//! `etcdutl snapshot restore`, the manifests moved aside and back, the old data kept — and a dry run
//! of `save` plans the snapshot on the first control plane only; an existing output is refused.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clusterctl_phases::etcd::{check_snapshot, restore, save, Corrupt};
use clusterctl_phases::{PlanKind, QuietReporter};
use clusterctl_spec::ValidCluster;
use sha2::{Digest, Sha256};

/// An SSH cluster of two control planes and a worker at unroutable addresses.
fn cluster(dir: &Path) -> ValidCluster {
    let file = dir.join("cluster.yaml");
    std::fs::write(
        &file,
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {name: lab}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  ssh: {user: root, port: 22}\n  nodes:\n    - {name: c1, role: control-plane, address: 192.0.2.1}\n    - {name: c2, role: control-plane, address: 192.0.2.2}\n    - {name: w1, role: worker, address: 192.0.2.3}\n",
    )
    .expect("cluster file");
    let loaded = clusterctl_spec::load(&file).expect("load");
    clusterctl_spec::validate(&loaded).expect("valid").cluster
}

/// Bytes shaped as `etcdctl snapshot save` writes them: a bbolt meta page magic, the sha256 appended.
fn snapshot() -> Vec<u8> {
    let mut db = vec![0u8; 16384];
    db[16..20].copy_from_slice(&[0xED, 0xDA, 0x0C, 0xED]);
    db[9000] = 42;
    let sum = Sha256::digest(&db);
    db.extend_from_slice(&sum);
    db
}

fn restore_opts(snapshot: &Path) -> restore::Options {
    restore::Options {
        snapshot: snapshot.to_path_buf(),
        known_hosts: None,
        timeout: Duration::from_secs(30),
        verbose: false,
        dry_run: false,
    }
}

#[test]
fn a_damaged_snapshot_is_refused_before_any_node_is_reached() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = cluster(dir.path());
    let mut bytes = snapshot();
    bytes[9000] ^= 0xff;
    let bad = dir.path().join("bad.db");
    std::fs::write(&bad, &bytes).expect("write");
    // Not a dry run: a refusal must come before the (unroutable) nodes are tried.
    let t = std::time::Instant::now();
    let e = restore::run(&c, &restore_opts(&bad), Arc::new(QuietReporter)).expect_err("refused");
    assert!(e.refused(), "{e}");
    assert!(
        e.to_string().contains("integrity check failed")
            && e.to_string().contains("nothing was changed"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "no node was tried");
    let copied = dir.path().join("db");
    std::fs::write(&copied, &snapshot()[..16384]).expect("write");
    let e = restore::run(&c, &restore_opts(&copied), Arc::new(QuietReporter)).expect_err("refused");
    assert!(e.to_string().contains("no integrity hash"), "{e}");
    assert_eq!(check_snapshot(&snapshot()), Ok(()));
    assert!(matches!(
        check_snapshot(&bytes),
        Err(Corrupt::HashMismatch { .. })
    ));
}

#[test]
fn a_dry_run_of_the_restore_plans_every_phase_on_every_control_plane() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = cluster(dir.path());
    let snap = dir.path().join("snap.db");
    std::fs::write(&snap, snapshot()).expect("write");
    let mut opts = restore_opts(&snap);
    opts.dry_run = true;
    let report = restore::run(&c, &opts, Arc::new(QuietReporter)).expect("planned");
    assert!(report.stopped.is_none(), "{:?}", report.stopped);
    assert_eq!(
        report.members,
        [
            ("c1".to_string(), "https://192.0.2.1:2380".to_string()),
            ("c2".to_string(), "https://192.0.2.2:2380".to_string())
        ]
    );
    let names: Vec<&str> = report.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["c1", "c2"], "control planes only");
    let on = |node: &str, phase: &str| -> Vec<String> {
        report
            .plan
            .iter()
            .filter(|e| e.node == node && e.phase == phase)
            .map(|e| e.text.clone())
            .collect()
    };
    for node in ["c1", "c2"] {
        let stage = on(node, "etcd-restore/stage").join("\n");
        assert!(
            stage.contains(&format!("--name {node} "))
                && stage.contains(
                    "--initial-cluster c1=https://192.0.2.1:2380,c2=https://192.0.2.2:2380 "
                )
                && stage.contains("--bump-revision 1000000000 --mark-compacted")
                && stage.contains("snapshot status"),
            "{node}: {stage}"
        );
        let id = &report.sha256[..12];
        assert!(
            stage.contains(&format!(
                "write /var/lib/etcd/clusterctl-restore/{id}/snapshot.db (16416 bytes, mode 0600)"
            )),
            "{stage}"
        );
        assert!(on(node, "etcd-restore/stop")
            .join("\n")
            .contains("/etc/kubernetes/clusterctl-restore-manifests"));
        assert!(on(node, "etcd-restore/data-dir")
            .join("\n")
            .contains("old-member"));
        assert!(
            !on(node, "etcd-restore/start-etcd").is_empty()
                && !on(node, "etcd-restore/healthy").is_empty()
        );
    }
    assert!(
        !on("c1", "etcd-restore/nodes-ready").is_empty()
            && on("c2", "etcd-restore/nodes-ready").is_empty()
    );
    assert!(report.plan.iter().all(|e| e.node != "w1"));
    assert!(report.changes >= 10, "{}", report.changes);
    assert!(report.plan.iter().any(|e| e.kind == PlanKind::Run));
}

#[test]
fn save_refuses_an_existing_output_and_plans_on_the_first_control_plane() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = cluster(dir.path());
    let out = dir.path().join("snap.db");
    std::fs::write(&out, b"keep me").expect("write");
    let opts = save::Options {
        output: out.clone(),
        overwrite: false,
        known_hosts: None,
        verbose: false,
        dry_run: false,
    };
    let e = save::run(&c, &opts, Arc::new(QuietReporter)).expect_err("refused");
    assert!(e.refused() && e.to_string().contains("--overwrite"), "{e}");
    assert_eq!(std::fs::read(&out).expect("read"), b"keep me");
    let plan = save::run(
        &c,
        &save::Options {
            overwrite: true,
            dry_run: true,
            ..opts
        },
        Arc::new(QuietReporter),
    )
    .expect("planned");
    assert!(plan.saved.is_none());
    let c1: Vec<&str> = plan
        .plan
        .iter()
        .filter(|e| e.node == "c1")
        .map(|e| e.text.as_str())
        .collect();
    assert!(
        c1.iter().any(|t| t.contains("etcdctl snapshot save")),
        "{c1:?}"
    );
    assert!(
        c1.iter()
            .any(|t| t.contains(&format!("write {} (mode 0600)", out.display()))),
        "{c1:?}"
    );
    let c2: Vec<&str> = plan
        .plan
        .iter()
        .filter(|e| e.node == "c2")
        .map(|e| e.text.as_str())
        .collect();
    assert!(c2.iter().all(|t| !t.contains("snapshot save")), "{c2:?}");
    assert_eq!(
        std::fs::read(&out).expect("read"),
        b"keep me",
        "a dry run writes nothing"
    );
}
