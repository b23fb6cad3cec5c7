//! The diagnosis over recorded API objects (fixtures in the API's JSON shapes, modelled on seed
//! `000_…`: a nodeSelector no node matches after a re-create, an image not loaded, a crash loop, a node
//! without a CNI and a sandbox the CNI could not create).

use clusterctl_kubeapi::{diagnose, Event, Layer, Node, Pod};
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default()).unwrap_or(Value::Null)
}

fn items<T: serde::de::DeserializeOwned>(name: &str) -> Vec<T> {
    let v = fixture(name);
    let items = v["items"].as_array().cloned().unwrap_or_default();
    assert!(!items.is_empty(), "fixture {name} has items");
    items
        .into_iter()
        .map(|i| serde_json::from_value(i).expect("fixture item decodes as the API type"))
        .collect()
}

fn events_of(pod: &Pod) -> Vec<Event> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    items::<Event>(&format!("events-{ns}.json"))
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name.as_str()))
        .collect()
}

#[test]
fn every_stuck_pod_is_placed_at_its_layer() {
    let nodes: Vec<Node> = items("nodes.json");
    let pods: Vec<Pod> = items("pods.json");
    let mut asked = Vec::new();
    let d = diagnose(&nodes, &pods, &mut |p| events_of(p), &mut |img| {
        asked.push(img.to_string());
        Some(if img == "cka-api:v3" {
            vec![]
        } else {
            vec!["lab-worker2".to_string()]
        })
    });
    let layers: Vec<(String, Layer)> = d.stuck.iter().map(|s| (s.name.clone(), s.layer)).collect();
    assert_eq!(
        layers,
        vec![
            ("api-5c6b7d-q8m2z".to_string(), Layer::Image),
            ("api-7d9f8c-x2k4p".to_string(), Layer::Scheduling),
            ("redis-6f7b9d-7hxlw".to_string(), Layer::Application),
            ("coredns-66bc5c-9xv2d".to_string(), Layer::Network),
        ]
    );
    assert_eq!(
        asked,
        vec!["cka-api:v3".to_string()],
        "runtimes asked once per image"
    );

    let sched = &d.stuck[1];
    assert_eq!(sched.reason, "Unschedulable");
    assert!(
        sched.message.starts_with("0/3 nodes are available"),
        "{}",
        sched.message
    );
    assert_eq!(sched.missing_labels, vec!["disktype=ssd".to_string()]);
    assert!(sched.next[0].contains("disktype: ssd"), "{:?}", sched.next);

    let image = &d.stuck[0];
    assert_eq!(image.reason, "ImagePullBackOff");
    assert_eq!(image.image.as_deref(), Some("cka-api:v3"));
    assert_eq!(image.nodes_with_image, Some(vec![]));
    assert_eq!(image.node.as_deref(), Some("lab-worker2"));
    assert!(
        image
            .message
            .contains("Failed to pull image \"cka-api:v3\""),
        "{}",
        image.message
    );
    assert!(
        image.next[0].contains("clusterctl image load"),
        "{:?}",
        image.next
    );

    let crash = &d.stuck[2];
    assert_eq!(crash.reason, "CrashLoopBackOff");
    let t = crash.last_termination.as_ref().expect("last termination");
    assert_eq!((t.reason.as_str(), t.exit_code), ("Error", 1));
    assert_eq!(crash.restarts, 6);
    assert!(crash.next.iter().any(|n| n.contains("--previous")));

    let net = &d.stuck[3];
    assert_eq!(net.reason, "FailedCreatePodSandBox");
    assert!(net.message.contains("clusterctl-cni"));
}

#[test]
fn not_ready_node_names_the_network_plugin() {
    let nodes: Vec<Node> = items("nodes.json");
    let d = diagnose(&nodes, &[], &mut |_| vec![], &mut |_| None);
    let w = d
        .nodes
        .iter()
        .find(|n| n.name == "lab-worker")
        .expect("lab-worker");
    assert!(!w.ready);
    assert_eq!(
        w.reason.as_deref(),
        Some("container runtime network not ready: NetworkPluginNotReady (Network plugin returns error: cni plugin not initialized)")
    );
    let cp = d
        .nodes
        .iter()
        .find(|n| n.name == "lab-control-plane")
        .expect("cp");
    assert_eq!(
        (cp.role.as_str(), cp.version.as_str(), cp.ready),
        ("control-plane", "v1.34.1", true)
    );
    assert_eq!(cp.reason, None);
    let w2 = d
        .nodes
        .iter()
        .find(|n| n.name == "lab-worker2")
        .expect("w2");
    assert_eq!(
        (w2.role.as_str(), w2.internal_ip.as_deref()),
        ("worker", Some("172.18.0.4"))
    );
}

