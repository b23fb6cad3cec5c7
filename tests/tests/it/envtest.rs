//! The real control plane (`clusterctl_testbed::envtest`): it starts, answers with the admin
//! certificate, refuses an unknown client, applies manifests through discovery, and stops on drop
//! (processes gone, temp dir removed).

use clusterctl_testbed::envtest::{Envtest, EnvtestError};
use serde_json::json;

#[test]
fn a_control_plane_starts_serves_and_stops() {
    let Some(env) = Envtest::require_own() else {
        return;
    };
    eprintln!("envtest {} ready in {:?}", env.version(), env.started_in());
    let v = env.get("/version").expect("version");
    assert_eq!(v["gitVersion"], env.version());
    // Discovery through the admin certificate; RBAC is on.
    let who = env
        .create(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        )
        .expect("self subject review");
    assert_eq!(
        who["status"]["userInfo"]["username"],
        "clusterctl-envtest-admin"
    );
    let ns = env.create_namespace("envt").expect("namespace");
    let applied = env
        .apply_manifest(
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {ns}}}\ndata: {{k: v}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {ns}-r}}\nrules: []\n"
            ),
            "envtest-self-test",
        )
        .expect("apply");
    assert_eq!(
        applied,
        [format!("ConfigMap {ns}/a"), format!("ClusterRole {ns}-r")]
    );
    let cm = env
        .get(&format!("/api/v1/namespaces/{ns}/configmaps/a"))
        .expect("configmap");
    assert_eq!(cm["data"]["k"], "v");
    match env.get("/api/v1/namespaces/nope-none/configmaps/x") {
        Err(EnvtestError::Status { code: 404, .. }) => {}
        other => panic!("expected 404, got {other:?}"),
    }
    let pids = env.pids();
    let dir = env.dir_path().to_path_buf();
    assert_eq!(pids.len(), 3, "watchdog, etcd, kube-apiserver");
    let url = env.url();
    drop(env);
    assert!(!dir.exists(), "{} removed", dir.display());
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .map(|s| s.contains(") Z "))
                    .unwrap_or(true),
            "process {pid} still runs after drop"
        );
    }
    assert!(
        std::net::TcpStream::connect(url.trim_start_matches("https://")).is_err(),
        "nothing listens after drop"
    );
}

/// The shared control plane (never dropped: it lives for the whole test process) is cleaned up by its
/// watchdog once the process is gone. This test runs itself in a child process
/// (`CLUSTERCTL_ENVTEST_CHILD=1`), which starts the shared control plane, prints its pids and temp dir,
/// and exits without dropping it; then every one of those processes must end and the dir must go.
#[test]
fn shared_control_plane_is_cleaned_up_by_the_watchdog() {
    const NAME: &str = "envtest::shared_control_plane_is_cleaned_up_by_the_watchdog";
    if std::env::var_os("CLUSTERCTL_ENVTEST_CHILD").is_some() {
        let env = Envtest::shared().expect("shared");
        println!("PIDS {:?}", env.pids());
        println!("DIR {}", env.dir_path().display());
        return;
    }
    // Only where a control plane can start (the same gate as the other envtest tests).
    let Some(own) = Envtest::require_own() else {
        return;
    };
    drop(own);
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env("CLUSTERCTL_ENVTEST_CHILD", "1")
        .output()
        .expect("child test process");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed:\n{text}");
    let pids: Vec<u32> = text
        .lines()
        .find_map(|l| l.split_once("PIDS ").map(|(_, r)| r))
        .map(|l| {
            l.trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .filter_map(|p| p.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let dir = text
        .lines()
        .find_map(|l| l.split_once("DIR ").map(|(_, r)| r))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(pids.len() >= 3 && !dir.is_empty(), "child printed:\n{text}");
    let gone = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !pids.iter().all(gone) || std::path::Path::new(&dir).exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "after 60 s still running: {:?}, dir there: {}",
            pids.iter().filter(|p| !gone(p)).collect::<Vec<_>>(),
            std::path::Path::new(&dir).exists()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
