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

/// Run by hand (`--ignored --nocapture`): starts the shared control plane and exits, leaving the
/// watchdog to clean up; `pgrep -f envt` afterwards must find nothing.
#[test]
#[ignore]
fn shared_control_plane_is_cleaned_up_by_the_watchdog() {
    let env = Envtest::shared().expect("shared");
    eprintln!("pids {:?} dir {}", env.pids(), env.dir_path().display());
}
