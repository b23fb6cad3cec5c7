//! The etcd part of `real_day2` (see its module documentation): `etcd snapshot save`, a damaged copy
//! refused, a dry run, a restore killed while it swaps the data directory and run again, and the same
//! restore once more changing nothing.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::real_cluster::all_ready;
use crate::real_support::{wait_for, RealCluster};

/// The ConfigMap's value (in the snapshot; never in clusterctl's output).
const VALUE: &str = "kept-by-the-etcd-snapshot-0xC0FFEE";

/// `clusterctl etcd snapshot ARGS -f FILE`.
fn etcd(c: &RealCluster, args: &[&str]) -> clusterctl_testbed::cli::Run {
    let f = c.file.to_string_lossy().into_owned();
    let mut all = vec!["etcd", "snapshot"];
    all.extend(args);
    all.extend(["-f", f.as_str()]);
    c.clusterctl(&all)
}

/// Whether the first control plane's static pods and data are as `up` left them: every manifest in
/// place, nothing aside, no restore directory.
fn untouched(c: &RealCluster) -> Result<(), String> {
    let out = c
        .first()
        .sh("ls /etc/kubernetes/manifests; ls -d /etc/kubernetes/clusterctl-restore-manifests /var/lib/etcd/clusterctl-restore 2>&1 || true")
        .map_err(|e| e.to_string())?;
    for m in [
        "etcd.yaml",
        "kube-apiserver.yaml",
        "kube-controller-manager.yaml",
        "kube-scheduler.yaml",
    ] {
        if !out.contains(m) {
            return Err(format!("{m} not in place:\n{out}"));
        }
    }
    if out.matches("No such file").count() != 2 {
        return Err(format!("a restore left something:\n{out}"));
    }
    Ok(())
}

/// Save, refusals, dry run, a killed and resumed restore, and an idempotent one (module doc).
pub(super) fn backup_and_restore(c: &RealCluster, etcdutl: &std::path::Path) {
    let t = Instant::now();
    c.apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: kept}}\ndata: {{value: {VALUE}}}\n"
    ));
    let dir = c.file.parent().expect("dir").to_path_buf();
    let snap = dir.join("snap.db");
    let snap_s = snap.to_string_lossy().into_owned();

    // Save: 0600, the status reported, the content never printed.
    let ts = Instant::now();
    let saved = etcd(c, &["save", &snap_s]);
    let save_secs = ts.elapsed().as_secs_f64();
    let out = saved.all();
    assert_eq!(saved.code, 0, "save:\n{out}");
    assert!(
        !out.contains(VALUE),
        "the snapshot's content was printed:\n{out}"
    );
    let mode = std::fs::metadata(&snap)
        .expect("snapshot")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "snapshot mode");
    let reported = out
        .lines()
        .find(|l| l.starts_with("etcdutl snapshot status: hash "))
        .unwrap_or_else(|| panic!("no status line:\n{out}"))
        .to_string();
    // The test bed's own etcdutl reads the same status from the file.
    let st = std::process::Command::new(etcdutl)
        .args(["snapshot", "status", &snap_s, "-w", "json"])
        .output()
        .expect("etcdutl");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&st.stdout).expect("status json");
    let revision = status["revision"].as_i64().expect("revision");
    let keys = status["totalKey"].as_u64().expect("totalKey");
    assert!(
        reported.contains(&format!("revision {revision}, {keys} keys")),
        "clusterctl reported `{reported}`, etcdutl reads {status}"
    );
    let json = etcd(c, &["save", &snap_s, "-o", "json"]);
    assert_eq!(
        json.code,
        2,
        "an existing output is refused:\n{}",
        json.all()
    );
    assert!(
        json.stdout.contains("\"result\": \"invalid\"") && json.all().contains("--overwrite"),
        "{}",
        json.all()
    );

    c.kubectl("delete configmap kept");
    assert!(c
        .kubectl("get configmaps -o name")
        .lines()
        .all(|l| l != "configmap/kept"));

    // A damaged copy is refused before anything changes.
    let bad = dir.join("bad.db");
    let mut bytes = std::fs::read(&snap).expect("read");
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 8] {
        *b ^= 0xff;
    }
    std::fs::write(&bad, &bytes).expect("write");
    let refused = etcd(c, &["restore", &bad.to_string_lossy()]);
    assert_eq!(refused.code, 2, "damaged snapshot:\n{}", refused.all());
    assert!(
        refused.all().contains("integrity check failed"),
        "{}",
        refused.all()
    );
    untouched(c).expect("nothing changed by the refused restore");

    // A dry run changes nothing.
    let dry = etcd(c, &["restore", &snap_s, "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.all());
    assert!(
        dry.stdout.contains("etcd-restore/data-dir"),
        "{}",
        dry.stdout
    );
    untouched(c).expect("nothing changed by the dry run");

    // The restore, killed while it swaps the data directory, then run again: it resumes.
    let tr = Instant::now();
    let f = c.file.to_string_lossy().into_owned();
    let killed = super::killed_when(
        c,
        &["etcd", "snapshot", "restore", &snap_s, "-f", &f],
        |o| o.contains("etcd-restore/data-dir"),
        Duration::ZERO,
    );
    eprintln!("[real] the killed restore said:\n{killed}");
    let restored = etcd(c, &["restore", &snap_s]);
    let restore_secs = tr.elapsed().as_secs_f64();
    eprintln!("[real] restore (after the killed one):\n{}", restored.all());
    assert_eq!(restored.code, 0, "restore:\n{}", restored.all());
    assert!(
        restored.all().contains("took over the lock of cluster"),
        "{}",
        restored.all()
    );
    assert!(!restored.all().contains(VALUE), "{}", restored.all());
    let value = c.kubectl("get configmap kept -o jsonpath={.data.value}");
    assert_eq!(value, VALUE, "the ConfigMap is back");
    let cp = c.roles[0].0.clone();
    assert_eq!(
        c.etcd_members(),
        vec![cp],
        "every control plane an etcd member"
    );
    wait_for(
        "the node Ready after the restore",
        Duration::from_secs(120),
        || all_ready(c),
    );
    let kept = c
        .first()
        .sh("ls -d /var/lib/etcd/clusterctl-restore/*/old-member/snap && ls /etc/kubernetes/manifests && ! ls /etc/kubernetes/clusterctl-restore-manifests 2>/dev/null")
        .expect("previous data kept, manifests back");
    assert!(kept.contains("kube-apiserver.yaml"), "{kept}");

    // The same restore again changes nothing.
    let again = etcd(c, &["restore", &snap_s]);
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(again.stdout.contains("nothing changed"), "{}", again.all());
    eprintln!(
        "[real] etcd part: save {save_secs:.1}s, killed and resumed restore {restore_secs:.1}s, all {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
