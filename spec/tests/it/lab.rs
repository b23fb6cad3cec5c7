//! The lab's fields (issue 27 items 1–2) at the file level: `spec.storage.defaultClass` (local-path on by
//! default for the docker provider, off for ssh, `none` turns it off) and `spec.registry.local` (port 5001
//! and registry:2 by digest by default, the container `<cluster>-registry`); wrong values refused at their
//! own line with a hint; `spec.docker.loadBalancer` (item 4: made for several docker control planes
//! without a VIP or endpoint, or when written; the endpoint `<cluster>-external-load-balancer:6443`).

use clusterctl_spec::lab::{
    LabLoadBalancer, LabRegistry, DEFAULT_LOAD_BALANCER_IMAGE, DEFAULT_LOCAL_REGISTRY_IMAGE,
};
use clusterctl_spec::{validate, Diagnostic, Loaded, Severity, ValidCluster};

const BASE: &str = "\
apiVersion: clusterctl.io/v1alpha1
kind: Cluster
metadata:
  name: lab
spec:
  kubernetesVersion: v1.34.1
  provider: docker
  nodes:
    - name: cp1
      role: control-plane
";

/// BASE with `insert` before `  nodes:` (and `provider: docker` replaced by `provider`).
fn check(provider: &str, insert: &str) -> Result<ValidCluster, Vec<Diagnostic>> {
    let text = BASE
        .replacen("provider: docker", &format!("provider: {provider}"), 1)
        .replacen("  nodes:\n", &format!("{insert}  nodes:\n"), 1);
    let text = if provider == "ssh" {
        text.replacen(
            "role: control-plane\n",
            "role: control-plane\n      address: 10.0.0.11/24\n",
            1,
        )
    } else {
        text
    };
    match validate(&Loaded::from_text("cluster.yaml", text)) {
        Ok(v) => Ok(v.cluster),
        Err(r) => Err(r
            .items
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .collect()),
    }
}

/// The one error of `insert`: (line, message, help).
fn one_error(provider: &str, insert: &str) -> (usize, String, String) {
    let e = check(provider, insert).expect_err("refused");
    assert_eq!(e.len(), 1, "{e:?}");
    (
        e[0].line,
        e[0].message.clone(),
        e[0].help.clone().unwrap_or_default(),
    )
}

#[test]
fn local_path_is_the_docker_default_and_can_be_turned_off() {
    assert!(check("docker", "").expect("valid").local_path());
    assert!(!check("ssh", "").expect("valid").local_path());
    let off = check("docker", "  storage: {defaultClass: none}\n").expect("valid");
    assert!(!off.local_path());
    let on = check("ssh", "  storage:\n    defaultClass: local-path\n").expect("valid");
    assert!(on.local_path());
}

#[test]
fn the_local_registry_defaults_to_5001_and_registry_2_by_digest() {
    assert_eq!(check("docker", "").expect("valid").local_registry(), None);
    let c = check("docker", "  registry:\n    local: {}\n").expect("valid");
    assert_eq!(
        c.local_registry(),
        Some(LabRegistry {
            port: 5001,
            image: DEFAULT_LOCAL_REGISTRY_IMAGE.into(),
            container: "lab-registry".into(),
        })
    );
    assert!(DEFAULT_LOCAL_REGISTRY_IMAGE.contains("registry:2@sha256:"));
    assert_eq!(c.mirror(), None, "a local registry is no mirror");
    let c = check(
        "docker",
        "  registry:\n    local: {port: 5999, image: clusterctl.test/registry:2}\n",
    )
    .expect("valid");
    let r = c.local_registry().expect("local");
    assert_eq!(
        (r.port, r.image.as_str()),
        (5999, "clusterctl.test/registry:2")
    );
}

#[test]
fn wrong_values_are_refused_at_their_line_with_a_hint() {
    // BASE has 7 lines before `nodes:`; the inserted lines start at line 8.
    let (line, msg, help) = one_error("docker", "  storage:\n    defaultClass: longhorn\n");
    assert_eq!(line, 9, "{msg}");
    assert!(msg.contains("longhorn"), "{msg}");
    assert!(
        help.contains("local-path") && help.contains("none"),
        "{help}"
    );

    let (line, msg, help) = one_error("docker", "  registry:\n    local:\n      port: 70000\n");
    assert_eq!(line, 10, "{msg}");
    assert!(msg.contains("70000"), "{msg}");
    assert!(help.contains("5001"), "{help}");

    let (line, msg, _) = one_error("docker", "  registry:\n    local:\n      port: 0\n");
    assert_eq!(line, 10, "{msg}");

    let (line, msg, help) = one_error(
        "docker",
        "  registry:\n    local:\n      image: 'Not An Image'\n",
    );
    assert_eq!(line, 10, "{msg}");
    assert!(help.contains("registry:2"), "{help}");

    let (line, msg, help) = one_error("ssh", "  registry:\n    local: {}\n");
    assert_eq!(line, 9, "{msg}");
    assert!(msg.contains("ssh"), "{msg}");
    assert!(help.contains("registry.mirror"), "{help}");

    // CRI-O on docker nodes has findings of its own; the one of registry.local is at its line.
    let e = check(
        "docker",
        "  runtime: {kind: crio}\n  registry:\n    local: {}\n",
    )
    .expect_err("refused");
    let mine = e
        .iter()
        .find(|d| d.message.contains("not containerd"))
        .unwrap_or_else(|| panic!("{e:?}"));
    assert_eq!(mine.line, 10, "{mine:?}");
    assert!(mine
        .help
        .as_deref()
        .unwrap_or_default()
        .contains("containerd"));

    let (line, msg, help) = one_error("docker", "  registry: {}\n");
    assert_eq!(line, 8, "{msg}");
    assert!(
        help.contains("local:") && help.contains("mirror:"),
        "{help}"
    );

    let (line, msg, help) = one_error(
        "docker",
        "  registry:\n    local: {}\n  nodes:\n    - name: registry\n      role: worker\n#",
    );
    assert_eq!(line, 11, "{msg}");
    assert!(msg.contains("registry"), "{msg}");
    assert!(help.contains("rename"), "{help}");
}

