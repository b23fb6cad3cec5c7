//! The real `kubeadm` (built from its Go module by `scripts/k8s/build.sh`, through
//! `clusterctl_testbed::k8sbin`) on every kubeadm config render writes, for every input (each embedded
//! profile and each test fixture) re-targeted to the kubeadm's own version, one kubeadm per supported
//! minor ([`KUBEADMS`]):
//!
//! * `kubeadm config validate --config` on each rendered `init.yaml` (Init + Cluster + Kubelet [+
//!   KubeProxy] configuration; the component configs are decoded strictly too, but their values are
//!   not validated — the kubelet does that when it starts), `join.yaml` (the join placeholders
//!   replaced by well-formed values), `reset.yaml` and `upgrade.yaml` must exit 0 and print nothing
//!   but `ok`;
//! * `upgrade.yaml` also through `kubeadm upgrade plan --config`: before v1.36 `kubeadm config
//!   validate` accepts any `UpgradeConfiguration` unchecked (it prints `ok` even for unknown fields),
//!   while the upgrade commands' loader decodes it strictly and only warns (`strict decoding error:
//!   unknown field …`) before it goes on to the (absent) cluster: no such warning may appear, and the
//!   run must get as far as the kubeconfig. Canaries prove both checks refuse an unknown field on
//!   each kubeadm;
//! * the image-list drift check: `kubeadm config images list --config init.yaml` must equal, line by
//!   line, the kubeadm part of `clusterctl airgap images` ([`clusterctl_render::images`], the pull
//!   references of kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, CoreDNS, pause
//!   and etcd). That checks the naming rules (mirror repository, CoreDNS sub-path, kube-proxy disabled)
//!   and pause, which the config does not pin; etcd and CoreDNS tags are pinned in the rendered
//!   ClusterConfiguration, so kubeadm echoes them. Hence also:
//! * the version-table drift check: `kubeadm config images list --kubernetes-version V` (kubeadm's own
//!   defaults, nothing pinned) must equal the table's [`VersionInfo::kubeadm_images`] for V.
//!
//! [`VersionInfo::kubeadm_images`]: clusterctl_spec::VersionInfo::kubeadm_images
//!
//! Every file's content is checked once per kubeadm (nodes share reset and upgrade configs).

use crate::common;

use clusterctl_render::{images, render, Facts, Purpose};
use clusterctl_testbed::k8sbin::require_programs;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The kubeadm versions run, one per supported minor, with why that patch: the newest patch of the
/// minor that the version table (`spec/src/versions.rs`) knows and the Go module proxy serves
/// completely (k8s.io/kubernetes and every staging module at the matching v0 version).
pub(crate) const KUBEADMS: &[(&str, &str)] = &[
    (
        "v1.31.0",
        "the table's v1.31.14 is served but its staging module k8s.io/kube-proxy@v0.31.14 is not \
         (proxy: 403 'This module version is not available'); v1.31.0 is the only other served 1.31",
    ),
    ("v1.32.13", "the table's newest 1.32, served"),
    ("v1.33.13", "the table's newest 1.33, served"),
    (
        "v1.34.4",
        "the table knows up to v1.34.10; the proxy serves v1.34.0, .2, .3, .4",
    ),
    (
        "v1.35.4",
        "the table knows up to v1.35.7; the proxy serves only v1.35.4",
    ),
    ("v1.36.3", "the table's newest 1.36, served"),
];

/// The components of `clusterctl airgap images` that kubeadm's own list covers.
const KUBEADM_COMPONENTS: [&str; 7] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
    "coredns",
    "pause",
    "etcd",
];

