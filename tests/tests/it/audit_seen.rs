//! Audit, seen (issue 25 item 4): a real kube-apiserver run with the audit flags and the default
//! policy clusterctl renders for `spec.apiServer.audit` (`apiserver_rendered`).
//!
//! * **To a file, rotated**: requests the test makes are in the log as the policy says — a
//!   ServiceAccount create at `Request` (its body kept, no response body), a Secret create at
//!   `Metadata` (no body: the secret's data never reaches the log), each with the test's user, verb,
//!   resource, namespace and name; the rotation flags are the ones the API server runs with (its
//!   `FLAG:` lines), and `maxSize: 1` / `maxBackup: 1` act: after more than 1 MB of events the log has
//!   been rotated into a timestamped backup and no more than one backup is kept.
//! * **To standard output** (`logPath: "-"`): no rotation flag is rendered, and the events are in the
//!   API server's own output (what a container log collector reads).

use std::time::{Duration, Instant};

use clusterctl_testbed::envtest::{Envtest, ADMIN_USER};
use clusterctl_testbed::k8sbin::{require_programs, DEFAULT_VERSION};
use serde_json::{json, Value};

use crate::apiserver_rendered::{envtest_with, rendered, under};

/// The audit events (JSON lines) in `text`.
fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["kind"] == "Event" && v["apiVersion"] == "audit.k8s.io/v1")
        .collect()
}

/// The `ResponseComplete` event of `verb` on `resource` `ns`/`name`, waiting up to 30 s for it.
fn event_of(read: &dyn Fn() -> String, verb: &str, resource: &str, ns: &str, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = events(&read()).into_iter().find(|e| {
            e["stage"] == "ResponseComplete"
                && e["verb"] == verb
                && e["objectRef"]["resource"] == resource
                && e["objectRef"]["namespace"] == ns
                && e["objectRef"]["name"] == name
        });
        match found {
            Some(e) => return e,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            None => panic!("no audit event for {verb} {resource} {ns}/{name}"),
        }
    }
}

/// Creates a ServiceAccount and a Secret in a new namespace and checks their events in `read()`.
fn requests_are_audited_at_the_policy_level(env: &Envtest, read: &dyn Fn() -> String) {
    let ns = env.create_namespace("audit").expect("namespace");
    let sa = clusterctl_testbed::unique_name("sa");
    env.create(
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}}),
    )
    .expect("service account");
    let e = event_of(read, "create", "serviceaccounts", &ns, &sa);
    assert_eq!(e["user"]["username"], ADMIN_USER, "{e}");
    assert_eq!(
        e["level"], "Request",
        "writes are kept with their body: {e}"
    );
    assert_eq!(e["requestObject"]["metadata"]["name"], sa.as_str(), "{e}");
    assert!(e.get("responseObject").is_none(), "{e}");
    assert_eq!(e["responseStatus"]["code"], 201, "{e}");

    let secret = clusterctl_testbed::unique_name("s");
    env.create(
        &format!("/api/v1/namespaces/{ns}/secrets"),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret},
                "stringData": {"password": "audit-must-not-keep-this"}}),
    )
    .expect("secret");
    let e = event_of(read, "create", "secrets", &ns, &secret);
    assert_eq!(e["user"]["username"], ADMIN_USER, "{e}");
    assert_eq!(e["level"], "Metadata", "{e}");
    assert!(e.get("requestObject").is_none(), "{e}");
    assert!(
        !read().contains("audit-must-not-keep-this"),
        "a secret's data reached the audit log"
    );
}

#[test]
fn audit_events_are_written_at_the_policy_level_and_the_log_rotates() {
    if require_programs(DEFAULT_VERSION, &["kube-apiserver", "etcd"]).is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let t = Instant::now();
    let r = rendered(
        dir.path(),
        "    audit: {policy: default, logPath: /var/log/kubernetes/audit/audit.log, maxAge: 7, maxBackup: 1, maxSize: 1}\n",
    );
    for (flag, value) in [
        ("audit-log-maxage", "7"),
        ("audit-log-maxbackup", "1"),
        ("audit-log-maxsize", "1"),
        ("audit-policy-file", "/etc/kubernetes/audit/policy.yaml"),
    ] {
        assert_eq!(r.flag(flag), Some(value), "{flag}: {:?}", r.flags);
    }
    let root = dir.path().join("node");
    let env = envtest_with(&r, &root);
    let log = under(&root, "/var/log/kubernetes/audit/audit.log");
    let logs = log.parent().expect("log dir").to_path_buf();
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    requests_are_audited_at_the_policy_level(&env, &read);

    // The API server runs with the rotation flags as rendered (it prints each flag at start).
    let out = env.apiserver_log();
    for flag in [
        "--audit-log-maxage=\"7\"",
        "--audit-log-maxbackup=\"1\"",
        "--audit-log-maxsize=\"1\"",
    ] {
        assert!(
            out.contains(&format!("FLAG: {flag}")),
            "{flag} not in effect"
        );
    }
    // More than 2 MB of Request-level events (ServiceAccounts with a 200 kB annotation each): the
    // log is rotated at 1 MB into `audit-<time>.log` backups, of which one is kept.
    let ns = env.create_namespace("rot").expect("namespace");
    let big = "x".repeat(200 * 1024);
    for i in 0..12 {
        env.create(
            &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
            &json!({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": format!("big-{i}"), "annotations": {"pad": big}}}),
        )
        .expect("service account");
    }
    let backups = || -> Vec<String> {
        std::fs::read_dir(&logs)
            .expect("log dir")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("audit-") && n.ends_with(".log"))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while backups().len() != 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let kept = backups();
    assert_eq!(
        kept.len(),
        1,
        "one rotated backup kept (maxBackup 1): {kept:?}"
    );
    let size = std::fs::metadata(&log).expect("current log").len();
    assert!(
        size <= 1024 * 1024,
        "the current log is under maxSize: {size}"
    );
    eprintln!(
        "audit to a file, rotated: {:.1}s",
        t.elapsed().as_secs_f64()
    );
}

#[test]
fn audit_to_standard_output_is_in_the_api_servers_output() {
    if require_programs(DEFAULT_VERSION, &["kube-apiserver", "etcd"]).is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let t = Instant::now();
    let r = rendered(dir.path(), "    audit: {policy: default, logPath: \"-\"}\n");
    assert_eq!(r.flag("audit-log-path"), Some("-"));
    assert!(
        r.flags.iter().all(|(k, _)| !k.starts_with("audit-log-max")),
        "no rotation flag for standard output: {:?}",
        r.flags
    );
    let env = envtest_with(&r, &dir.path().join("node"));
    let read = || env.apiserver_log();
    requests_are_audited_at_the_policy_level(&env, &read);
    eprintln!(
        "audit to standard output: {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
