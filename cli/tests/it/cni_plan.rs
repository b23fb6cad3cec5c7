//! Issue 13 in `up --dry-run`'s plan, offline (no node, no network: the file's hosts are not
//! contacted, PATH is empty): the seed profiles install their CNI — `kind-calico` downloads the pinned
//! Calico CRDs and tigera-operator manifest (address and sha256 with where it was read) in
//! `cni/sources`, which comes before any phase that changes a node, and its `cni` phase applies them
//! server-side with the CRDs waited for; `kubeadm-cilium` downloads the pinned chart and Helm archive
//! and runs `helm upgrade --install`; a file's `cni.sources` replaces the address and digest; `cni:
//! none` has no `cni/sources` and no `cni` phase.

use std::path::{Path, PathBuf};
use std::process::Command;

fn dry_run(file: &Path, dir: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(["up", "--dry-run", "--verbose", "-f"])
        .arg(file)
        .current_dir(dir)
        .env_clear()
        .env("PATH", dir.join("empty-path"))
        .env("HOME", dir)
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .output()
        .expect("run clusterctl");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

fn profile(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profiles")
        .join(format!("{name}.yaml"))
}

/// The phase names of the plan's `phases:` line, in order.
fn phases(out: &str) -> Vec<String> {
    out.lines()
        .find_map(|l| l.strip_prefix("phases: "))
        .unwrap_or_else(|| panic!("no phases line: {out}"))
        .split(" → ")
        .map(str::to_string)
        .collect()
}

#[test]
fn kind_calico_downloads_and_applies_calico_before_any_node_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, out) = dry_run(&profile("kind-calico"), dir.path());
    assert_eq!(code, 0, "{out}");
    let p = phases(&out);
    let at = |n: &str| {
        p.iter()
            .position(|x| x == n)
            .unwrap_or_else(|| panic!("{n}: {p:?}"))
    };
    assert!(at("render") < at("cni/sources"), "{p:?}");
    for changing in ["preflight", "files", "init", "cni", "wait-ready"] {
        assert!(at("cni/sources") < at(changing), "{changing}: {p:?}");
    }
    let v = &clusterctl_render::cni::versions::CALICO[0];
    assert!(
        out.contains(&format!(
            "download operator-crds.yaml from https://raw.githubusercontent.com/projectcalico/calico/{}/manifests/{} (sha256 {} from projectcalico/calico@{}",
            v.version, v.crds_file, v.crds_sha256, v.commit
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("download tigera-operator.yaml from https://raw.githubusercontent.com/projectcalico/calico/{}/manifests/tigera-operator.yaml (sha256 {}", v.version, v.operator_sha256)),
        "{out}"
    );
    assert!(
        out.contains("server-side apply the objects of operator-crds.yaml (field manager clusterctl), then wait until every CRD is Established"),
        "{out}"
    );
    assert!(
        out.contains(
            "server-side apply the Installation and APIServer of calico-installation.yaml"
        ),
        "{out}"
    );
}

#[test]
fn kubeadm_cilium_installs_the_chart_with_helm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, out) = dry_run(&profile("kubeadm-cilium"), dir.path());
    assert_eq!(code, 0, "{out}");
    assert!(phases(&out).contains(&"cni/sources".to_string()), "{out}");
    assert!(
        out.contains("download cilium.tgz from https://helm.cilium.io/cilium-1.17.6.tgz (sha256 96f6def2c6e913f0160a0d7296f2dae78c16aef0cb4c099384f3c72b2f5a6db2"),
        "{out}"
    );
    assert!(
        out.contains("download helm-linux-amd64.tar.gz from https://get.helm.sh/helm-v3.18.4-linux-amd64.tar.gz"),
        "{out}"
    );
    assert!(
        out.contains("helm upgrade --install cilium /etc/clusterctl/cni/cilium.tgz --namespace kube-system -f /etc/clusterctl/cni/cilium-values.yaml"),
        "{out}"
    );
    assert!(
        out.contains("write  /etc/clusterctl/cni/cilium-values.yaml"),
        "the rendered values are placed: {out}"
    );
}

#[test]
fn a_files_source_replaces_the_address_and_none_installs_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sha = "ab".repeat(32);
    let file = dir.path().join("flannel.yaml");
    let text = |cni: &str| {
        format!(
            "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: plan}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  networking: {{podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/16, cni: {cni}}}\n  ssh: {{user: root}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: 192.0.2.11}}\n"
        )
    };
    std::fs::write(
        &file,
        text(&format!("{{plugin: flannel, sources: [{{name: kube-flannel.yml, url: \"https://mirror.example.com/flannel/kube-flannel.yml\", sha256: {sha}}}]}}")),
    )
    .expect("file");
    let (code, out) = dry_run(&file, dir.path());
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("download kube-flannel.yml from https://mirror.example.com/flannel/kube-flannel.yml (sha256 {sha} from spec.networking.cni.sources)")),
        "{out}"
    );
    assert!(
        out.contains(
            "with the ConfigMap kube-flannel-cfg's net-conf.json replaced by flannel-net-conf.json"
        ),
        "{out}"
    );
    std::fs::write(&file, text("{plugin: none}")).expect("file");
    let (code, out) = dry_run(&file, dir.path());
    assert_eq!(code, 0, "{out}");
    let p = phases(&out);
    assert!(!p.iter().any(|x| x == "cni/sources" || x == "cni"), "{p:?}");
}

#[test]
fn skipping_the_cni_phases_downloads_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(["up", "--dry-run", "--skip-phases", "cni", "-f"])
        .arg(profile("kind-calico"))
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", dir.path().join("empty-path"))
        .env("HOME", dir.path())
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .output()
        .expect("run clusterctl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with("cni/sources")),
        "no cni/sources step: {text}"
    );
    assert!(!text.contains("download "), "{text}");
}

/// The seed profiles by name (`up --dry-run --profile NAME`, the profiles built into the binary) plan
/// the same CNI install as their files.
#[test]
fn the_seed_profiles_by_name_plan_their_cni_install() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = |name: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
            .args(["up", "--dry-run", "--verbose", "--profile", name])
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", dir.path().join("empty-path"))
            .env("HOME", dir.path())
            .env("DOCKER_HOST", "unix:///nonexistent.sock")
            .output()
            .expect("run clusterctl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {text}");
        text
    };
    let calico = plan("kind-calico");
    assert!(
        phases(&calico).contains(&"cni/sources".to_string()),
        "{calico}"
    );
    assert!(
        calico.contains("download operator-crds.yaml from https://raw.githubusercontent.com/projectcalico/calico/v3.32.1/")
            && calico.contains("server-side apply the Installation and APIServer of calico-installation.yaml"),
        "{calico}"
    );
    let cilium = plan("kubeadm-cilium");
    assert!(
        cilium.contains("download cilium.tgz from https://helm.cilium.io/cilium-1.17.6.tgz")
            && cilium.contains("helm upgrade --install cilium /etc/clusterctl/cni/cilium.tgz"),
        "{cilium}"
    );
}
