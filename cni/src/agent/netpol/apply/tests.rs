//! The applier against a stand-in `nft` (a shell script recording each script it is given and
//! refusing the compiled rules — they carry comments, the fail-closed table none — while a flag file
//! exists, or changes in place, or everything), what it sends (the whole table first, then only
//! changes, nothing for no change), and the Events its notices become.

use super::super::cache::Cache;
use super::super::report::{event, Notice, ENFORCED, FAILED_CLOSED, NOT_ENFORCED};
use super::Applier;
use crate::agent::netpol::Nft;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use std::path::Path;

/// A stand-in nft in `dir`: appends each script to `dir/log`, then refuses (exit 1, an nft-like
/// message) every script while `dir/refuse-all` exists, scripts with a rule comment while
/// `dir/refuse-rules` exists, and changes in place (no `delete table`) while
/// `dir/refuse-in-place` exists.
fn fake_nft(dir: &Path) -> Nft {
    let d = dir.display();
    let script = format!(
        "s=$(cat); printf '%s\\n====\\n' \"$s\" >> {d}/log; \
         [ -e {d}/refuse-all ] && {{ echo 'Error: Could not process rule' >&2; exit 1; }}; \
         if [ -e {d}/refuse-rules ] && printf '%s' \"$s\" | grep -q comment; then \
         echo 'Error: syntax error' >&2; exit 1; fi; \
         if [ -e {d}/refuse-in-place ] && ! printf '%s' \"$s\" | grep -q 'delete table'; then \
         echo 'Error: No such file or directory' >&2; exit 1; fi; exit 0"
    );
    Nft(vec!["sh".into(), "-c".into(), script, "nft".into()])
}

