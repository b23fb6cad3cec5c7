//! The builtin CNI agent's credentials on a real control plane (`clusterctl_testbed::envtest`): the
//! ServiceAccount, ClusterRole and binding render writes (`cni/clusterctl-cni-rbac.yaml`) applied as
//! `up`'s `cni` phase applies them; a token for `kube-system/clusterctl-cni` from the TokenRequest
//! API as `cni/agent-credentials` asks for it, in the kubeconfig text that phase writes; then the
//! agent's own Node source (`clusterctl_cni::agent::kube::KubeNodes`) with that kubeconfig: what the
//! agent reads (list and watch Nodes) is allowed — Nodes become peers only with a podCIDR and an
//! InternalIP, and a Node added during the watch ends it — as is what NetworkPolicy enforcement reads
//! (list and watch of Pods, Namespaces, NetworkPolicies); what it must not do (evict or get pods,
//! read events or secrets, change or delete Nodes, mint tokens) is refused.

use std::time::{Duration, Instant};

use clusterctl_cni::agent::kube::KubeNodes;
use clusterctl_cni::agent::PeerSource;
use clusterctl_kubeapi::{ApiError, ClusterApi, KubeClusterApi};
use clusterctl_phases::up::cni_token;
use clusterctl_render::{render, Facts};
use clusterctl_testbed::envtest::Envtest;
use serde_json::json;

/// A Node with `spec.podCIDR` = `cidr` and, when `ip` is given, that InternalIP (plus its Hostname).
fn node(env: &Envtest, name: &str, ip: Option<&str>, cidr: Option<&str>) {
    let spec = cidr.map_or(json!({}), |c| json!({"podCIDR": c, "podCIDRs": [c]}));
    let mut addresses = vec![json!({"type": "Hostname", "address": name})];
    if let Some(ip) = ip {
        addresses.insert(0, json!({"type": "InternalIP", "address": ip}));
    }
    env.create_node(
        name,
        &Default::default(),
        spec,
        json!({ "addresses": addresses }),
    )
    .expect("node");
}

fn forbidden<T: std::fmt::Debug>(what: &str, r: Result<T, ApiError>) {
    match r {
        Err(ApiError::Status {
            code: 403, message, ..
        }) => assert!(
            message.contains("system:serviceaccount:kube-system:clusterctl-cni"),
            "{what}: {message}"
        ),
        other => panic!("{what} must be refused with 403: {other:?}"),
    }
}

