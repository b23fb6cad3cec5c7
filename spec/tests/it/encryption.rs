//! `spec.apiServer.encryption` (issue 27 item 8) at the file level: the defaults (aescbc, `[secrets]`),
//! and wrong values refused at their own line with a hint — an unknown provider (the schema names the
//! allowed ones), resource names the API server would refuse, and the flag in `extraArgs`.

use clusterctl_spec::model::EncryptionProvider;
use clusterctl_spec::{validate, Diagnostic, Loaded, Severity};

const BASE: &str = "\
apiVersion: clusterctl.io/v1alpha1
kind: Cluster
metadata:
  name: demo
spec:
  kubernetesVersion: v1.34.1
  provider: ssh
  nodes:
    - name: cp1
      role: control-plane
      address: 10.0.0.11/24
";

/// BASE with `insert` before `  nodes:`: the errors, or the valid cluster's encryption settings.
fn check(insert: &str) -> Result<Option<(EncryptionProvider, Vec<String>)>, Vec<Diagnostic>> {
    let text = BASE.replacen("  nodes:\n", &format!("{insert}  nodes:\n"), 1);
    match validate(&Loaded::from_text("cluster.yaml", text)) {
        Ok(v) => Ok(v
            .cluster
            .spec()
            .api_server
            .encryption
            .clone()
            .map(|e| (e.provider, e.resources))),
        Err(r) => Err(r
            .items
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .collect()),
    }
}

/// The one error of `insert`: (line, message, help).
fn one_error(insert: &str) -> (usize, String, String) {
    let e = check(insert).expect_err("refused");
    assert_eq!(e.len(), 1, "{e:?}");
    (
        e[0].line,
        e[0].message.clone(),
        e[0].help.clone().unwrap_or_default(),
    )
}

#[test]
fn defaults_are_aescbc_and_secrets() {
    assert_eq!(check("").expect("valid"), None);
    let (p, r) = check("  apiServer:\n    encryption: {}\n")
        .expect("valid")
        .expect("on");
    assert_eq!(
        (p, r),
        (EncryptionProvider::Aescbc, vec!["secrets".to_string()])
    );
    let (p, r) = check("  apiServer:\n    encryption:\n      provider: secretbox\n      resources: [secrets, configmaps, '*.apps']\n")
        .expect("valid")
        .expect("on");
    assert_eq!(p, EncryptionProvider::Secretbox);
    assert_eq!(r, vec!["secrets", "configmaps", "*.apps"]);
}

#[test]
fn wrong_values_are_refused_at_their_line_with_a_hint() {
    // BASE has 7 lines before `nodes:`; the inserted lines start at line 8.
    let (line, msg, help) = one_error("  apiServer:\n    encryption:\n      provider: aesgcm\n");
    assert_eq!(line, 10, "{msg}");
    assert!(msg.contains("aesgcm"), "{msg}");
    assert!(
        help.contains("aescbc") && help.contains("secretbox"),
        "{help}"
    );

    let (line, msg, help) = one_error(
        "  apiServer:\n    encryption:\n      resources:\n        - secrets\n        - Secrets\n",
    );
    assert_eq!(line, 12, "{msg}");
    assert!(msg.contains("\"Secrets\""), "{msg}");
    assert!(help.contains("lower case"), "{help}");

    let (line, msg, help) = one_error("  apiServer:\n    encryption:\n      resources: []\n");
    assert_eq!(line, 10, "{msg}");
    assert!(
        msg.contains("empty") && help.contains("[secrets]"),
        "{msg} / {help}"
    );

    for (bad, words) in [
        ("events.events.k8s.io", "write `events`"),
        ("deployments.extensions", "current group"),
        ("'*'", "`*.*`"),
        ("serviceipallocations", "remove it"),
        ("'deployments.*'", "name the group"),
    ] {
        let (line, _, help) = one_error(&format!(
            "  apiServer:\n    encryption:\n      resources:\n        - {bad}\n"
        ));
        assert_eq!(line, 11, "{bad}");
        assert!(help.contains(words), "{bad}: {help}");
    }
    let (line, msg, _) = one_error(
        "  apiServer:\n    encryption:\n      resources:\n        - secrets\n        - secrets\n",
    );
    assert!(line == 12 && msg.contains("twice"), "{line} {msg}");
    let (line, msg, help) = one_error(
        "  apiServer:\n    encryption:\n      resources:\n        - '*.*'\n        - secrets\n",
    );
    assert!(line == 12 && msg.contains("overlaps"), "{line} {msg}");
    assert!(help.contains("wildcard"), "{help}");

    let (_, msg, help) = one_error(
        "  apiServer:\n    extraArgs:\n      encryption-provider-config: /x\n    encryption: {}\n",
    );
    assert!(msg.contains("spec.apiServer.encryption"), "{msg}");
    assert!(help.contains("remove it from extraArgs"), "{help}");
}
