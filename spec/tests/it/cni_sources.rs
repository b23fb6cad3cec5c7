//! Issue 13 at the file level: `networking.cni.sources` (another address and digest for one of the
//! CNI's upstream files) and `networking.cni.acceptUnverified` (a warning, never silent).

use clusterctl_spec::{validate, Diagnostic, Loaded, Severity};

/// A cluster file with `cni` (flow mapping text) under `networking`.
fn diags(cni: &str) -> Result<Vec<Diagnostic>, Vec<Diagnostic>> {
    let text = format!(
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: demo\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  networking:\n    podSubnet: 10.244.0.0/16\n    cni: {cni}\n  nodes:\n    - name: cp1\n      role: control-plane\n      address: 10.0.0.11/24\n"
    );
    match validate(&Loaded::from_text("cluster.yaml", text)) {
        Ok(v) => Ok(v.warnings),
        Err(r) => Err(r.items),
    }
}

/// (code, path) of every error.
fn errors(cni: &str) -> Vec<(String, String)> {
    match diags(cni) {
        Ok(_) => Vec::new(),
        Err(d) => d
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| (d.code.to_string(), d.path.to_string()))
            .collect(),
    }
}

const SHA: &str = "0bd380eb4954227c903bdea96dc9254650badd2d45ebe31978a47c3ffe2e9727";

#[test]
fn a_source_for_a_file_of_the_cni_with_a_digest_is_accepted() {
    let ok = diags(&format!(
        "{{plugin: flannel, sources: [{{name: kube-flannel.yml, url: \"https://mirror.example.com/flannel/kube-flannel.yml\", sha256: {SHA}}}]}}"
    ))
    .unwrap_or_else(|d| panic!("refused: {d:?}"));
    assert!(
        ok.iter().all(|d| !d.code.starts_with("spec::cni")),
        "{ok:?}"
    );
    diags("{plugin: cilium, sources: [{name: cilium.tgz, url: \"https://charts.example.com/cilium-1.20.0.tgz\"}, {name: helm-linux-amd64.tar.gz, url: \"https://mirror.example.com/helm.tgz\"}]}")
        .unwrap_or_else(|d| panic!("refused: {d:?}"));
}

#[test]
fn wrong_names_addresses_and_digests_are_refused_where_they_are() {
    let p = "spec.networking.cni.sources";
    assert_eq!(
        errors("{plugin: calico, sources: [{name: kube-flannel.yml, url: \"https://m.example.com/x\"}]}"),
        [("spec::cni-source".to_string(), format!("{p}[0].name"))]
    );
    assert_eq!(
        errors("{plugin: calico, sources: [{name: tigera-operator.yaml, url: \"https://m.example.com/a\"}, {name: tigera-operator.yaml, url: \"https://m.example.com/b\"}]}"),
        [("spec::cni-source".to_string(), format!("{p}[1].name"))]
    );
    assert_eq!(
        errors("{plugin: flannel, sources: [{name: kube-flannel.yml, url: \"ftp://m.example.com/x\"}]}"),
        [("spec::cni-source".to_string(), format!("{p}[0].url"))]
    );
    assert_eq!(
        errors("{plugin: flannel, sources: [{name: kube-flannel.yml, url: \"https://m.example.com/x\", sha256: abc}]}"),
        [("spec::cni-source".to_string(), format!("{p}[0].sha256"))]
    );
    assert_eq!(
        errors("{plugin: builtin, sources: [{name: x, url: \"https://m.example.com/x\"}]}"),
        [("spec::cni-source".to_string(), format!("{p}[0]"))]
    );
    // A login in the address would be printed in messages: refused, also without a password.
    for url in [
        "https://admin:hunter2@m.example.com/kube-flannel.yml",
        "http://admin@m.example.com/x",
    ] {
        assert_eq!(
            errors(&format!(
                "{{plugin: flannel, sources: [{{name: kube-flannel.yml, url: \"{url}\"}}]}}"
            )),
            [("spec::cni-source".to_string(), format!("{p}[0].url"))],
            "{url}"
        );
    }
    // An `@` after the host (a path or query) is not a login.
    assert!(errors("{plugin: flannel, sources: [{name: kube-flannel.yml, url: \"https://m.example.com/a@b/x?u=@\"}]}").is_empty());
    // Unknown keys in a source are refused by the strict loader.
    assert!(diags("{plugin: flannel, sources: [{name: kube-flannel.yml, url: \"https://m.example.com/x\", digest: x}]}").is_err());
}

#[test]
fn accepting_unverified_files_is_a_warning() {
    let w = diags("{plugin: cilium, version: v1.99.0, acceptUnverified: true}")
        .unwrap_or_else(|d| panic!("refused: {d:?}"));
    let hit: Vec<&Diagnostic> = w
        .iter()
        .filter(|d| d.code == "spec::cni-unverified")
        .collect();
    assert_eq!(hit.len(), 1, "{w:?}");
    assert_eq!(hit[0].severity, Severity::Warning);
    assert_eq!(hit[0].path, "spec.networking.cni.acceptUnverified");
}

#[test]
fn a_cni_version_clusterctl_has_not_pinned_is_refused_at_its_line() {
    let v = "spec.networking.cni.version";
    // Calico and flannel: only the table's versions (their image tags are known only there).
    for bad in [
        "{plugin: calico, version: v3.29.0}",
        "{plugin: flannel, version: 0.25.1}",
    ] {
        assert_eq!(
            errors(bad),
            [("spec::cni-version".to_string(), v.to_string())],
            "{bad}"
        );
    }
    let d = diags("{plugin: calico, version: v3.29.0}").unwrap_err();
    assert!(
        d[0].help.as_deref().unwrap_or("").contains("v3.32.1"),
        "{:?}",
        d[0]
    );
    assert!(errors("{plugin: calico, version: v3.31.7}").is_empty());
    assert!(errors("{plugin: flannel, version: 0.27.4}").is_empty());
    // Cilium: a version without a pinned chart digest needs the file's own digest or its acceptance.
    assert_eq!(
        errors("{plugin: cilium, version: v1.99.0}"),
        [("spec::cni-version".to_string(), v.to_string())]
    );
    assert!(errors("{plugin: cilium, version: 1.17.6}").is_empty());
    assert!(errors(&format!(
        "{{plugin: cilium, version: v1.99.0, sources: [{{name: cilium.tgz, url: \"https://m.example.com/cilium-1.99.0.tgz\", sha256: {SHA}}}]}}"
    ))
    .is_empty());
    // A source without a digest does not pin it.
    assert_eq!(
        errors("{plugin: cilium, version: v1.99.0, sources: [{name: cilium.tgz, url: \"https://m.example.com/c.tgz\"}]}"),
        [("spec::cni-version".to_string(), v.to_string())]
    );
}
