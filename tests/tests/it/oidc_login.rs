//! Keycloak OIDC with a real login (issue 25 item 2): a real Keycloak (`clusterctl_testbed::keycloak`,
//! TLS from a test CA, realm from its template database) as the issuer of a real kube-apiserver run
//! with what clusterctl renders for `spec.apiServer.oidc` (`apiserver_rendered`): in `flags` mode (the
//! `--oidc-*` flags, the CA as `--oidc-ca-file`) and in `structured` mode (the
//! `AuthenticationConfiguration` with the CA inline). In each: an ID token from Keycloak's token
//! endpoint (password grant of client `kubernetes`) used by the real `kubectl`: `kubectl auth whoami`
//! prints the prefixed user and group; before any binding the user may not list pods; a
//! ClusterRoleBinding for the prefixed group to a ClusterRole of `get`/`list` on pods allows `kubectl
//! get pods` and nothing more (Secrets, Nodes and a pod delete are forbidden); a token of another
//! client of the same realm (another audience) is refused with 401, and so is a token of the right
//! client once its `exp` has passed (the client's tokens live [`keycloak::TOKEN_LIFESPAN`]; kubectl
//! is handed a fresh one before each call). Keycloak's start time, its CPU time and memory are
//! printed (docs/testing.md).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clusterctl_testbed::envtest::Envtest;
use clusterctl_testbed::k8sbin::{require_programs, DEFAULT_VERSION};
use clusterctl_testbed::keycloak::{self, Keycloak};
use serde_json::json;

use crate::apiserver_rendered::{envtest_with, rendered};

/// The real kubectl logged in as [`keycloak::USER`] against one API server.
struct Login<'a> {
    kc: &'a Keycloak,
    env: &'a Envtest,
    kubectl: &'a Path,
    kubeconfig: std::path::PathBuf,
}

impl Login<'_> {
    /// `kubectl --kubeconfig <token kubeconfig> ARGS` with a token fetched just before (the
    /// client's tokens are short-lived): (success, stdout + stderr).
    fn kubectl(&self, args: &[&str]) -> (bool, String) {
        let token = self
            .kc
            .id_token(keycloak::CLIENT_ID)
            .expect("a token of kubernetes");
        std::fs::write(
            &self.kubeconfig,
            self.env.kubeconfig_with_token("oidc", &token),
        )
        .expect("kubeconfig");
        run_kubectl(self.kubectl, &self.kubeconfig, args)
    }
}

