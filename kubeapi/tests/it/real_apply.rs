//! Server-side apply and reads of objects of any kind (`ClusterApi::apply`, `get_object`,
//! `list_objects` of `KubeClusterApi`) against a real control plane (`clusterctl_testbed::envtest`):
//! an object is created, a second apply of the same object changes nothing (its resourceVersion
//! stays), a changed object converges with one field manager `clusterctl`, and a field another
//! manager set is taken over (conflicts forced) — each apply telling which it was ([`Applied`]:
//! created, unchanged, configured), also for a CRD and for a Namespace with only a name (whose second
//! apply the server writes, only in its managedFields, and which is unchanged); a CRD's kind is found through discovery once the CRD
//! is Established, and before that an apply of its kind fails naming the object; a custom resource its
//! schema refuses fails with the server's 422 message and the object's name; a missing object or kind
//! reads as `None` / an empty list.

use clusterctl_kubeapi::{ApiError, Applied, ClusterApi, KubeClusterApi};
use clusterctl_testbed::envtest::Envtest;
use clusterctl_testbed::unique_name;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn rv(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn apply_creates_keeps_converges_and_names_what_the_server_refuses() {
    let Some(env) = Envtest::require_shared() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("config");
    std::fs::write(&kc, env.kubeconfig("envtest")).expect("kubeconfig");
    let api = KubeClusterApi::from_kubeconfig(&kc, Some("envtest")).expect("client");
    let ns = env.create_namespace("apply").expect("namespace");

    // A namespaced object: created, kept, converged.
    let cm = |v: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "settings", "namespace": ns}, "data": {"key": v}})
    };
    assert_eq!(api.apply(&cm("one")).expect("created"), Applied::Created);
    let got = api
        .get_object("v1", "ConfigMap", Some(&ns), "settings")
        .expect("get")
        .expect("exists");
    assert_eq!(got["data"]["key"], "one");
    assert_eq!(api.apply(&cm("one")).expect("again"), Applied::Unchanged);
    let again = api
        .get_object("v1", "ConfigMap", Some(&ns), "settings")
        .expect("get")
        .expect("exists");
    assert_eq!(rv(&again), rv(&got), "an equal apply changes nothing");
    // Another manager changes the value; the next apply takes it back (conflicts forced).
    env.merge_patch(
        &format!("/api/v1/namespaces/{ns}/configmaps/settings"),
        &json!({"data": {"key": "by-hand"}}),
    )
    .expect("hand edit");
    assert_eq!(
        api.apply(&cm("two")).expect("converged"),
        Applied::Configured
    );
    let conv = api
        .get_object("v1", "ConfigMap", Some(&ns), "settings")
        .expect("get")
        .expect("exists");
    assert_eq!(conv["data"]["key"], "two");
    let owners: Vec<String> = conv["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["operation"] == "Apply")
        .filter_map(|m| m["manager"].as_str().map(str::to_string))
        .collect();
    assert_eq!(owners, ["clusterctl"]);
    assert_eq!(api.apply(&cm("two")).expect("again"), Applied::Unchanged);
    let kept = api
        .get_object("v1", "ConfigMap", Some(&ns), "settings")
        .expect("get")
        .expect("exists");
    assert_eq!(rv(&kept), rv(&conv), "unchanged: the same resourceVersion");
    // A hand edit put back to the applied value: the apply takes the field back (configured).
    env.merge_patch(
        &format!("/api/v1/namespaces/{ns}/configmaps/settings"),
        &json!({"data": {"key": "by-hand"}}),
    )
    .expect("hand edit");
    assert_eq!(
        api.apply(&cm("two")).expect("taken back"),
        Applied::Configured
    );

    // An object whose applied configuration owns no field (a Namespace with only a name): on the
    // second apply the server writes it once more, only to record a `before-first-apply` field
    // manager (the resourceVersion moves); the object is the same, so that apply is unchanged.
    let bare_name = unique_name("bare");
    let bare = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": bare_name}});
    let read = |n: &str| {
        api.get_object("v1", "Namespace", None, n)
            .expect("get")
            .expect("exists")
    };
    assert_eq!(api.apply(&bare).expect("bare"), Applied::Created);
    let first = read(&bare_name);
    assert_eq!(api.apply(&bare).expect("bare again"), Applied::Unchanged);
    let second = read(&bare_name);
    assert_ne!(
        rv(&first),
        rv(&second),
        "the server wrote its field-ownership bookkeeping: {second}"
    );
    assert_eq!(first["metadata"]["labels"], second["metadata"]["labels"]);
    assert_eq!(api.apply(&bare).expect("third"), Applied::Unchanged);
    assert_eq!(
        rv(&read(&bare_name)),
        rv(&second),
        "then nothing is written"
    );

    // A kind the server does not serve yet: the apply names the object; reads are None / empty.
    let group = format!("{}.example.com", unique_name("g"));
    let widget = |size: Value| {
        json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
               "metadata": {"name": "w1"}, "spec": {"size": size}})
    };
    let e = api.apply(&widget(json!(3))).expect_err("no such kind yet");
    assert!(e.to_string().contains("Widget w1"), "{e}");
    assert!(api
        .get_object(&format!("{group}/v1"), "Widget", None, "w1")
        .expect("get")
        .is_none());
    assert!(api
        .list_objects(&format!("{group}/v1"), "Widget")
        .expect("list")
        .is_empty());

    // Its CRD (cluster-scoped kind, a schema with an integer size), then the resource.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Cluster",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "size": {"type": "integer", "minimum": 1}}}}}}}]}});
    assert_eq!(api.apply(&crd).expect("CRD"), Applied::Created);
    let start = Instant::now();
    loop {
        let c = api
            .get_object(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                None,
                &format!("widgets.{group}"),
            )
            .expect("get CRD")
            .expect("exists");
        let est = c["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| x["type"] == "Established" && x["status"] == "True");
        if est {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "not Established");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Established, the CRD is no longer written to by the server: an equal apply leaves it.
    assert_eq!(api.apply(&crd).expect("CRD again"), Applied::Unchanged);
    assert_eq!(
        api.apply(&widget(json!(3)))
            .expect("accepted by the schema"),
        Applied::Created
    );
    match api.apply(&widget(json!(0))) {
        Err(ApiError::Status {
            call,
            code,
            message,
            ..
        }) => {
            assert_eq!(code, 422);
            assert!(call.contains("Widget w1"), "{call}");
            assert!(message.contains("spec.size"), "{message}");
        }
        other => panic!("expected a 422, got {other:?}"),
    }
    let stored = api
        .get_object(&format!("{group}/v1"), "Widget", None, "w1")
        .expect("get")
        .expect("exists");
    assert_eq!(
        stored["spec"]["size"], 3,
        "the refused apply changed nothing"
    );
    assert_eq!(
        api.apply(&widget(json!(3))).expect("again"),
        Applied::Unchanged
    );
    // Right after the CRD is Established a list may still answer 429 while its storage starts.
    let start = Instant::now();
    let list = loop {
        match api.list_objects(&format!("{group}/v1"), "Widget") {
            Ok(l) => break l,
            Err(ApiError::Status { code: 429, .. })
                if start.elapsed() < Duration::from_secs(60) =>
            {
                std::thread::sleep(Duration::from_millis(200))
            }
            Err(e) => panic!("list: {e}"),
        }
    };
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["metadata"]["name"], "w1");
    // An object without a name is refused before any request.
    let e = api
        .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}))
        .expect_err("no name");
    assert!(e.to_string().contains("metadata.name"), "{e}");
}