#[test]
fn image_on_other_node_and_pull_policy_always_are_named() {
    let nodes: Vec<Node> = items("nodes.json");
    let mut pods: Vec<Pod> = items("pods.json");
    pods.retain(|p| p.metadata.name.as_deref() == Some("api-5c6b7d-q8m2z"));
    if let Some(c) = pods[0].spec.as_mut().and_then(|s| s.containers.first_mut()) {
        c.image_pull_policy = Some("Always".into());
    }
    let d = diagnose(&nodes, &pods, &mut |_| vec![], &mut |_| {
        Some(vec!["lab-worker".to_string()])
    });
    let s = &d.stuck[0];
    assert_eq!(s.pull_policy.as_deref(), Some("Always"));
    assert!(
        s.next[0].contains("on lab-worker but not on lab-worker2"),
        "{:?}",
        s.next
    );
    assert!(
        s.next[1].contains("imagePullPolicy is Always"),
        "{:?}",
        s.next
    );
    // Without events the kubelet's waiting message is used.
    assert!(
        s.message.contains("Back-off pulling image"),
        "{}",
        s.message
    );
}

#[test]
fn node_affinity_requirements_no_node_meets_are_named() {
    let nodes: Vec<Node> = items("nodes.json");
    let mut pods: Vec<Pod> = items("pods.json");
    pods.truncate(1);
    let spec = pods[0].spec.as_mut().expect("spec");
    spec.node_selector = None;
    spec.affinity = Some(
        serde_json::from_value(
            serde_json::json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "disktype", "operator": "In", "values": ["ssd", "nvme"]},
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}),
        )
        .expect("affinity"),
    );
    let d = diagnose(&nodes, &pods, &mut |_| vec![], &mut |_| None);
    assert_eq!(
        d.stuck[0].missing_labels,
        vec!["disktype in (ssd,nvme)".to_string()]
    );
}

#[test]
fn healthy_and_finished_pods_are_not_stuck() {
    let nodes: Vec<Node> = items("nodes.json");
    let mut pods: Vec<Pod> = items("pods.json");
    pods.retain(|p| p.metadata.name.as_deref() == Some("postgres-0"));
    let mut done = pods[0].clone();
    if let Some(s) = done.status.as_mut() {
        s.phase = Some("Succeeded".into());
    }
    pods.push(done);
    let d = diagnose(
        &nodes,
        &pods,
        &mut |_| panic!("no events asked for healthy pods"),
        &mut |_| None,
    );
    assert!(d.stuck.is_empty());
    assert_eq!(d.nodes.len(), 3);
}

/// Seen on a real HA cluster (CI on a fresh machine): right after a control plane joins, its kubelet
/// reports kube-proxy's container as `CreateContainerConfigError` "services have not yet been read at
/// least once, cannot construct envvars" and retries by itself a moment later — not stuck. The same
/// reason with another message (a missing ConfigMap) still is.
#[test]
fn a_kubelet_that_has_not_yet_read_services_is_not_stuck() {
    let nodes: Vec<Node> = items("nodes.json");
    let mut pods: Vec<Pod> = items("pods.json");
    pods.retain(|p| p.metadata.name.as_deref() == Some("postgres-0"));
    let waiting = |message: &str| {
        let mut pod = pods[0].clone();
        let status = pod.status.as_mut().expect("fixture pod has a status");
        status.phase = Some("Pending".into());
        let cs = status
            .container_statuses
            .as_mut()
            .and_then(|c| c.first_mut())
            .expect("fixture pod has a container status");
        cs.ready = false;
        cs.state = Some(k8s_openapi::api::core::v1::ContainerState {
            waiting: Some(k8s_openapi::api::core::v1::ContainerStateWaiting {
                reason: Some("CreateContainerConfigError".into()),
                message: Some(message.into()),
            }),
            ..Default::default()
        });
        pod
    };
    let transient =
        waiting("services have not yet been read at least once, cannot construct envvars");
    let d = diagnose(&nodes, &[transient], &mut |_| Vec::new(), &mut |_| None);
    assert!(d.stuck.is_empty(), "{:?}", d.stuck);
    let missing = waiting("configmap \"kube-proxy\" not found");
    let d = diagnose(&nodes, &[missing], &mut |_| Vec::new(), &mut |_| None);
    assert_eq!(d.stuck.len(), 1, "{:?}", d.stuck);
    assert_eq!(d.stuck[0].reason, "CreateContainerConfigError");
}

