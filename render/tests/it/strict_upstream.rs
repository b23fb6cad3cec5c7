//! Every file rendered for every profile and fixture × every supported minor × containerd 1.x and 2.x is
//! decoded strictly against the transcribed upstream types (tests/it/upstream), and so is every v1beta3
//! rendering. Also proves the strict types bite: misplaced and unknown fields are rejected.

use crate::common;
use crate::upstream;

use clusterctl_render::{render, render_with_api, Facts, Rendered};
use clusterctl_spec::KubeadmApi;
use std::collections::BTreeSet;

fn check_all(label: &str, r: &Rendered, seen: &mut BTreeSet<String>) {
    let mut failures = Vec::new();
    for (node, f) in r.all() {
        match upstream::check(f) {
            Ok(kinds) => seen.extend(kinds),
            Err(e) => failures.push(format!("{label} {}: {e}", node.unwrap_or("cluster"))),
        }
    }
    assert!(
        failures.is_empty(),
        "strict decoding failed:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_file_of_every_input_and_minor_decodes_strictly() {
    let mut seen = BTreeSet::new();
    let mut runs = 0;
    for (label, loaded) in common::inputs() {
        for v in common::supported_minors() {
            let l = common::with_version(&loaded, &v);
            let c = common::valid(&format!("{label}@{v}"), &l);
            let mut facts = Facts::assumed(&c);
            check_all(
                &format!("{label}@{v}/containerd1"),
                &render(&c, &facts).expect("renders"),
                &mut seen,
            );
            for nf in facts.nodes.values_mut() {
                nf.containerd_major = 2;
            }
            check_all(
                &format!("{label}@{v}/containerd2"),
                &render(&c, &facts).expect("renders"),
                &mut seen,
            );
            let v3 = render_with_api(&c, &Facts::assumed(&c), KubeadmApi::V1beta3)
                .expect("renders v1beta3");
            check_all(&format!("{label}@{v}/v1beta3"), &v3, &mut seen);
            runs += 1;
        }
    }
    assert!(runs >= 5 * 6, "too few renders: {runs}");
    // Every format render can write was exercised at least once.
    for kind in [
        "kubeadm.k8s.io/v1beta4/InitConfiguration",
        "kubeadm.k8s.io/v1beta4/ClusterConfiguration",
        "kubeadm.k8s.io/v1beta4/JoinConfiguration",
        "kubeadm.k8s.io/v1beta4/ResetConfiguration",
        "kubeadm.k8s.io/v1beta4/UpgradeConfiguration",
        "kubeadm.k8s.io/v1beta3/InitConfiguration",
        "kubeadm.k8s.io/v1beta3/ClusterConfiguration",
        "kubeadm.k8s.io/v1beta3/JoinConfiguration",
        "kubelet.config.k8s.io/v1beta1/KubeletConfiguration",
        "kubeproxy.config.k8s.io/v1alpha1/KubeProxyConfiguration",
        "audit.k8s.io/v1/Policy",
        "apiserver.config.k8s.io/v1beta1/AuthenticationConfiguration",
        "apiserver.config.k8s.io/v1/AuthenticationConfiguration",
        "apiserver.config.k8s.io/v1/EncryptionConfiguration",
        "kind.x-k8s.io/v1alpha4/Cluster",
        "v1/Pod",
        "v1/ServiceAccount",
        "rbac.authorization.k8s.io/v1/ClusterRole",
        "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
        "operator.tigera.io/v1/Installation",
        "cilium/values",
        "containerd/v2",
        "containerd/v3",
        "containerd/hosts.toml",
        "crio/crio.conf",
        "containers/registries.conf",
        "pem",
        "sysctl",
        "crictl",
        "modules-load",
        "cni/conflist",
        "flannel/net-conf",
        "clusterctl/agent",
        "systemd/unit",
        "tmpfiles.d",
        "sh",
    ] {
        assert!(
            seen.contains(kind),
            "format never rendered by any input: {kind}; seen {seen:?}"
        );
    }
}

fn doc(text: &str) -> serde_yaml::Value {
    serde_yaml::from_str(text).expect("test YAML")
}

#[test]
fn strict_types_reject_the_seed_v1beta4_error_and_unknown_fields() {
    // The seed's failure: apiServer.timeoutForControlPlane is v1beta3-only.
    let bad = doc("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\napiServer:\n  timeoutForControlPlane: 4m0s\n");
    let e = upstream::check_yaml_doc(&bad).expect_err("must be rejected");
    assert!(e.contains("timeoutForControlPlane"), "{e}");
    // The same field is fine in v1beta3.
    let ok = doc("apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  timeoutForControlPlane: 4m0s\n");
    upstream::check_yaml_doc(&ok).expect("v1beta3 has it");
    // v1beta3 map extraArgs are wrong in v1beta4.
    let map_args = doc("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n    audit-log-path: /x\n");
    assert!(upstream::check_yaml_doc(&map_args).is_err());
    // A misplaced kubelet field.
    let misplaced = doc("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeletExtraArgs: {}\n");
    assert!(upstream::check_yaml_doc(&misplaced).is_err());
    // A bad duration.
    let dur = doc("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nshutdownGracePeriod: 30\n");
    assert!(upstream::check_yaml_doc(&dur).is_err());
    let dur2 = doc("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nshutdownGracePeriod: 30x\n");
    assert!(upstream::check_yaml_doc(&dur2).is_err());
    // An unknown kind is refused rather than passed.
    let unknown = doc("apiVersion: example.com/v1\nkind: Thing\n");
    assert!(upstream::check_yaml_doc(&unknown).is_err()); // EncryptionConfiguration: a misplaced key field, and two providers in one entry.
    let enc = |providers: &str| {
        doc(&format!("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n{providers}"))
    };
    upstream::check_yaml_doc(&enc(
        "  - aescbc:\n      keys:\n      - {name: k, secret: s}\n  - identity: {}\n",
    ))
    .expect("a valid EncryptionConfiguration");
    assert!(upstream::check_yaml_doc(&enc("  - aescbc:\n      secret: s\n")).is_err());
    let two = upstream::check_yaml_doc(&enc("  - aescbc: {keys: []}\n    identity: {}\n"))
        .expect_err("two providers in one entry");
    assert!(two.contains("2 providers"), "{two}");
}

#[test]
fn strict_toml_rejects_legacy_mirrors_next_to_config_path() {
    let text = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"p\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\nSystemdCgroup = true\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\nconfig_path = \"/etc/containerd/certs.d\"\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\nendpoint = [\"https://m\"]\n";
    let f = clusterctl_render::RenderedFile::text(
        "/etc/containerd/config.toml",
        0o644,
        text.to_string(),
        clusterctl_render::Purpose::ContainerdConfig,
    );
    let e = upstream::check(&f).expect_err("mirrors with config_path must fail");
    assert!(e.contains("mirrors"), "{e}");
    let without = text
        .split("[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors")
        .next()
        .unwrap_or_default();
    let f2 = clusterctl_render::RenderedFile::text(
        "/etc/containerd/config.toml",
        0o644,
        without.to_string(),
        clusterctl_render::Purpose::ContainerdConfig,
    );
    upstream::check(&f2).expect("without mirrors it decodes");
}
