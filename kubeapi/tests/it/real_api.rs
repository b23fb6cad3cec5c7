//! `KubeClusterApi` against a real control plane (`clusterctl_testbed::envtest`: upstream etcd and
//! kube-apiserver on loopback, RBAC on, admin client certificate as in kubeadm's `admin.conf`): what the
//! server stores after each call, not what the client sent. Lists decode; events are filtered by the
//! server's field selector and ordered; a list longer than a page comes whole and lean; a label merge patch sets, removes and keeps labels; a taint
//! strategic merge patch replaces the list; cordon and uncordon; an eviction is refused by a real
//! PodDisruptionBudget with the eviction API's 429 and accepted once the budget allows it; drain
//! evicts, keeps mirror and DaemonSet pods and waits for the pods to go; Node deletion; 404s; the
//! TokenRequest API for a ServiceAccount, whose token then has exactly its RBAC; a wrong CA is refused.
//!
//! No controller-manager runs, so the test does its part: a Pod's status and a budget's status are
//! written through their `status` subresources. The shared control plane holds every test's objects,
//! so each test works in its own namespace and on its own uniquely named Nodes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clusterctl_kubeapi::drain::{drain, MIRROR_ANNOTATION};
use clusterctl_kubeapi::{ApiError, ClusterApi, EvictOutcome, KubeClusterApi, TaintSpec};
use clusterctl_testbed::envtest::Envtest;
use clusterctl_testbed::unique_name;
use serde_json::{json, Value};

struct Setup {
    env: &'static Envtest,
    api: KubeClusterApi,
    ns: String,
    _dir: tempfile::TempDir,
}

