//! The facts `ValidCluster` resolves for other crates, checked on the profiles: endpoint defaults, node
//! order and roles, SSH overrides, subnets and service IPs, the version's images, the mirror rewrite and the
//! referenced files' contents.

use std::net::IpAddr;

use clusterctl_spec::model::Role;
use clusterctl_spec::{from_profile, profiles::profile_file, validate, KubeadmApi, ValidCluster};

fn cluster(name: &str) -> ValidCluster {
    let loaded = from_profile(name).unwrap_or_else(|d| panic!("{d}"));
    validate(&loaded).unwrap_or_else(|d| panic!("{d}")).cluster
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

#[test]
fn ha_airgap_facts() {
    let c = cluster("ha-airgap");
    assert_eq!(c.name(), "topgun");
    assert_eq!(
        c.endpoint().to_string(),
        "172.20.6.110:6443",
        "endpoint defaults to the VIP"
    );
    assert_eq!(c.vip(), Some(ip("172.20.6.110")));
    assert_eq!(c.first_control_plane().name, "topgun-c1");
    let cps: Vec<&str> = c.control_planes().map(|n| n.name.as_str()).collect();
    let ws: Vec<&str> = c.workers().map(|n| n.name.as_str()).collect();
    assert_eq!(cps, ["topgun-c1", "topgun-c2", "topgun-c3"]);
    assert_eq!(ws, ["topgun-w1", "topgun-w2", "topgun-w3"]);
    assert!(c
        .control_planes()
        .all(|n| n.vip_interface.as_deref() == Some("ens18")));
    assert!(c.workers().all(|n| n.vip_interface.is_none()));
    assert_eq!(c.first_control_plane().address, Some(ip("172.20.6.111")));
    assert_eq!(
        c.first_control_plane()
            .subnet
            .map(|s| s.to_string())
            .as_deref(),
        Some("172.20.0.0/16")
    );
    assert_eq!(c.kubeadm_api(), KubeadmApi::V1beta4);
    let v = c.version_info();
    assert_eq!(
        (v.etcd, v.coredns, v.pause),
        ("3.6.4-0", "v1.12.1", "3.10.1")
    );
    assert_eq!(
        c.extra_versions()
            .iter()
            .map(|v| v.tag())
            .collect::<Vec<_>>(),
        ["v1.34.2"]
    );
    assert_eq!(c.mirror_prefix(), Some("harbor.example.com/library"));
    let m = c.mirror().expect("mirror");
    assert_eq!(
        (m.host.as_str(), m.path.as_str()),
        ("harbor.example.com", "library")
    );
    assert_eq!(m.password_env.as_deref(), Some("HARBOR_PASSWORD"));
    assert_eq!(
        c.image("registry.k8s.io/coredns/coredns:v1.12.1"),
        "harbor.example.com/library/coredns/coredns:v1.12.1"
    );
    assert_eq!(
        c.image(c.kube_vip_image()),
        "harbor.example.com/library/kube-vip/kube-vip:v1.0.1"
    );
    assert_eq!(c.registry_ca_pem(), profile_file("harbor-ca.crt"));
    assert!(c
        .registry_ca_pem()
        .is_some_and(|p| p.contains("BEGIN CERTIFICATE")));
    assert_eq!(c.pod_subnet().to_string(), "10.244.0.0/16");
    assert_eq!(c.node_cidr_mask_size(), 24);
    assert_eq!(c.api_service_ip(), ip("10.96.0.1"));
    assert_eq!(c.dns_service_ip(), ip("10.96.0.10"));
    assert!(c
        .nodes()
        .iter()
        .all(|n| n.ssh.user == "bigred" && n.ssh.port == 22));
}

#[test]
fn lab_and_builtin_facts() {
    let lab = cluster("lab");
    assert_eq!(lab.endpoint().to_string(), "lab-control-plane:6443");
    assert_eq!(lab.docker_node_image(), "kindest/node:v1.34.1");
    assert!(lab.mirror().is_none());
    assert_eq!(
        lab.image("registry.k8s.io/pause:3.10.1"),
        "registry.k8s.io/pause:3.10.1"
    );
    assert_eq!(lab.nodes().len(), 3);
    assert!(lab.nodes().iter().all(|n| n.address.is_none()));

    let b = cluster("builtin");
    assert_eq!(b.node_cidr_mask_size(), 25);
    let n2 = b.node("node2").expect("node2");
    assert_eq!(
        (
            n2.ssh.port,
            n2.ssh.key_file.as_deref(),
            n2.ssh.user.as_str()
        ),
        (2222, Some("~/.ssh/node2_ed25519"), "root")
    );
    let n1 = b.node("node1").expect("node1");
    assert_eq!(
        (n1.ssh.port, n1.ssh.key_file.as_deref()),
        (22, Some("~/.ssh/id_ed25519"))
    );
    assert_eq!(n2.taints.len(), 1);
    assert_eq!(
        b.endpoint().to_string(),
        "10.10.0.11:6443",
        "endpoint defaults to the first control plane"
    );
}

#[test]
fn calico_cilium_and_oidc_facts() {
    let k = cluster("kind-calico");
    assert_eq!(k.pod_subnet().to_string(), "192.168.0.0/16");
    assert_eq!(
        k.node("worker")
            .and_then(|n| n.labels.get("disktype"))
            .map(String::as_str),
        Some("ssd")
    );
    assert_eq!(k.spec().images.preload, ["cka-api:v4"]);

    let c = cluster("kubeadm-cilium");
    assert_eq!(c.kubernetes_version().to_string(), "1.33.2");
    assert_eq!(c.version_info().coredns, "v1.12.0");
    assert_eq!(c.endpoint().to_string(), "192.168.11.71:6443");
    assert!(c.spec().networking.cni.kube_proxy_replacement);

    let o = cluster("oidc-audit");
    assert_eq!(o.oidc_ca_pem(), profile_file("keycloak-ca.crt"));
    assert_eq!(o.audit_policy(), profile_file("audit-policy.yaml"));
    assert_eq!(o.first_control_plane().role, Role::ControlPlane);
}

#[test]
fn default_audit_policy_and_loading_from_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = from_profile("oidc-audit")
        .expect("profile")
        .source_text
        .replace("policy: audit-policy.yaml", "policy: default");
    let path = dir.path().join("c.yaml");
    std::fs::write(&path, text).expect("write");
    std::fs::write(
        dir.path().join("keycloak-ca.crt"),
        profile_file("keycloak-ca.crt").unwrap_or(""),
    )
    .expect("write ca");
    let loaded = clusterctl_spec::load(&path).unwrap_or_else(|d| panic!("{d}"));
    let c = validate(&loaded).unwrap_or_else(|d| panic!("{d}")).cluster;
    assert_eq!(
        c.audit_policy(),
        Some(clusterctl_spec::audit::DEFAULT_POLICY)
    );
    assert!(c.oidc_ca_pem().is_some());
}
