//! kubeadm's strict-decoding warnings are failures of the phase that ran kubeadm (issue 15 item 4):
//! the real kubeadm (v1.34.4, built from its Go module) reads the configuration render writes for a
//! fixture that sets every kubeadm setting the file offers (timeouts among them) without a warning,
//! and a phase running it through `NodeCtx::run` on this machine succeeds; the same configuration with
//! a field kubeadm does not know — which kubeadm only warns about and drops, exiting 0 — fails the
//! phase with a check error naming the kind and the field.

use std::path::Path;
use std::sync::Arc;

use clusterctl_exec::local::LocalTransport;
use clusterctl_phases::{Mode, NodeCtx, PhaseError, PlainReporter, Secrets};
use clusterctl_render::{render, Facts};
use clusterctl_spec::model::Role;
use clusterctl_spec::ValidNode;
use clusterctl_testbed::k8sbin::require_programs;

fn ctx() -> NodeCtx {
    let mut c = NodeCtx::new(
        ValidNode::new("local", Role::ControlPlane, "127.0.0.1".parse().ok()),
        Some(Arc::new(LocalTransport::new("local"))),
        Mode::default(),
        Arc::new(PlainReporter::stderr(false)),
        Secrets::default(),
    );
    c.phase = "init".into();
    c
}

#[test]
fn a_field_kubeadm_drops_fails_the_phase_naming_it() {
    let Some(bins) = require_programs("v1.34.4", &["kubeadm"]) else {
        return;
    };
    let kubeadm = bins.path("kubeadm").display().to_string();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../render/tests/fixtures/docker-kind-settings.yaml");
    let loaded = clusterctl_spec::load(&fixture).expect("fixture loads");
    let c = clusterctl_spec::validate(&loaded)
        .unwrap_or_else(|d| panic!("{}", d.summary()))
        .cluster;
    let r = render(&c, &Facts::assumed(&c)).expect("renders");
    let init = r
        .node_file("cp1", "/etc/kubernetes/kubeadm/init.yaml")
        .expect("init.yaml")
        .as_text()
        .into_owned();
    assert!(
        init.contains("controlPlaneComponentHealthCheck: 10m0s"),
        "{init}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("init.yaml");
    std::fs::write(&good, &init).expect("write");
    // A command that loads the whole configuration and changes nothing.
    let cmd = |f: &Path| {
        clusterctl_exec::Cmd::new(format!(
            "{kubeadm} config images list --config {}",
            f.display()
        ))
    };
    let out = ctx()
        .run(cmd(&good))
        .expect("the rendered configuration is read without a warning")
        .expect("ran");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("registry.k8s.io/kube-apiserver:v1.34.1"),
        "{out:?}"
    );

    // A timeout kubeadm does not know and a misspelt ClusterConfiguration field: kubeadm exits 0.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        init.replacen(
            "  kubeletHealthCheck: 5m0s\n",
            "  kubeletHealthCheck: 5m0s\n  bogusTimeout: 1m0s\n",
            1,
        )
        .replacen(
            "kind: ClusterConfiguration\n",
            "kind: ClusterConfiguration\ncertificateDir: /etc/kubernetes/pki\n",
            1,
        ),
    )
    .expect("write");
    let plain = std::process::Command::new(&kubeadm)
        .args(["config", "images", "list", "--config"])
        .arg(&bad)
        .output()
        .expect("kubeadm runs");
    assert!(plain.status.success(), "kubeadm only warns: {plain:?}");
    match ctx().run(cmd(&bad)) {
        Err(PhaseError::Check { problems, .. }) => {
            let all = problems.join("\n");
            assert!(
                all.contains("InitConfiguration: unknown field \"timeouts.bogusTimeout\""),
                "{all}"
            );
            assert!(
                all.contains("ClusterConfiguration: unknown field \"certificateDir\""),
                "{all}"
            );
            assert_eq!(problems.len(), 2, "{all}");
        }
        other => panic!("a dropped field must fail the phase: {other:?}"),
    }
}
