//! Issue 15 items 2, 4 and 8 at the file level: `networking.underlayMTU` and a `cni.mtu` that must fit
//! under it, `kubeadm.timeouts` as positive Go durations, and `audit.logPath: "-"` (the API server's
//! standard output) accepted.

use clusterctl_spec::{validate, Diagnostic, Loaded, Severity};

const BASE: &str = "\
apiVersion: clusterctl.io/v1alpha1
kind: Cluster
metadata:
  name: demo
spec:
  kubernetesVersion: v1.34.1
  provider: ssh
  networking:
    podSubnet: 10.244.0.0/16
  nodes:
    - name: cp1
      role: control-plane
      address: 10.0.0.11/24
";

/// BASE with `insert` placed before `  nodes:`; every diagnostic (errors and warnings).
fn diags(insert: &str) -> Result<Vec<Diagnostic>, Vec<Diagnostic>> {
    let text = BASE.replacen("  nodes:\n", &format!("{insert}  nodes:\n"), 1);
    match validate(&Loaded::from_text("cluster.yaml", text)) {
        Ok(v) => Ok(v.warnings),
        Err(r) => Err(r.items),
    }
}

fn errors(insert: &str) -> Vec<String> {
    match diags(insert) {
        Ok(_) => Vec::new(),
        Err(d) => d
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| {
                format!(
                    "{} [{}] help: {}",
                    d.message,
                    d.path,
                    d.help.unwrap_or_default()
                )
            })
            .collect(),
    }
}

#[test]
fn audit_to_stdout_is_accepted() {
    let ok = diags("  apiServer:\n    audit:\n      logPath: \"-\"\n      maxSize: 0\n")
        .unwrap_or_else(|d| panic!("refused: {d:?}"));
    assert!(
        ok.iter().all(|d| d.code != "spec::audit-rotation"),
        "no rotation warning for stdout: {ok:?}"
    );
    let e = errors("  apiServer:\n    audit:\n      logPath: audit.log\n");
    assert!(
        e.iter()
            .any(|m| m.contains("not an absolute file path") && m.contains("`-`")),
        "{e:?}"
    );
}

#[test]
fn cni_mtu_must_fit_under_the_underlay_mtu() {
    let net = |extra: &str| format!("  networking:\n    podSubnet: 10.244.0.0/16\n{extra}");
    let run = |extra: &str| {
        let text = BASE.replacen(
            "  networking:\n    podSubnet: 10.244.0.0/16\n",
            &net(extra),
            1,
        );
        match validate(&Loaded::from_text("cluster.yaml", text)) {
            Ok(v) => Ok(v.warnings),
            Err(r) => Err(r.items),
        }
    };
    let fits = run("    underlayMTU: 1400\n    cni: {mtu: 1350}\n").expect("1350 + 50 fits 1400");
    assert!(fits.iter().all(|d| d.code != "spec::mtu"), "{fits:?}");
    let too_big =
        run("    underlayMTU: 1400\n    cni: {mtu: 1400}\n").expect_err("1400 + 50 > 1400");
    let d = too_big
        .iter()
        .find(|d| d.code == "spec::mtu")
        .unwrap_or_else(|| panic!("{too_big:?}"));
    assert!(
        d.message.contains(
            "cni.mtu 1400 plus the 50-byte VXLAN overhead does not fit under underlayMTU 1400"
        ),
        "{d}"
    );
    assert!(
        d.help.as_deref().unwrap_or("").contains("cni.mtu: 1350"),
        "{d}"
    );
    assert_eq!(d.path, "spec.networking.cni.mtu");
    let out_of_range = run("    underlayMTU: 600\n").expect_err("600 leaves no room");
    assert!(
        out_of_range
            .iter()
            .any(|d| d.code == "spec::underlay-mtu" && d.path == "spec.networking.underlayMTU"),
        "{out_of_range:?}"
    );
    let calico = run("    underlayMTU: 1400\n    cni: {plugin: calico}\n").expect("a warning only");
    assert!(
        calico.iter().any(|d| d.code == "spec::underlay-mtu"
            && d.severity == Severity::Warning
            && d.help.as_deref().unwrap_or("").contains("cni.mtu: 1350")),
        "{calico:?}"
    );
}

#[test]
fn kubeadm_timeouts_are_positive_go_durations() {
    let ok = diags("  kubeadm:\n    timeouts:\n      controlPlaneComponentHealthCheck: 10m\n      kubeletHealthCheck: 4m0s\n      kubernetesAPICall: 90s\n      etcdAPICall: 2m\n      tlsBootstrap: 6m\n      discovery: 7m30s\n      upgradeManifests: 1h\n")
        .unwrap_or_else(|d| panic!("refused: {d:?}"));
    assert!(ok.is_empty(), "{ok:?}");
    let e = errors(
        "  kubeadm:\n    timeouts:\n      discovery: 5 minutes\n      tlsBootstrap: \"0\"\n",
    );
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e[0].contains("kubeadm timeout discovery \"5 minutes\": not a duration")
            || e[1].contains("kubeadm timeout discovery \"5 minutes\": not a duration"),
        "{e:?}"
    );
    assert!(
        e.iter().any(|m| m.contains("tlsBootstrap \"0\"")
            && m.contains("[spec.kubeadm.timeouts.tlsBootstrap]")),
        "{e:?}"
    );
    let unknown = errors("  kubeadm:\n    timeouts:\n      timeoutForControlPlane: 4m\n");
    assert!(
        unknown.iter().any(|m| m.contains("timeoutForControlPlane")),
        "a v1beta3 name is not a field here: {unknown:?}"
    );
}