/// BASE's docker cluster with `extra` control planes cp2, cp3… listed before cp1 (the inserted
/// `nodes:` list ends in `#`, which comments out BASE's own key so that cp1 continues the list).
fn with_control_planes(extra: usize, insert: &str) -> Result<ValidCluster, Vec<Diagnostic>> {
    let nodes: String = (2..2 + extra)
        .map(|i| format!("    - name: cp{i}\n      role: control-plane\n"))
        .collect();
    check("docker", &format!("{insert}  nodes:\n{nodes}#"))
}

#[test]
fn several_docker_control_planes_get_the_load_balancer_as_their_endpoint() {
    let one = check("docker", "").expect("valid");
    assert_eq!(one.load_balancer(), None);
    assert_eq!(one.endpoint().to_string(), "lab-cp1:6443");
    let three = with_control_planes(2, "").expect("valid");
    assert_eq!(
        three.load_balancer(),
        Some(LabLoadBalancer {
            port: 0,
            image: DEFAULT_LOAD_BALANCER_IMAGE.into(),
            container: "lab-external-load-balancer".into(),
        })
    );
    assert!(DEFAULT_LOAD_BALANCER_IMAGE.contains("kindest/haproxy:v20230606-42a2262b@sha256:"));
    assert_eq!(
        three.endpoint().to_string(),
        "lab-external-load-balancer:6443"
    );
    // Written, it comes for one control plane too (control planes joined later are behind it).
    let written = check(
        "docker",
        "  docker:\n    loadBalancer: {port: 7443, image: clusterctl.test/haproxy:1}\n",
    )
    .expect("valid");
    let lb = written.load_balancer().expect("load balancer");
    assert_eq!(
        (lb.port, lb.image.as_str()),
        (7443, "clusterctl.test/haproxy:1")
    );
    // An endpoint of the user's: no load balancer.
    let own = with_control_planes(2, "  controlPlane: {endpoint: 'api.example.com:6443'}\n")
        .expect("valid");
    assert_eq!(own.load_balancer(), None);
    assert_eq!(own.endpoint().to_string(), "api.example.com:6443");
}

#[test]
fn wrong_load_balancer_values_are_refused_at_their_line_with_a_hint() {
    let (line, msg, help) = one_error(
        "docker",
        "  docker:\n    loadBalancer:\n      port: 70000\n",
    );
    assert_eq!(line, 10, "{msg}");
    assert!(msg.contains("70000"), "{msg}");
    assert!(help.contains("65535"), "{help}");

    let (line, msg, help) = one_error(
        "docker",
        "  docker:\n    loadBalancer:\n      image: 'Not An Image'\n",
    );
    assert_eq!(line, 10, "{msg}");
    assert!(help.contains("kindest/haproxy"), "{help}");

    let (line, msg, help) = one_error("ssh", "  docker:\n    loadBalancer: {}\n");
    assert_eq!(line, 9, "{msg}");
    assert!(msg.contains("ssh"), "{msg}");
    assert!(help.contains("controlPlane.vip"), "{help}");

    let (line, msg, help) = one_error(
        "docker",
        "  controlPlane: {endpoint: 'api.example.com:6443'}\n  docker:\n    loadBalancer: {}\n",
    );
    assert_eq!(line, 10, "{msg}");
    assert!(help.contains("remove `controlPlane.endpoint`"), "{help}");

    let e = with_control_planes(1, "").err();
    assert!(e.is_none(), "{e:?}");
    let (line, msg, help) = {
        let e = check(
            "docker",
            "  nodes:\n    - name: external-load-balancer\n      role: control-plane\n#",
        )
        .expect_err("refused");
        assert_eq!(e.len(), 1, "{e:?}");
        (
            e[0].line,
            e[0].message.clone(),
            e[0].help.clone().unwrap_or_default(),
        )
    };
    assert_eq!(line, 9, "{msg}");
    assert!(msg.contains("load balancer"), "{msg}");
    assert!(help.contains("rename"), "{help}");
}