#[test]
fn the_agent_token_lists_and_watches_nodes_and_nothing_else() {
    // Its own control plane: the agent lists every Node, and the RBAC names are fixed.
    let Some(env) = Envtest::require_own() else {
        return;
    };
    let loaded = clusterctl_spec::from_profile("builtin").expect("profile");
    let cluster = clusterctl_spec::validate(&loaded).expect("valid").cluster;
    let rendered = render(&cluster, &Facts::assumed(&cluster)).expect("renders");
    let rbac = rendered
        .cluster_file(clusterctl_render::cni::builtin::RBAC_PATH)
        .expect("the builtin CNI's RBAC manifest");
    let applied = env
        .apply_manifest(&rbac.as_text(), "clusterctl")
        .expect("the rendered RBAC applies");
    assert_eq!(
        applied,
        [
            "ServiceAccount kube-system/clusterctl-cni",
            "ClusterRole clusterctl-cni-agent",
            "ClusterRoleBinding clusterctl-cni-agent"
        ]
    );
    // Only Nodes with a podCIDR and an InternalIP are peers.
    node(&env, "cp-1", Some("192.168.10.11"), Some("10.244.0.0/24"));
    node(
        &env,
        "worker-1",
        Some("192.168.10.21"),
        Some("10.244.1.0/24"),
    );
    node(&env, "worker-2", Some("192.168.10.22"), None);
    node(&env, "worker-4", None, Some("10.244.4.0/24"));

    let dir = tempfile::tempdir().expect("tempdir");
    let admin_kc = dir.path().join("admin.conf");
    std::fs::write(&admin_kc, env.kubeconfig("admin")).expect("admin kubeconfig");
    let admin = KubeClusterApi::from_kubeconfig(&admin_kc, None).expect("admin client");
    let token = admin
        .service_account_token(
            cni_token::NAMESPACE,
            cni_token::SERVICE_ACCOUNT,
            cni_token::TOKEN_SECONDS,
        )
        .expect("TokenRequest for the agent");
    let exp = cni_token::token_expiry(&token).expect("a JWT with exp");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    assert!(
        exp - now > cni_token::RENEW_BEFORE_SECONDS,
        "the server granted more than the renewal margin: {} s",
        exp - now
    );
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(env.ca_pem());
    let agent_kc = dir.path().join("agent.kubeconfig");
    std::fs::write(&agent_kc, cni_token::kubeconfig(&env.url(), &ca, &token))
        .expect("agent kubeconfig");

    // What the agent does: list, then watch from the list's resourceVersion.
    let mut agent = KubeNodes::new(Some(agent_kc.clone())).expect("agent client");
    let peers = agent.peers().expect("the agent may list Nodes");
    let names: Vec<&str> = peers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["cp-1", "worker-1"]);
    assert_eq!(peers[1].node_ip, std::net::Ipv4Addr::new(192, 168, 10, 21));
    assert_eq!(peers[1].pod_cidr.to_string(), "10.244.1.0/24");
    // A refused watch returns after the agent's 2 s back-off; an allowed one only when a Node
    // changes, which happens 3 s in.
    let took = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_secs(3));
            node(
                &env,
                "worker-3",
                Some("192.168.10.23"),
                Some("10.244.3.0/24"),
            );
        });
        let t = Instant::now();
        agent.wait(Duration::from_secs(60));
        t.elapsed()
    });
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(45),
        "the watch is allowed and ends on the new Node: {took:?}"
    );
    let names: Vec<String> = agent
        .peers()
        .expect("list again")
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["cp-1", "worker-1", "worker-3"]);

    // What the agent must not do.
    let as_agent = KubeClusterApi::from_kubeconfig(&agent_kc, None).expect("agent as ClusterApi");
    assert_eq!(as_agent.nodes().expect("nodes").len(), 5);
    // NetworkPolicy enforcement reads pods, namespaces and policies (list, watch) and nothing more.
    as_agent
        .pods()
        .expect("the agent may list Pods (NetworkPolicy)");
    forbidden("evict a pod", as_agent.evict("kube-system", "x"));
    forbidden(
        "label a node",
        as_agent.patch_node_labels(
            "worker-1",
            &[("x".to_string(), Some("y".to_string()))]
                .into_iter()
                .collect(),
        ),
    );
    forbidden(
        "cordon a node",
        as_agent.set_unschedulable("worker-1", true),
    );
    forbidden("delete a node", as_agent.delete_node("worker-1"));
    forbidden(
        "mint a token",
        as_agent.service_account_token(cni_token::NAMESPACE, cni_token::SERVICE_ACCOUNT, 600),
    );
    forbidden(
        "read events",
        as_agent.events_for("kube-system", "Pod", "x"),
    );
    // Asked as the agent through a SubjectAccessReview by the admin: secrets not listed; for
    // NetworkPolicy, list and watch of the three kinds, no get, no writes but Events it creates.
    for (verb, group, resource, allowed) in [
        ("list", "", "secrets", false),
        ("list", "networking.k8s.io", "networkpolicies", true),
        ("watch", "networking.k8s.io", "networkpolicies", true),
        ("list", "", "namespaces", true),
        ("watch", "", "namespaces", true),
        ("watch", "", "pods", true),
        ("get", "", "pods", false),
        ("get", "", "namespaces", false),
        ("create", "networking.k8s.io", "networkpolicies", false),
        ("delete", "", "pods", false),
        ("create", "", "events", true),
        ("patch", "", "events", false),
        ("list", "", "events", false),
    ] {
        let review = env
            .create(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                        "spec": {"user": "system:serviceaccount:kube-system:clusterctl-cni",
                                 "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                                            "system:authenticated"],
                                 "resourceAttributes": {"verb": verb, "group": group,
                                                        "resource": resource}}}),
            )
            .expect("subject access review");
        assert_eq!(
            review["status"]["allowed"], allowed,
            "{verb} {resource}: {review}"
        );
    }
}