fn setup() -> Option<Setup> {
    let env = Envtest::require_shared()?;
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("config");
    std::fs::write(&kc, env.kubeconfig("envtest")).expect("kubeconfig written");
    let api = KubeClusterApi::from_kubeconfig(&kc, Some("envtest")).expect("client");
    let ns = env.create_namespace("kapi").expect("namespace");
    Some(Setup {
        env,
        api,
        ns,
        _dir: dir,
    })
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A Ready Node named `<prefix><unique>` with `labels` and `spec`; returns its name.
fn node(env: &Envtest, prefix: &str, l: &[(&str, &str)], spec: Value) -> String {
    let name = unique_name(prefix);
    env.create_node(
        &name,
        &labels(l),
        spec,
        json!({"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                               "message": "kubelet is posting ready status",
                               "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                               "lastTransitionTime": "2026-01-01T00:00:00Z"}],
               "addresses": [{"type": "InternalIP", "address": "192.0.2.10"}]}),
    )
    .expect("node");
    name
}

/// A Pod `name` bound to `node` (no scheduler), optionally with `metadata` merged in, then set
/// Running and Ready through the status subresource. `terminationGracePeriodSeconds: 0` lets the API
/// server delete it at once on eviction, as a kubelet confirming the kill would.
fn running_pod(env: &Envtest, ns: &str, name: &str, node: &str, app: &str, metadata: Value) {
    let mut meta = json!({"name": name, "labels": {"app": app}});
    if let (Some(m), Some(extra)) = (meta.as_object_mut(), metadata.as_object()) {
        m.extend(extra.clone());
    }
    env.create(
        &format!("/api/v1/namespaces/{ns}/pods"),
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1"}]}}),
    )
    .expect("pod");
    env.merge_patch(
        &format!("/api/v1/namespaces/{ns}/pods/{name}/status"),
        &json!({"status": {"phase": "Running",
                           "conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .expect("pod status");
}

fn pod_exists(env: &Envtest, ns: &str, name: &str) -> bool {
    env.get(&format!("/api/v1/namespaces/{ns}/pods/{name}"))
        .is_ok()
}

/// A PodDisruptionBudget `name` selecting `app`, allowing no disruption (its status is never computed
/// without a controller-manager, which the eviction API treats as "not processed yet": 429).
fn budget(env: &Envtest, ns: &str, name: &str, app: &str) {
    env.create(
        &format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"),
        &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": name},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}}}),
    )
    .expect("budget");
}

/// Writes the budget's status as the disruption controller would for one more healthy pod than
/// needed: one disruption allowed.
fn allow_one_disruption(env: &Envtest, ns: &str, name: &str) {
    let path = format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}");
    let generation = env.get(&path).expect("budget")["metadata"]["generation"].clone();
    env.merge_patch(
        &format!("{path}/status"),
        &json!({"status": {"observedGeneration": generation, "disruptionsAllowed": 1,
                           "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}}),
    )
    .expect("budget status");
}

#[test]
fn lists_decode_and_events_are_filtered_and_ordered() {
    let Some(s) = setup() else { return };
    let n = node(
        s.env,
        "kn",
        &[("zone", "a")],
        json!({"podCIDR": "10.244.7.0/24"}),
    );
    running_pod(s.env, &s.ns, "api", &n, "api", json!({}));
    running_pod(s.env, &s.ns, "web", &n, "web", json!({}));
    // Events out of order, and one of another pod that must not come back.
    for (i, (pod, reason, at)) in [
        ("api", "BackOff", "2026-01-01T00:03:00Z"),
        ("api", "Scheduled", "2026-01-01T00:01:00Z"),
        ("web", "Pulled", "2026-01-01T00:02:00Z"),
        ("api", "Failed", "2026-01-01T00:02:00Z"),
    ]
    .iter()
    .enumerate()
    {
        s.env
            .create(
                &format!("/api/v1/namespaces/{}/events", s.ns),
                &json!({"apiVersion": "v1", "kind": "Event",
                        "metadata": {"name": format!("{pod}.{i}")},
                        "involvedObject": {"kind": "Pod", "name": pod, "namespace": s.ns},
                        "reason": reason, "message": format!("{reason} of {pod}"), "type": "Normal",
                        "firstTimestamp": at, "lastTimestamp": at, "count": 1,
                        "source": {"component": "kubelet"}}),
            )
            .expect("event");
    }
    let nodes = s.api.nodes().expect("nodes");
    let mine = nodes
        .iter()
        .find(|x| x.metadata.name.as_deref() == Some(n.as_str()))
        .expect("the created node is listed");
    assert_eq!(
        mine.spec.as_ref().and_then(|x| x.pod_cidr.as_deref()),
        Some("10.244.7.0/24")
    );
    let pods: Vec<String> = s
        .api
        .pods()
        .expect("pods")
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(s.ns.as_str()))
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(pods, ["api", "web"]);
    let evs = s.api.events_for(&s.ns, "Pod", "api").expect("events");
    let reasons: Vec<&str> = evs.iter().filter_map(|e| e.reason.as_deref()).collect();
    assert_eq!(
        reasons,
        ["Scheduled", "Failed", "BackOff"],
        "only this pod's events, oldest first"
    );
}

/// More pods than one page of the lean list (500, kubectl's chunk size): every one comes back, and
/// none carries the `managedFields` the server stores.
#[test]
fn a_list_longer_than_a_page_comes_whole_without_managed_fields() {
    let Some(s) = setup() else { return };
    let want = 501;
    for i in 0..want {
        s.env
            .create(
                &format!("/api/v1/namespaces/{}/pods", s.ns),
                &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i:03}")},
                        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1"}]}}),
            )
            .expect("pod");
    }
    let stored = s
        .env
        .get(&format!("/api/v1/namespaces/{}/pods/p000", s.ns))
        .expect("pod");
    assert!(
        stored["metadata"]["managedFields"].is_array(),
        "the server stores managedFields: {stored}"
    );
    let mine: Vec<_> = s
        .api
        .pods()
        .expect("pods")
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(s.ns.as_str()))
        .collect();
    assert_eq!(mine.len(), want);
    assert!(mine.iter().all(|p| p.metadata.managed_fields.is_none()));
    let names: std::collections::BTreeSet<_> = mine
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names.len(), want, "no pod twice");
}

#[test]
fn label_merge_patch_sets_removes_and_keeps_labels() {
    let Some(s) = setup() else { return };
    let n = node(
        s.env,
        "kl",
        &[("disktype", "hdd"), ("old", "x"), ("keep", "y")],
        json!({}),
    );
    let patch = BTreeMap::from([
        ("disktype".to_string(), Some("ssd".to_string())),
        ("old".to_string(), None),
        ("new".to_string(), Some("z".to_string())),
    ]);
    s.api.patch_node_labels(&n, &patch).expect("label patch");
    let stored = s.env.get(&format!("/api/v1/nodes/{n}")).expect("node");
    let l = &stored["metadata"]["labels"];
    assert_eq!(l["disktype"], "ssd");
    assert_eq!(l["new"], "z");
    assert_eq!(l["keep"], "y", "labels not in the patch are kept");
    assert!(l.get("old").is_none(), "a null removes the label: {l}");
    assert!(
        stored["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["manager"] == "clusterctl" && m["operation"] == "Update"),
        "the patch is recorded under clusterctl's field manager: {}",
        stored["metadata"]["managedFields"]
    );
}

#[test]
fn taints_replace_the_list_and_cordon_toggles() {
    let Some(s) = setup() else { return };
    let n = node(
        s.env,
        "kt",
        &[],
        json!({"taints": [{"key": "old", "effect": "NoExecute"}]}),
    );
    let taints = vec![
        TaintSpec {
            key: "dedicated".into(),
            value: Some("db".into()),
            effect: "NoSchedule".into(),
        },
        TaintSpec {
            key: "gpu".into(),
            value: None,
            effect: "PreferNoSchedule".into(),
        },
    ];
    s.api.set_node_taints(&n, &taints).expect("taint");
    let path = format!("/api/v1/nodes/{n}");
    let stored = s.env.get(&path).expect("node");
    let got: Vec<TaintSpec> =
        serde_json::from_value(stored["spec"]["taints"].clone()).expect("taints");
    assert_eq!(got, taints, "the list is replaced, not merged");
    s.api.set_unschedulable(&n, true).expect("cordon");
    assert_eq!(
        s.env.get(&path).expect("node")["spec"]["unschedulable"],
        true
    );
    s.api.set_unschedulable(&n, false).expect("uncordon");
    let after = s.env.get(&path).expect("node");
    assert_ne!(after["spec"]["unschedulable"], true);
    assert_eq!(
        after["spec"]["taints"].as_array().map(Vec::len),
        Some(2),
        "cordon keeps the taints"
    );
    s.api.set_node_taints(&n, &[]).expect("untaint");
    let cleared = s.env.get(&path).expect("node");
    assert!(
        cleared["spec"]["taints"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{}",
        cleared["spec"]
    );
}

#[test]
fn eviction_is_refused_by_a_real_budget_with_429_until_it_allows() {
    let Some(s) = setup() else { return };
    let n = node(s.env, "ke", &[], json!({}));
    running_pod(s.env, &s.ns, "db-0", &n, "db", json!({}));
    running_pod(s.env, &s.ns, "web-1", &n, "web", json!({}));
    budget(s.env, &s.ns, "db", "db");
    match s.api.evict(&s.ns, "db-0").expect("evict call") {
        EvictOutcome::Blocked(msg) => assert!(msg.contains("disruption budget"), "{msg}"),
        other => panic!("the budget must refuse the eviction: {other:?}"),
    }
    assert!(
        pod_exists(s.env, &s.ns, "db-0"),
        "a refused eviction keeps the pod"
    );
    // A pod no budget covers goes at once.
    assert_eq!(
        s.api.evict(&s.ns, "web-1").expect("evict"),
        EvictOutcome::Evicted
    );
    assert!(!pod_exists(s.env, &s.ns, "web-1"));
    allow_one_disruption(s.env, &s.ns, "db");
    assert_eq!(
        s.api.evict(&s.ns, "db-0").expect("evict"),
        EvictOutcome::Evicted
    );
    assert!(!pod_exists(s.env, &s.ns, "db-0"));
    // An eviction of a pod that is gone is not an error.
    assert_eq!(
        s.api.evict(&s.ns, "db-0").expect("evict"),
        EvictOutcome::Evicted
    );
}

#[test]
fn drain_retries_a_budget_refusal_keeps_mirror_and_daemonset_pods_and_waits() {
    let Some(s) = setup() else { return };
    let n = node(s.env, "kd", &[], json!({}));
    let other = node(s.env, "kd", &[], json!({}));
    let ds_owner = json!({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
        "name": "agent", "uid": "00000000-0000-0000-0000-000000000001", "controller": true}]});
    running_pod(s.env, &s.ns, "web-1", &n, "web", json!({}));
    running_pod(s.env, &s.ns, "db-0", &n, "db", json!({}));
    running_pod(s.env, &s.ns, "agent-x", &n, "agent", ds_owner);
    running_pod(
        s.env,
        &s.ns,
        "static-x",
        &n,
        "static",
        json!({"annotations": {MIRROR_ANNOTATION: "hash"}}),
    );
    running_pod(s.env, &s.ns, "web-2", &other, "web", json!({}));
    budget(s.env, &s.ns, "db", "db");
    let env = s.env;
    let (ns, node_name) = (s.ns.clone(), n.clone());
    // The disruption controller's part: after a while, the budget allows one disruption.
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        allow_one_disruption(env, &ns, "db");
    });
    let t = Instant::now();
    let report = drain(
        &s.api,
        &node_name,
        Duration::from_secs(60),
        Duration::from_millis(200),
    )
    .expect("drained");
    release.join().expect("release thread");
    assert!(
        t.elapsed() >= Duration::from_secs(2),
        "the drain waited for the budget: {:?}",
        t.elapsed()
    );
    let ns = &s.ns;
    assert_eq!(
        report.evicted,
        [format!("{ns}/web-1"), format!("{ns}/db-0")],
        "{report:?}"
    );
    let mut kept = report.kept.clone();
    kept.sort();
    assert_eq!(kept, [format!("{ns}/agent-x"), format!("{ns}/static-x")]);
    let stored = s.env.get(&format!("/api/v1/nodes/{n}")).expect("node");
    assert_eq!(stored["spec"]["unschedulable"], true, "cordoned");
    for (p, there) in [
        ("web-1", false),
        ("db-0", false),
        ("agent-x", true),
        ("static-x", true),
        ("web-2", true),
    ] {
        assert_eq!(pod_exists(s.env, ns, p), there, "{p}");
    }
}

#[test]
fn delete_node_and_not_found() {
    let Some(s) = setup() else { return };
    let n = node(s.env, "kx", &[], json!({}));
    s.api.delete_node(&n).expect("delete");
    assert!(s.env.get(&format!("/api/v1/nodes/{n}")).is_err(), "gone");
    s.api
        .delete_node(&n)
        .expect("a missing node is not an error");
    match s.api.patch_node_labels(&n, &BTreeMap::new()) {
        Err(ApiError::Status { code, reason, .. }) => {
            assert_eq!((code, reason.as_str()), (404, "NotFound"))
        }
        other => panic!("expected a 404 Status error, got {other:?}"),
    }
}

#[test]
fn token_request_gives_a_token_with_exactly_its_rbac() {
    let Some(s) = setup() else { return };
    let sa = "reader";
    s.env
        .create(
            &format!("/api/v1/namespaces/{}/serviceaccounts", s.ns),
            &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}}),
        )
        .expect("service account");
    let token = s
        .api
        .service_account_token(&s.ns, sa, 3600)
        .expect("token request");
    assert_eq!(token.split('.').count(), 3, "a JWT");
    match s.api.service_account_token(&s.ns, "nope", 3600) {
        Err(ApiError::Status { code: 404, .. }) => {}
        other => panic!("a missing ServiceAccount is a 404: {other:?}"),
    }
    // The token authenticates as the ServiceAccount, which may read pods of its namespace only.
    s.env
        .apply_manifest(
            &format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: pods, namespace: {ns}}}\nrules: [{{apiGroups: [''], resources: [pods], verbs: [list]}}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: pods, namespace: {ns}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: pods}}\nsubjects: [{{kind: ServiceAccount, name: {sa}, namespace: {ns}}}]\n",
                ns = s.ns
            ),
            "clusterctl-test",
        )
        .expect("rbac");
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("sa");
    std::fs::write(&kc, s.env.kubeconfig_with_token("sa", &token)).expect("kubeconfig");
    let as_sa = KubeClusterApi::from_kubeconfig(&kc, None).expect("client");
    match as_sa.nodes() {
        Err(ApiError::Status {
            code: 403, message, ..
        }) => assert!(
            message.contains(&format!("system:serviceaccount:{}:{sa}", s.ns)),
            "{message}"
        ),
        other => panic!("nodes are not the ServiceAccount's to list: {other:?}"),
    }
    // Cluster-wide pods are refused too; this API lists all namespaces.
    assert!(matches!(
        as_sa.pods(),
        Err(ApiError::Status { code: 403, .. })
    ));
}

#[test]
fn a_wrong_ca_is_refused() {
    let Some(env) = Envtest::require_shared() else {
        return;
    };
    // Another CA (the recording server's), this server's address: TLS verification must fail.
    let other = clusterctl_testbed::apiserver::ApiServer::start().expect("other CA");
    let kc = other.kubeconfig("x").replace(&other.url(), &env.url());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config");
    std::fs::write(&path, kc).expect("written");
    let api = KubeClusterApi::from_kubeconfig(&path, None).expect("client");
    match api.nodes() {
        Err(ApiError::Unreachable { .. }) => {}
        other => panic!("expected a TLS failure, got {other:?}"),
    }
}