/// Well-formed stand-ins for the join secrets (formats kubeadm validates).
fn fill_placeholders(text: &str) -> String {
    use clusterctl_render::placeholders::{CA_CERT_HASH, CERTIFICATE_KEY, JOIN_TOKEN};
    text.replace(JOIN_TOKEN, "abcdef.0123456789abcdef")
        .replace(CA_CERT_HASH, &format!("sha256:{}", "ab".repeat(32)))
        .replace(CERTIFICATE_KEY, &"cd".repeat(32))
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn kubeadm(bin: &Path, args: &[&str], config: &Path) -> Run {
    let out = Command::new(bin)
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `kubeadm upgrade plan --config` on `path` decodes the UpgradeConfiguration strictly (it only warns
/// on an unknown field, then goes on) and gets as far as the kubeconfig, which does not exist.
fn upgrade_loads_cleanly(bin: &Path, path: &Path, no_kubeconfig: &Path) -> Result<(), String> {
    let r = kubeadm(
        bin,
        &[
            "upgrade",
            "plan",
            "--kubeconfig",
            &no_kubeconfig.to_string_lossy(),
        ],
        path,
    );
    let decoded =
        !r.stderr.contains("error unmarshaling") && !r.stderr.contains("strict decoding error");
    let reached_client = r.stderr.contains(&*no_kubeconfig.to_string_lossy());
    if decoded && reached_client {
        Ok(())
    } else {
        Err(format!(
            "kubeadm upgrade plan --config did not load it cleanly (exit {}):\n{}{}",
            r.code, r.stdout, r.stderr
        ))
    }
}

/// Proves both checks bite on this kubeadm: an unknown field is refused by `config validate` (in a
/// JoinConfiguration) and reported by `upgrade plan`'s loader (in an UpgradeConfiguration).
fn canaries(bin: &Path, dir: &Path, no_kubeconfig: &Path) {
    let join = dir.join("canary-join.yaml");
    std::fs::write(
        &join,
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\nbogusField: 1\n",
    )
    .expect("canary");
    let r = kubeadm(bin, &["config", "validate"], &join);
    assert!(
        r.code != 0 && r.stderr.contains("bogusField"),
        "kubeadm config validate must refuse an unknown field: exit {} {}{}",
        r.code,
        r.stdout,
        r.stderr
    );
    let upgrade = dir.join("canary-upgrade.yaml");
    std::fs::write(
        &upgrade,
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\nbogusField: 1\n",
    )
    .expect("canary");
    let e = upgrade_loads_cleanly(bin, &upgrade, no_kubeconfig)
        .expect_err("kubeadm upgrade plan must report an unknown field");
    assert!(e.contains("bogusField"), "{e}");
}

/// Validates every rendered kubeadm file and compares the image lists for one kubeadm `version`;
/// panics listing every failure.
fn check(version: &str) {
    // scripts/test-all.sh's KUBEADM_VERSIONS: the list a tight budget trims (docs/testing.md).
    if let Ok(list) = std::env::var("CLUSTERCTL_KUBEADM_VERSIONS") {
        if !list.split_whitespace().any(|v| v == version) {
            eprintln!("SKIP: kubeadm {version} is not in CLUSTERCTL_KUBEADM_VERSIONS ({list})");
            return;
        }
    }
    let Some(bins) = require_programs(version, &["kubeadm"]) else {
        return;
    };
    let bin = bins.path("kubeadm");
    let short = Command::new(bin)
        .args(["version", "-o", "short"])
        .output()
        .expect("kubeadm version");
    assert_eq!(
        String::from_utf8_lossy(&short.stdout).trim(),
        version,
        "the cached kubeadm reports its tag"
    );
    let mut failures = Vec::new();
    let info = clusterctl_spec::versions::parse_version(version)
        .and_then(|v| clusterctl_spec::versions::lookup(&v))
        .unwrap_or_else(|| panic!("{version} is not in the version table"));
    let defaults = Command::new(bin)
        .args(["config", "images", "list", "--kubernetes-version", version])
        .output()
        .expect("kubeadm config images list");
    let got: Vec<String> = String::from_utf8_lossy(&defaults.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    if !defaults.status.success() || got != info.kubeadm_images() {
        failures.push(format!(
            "version table drift for {version}:\n  kubeadm config images list --kubernetes-version {version}: {got:?}\n  spec/src/versions.rs: {:?}\n  stderr: {}",
            info.kubeadm_images(),
            String::from_utf8_lossy(&defaults.stderr).trim()
        ));
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let no_kubeconfig = dir.path().join("no-such-admin.conf");
    canaries(bin, dir.path(), &no_kubeconfig);
    let mut seen = BTreeSet::new();
    let (mut validated, mut lists) = (0, 0);
    for (label, loaded) in common::inputs() {
        let l = common::with_version(&loaded, version);
        let c = common::valid(&format!("{label}@{version}"), &l);
        // As strict_upstream does: containerd 1.x and 2.x nodes (the same kubeadm files unless the
        // runtime changes them; each distinct file is validated once).
        let mut facts = Facts::assumed(&c);
        let mut renders = vec![render(&c, &facts).expect("renders")];
        for nf in facts.nodes.values_mut() {
            nf.containerd_major = 2;
        }
        renders.push(render(&c, &facts).expect("renders"));
        for (node, f) in renders.iter().flat_map(|r| r.all()) {
            let purpose = f.purpose;
            if !matches!(
                purpose,
                Purpose::KubeadmInit
                    | Purpose::KubeadmJoin
                    | Purpose::KubeadmReset
                    | Purpose::KubeadmUpgrade
            ) {
                continue;
            }
            let text = fill_placeholders(&f.as_text());
            let at = format!("{label}@{version} {} {}", node.unwrap_or("cluster"), f.path);
            let path = dir.path().join(format!("{}.yaml", seen.len()));
            if purpose == Purpose::KubeadmInit {
                std::fs::write(&path, &text).expect("write config");
                let r = kubeadm(bin, &["config", "images", "list"], &path);
                let want: Vec<String> = images(&c)
                    .iter()
                    .filter(|i| KUBEADM_COMPONENTS.contains(&i.component.as_str()))
                    .map(|i| i.pull_ref().to_string())
                    .collect();
                let got: Vec<String> = r.stdout.lines().map(str::to_string).collect();
                if r.code != 0 || got != want {
                    failures.push(format!(
                        "{at}: image list drift\n  kubeadm config images list (exit {}): {got:?}\n  clusterctl airgap images (kubeadm part): {want:?}\n  stderr: {}",
                        r.code,
                        r.stderr.trim()
                    ));
                }
                lists += 1;
            }
            if !seen.insert(text.clone()) {
                continue;
            }
            std::fs::write(&path, &text).expect("write config");
            validated += 1;
            if purpose == Purpose::KubeadmUpgrade {
                if let Err(e) = upgrade_loads_cleanly(bin, &path, &no_kubeconfig) {
                    failures.push(format!("{at}: {e}\n--- config ---\n{text}"));
                }
            }
            let r = kubeadm(bin, &["config", "validate"], &path);
            if r.code != 0 || r.stdout.trim() != "ok" || !r.stderr.trim().is_empty() {
                failures.push(format!(
                    "{at}: kubeadm config validate (exit {}):\n{}{}\n--- config ---\n{text}",
                    r.code, r.stdout, r.stderr
                ));
            }
        }
    }
    eprintln!(
        "kubeadm {version}: {validated} distinct configs validated, {lists} image lists compared"
    );
    assert!(validated >= 20 && lists >= 14, "too little checked");
    assert!(
        failures.is_empty(),
        "real kubeadm {version} disagrees with render ({} failures):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_supported_minor_has_a_kubeadm_and_each_version_is_in_the_table() {
    let minors: BTreeSet<u64> = clusterctl_spec::versions::SUPPORTED
        .iter()
        .map(|r| r.minor)
        .collect();
    let covered: BTreeSet<u64> = KUBEADMS
        .iter()
        .map(|(v, _)| {
            let v = clusterctl_spec::versions::parse_version(v).expect("a version");
            assert!(
                clusterctl_spec::versions::lookup(&v).is_some(),
                "{v} is not in the version table"
            );
            v.minor
        })
        .collect();
    assert_eq!(covered, minors, "one kubeadm per supported minor");
}

#[test]
fn kubeadm_v1_31() {
    check(KUBEADMS[0].0);
}

#[test]
fn kubeadm_v1_32() {
    check(KUBEADMS[1].0);
}

#[test]
fn kubeadm_v1_33() {
    check(KUBEADMS[2].0);
}

#[test]
fn kubeadm_v1_34() {
    check(KUBEADMS[3].0);
}

#[test]
fn kubeadm_v1_35() {
    check(KUBEADMS[4].0);
}

#[test]
fn kubeadm_v1_36() {
    check(KUBEADMS[5].0);
}
