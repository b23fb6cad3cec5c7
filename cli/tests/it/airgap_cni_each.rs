//! Issue 13, air-gapped, for the CNIs whose dataplane the test bed cannot run (Calico, Cilium) and for
//! `cni: none` — the level `airgap_cni` proves for flannel, which `airgap_flannel` then runs for real.
//! Upstream files of our own (Calico's CRDs and operator manifest as YAML of their shape, Cilium's
//! chart and the Helm archive as bytes of our own: the test bed fetches no Calico or Cilium release)
//! are named in the file's `cni.sources` with their sha256, each served by a loopback listener; every
//! image of the plan is built here from random bytes and served by a loopback `docker-registry`
//! (`airgap_support`). Checks per CNI: `airgap bundle` (the library call the CLI makes) downloads each
//! file once and carries it as `upstream/<name>` with its digest, with the CNI's images (the tigera
//! operator; the cilium agent and operator); then, every source address leading to a listener that
//! must never be contacted and an empty upstream cache, `up --dry-run` runs `airgap/verify` before
//! `cni/sources`, which takes every file from the bundle (entry and sha256 named) and downloads
//! nothing, and the `cni` phase plans the install from them (Calico's CRDs waited for, then the
//! `Installation`; `helm upgrade --install cilium` with the bundle's chart); no listener was
//! contacted. `cni: none`: the bundle carries no upstream file and the air-gapped plan has neither
//! `cni/sources` nor `cni`.

use crate::airgap_cni::{dry_run, Listener};
use crate::airgap_support::{bundle_served, valid_file};

use std::path::Path;
use std::sync::atomic::Ordering;

use clusterctl_testbed::registry::{self, Registry};
use clusterctl_testbed::require;

/// CRDs of Calico's shape for the operator's kinds (`operator-crds.yaml`).
const CALICO_CRDS: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: installations.operator.tigera.io}\nspec:\n  group: operator.tigera.io\n  names: {kind: Installation, listKind: InstallationList, plural: installations, singular: installation}\n  scope: Cluster\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n";