/// `kubectl --kubeconfig KUBECONFIG ARGS`: (success, stdout + stderr).
fn run_kubectl(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The HTTP status of `GET /api/v1/namespaces/default/pods` with bearer `token`.
fn status_with(env: &Envtest, dir: &Path, token: &str) -> String {
    let ca = dir.join("apiserver-ca.crt");
    std::fs::write(&ca, env.ca_pem()).expect("ca");
    // The header comes from a file (0600 in the test's directory), not the command line.
    let header = dir.join("auth-header");
    std::fs::write(&header, format!("Authorization: Bearer {token}\n")).expect("header");
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(&ca)
        .arg("-H")
        .arg(format!("@{}", header.display()))
        .arg(format!("{}/api/v1/namespaces/default/pods", env.url()))
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_keycloak_login_authenticates_kubectl_in_both_oidc_modes() {
    let Some(bins) = require_programs(DEFAULT_VERSION, &["kubectl", "kube-apiserver", "etcd"])
    else {
        return;
    };
    let Some(kc) = Keycloak::require() else {
        return;
    };
    eprintln!(
        "Keycloak {} ready in {:.1}s, CPU {:.1}s, RSS {} MiB",
        keycloak::VERSION,
        kc.started_in().as_secs_f64(),
        kc.cpu_time().unwrap_or_default().as_secs_f64(),
        kc.rss_kib().unwrap_or(0) / 1024
    );
    for mode in ["flags", "structured"] {
        let t = Instant::now();
        login_in_mode(&kc, bins.path("kubectl"), mode);
        eprintln!("oidc {mode}: {:.1}s", t.elapsed().as_secs_f64());
    }
    eprintln!(
        "Keycloak RSS after the logins: {} MiB",
        kc.rss_kib().unwrap_or(0) / 1024
    );
}

fn login_in_mode(kc: &Keycloak, kubectl_bin: &Path, mode: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("kc-ca.crt"), kc.ca_pem()).expect("ca file");
    let r = rendered(
        dir.path(),
        &format!(
            "    oidc:\n      issuerURL: {}\n      clientID: {}\n      usernameClaim: preferred_username\n      usernamePrefix: \"oidc:\"\n      groupsClaim: groups\n      groupsPrefix: \"oidc:\"\n      caFile: kc-ca.crt\n      mode: {mode}\n",
            kc.issuer_url(),
            keycloak::CLIENT_ID
        ),
    );
    if mode == "flags" {
        assert_eq!(r.flag("oidc-client-id"), Some(keycloak::CLIENT_ID));
        assert!(r.flag("authentication-config").is_none());
    } else {
        assert!(r.flag("authentication-config").is_some());
        assert!(r.flags.iter().all(|(k, _)| !k.starts_with("oidc-")));
    }
    let env = envtest_with(&r, &dir.path().join("node"));
    // Fetched first, seen refused once it has expired, at the end.
    let expiring = kc
        .id_token(keycloak::CLIENT_ID)
        .expect("a token of kubernetes");
    let login = Login {
        kc,
        env: &env,
        kubectl: kubectl_bin,
        kubeconfig: dir.path().join("oidc.kubeconfig"),
    };

    // The authenticator may still be fetching the issuer's keys right after the start.
    let deadline = Instant::now() + Duration::from_secs(60);
    let whoami = loop {
        let (ok, out) = login.kubectl(&["auth", "whoami"]);
        if ok || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(keycloak::whoami_names(&whoami, "oidc:"), "{mode}: {whoami}");
    let group = format!("oidc:{}", keycloak::GROUP);

    let (ok, out) = login.kubectl(&["get", "pods", "-n", "default"]);
    assert!(
        !ok && out.contains("Forbidden"),
        "{mode}, no binding yet: {out}"
    );
    let role = clusterctl_testbed::unique_name("pods-reader");
    env.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": role},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
    )
    .expect("cluster role");
    env.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]}),
    )
    .expect("cluster role binding");
    let deadline = Instant::now() + Duration::from_secs(30);
    let (ok, out) = loop {
        let r = login.kubectl(&["get", "pods", "-n", "default"]);
        if r.0 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(ok, "{mode}: the group's binding allows get pods: {out}");
    for args in [
        &["get", "secrets", "-n", "default"][..],
        &["get", "nodes"][..],
        &["delete", "pod", "nothing", "-n", "default"][..],
    ] {
        let (ok, out) = login.kubectl(args);
        assert!(!ok && out.contains("Forbidden"), "{mode} {args:?}: {out}");
    }

    // Another client's token: signed by the same issuer, but not for this audience.
    let other = kc
        .id_token(keycloak::OTHER_CLIENT_ID)
        .expect("a token of other");
    assert_eq!(status_with(&env, dir.path(), &other), "401", "{mode}");
    let fresh = kc
        .id_token(keycloak::CLIENT_ID)
        .expect("a token of kubernetes");
    assert_eq!(status_with(&env, dir.path(), &fresh), "200", "{mode}");
    refused_once_expired(&env, dir.path(), &expiring, mode);
}

/// Waits until `token`'s `exp` has passed, then expects 401 for it (within the API server's
/// authentication cache time, 10 s), while a fresh token of the same client still gets 200.
fn refused_once_expired(env: &Envtest, dir: &Path, token: &str, mode: &str) {
    let exp = keycloak::token_expiry(token).expect("the ID token is a JWT with exp");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    std::thread::sleep(Duration::from_secs(exp.saturating_sub(now) + 1));
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        let code = status_with(env, dir, token);
        if code == "401" || Instant::now() > deadline {
            break code;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(code, "401", "{mode}: a token expired at {exp}");
    eprintln!(
        "oidc {mode}: the expired token refused {}s after its exp",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            .saturating_sub(exp)
    );
}
