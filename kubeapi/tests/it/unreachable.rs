//! A client whose API server does not answer: the error names the server URL and the kubeconfig
//! (and context) it came from, and keeps the client's error as its source. Needs nothing but
//! loopback (a port that was just bound and released, so nothing listens on it).

use clusterctl_kubeapi::{ApiError, ClusterApi, KubeClusterApi};
use std::error::Error as _;

/// A port on 127.0.0.1 that nothing listens on (bound, read, released).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    l.local_addr().expect("address").port()
}

fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab-admin\nclusters:\n- name: lab\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: lab-admin\n  context:\n    cluster: lab\n    user: admin\nusers:\n- name: admin\n  user:\n    token: not-a-real-token\n"
    )
}

/// Every cause's text, outermost first.
fn chain(e: &ApiError) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push(c.to_string());
        cur = c.source();
    }
    out
}

#[test]
fn a_kubeconfig_file_pointing_nowhere_names_its_server_file_and_context() {
    let server = format!("https://127.0.0.1:{}", closed_port());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config");
    std::fs::write(&path, kubeconfig(&server)).expect("written");
    let api = KubeClusterApi::from_kubeconfig(&path, None).expect("client");
    let err = api.nodes().expect_err("nothing listens there");
    let ApiError::Unreachable {
        call,
        server: named,
        origin,
        ..
    } = &err
    else {
        panic!("expected Unreachable, got {err:?}");
    };
    assert_eq!(call, "list nodes");
    assert!(named.starts_with(&server), "{named} vs {server}");
    assert_eq!(
        origin,
        &format!("{} (context lab-admin)", path.display()),
        "{origin}"
    );
    let text = err.to_string();
    assert!(text.contains(&server), "{text}");
    assert!(text.contains("context lab-admin"), "{text}");
    assert!(!text.contains("not-a-real-token"), "{text}");
    assert!(
        text.to_lowercase().contains("refused"),
        "the message says why (the client's causes), not only `client error (Connect)`: {text}"
    );
    let causes = chain(&err);
    assert!(
        causes.len() > 1,
        "the client's error is kept as the source: {causes:?}"
    );
    let all = causes.join(" / ").to_lowercase();
    assert!(all.contains("connect") || all.contains("refused"), "{all}");
}

#[test]
fn an_admin_conf_text_pointing_nowhere_names_its_server_and_origin() {
    let server = format!("https://127.0.0.1:{}", closed_port());
    let api = KubeClusterApi::from_kubeconfig_text(&kubeconfig(&server), "admin.conf of c1")
        .expect("client");
    let err = api.pods().expect_err("nothing listens there");
    let text = err.to_string();
    assert!(matches!(err, ApiError::Unreachable { .. }), "{err:?}");
    assert!(text.starts_with("list pods: "), "{text}");
    assert!(text.contains(&server), "{text}");
    assert!(text.contains("admin.conf of c1"), "{text}");
    let lower = text.to_lowercase();
    assert!(
        lower.contains("connect") || lower.contains("refused"),
        "the cause is in the message: {text}"
    );
}