/// Walkthrough findings: (1) a pod Pending on "untolerated taint(s)" (the scheduler's message names
/// none since Kubernetes 1.32) gets the taint named with its nodes, tolerated taints and
/// `PreferNoSchedule` left out; (2) a sandbox that fails because the runtime cannot pull the pause
/// image (containerd's message, quotes escaped as the kubelet's event carries them) is an image
/// problem naming that image, not a network one; a CNI failure stays at the network layer.
#[test]
fn untolerated_taints_are_named_and_a_pause_image_pull_is_an_image_problem() {
    let node = |name: &str, taints: Value| -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"taints": taints},
        }))
        .expect("node")
    };
    let nodes = vec![
        node(
            "cp1",
            serde_json::json!([
                {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
                {"key": "soft", "effect": "PreferNoSchedule"},
            ]),
        ),
        node(
            "w1",
            serde_json::json!([
                {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                {"key": "tolerated", "value": "x", "effect": "NoExecute"},
            ]),
        ),
    ];
    let pending: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "containers": [{"name": "web", "image": "nginx:1.27"}],
            "tolerations": [{"key": "tolerated", "operator": "Exists"}],
        },
        "status": {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/2 nodes are available: 2 node(s) had untolerated taint(s). preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        }]},
    }))
    .expect("pod");
    let d = diagnose(&nodes, &[pending], &mut |_| Vec::new(), &mut |_| None);
    let s = &d.stuck[0];
    assert_eq!(s.layer, Layer::Scheduling);
    assert_eq!(
        s.untolerated_taints,
        vec![
            "dedicated=gpu:NoSchedule on w1".to_string(),
            "node-role.kubernetes.io/control-plane:NoSchedule on cp1".to_string(),
        ]
    );
    assert!(
        s.next.iter().any(|n| n
            .contains("taint node-role.kubernetes.io/control-plane:NoSchedule on cp1")
            && n.contains(
                "kubectl taint node NODE node-role.kubernetes.io/control-plane:NoSchedule-"
            )),
        "{:?}",
        s.next
    );

    let sandbox = |message: &str| -> (Pod, Vec<Event>) {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "api", "namespace": "default"},
            "spec": {"nodeName": "w1", "containers": [{"name": "api", "image": "cka-api:v4"}]},
            "status": {"phase": "Pending", "containerStatuses": [{
                "name": "api", "image": "cka-api:v4", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }]},
        }))
        .expect("pod");
        let ev: Event = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "api.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "api", "namespace": "default"},
            "reason": "FailedCreatePodSandBox", "type": "Warning", "message": message,
        }))
        .expect("event");
        (pod, vec![ev])
    };
    let (pod, evs) = sandbox(
        r#"Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox image \"registry.k8s.io/pause:3.10.1\": failed to pull image \"registry.k8s.io/pause:3.10.1\": failed to resolve reference: dial tcp: lookup registry.k8s.io: no such host"#,
    );
    let d = diagnose(&nodes, &[pod], &mut |_| evs.clone(), &mut |_| Some(vec![]));
    let s = &d.stuck[0];
    assert_eq!(s.layer, Layer::Image, "{s:?}");
    assert_eq!(s.image.as_deref(), Some("registry.k8s.io/pause:3.10.1"));
    assert!(
        s.next[0].contains("pod sandbox (pause) image registry.k8s.io/pause:3.10.1"),
        "{:?}",
        s.next
    );
    let (pod, evs) = sandbox(
        r#"Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "abc": plugin type="clusterctl-cni" failed (add): no podCIDR"#,
    );
    let d = diagnose(&nodes, &[pod], &mut |_| evs.clone(), &mut |_| Some(vec![]));
    assert_eq!(d.stuck[0].layer, Layer::Network);
    assert_eq!(d.stuck[0].image, None);
}