/// Node n1 with pod a/web (10.0.1.2), a default-deny-ingress policy and one allowing port 80.
fn cache(extra_policy: Option<serde_json::Value>) -> Cache {
    let mut c = Cache::default();
    let pod = json!({"metadata": {"namespace": "a", "name": "web", "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "podIP": "10.0.1.2", "podIPs": [{"ip": "10.0.1.2"}]}});
    c.pods
        .insert("a/web".into(), serde_json::from_value(pod).unwrap());
    c.namespaces.insert(
        "/a".into(),
        serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap(),
    );
    let mut pols = vec![
        json!({"metadata": {"namespace": "a", "name": "deny", "uid": "u-deny"},
               "spec": {"podSelector": {}}}),
        json!({"metadata": {"namespace": "a", "name": "web80", "uid": "u-web80"},
               "spec": {"podSelector": {"matchLabels": {"app": "web"}},
                        "ingress": [{"ports": [{"port": 80}]}]}}),
    ];
    pols.extend(extra_policy);
    for p in pols {
        let key = format!(
            "{}/{}",
            p["metadata"]["namespace"].as_str().unwrap(),
            p["metadata"]["name"].as_str().unwrap()
        );
        c.policies.insert(key, serde_json::from_value(p).unwrap());
    }
    c
}

fn last_script(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    log.trim_end()
        .trim_end_matches("====")
        .rsplit("====\n")
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_missing_nft_is_reported_once_as_not_enforced() {
    let nft = Nft(vec!["/nonexistent/clusterctl-test/nft".into()]);
    let mut a = Applier::new("n1", &nft);
    let n = a.apply(&cache(None));
    assert_eq!(n.len(), 1, "{n:?}");
    assert!(
        matches!(&n[0], Notice::NotEnforced(w) if w.contains("nft is not installed")),
        "{n:?}"
    );
    assert!(a.apply(&cache(None)).is_empty(), "reported once");
    let e = event("n1", &n[0], Timestamp::now());
    assert_eq!(e.reason.as_deref(), Some(NOT_ENFORCED));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.involved_object.kind.as_deref(), Some("Node"));
    assert_eq!(e.involved_object.name.as_deref(), Some("n1"));
    assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
    assert!(e.message.unwrap().contains("NOT enforced on node n1"));
}

#[test]
fn refused_rules_fail_closed_and_recover() {
    let dir = tempfile::tempdir().unwrap();
    let nft = fake_nft(dir.path());
    let mut a = Applier::new("n1", &nft);
    // Applied as compiled: nothing to report on the first success.
    assert!(a.apply(&cache(None)).is_empty());
    assert!(last_script(dir.path()).contains("th dport { 80 } accept"));
    // nft refuses the compiled rules: the fail-closed table isolates the pod and allows nothing.
    std::fs::write(dir.path().join("refuse-rules"), "").unwrap();
    let n = a.apply(&cache(Some(
        json!({"metadata": {"namespace": "a", "name": "more"},
        "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 81}]}]}}),
    )));
    assert_eq!(n.len(), 1, "{n:?}");
    assert!(
        matches!(&n[0], Notice::NodeFailedClosed(w) if w.contains("syntax error")),
        "{n:?}"
    );
    let closed = last_script(dir.path());
    assert!(
        closed.contains("set ingress_isolated { type ipv4_addr; elements = { 10.0.1.2 } }")
            && !closed.contains("accept comment")
            && closed.contains("counter drop"),
        "{closed}"
    );
    let e = event("n1", &n[0], Timestamp::now());
    assert_eq!(e.reason.as_deref(), Some(FAILED_CLOSED));
    // Still refused: reported once.
    assert!(a.apply(&cache(None)).is_empty());
    // Accepted again: enforced as written, reported.
    std::fs::remove_file(dir.path().join("refuse-rules")).unwrap();
    let n = a.apply(&cache(None));
    assert_eq!(n, vec![Notice::Enforced]);
    assert_eq!(
        event("n1", &n[0], Timestamp::now()).reason.as_deref(),
        Some(ENFORCED)
    );
    assert!(last_script(dir.path()).contains("th dport { 80 } accept"));
}

fn scripts(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("log"))
        .unwrap_or_default()
        .matches("\n====\n")
        .count()
}

#[test]
fn after_the_whole_table_only_changes_are_sent() {
    let dir = tempfile::tempdir().unwrap();
    let nft = fake_nft(dir.path());
    let mut a = Applier::new("n1", &nft);
    // The first apply writes the whole table.
    assert!(a.apply(&cache(None)).is_empty());
    assert!(last_script(dir.path()).starts_with("table inet clusterctl-netpol {}\ndelete table"));
    // Nothing changed: no nft call at all.
    assert!(a.apply(&cache(None)).is_empty());
    assert_eq!(scripts(dir.path()), 1);
    // The pod's labels change (web80 stops selecting it): its chain and pods set go, the
    // dispatch is rewritten; nothing else.
    let mut c = cache(None);
    let web = c.pods.get_mut("a/web").unwrap();
    web.metadata.labels = Some([("app".to_string(), "other".to_string())].into());
    assert!(a.apply(&c).is_empty());
    assert_eq!(scripts(dir.path()), 2);
    let t = "inet clusterctl-netpol";
    assert_eq!(
        last_script(dir.path()).lines().collect::<Vec<_>>(),
        [
            format!("flush chain {t} ingress"),
            format!("flush chain {t} p1_ingress"),
            format!("delete chain {t} p1_ingress"),
            format!("delete set {t} l1"),
            format!("add rule {t} ingress counter drop"),
        ]
    );
    // The kernel's table is not what was applied (nft refuses the change in place): the whole
    // table follows in the same apply, and nothing is reported.
    std::fs::write(dir.path().join("refuse-in-place"), "").unwrap();
    assert!(a.apply(&cache(None)).is_empty());
    assert_eq!(
        scripts(dir.path()),
        4,
        "the refused change, then the whole table"
    );
    let whole = last_script(dir.path());
    assert!(
        whole.starts_with("table inet clusterctl-netpol {}\ndelete table")
            && whole.contains("th dport { 80 } accept"),
        "{whole}"
    );
}

#[test]
fn nothing_applicable_is_not_enforced() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("refuse-all"), "").unwrap();
    let nft = fake_nft(dir.path());
    let mut a = Applier::new("n1", &nft);
    let n = a.apply(&cache(None));
    assert_eq!(n.len(), 1, "{n:?}");
    assert!(
        matches!(&n[0], Notice::NotEnforced(w) if w.contains("fail-closed table")),
        "{n:?}"
    );
}

#[test]
fn a_policy_failing_closed_is_reported_on_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let nft = fake_nft(dir.path());
    let mut a = Applier::new("n1", &nft);
    let bad = json!({"metadata": {"namespace": "a", "name": "bad", "uid": "u-bad"},
        "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80, "protocol": "ICMP"}]}]}});
    let n = a.apply(&cache(Some(bad.clone())));
    assert_eq!(n.len(), 1, "{n:?}");
    let Notice::PolicyFailedClosed {
        namespace,
        name,
        uid,
        why,
    } = &n[0]
    else {
        panic!("{n:?}")
    };
    assert_eq!(
        (namespace.as_str(), name.as_str(), uid.as_deref()),
        ("a", "bad", Some("u-bad"))
    );
    assert!(why.contains("ICMP"), "{why}");
    let e = event("n1", &n[0], Timestamp::now());
    assert_eq!(e.involved_object.kind.as_deref(), Some("NetworkPolicy"));
    assert_eq!(e.involved_object.uid.as_deref(), Some("u-bad"));
    assert_eq!(e.metadata.namespace.as_deref(), Some("a"));
    assert_eq!(e.reason.as_deref(), Some(FAILED_CLOSED));
    assert!(a.apply(&cache(Some(bad))).is_empty(), "reported once");
    // Fixed: reported as programmed again, on the policy.
    let fixed = json!({"metadata": {"namespace": "a", "name": "bad", "uid": "u-bad"},
        "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}});
    let n = a.apply(&cache(Some(fixed)));
    assert_eq!(
        n,
        vec![Notice::PolicyEnforced {
            namespace: "a".into(),
            name: "bad".into(),
            uid: Some("u-bad".into())
        }]
    );
    assert_eq!(
        event("n1", &n[0], Timestamp::now()).reason.as_deref(),
        Some(ENFORCED)
    );
}

#[test]
fn the_table_is_the_one_destroy_deletes() {
    use clusterctl_render::cni::netpol::{FAMILY, TABLE};
    assert_eq!(crate::agent::netpol::TABLE, format!("{FAMILY} {TABLE}"));
}