/// An operator manifest of Calico's shape (`tigera-operator.yaml`).
const TIGERA_OPERATOR: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: tigera-operator}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: tigera-operator, namespace: tigera-operator}\nspec:\n  selector: {matchLabels: {name: tigera-operator}}\n  template:\n    metadata: {labels: {name: tigera-operator}}\n    spec:\n      containers:\n      - {name: tigera-operator, image: \"quay.io/tigera/operator:v1.42.3\"}\n";

/// One upstream file of the test: name and bytes.
type Fixture = (&'static str, Vec<u8>);

fn cluster_yaml(dir: &Path, plugin: &str, sources: &[(String, String, String)]) -> String {
    let sources: Vec<String> = sources
        .iter()
        .map(|(n, u, s)| format!("{{name: {n}, url: \"{u}\", sha256: {s}}}"))
        .collect();
    let sources = if sources.is_empty() {
        String::new()
    } else {
        format!("\n      sources: [{}]", sources.join(", "))
    };
    format!(
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: agcni}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  networking:\n    podSubnet: 10.244.0.0/16\n    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: {plugin}{sources}\n  ssh: {{user: root, keyFile: {}, port: 22, hostKeyPolicy: strict}}\n  packages: {{source: preinstalled}}\n  airgap: {{bundle: site.tar}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: 192.0.2.10}}\n    - {{name: w1, role: worker, address: 192.0.2.11}}\n",
        dir.join("id_test").display()
    )
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

/// Bundles `plugin` with `files` as its `cni.sources`, then plans the air-gapped `up`; asserts what
/// the module doc says and returns the plan's text.
fn bundled_then_planned(plugin: &str, files: &[Fixture], image: &str, seed: u64) -> String {
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        work.path().join("id_test"),
        "not a key; nothing is contacted\n",
    )
    .expect("key");
    let digest = |b: &[u8]| clusterctl_airgap::Digest::of(b).hex().to_string();
    let servers: Vec<Listener> = files
        .iter()
        .map(|(_, b)| Listener::start_on("127.0.0.1:0", Some(b.clone())))
        .collect();
    let sources = |ports: &[u16]| -> Vec<(String, String, String)> {
        files
            .iter()
            .zip(ports)
            .map(|((n, b), p)| {
                (
                    n.to_string(),
                    format!("http://127.0.0.1:{p}/{n}"),
                    digest(b),
                )
            })
            .collect()
    };
    let ports: Vec<u16> = servers.iter().map(|s| s.port).collect();
    let file = work.path().join("cluster.yaml");
    let valid = valid_file(&file, &cluster_yaml(work.path(), plugin, &sources(&ports)));
    let reg = Registry::start().expect("registry");
    let summary = bundle_served(
        &valid,
        &reg,
        seed,
        work.path(),
        &work.path().join("site.tar"),
    );
    let mut carried: Vec<(String, String, String)> = summary
        .manifest
        .upstream
        .iter()
        .map(|f| (f.name.clone(), f.path.clone(), f.sha256.hex().to_string()))
        .collect();
    carried.sort();
    let mut want: Vec<(String, String, String)> = files
        .iter()
        .map(|(n, b)| (n.to_string(), format!("upstream/{n}"), digest(b)))
        .collect();
    want.sort();
    assert_eq!(carried, want, "{plugin}");
    for s in &servers {
        assert_eq!(
            s.hits.load(Ordering::SeqCst),
            1,
            "{plugin}: downloaded once"
        );
    }
    assert!(
        image.is_empty()
            || summary
                .manifest
                .images
                .iter()
                .any(|i| i.source.contains(image)),
        "{plugin}: {image} carried"
    );
    drop(servers);

    // The site: every source address leads to a listener that must never be contacted.
    let dead: Vec<Listener> = files
        .iter()
        .map(|_| Listener::start_on("127.0.0.1:0", None))
        .collect();
    let ports: Vec<u16> = dead.iter().map(|s| s.port).collect();
    std::fs::write(&file, cluster_yaml(work.path(), plugin, &sources(&ports))).expect("file");
    let site = tempfile::tempdir().expect("tempdir");
    let (code, out) = dry_run(&file, site.path());
    assert_eq!(code, 0, "{plugin}: {out}");
    let p = phases(&out);
    let at = |n: &str| p.iter().position(|x| x == n).unwrap_or(usize::MAX);
    if !files.is_empty() {
        assert!(at("airgap/verify") < at("cni/sources"), "{p:?}");
        assert!(at("cni/sources") < at("preflight"), "{p:?}");
    }
    for (n, b) in files {
        assert!(
            out.contains(&format!(
                "take {n} from the air-gap bundle (upstream/{n}, sha256:{})",
                digest(b)
            )),
            "{plugin}: {n}: {out}"
        );
    }
    assert!(!out.contains("download "), "{plugin}: {out}");
    std::thread::sleep(std::time::Duration::from_millis(100));
    for d in &dead {
        assert_eq!(
            d.hits.load(Ordering::SeqCst),
            0,
            "{plugin}: the air-gapped up contacted a source address"
        );
    }
    out
}

#[test]
fn calico_cilium_and_none_install_from_the_bundle_without_reaching_out() {
    if !require("docker-registry", registry::available()) {
        return;
    }
    let calico = bundled_then_planned(
        "calico",
        &[
            ("operator-crds.yaml", CALICO_CRDS.as_bytes().to_vec()),
            ("tigera-operator.yaml", TIGERA_OPERATOR.as_bytes().to_vec()),
        ],
        "quay.io/tigera/operator:",
        1310,
    );
    assert!(
        calico.contains("server-side apply the objects of operator-crds.yaml (field manager clusterctl), then wait until every CRD is Established"),
        "{calico}"
    );
    assert!(
        calico.contains(
            "server-side apply the Installation and APIServer of calico-installation.yaml"
        ),
        "{calico}"
    );

    let cilium = bundled_then_planned(
        "cilium",
        &[
            ("cilium.tgz", b"a chart of our own, not cilium's\n".to_vec()),
            (
                "helm-linux-amd64.tar.gz",
                b"a helm archive of our own\n".to_vec(),
            ),
        ],
        "quay.io/cilium/cilium:",
        1320,
    );
    assert!(
        cilium.contains("helm upgrade --install cilium /etc/clusterctl/cni/cilium.tgz --namespace kube-system -f /etc/clusterctl/cni/cilium-values.yaml"),
        "{cilium}"
    );

    let none = bundled_then_planned("none", &[], "", 1330);
    let p = phases(&none);
    assert!(!p.iter().any(|x| x == "cni/sources" || x == "cni"), "{p:?}");
}
