//! Third-party CNI installs (`clusterctl_render::cni::install`, `clusterctl_phases::up::cni_install`)
//! against a real control plane (`clusterctl_testbed::envtest`: upstream etcd and kube-apiserver, one per
//! test, thrown away whole) and the real `kubectl` (`clusterctl_testbed::k8sbin`). Each CNI's steps are
//! built as `up` builds them — from the cluster file, the files render writes and the upstream files —
//! and server-side applied through `KubeClusterApi::apply` (field manager `clusterctl`), then checked in
//! what the server stores. The steps go through the `cni` phase's own `apply_steps` (a real run on
//! a first control plane), which reports each object `created`, `configured` or `unchanged` and counts
//! only the first two as changes: a first apply creates every object, a re-apply leaves every object
//! unchanged and counts no change, a changed field configures only its object (real kubectl's
//! server-side apply says `serverside-applied` of every object either way).
//!
//! * **flannel**: the real upstream `kube-flannel.yml` of the pinned release, which the test bed reads
//!   from flannel's Go module (`scripts/k8s/build.sh flannel-manifest`; its sha256 is the one pinned in
//!   the version table): every object accepted, the ConfigMap's `net-conf.json` is the rendered one, the
//!   DaemonSet's images are under the mirror; a second apply changes nothing (resourceVersions kept),
//!   real `kubectl apply --server-side --field-manager=clusterctl` of the same objects changes nothing
//!   either, and a changed podSubnet converges.
//! * **calico**: for each pinned release, **Calico's real** CRD file and `tigera-operator.yaml` (read
//!   from `../shared/upstream/calico/<version>/` by `clusterctl_testbed::upstream`; their sha256 is the
//!   pinned one): the CRDs become Established before anything else is applied, the rendered
//!   `Installation` and the `APIServer` are accepted by the real schemas under strict field validation,
//!   an `Installation` the schema refuses (a value outside an enum, a field it does not declare) fails
//!   naming the object and the server's message, the operator Deployment runs the mirror's image, real
//!   kubectl's server-side apply of the same objects changes nothing, and the TigeraStatus wait names
//!   what is still progressing until all are Available.
//! * **kindnet**: kind's real default CNI manifest of the kind release clusterctl targets (the constant
//!   kind's node image build writes to `/kind/manifests/default-cni.yaml`, which the test bed reads from
//!   kind's Go module: `scripts/k8s/build.sh kindnet-manifest`), filled with podSubnet and patched with
//!   the endpoint as kind's `installcni` does: its four objects accepted, the DaemonSet's image under the
//!   mirror, `CONTROL_PLANE_ENDPOINT` appended last; a re-apply and real kubectl change nothing.
//! * **cni: none**: the control-plane components `wait-ready` waits for instead of Ready nodes, from
//!   real Pods whose status the test sets.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clusterctl_kubeapi::{ClusterApi, KubeClusterApi};
use clusterctl_phases::up::cni_install::{
    apply_steps, calico_not_available, control_plane_not_ready, for_cluster,
};
use clusterctl_phases::{Mode, NodeCtx, Outcome, Reporter, Secrets};
use clusterctl_render::cni::install::{
    images_of, kindnet_steps, manifest_steps, ApplyStep, InstallInput, Wait,
};
use clusterctl_render::cni::versions::CalicoRelease;
use clusterctl_render::{render, Facts};
use clusterctl_spec::model::Role;
use clusterctl_spec::{ValidCluster, ValidNode};
use clusterctl_testbed::envtest::Envtest;
use clusterctl_testbed::k8sbin::{require_programs, DEFAULT_VERSION};
use serde_json::{json, Value};

const MIRROR: &str = "harbor.example.com/library";

/// A two-node cluster file with `cni` and a registry mirror: SSH hosts, or docker nodes for kindnet
/// (which is only offered with the docker provider).
fn cluster(dir: &Path, cni: &str, pod_subnet: &str) -> ValidCluster {
    let file = dir.join(format!("{}.yaml", clusterctl_testbed::unique_name("c")));
    let hosts = if cni == "kindnet" {
        "  provider: docker\n  nodes:\n    - {name: cp1, role: control-plane}\n    - {name: w1, role: worker}\n"
    } else {
        "  provider: ssh\n  controlPlane: {endpoint: 10.88.0.11:6443}\n  ssh: {user: root}\n  nodes:\n    - {name: cp1, role: control-plane, address: 10.88.0.11}\n    - {name: w1, role: worker, address: 10.88.0.12}\n"
    };
    std::fs::write(
        &file,
        format!(
            "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: cnitest}}\nspec:\n  kubernetesVersion: v1.34.1\n  networking: {{podSubnet: {pod_subnet}, serviceSubnet: 10.96.0.0/16, cni: {{plugin: {cni}}}}}\n  registry: {{mirror: \"{MIRROR}\"}}\n{hosts}"
        ),
    )
    .expect("cluster file");
    let loaded = clusterctl_spec::load(&file).expect("load");
    clusterctl_spec::validate(&loaded).expect("valid").cluster
}

/// What `up` gives the install: the input from the cluster file and the rendered `cni/` files by name.
fn prepared(cluster: &ValidCluster) -> (InstallInput, BTreeMap<String, Vec<u8>>) {
    let ci = for_cluster(cluster, None)
        .expect("pinned")
        .expect("a third-party CNI");
    let rendered = render(cluster, &Facts::assumed(cluster)).expect("renders");
    let files = rendered
        .cluster
        .iter()
        .filter_map(|f| {
            f.path
                .strip_prefix("cni/")
                .map(|n| (n.to_string(), f.content.clone()))
        })
        .collect();
    (ci.input, files)
}

struct Api {
    api: KubeClusterApi,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

fn client(env: &Envtest) -> Api {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("config");
    std::fs::write(&kubeconfig, env.kubeconfig("envtest")).expect("kubeconfig");
    let api = KubeClusterApi::from_kubeconfig(&kubeconfig, Some("envtest")).expect("client");
    Api {
        api,
        kubeconfig,
        _dir: dir,
    }
}

/// Keeps the lines a phase reports.
#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl Reporter for Lines {
    fn phase_start(&self, _: &str, _: &str) {}
    fn phase_end(&self, _: &str, _: &str, _: &Outcome) {}
    fn change(&self, _: &str, _: &str, what: &str) {
        if let Ok(mut v) = self.0.lock() {
            v.push(what.to_string());
        }
    }
    fn query(&self, _: &str, _: &str, _: &str) {}
    fn output(&self, _: &str, _: &[u8]) {}
    fn upload_progress(&self, _: &str, _: &str, _: u64, _: u64) {}
    fn note(&self, _: &str) {}
}

/// What one run of the `cni` phase's apply did: the changes it counted and the line it reported
/// per object.
struct Run {
    changes: usize,
    lines: Vec<String>,
}

impl Run {
    /// The word each object was reported with (`created`, `configured`, `unchanged`), in order.
    fn words(&self) -> Vec<&str> {
        self.lines
            .iter()
            .map(|l| l.rsplit(": ").next().unwrap_or_default())
            .collect()
    }
    /// The word `object` (`KIND NAME`) was reported with.
    fn word_of(&self, object: &str) -> &str {
        let head = format!("api: server-side apply {object}: ");
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix(&head))
            .unwrap_or_else(|| panic!("no line for {object}: {:?}", self.lines))
    }
}

/// Applies the steps as `up`'s `cni` phase does: its own `apply_steps` in a real run on the first
/// control plane — every object, then the step's wait (CRDs Established).
fn apply(api: &KubeClusterApi, steps: &[ApplyStep]) -> Run {
    let lines = Arc::new(Lines::default());
    let node = ValidNode::new("cp1", Role::ControlPlane, None);
    let mut ctx = NodeCtx::new(
        node,
        None,
        Mode::default(),
        lines.clone(),
        Secrets::default(),
    );
    ctx.phase = "cni".into();
    if let Err(e) = apply_steps(&mut ctx, Some(api), steps) {
        panic!("apply: {e}");
    }
    let lines = lines.0.lock().map(|v| v.clone()).unwrap_or_default();
    let objects: usize = steps.iter().map(|s| s.objects.len()).sum();
    assert_eq!(lines.len(), objects, "one line per object: {lines:?}");
    Run {
        changes: ctx.changes,
        lines,
    }
}

fn get(api: &KubeClusterApi, api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> Value {
    api.get_object(api_version, kind, ns, name)
        .expect("get")
        .unwrap_or_else(|| panic!("{kind} {ns:?}/{name} exists"))
}

fn resource_versions(api: &KubeClusterApi, objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| {
            let v = get(
                api,
                o["apiVersion"].as_str().unwrap_or_default(),
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["namespace"].as_str(),
                o["metadata"]["name"].as_str().unwrap_or_default(),
            );
            v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Real `kubectl apply --server-side --field-manager=clusterctl` of `objects`; returns its output.
/// The objects go as one JSON `v1` `List`: YAML written by serde_yaml would leave strings such as
/// `Off` (an enum value in Calico's FelixConfiguration CRD) unquoted, which kubectl's YAML 1.1 reader
/// takes for booleans.
fn kubectl_apply(kubectl: &Path, kubeconfig: &Path, objects: &[Value]) -> String {
    let file = kubeconfig.with_file_name(format!("{}.json", clusterctl_testbed::unique_name("m")));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    std::fs::write(&file, list.to_string()).expect("manifest");
    let out = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "--server-side", "--field-manager=clusterctl", "-f"])
        .arg(&file)
        .output()
        .expect("kubectl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl apply: {text}");
    text
}

fn sha256_hex(b: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(b))
}

#[test]
fn flannel_upstream_manifest_with_the_rendered_net_conf_is_applied_and_converges() {
    let Some(bins) = require_programs(DEFAULT_VERSION, &["kubectl", "flannel-manifest"]) else {
        return;
    };
    let Some(env) = Envtest::require_own() else {
        return;
    };
    let manifest = std::fs::read(bins.path("flannel-manifest")).expect("kube-flannel.yml");
    let pinned = &clusterctl_render::cni::versions::FLANNEL[0];
    assert_eq!(
        sha256_hex(&manifest),
        pinned.manifest_sha256,
        "the Go module's kube-flannel.yml of {} has the pinned sha256",
        pinned.version
    );
    let a = client(&env);
    let dir = tempfile::tempdir().expect("tempdir");
    let c = cluster(dir.path(), "flannel", "10.244.0.0/16");
    let (input, rendered) = prepared(&c);
    assert_eq!(input.mirror_prefix.as_deref(), Some(MIRROR));
    let upstream = BTreeMap::from([("kube-flannel.yml".to_string(), manifest.clone())]);
    let steps = manifest_steps(&input, &upstream, &rendered).expect("steps");
    assert_eq!(steps.len(), 1);
    let objects = &steps[0].objects;
    let first = apply(&a.api, &steps);
    assert_eq!(first.changes, objects.len(), "{:?}", first.lines);
    assert!(
        first.words().iter().all(|w| *w == "created"),
        "{:?}",
        first.lines
    );

    let cm = get(
        &a.api,
        "v1",
        "ConfigMap",
        Some("kube-flannel"),
        "kube-flannel-cfg",
    );
    let net_conf = String::from_utf8(rendered["flannel-net-conf.json"].clone()).expect("utf8");
    assert_eq!(cm["data"]["net-conf.json"], net_conf.as_str());
    assert!(net_conf.contains("10.244.0.0/16"), "{net_conf}");
    let ds = get(
        &a.api,
        "apps/v1",
        "DaemonSet",
        Some("kube-flannel"),
        "kube-flannel-ds",
    );
    let images = images_of(std::slice::from_ref(&ds));
    assert!(images.len() >= 2, "{images:?}");
    for i in &images {
        assert!(i.starts_with(&format!("{MIRROR}/flannel-io/")), "{i}");
    }
    assert!(
        images
            .iter()
            .any(|i| i.ends_with(&format!("/flannel:{}", pinned.version))),
        "{images:?}"
    );
    // Idempotent, through our client and through real kubectl with the same field manager.
    let before = resource_versions(&a.api, objects);
    let again = apply(&a.api, &steps);
    assert_eq!(again.changes, 0, "a re-apply counts no change");
    assert!(
        again.words().iter().all(|w| *w == "unchanged"),
        "{:?}",
        again.lines
    );
    assert_eq!(
        resource_versions(&a.api, objects),
        before,
        "a re-apply changes nothing"
    );
    // Real kubectl's server-side apply says `serverside-applied` of every object, changed or not.
    let out = kubectl_apply(bins.path("kubectl"), &a.kubeconfig, objects);
    let said: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(said.len(), objects.len(), "{out}");
    assert!(
        said.iter().all(|l| l.ends_with(" serverside-applied")),
        "{out}"
    );
    assert_eq!(
        resource_versions(&a.api, objects),
        before,
        "kubectl's server-side apply of the same objects changes nothing"
    );
    // A changed podSubnet converges: the ConfigMap gets the new net-conf.json.
    let c2 = cluster(dir.path(), "flannel", "10.32.0.0/12");
    let (input2, rendered2) = prepared(&c2);
    let steps2 = manifest_steps(&input2, &upstream, &rendered2).expect("steps");
    let changed = apply(&a.api, &steps2);
    assert_eq!(changed.changes, 1, "{:?}", changed.lines);
    assert_eq!(
        changed.word_of("ConfigMap kube-flannel/kube-flannel-cfg"),
        "configured"
    );
    assert_eq!(
        changed
            .words()
            .iter()
            .filter(|w| **w == "unchanged")
            .count(),
        objects.len() - 1,
        "{:?}",
        changed.lines
    );
    let cm = get(
        &a.api,
        "v1",
        "ConfigMap",
        Some("kube-flannel"),
        "kube-flannel-cfg",
    );
    let conf = cm["data"]["net-conf.json"].as_str().unwrap_or_default();
    assert!(
        conf.contains("10.32.0.0/12") && !conf.contains("10.244."),
        "{conf}"
    );
    let managers: Vec<&str> = cm["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(managers, ["clusterctl"], "one field manager");
}

/// Calico's real files of `release` (`../shared/upstream/calico/<version>/`), by the names `up` gives
/// them; `None` when they are missing outside CI.
fn calico_upstream(release: &CalicoRelease) -> Option<BTreeMap<String, Vec<u8>>> {
    let files = clusterctl_testbed::upstream::calico(release.version, release.crds_file)?;
    Some(BTreeMap::from([
        ("operator-crds.yaml".to_string(), files.crds),
        ("tigera-operator.yaml".to_string(), files.operator),
    ]))
}

/// A two-node Calico cluster file pinning `version`, with the mirror, `pod_subnet` and `cni_extra`
/// (more `cni` fields, e.g. `mtu` and `values`).
fn calico_cluster(dir: &Path, version: &str, pod_subnet: &str, cni_extra: &str) -> ValidCluster {
    let file = dir.join(format!("{}.yaml", clusterctl_testbed::unique_name("c")));
    std::fs::write(
        &file,
        format!(
            "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: cnitest}}\nspec:\n  kubernetesVersion: v1.34.1\n  networking:\n    podSubnet: {pod_subnet}\n    serviceSubnet: 10.96.0.0/16\n    cni: {{plugin: calico, version: {version}{cni_extra}}}\n  registry: {{mirror: \"{MIRROR}\"}}\n  provider: ssh\n  controlPlane: {{endpoint: 10.88.0.11:6443}}\n  ssh: {{user: root}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: 10.88.0.11}}\n    - {{name: w1, role: worker, address: 10.88.0.12}}\n"
        ),
    )
    .expect("cluster file");
    let loaded = clusterctl_spec::load(&file).expect("load");
    clusterctl_spec::validate(&loaded).expect("valid").cluster
}

#[test]
fn calico_upstream_files_are_byte_for_byte_the_pinned_ones() {
    for release in clusterctl_render::cni::versions::CALICO {
        let Some(files) = calico_upstream(release) else {
            return;
        };
        assert_eq!(
            sha256_hex(&files["operator-crds.yaml"]),
            release.crds_sha256,
            "{} {}",
            release.version,
            release.crds_file
        );
        assert_eq!(
            sha256_hex(&files["tigera-operator.yaml"]),
            release.operator_sha256,
            "{} tigera-operator.yaml",
            release.version
        );
    }
}

#[test]
fn calico_real_crds_are_established_first_and_accept_every_object_up_applies() {
    let Some(bins) = require_programs(DEFAULT_VERSION, &["kubectl"]) else {
        return;
    };
    for release in clusterctl_render::cni::versions::CALICO {
        let t = Instant::now();
        if !calico_release_against_its_real_schemas(bins.path("kubectl"), release) {
            return;
        }
        eprintln!(
            "calico {}: real CRDs and operator on a real API server in {:.1}s",
            release.version,
            t.elapsed().as_secs_f64()
        );
    }
}

/// The steps `up` builds for `release` from its real files, applied to a control plane of their own;
/// `false` when a part is missing outside CI.
fn calico_release_against_its_real_schemas(kubectl: &Path, release: &CalicoRelease) -> bool {
    let Some(upstream) = calico_upstream(release) else {
        return false;
    };
    let Some(env) = Envtest::require_own() else {
        return false;
    };
    let a = client(&env);
    let dir = tempfile::tempdir().expect("tempdir");
    // `cni.mtu` and a pass-through value of Calico's own (`values`) are rendered into the Installation.
    let extra = ", mtu: 1410, values: {controlPlaneReplicas: 1}";
    let c = calico_cluster(dir.path(), release.version, "192.168.0.0/16", extra);
    let (input, rendered) = prepared(&c);
    let steps = manifest_steps(&input, &upstream, &rendered).expect("steps");
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0].wait, Wait::CrdsEstablished);
    assert!(
        steps[0].objects.len() > 20,
        "{}: every CRD of the real file",
        release.version
    );
    // Before the CRDs are applied the custom resources have no kind to go to: the server refuses.
    let early = a.api.apply(&steps[2].objects[0]).expect_err("no CRD yet");
    assert!(early.to_string().contains("Installation"), "{early}");
    let count: usize = steps.iter().map(|s| s.objects.len()).sum();
    let first = apply(&a.api, &steps);
    assert_eq!(first.changes, count, "{:?}", first.lines);
    assert!(
        first.words().iter().all(|w| *w == "created"),
        "{:?}",
        first.lines
    );
    // A re-run (the CRDs Established, nothing changed since): every object unchanged, no change.
    let again = apply(&a.api, &steps);
    assert_eq!(again.changes, 0, "{:?}", again.lines);
    assert!(
        again.words().iter().all(|w| *w == "unchanged"),
        "{:?}",
        again.lines
    );
    // The real kubectl takes the same objects (server-side, same field manager) and changes nothing.
    let all: Vec<Value> = steps.iter().flat_map(|s| s.objects.clone()).collect();
    let before = resource_versions(&a.api, &all);
    let out = kubectl_apply(kubectl, &a.kubeconfig, &all);
    assert!(out.contains("serverside-applied"), "{out}");
    assert_eq!(
        resource_versions(&a.api, &all),
        before,
        "kubectl's server-side apply of Calico's objects changes nothing"
    );
    calico_objects_as_stored(&a.api, release, "192.168.0.0/16");
    calico_schema_refusals(&a.api, &steps, &c, dir.path(), release, &upstream);

    // A changed podSubnet: the Installation is configured, nothing else.
    let c2 = calico_cluster(dir.path(), release.version, "10.32.0.0/12", extra);
    let (input2, rendered2) = prepared(&c2);
    let steps2 = manifest_steps(&input2, &upstream, &rendered2).expect("steps");
    let changed = apply(&a.api, &steps2);
    assert_eq!(changed.changes, 1, "{:?}", changed.lines);
    assert_eq!(changed.word_of("Installation default"), "configured");
    calico_objects_as_stored(&a.api, release, "10.32.0.0/12");
    tigera_status_wait(&env, &a.api);
    true
}

/// The Installation, APIServer and operator Deployment as the real API server stores them.
fn calico_objects_as_stored(api: &KubeClusterApi, release: &CalicoRelease, pod_subnet: &str) {
    let inst = get(
        api,
        "operator.tigera.io/v1",
        "Installation",
        None,
        "default",
    );
    let pool = &inst["spec"]["calicoNetwork"]["ipPools"][0];
    assert_eq!(pool["cidr"], pod_subnet);
    assert_eq!(pool["encapsulation"], "VXLANCrossSubnet");
    assert_eq!(pool["natOutgoing"], "Enabled");
    assert_eq!(pool["blockSize"], 26);
    assert_eq!(inst["spec"]["calicoNetwork"]["mtu"], 1410);
    assert_eq!(inst["spec"]["controlPlaneReplicas"], 1);
    assert_eq!(inst["spec"]["registry"], "harbor.example.com/");
    assert_eq!(inst["spec"]["imagePath"], "library/calico");
    get(api, "operator.tigera.io/v1", "APIServer", None, "default");
    let op = get(
        api,
        "apps/v1",
        "Deployment",
        Some("tigera-operator"),
        "tigera-operator",
    );
    assert_eq!(
        images_of(std::slice::from_ref(&op)),
        [format!("{MIRROR}/tigera/operator:{}", release.operator)],
        "{}",
        release.version
    );
}

/// The real schemas are enforced, strictly: a value outside an enum and a field the schema does not
/// declare (a misspelled pass-through value, as a cluster file may carry) are refused, naming the
/// object and the server's reason.
fn calico_schema_refusals(
    api: &KubeClusterApi,
    steps: &[ApplyStep],
    c: &ValidCluster,
    dir: &Path,
    release: &CalicoRelease,
    upstream: &BTreeMap<String, Vec<u8>>,
) {
    let mut bad = steps[2].objects[0].clone();
    bad["spec"]["calicoNetwork"]["ipPools"][0]["encapsulation"] = json!("Bogus");
    let e = api
        .apply(&bad)
        .expect_err("refused by the schema")
        .to_string();
    assert!(e.contains("Installation default"), "{e}");
    assert!(
        e.contains("Unsupported value") && e.contains("Bogus"),
        "{e}"
    );
    let typo = calico_cluster(
        dir,
        release.version,
        &c.spec().networking.pod_subnet.to_string(),
        ", values: {controlPlaneReplica: 1}",
    );
    let (input, rendered) = prepared(&typo);
    let steps = manifest_steps(&input, upstream, &rendered).expect("steps");
    let e = api
        .apply(&steps[2].objects[0])
        .expect_err("an undeclared field is refused")
        .to_string();
    assert!(
        e.contains("Installation default") && e.contains("controlPlaneReplica"),
        "{e}"
    );
}

/// The TigeraStatus wait against the real TigeraStatus CRD: nothing reported yet, then progressing,
/// then available.
fn tigera_status_wait(env: &Envtest, api: &KubeClusterApi) {
    // Right after a CRD is Established the server may still answer its lists with 429 ("storage is
    // (re)initializing"), as wait-ready sees it: it counts as not yet available and is asked again.
    let list = |api: &KubeClusterApi| {
        let start = Instant::now();
        loop {
            match api.list_objects("operator.tigera.io/v1", "TigeraStatus") {
                Ok(l) => return l,
                Err(clusterctl_kubeapi::ApiError::Status { code: 429, .. })
                    if start.elapsed() < Duration::from_secs(60) =>
                {
                    std::thread::sleep(Duration::from_millis(200))
                }
                Err(e) => panic!("list TigeraStatus: {e}"),
            }
        }
    };
    assert_eq!(
        calico_not_available(&list(api)),
        ["tigera-operator has reported no TigeraStatus yet"]
    );
    for name in ["calico", "apiserver"] {
        api.apply(
            &json!({"apiVersion": "operator.tigera.io/v1", "kind": "TigeraStatus",
                       "metadata": {"name": name}, "spec": {}}),
        )
        .expect("status object");
    }
    let set = |name: &str, available: &str, progressing: (&str, &str)| {
        let at = "2026-01-01T00:00:00Z";
        env.merge_patch(
            &format!("/apis/operator.tigera.io/v1/tigerastatuses/{name}/status"),
            &json!({"status": {"conditions": [
                {"type": "Available", "status": available, "lastTransitionTime": at},
                {"type": "Progressing", "status": progressing.0, "message": progressing.1,
                 "lastTransitionTime": at}]}}),
        )
        .expect("status");
    };
    set(
        "calico",
        "False",
        ("True", "DaemonSet calico-node is not yet scheduled"),
    );
    set("apiserver", "True", ("False", ""));
    assert_eq!(
        calico_not_available(&list(api)),
        ["TigeraStatus calico (Progressing: DaemonSet calico-node is not yet scheduled)"]
    );
    set("calico", "True", ("False", ""));
    assert!(calico_not_available(&list(api)).is_empty());
    // A kind the server does not serve lists as empty (no TigeraStatus CRD: not Calico).
    assert!(api
        .list_objects("example.invalid/v1", "Nothing")
        .expect("list")
        .is_empty());
}

#[test]
fn kindnet_template_is_filled_patched_and_applied_and_cni_none_waits_for_the_control_plane() {
    let Some(bins) = require_programs(DEFAULT_VERSION, &["kindnet-manifest", "kubectl"]) else {
        return;
    };
    let Some(env) = Envtest::require_own() else {
        return;
    };
    let a = client(&env);
    let dir = tempfile::tempdir().expect("tempdir");
    let c = cluster(dir.path(), "kindnet", "10.244.0.0/16");
    let (input, _) = prepared(&c);
    assert!(input.endpoint.ends_with(":6443"), "{}", input.endpoint);
    // kind's real default CNI manifest of the kind release clusterctl targets, as its node image
    // build writes it to /kind/manifests/default-cni.yaml (the node images built here lack it).
    let template = std::fs::read_to_string(bins.path("kindnet-manifest")).expect("manifest");
    assert!(template.contains("would you kindly template this file"));
    let upstream_image = template
        .lines()
        .find_map(|l| l.trim().strip_prefix("image: "))
        .expect("the kindnetd image line")
        .to_string();
    let steps = kindnet_steps(&input, &template).expect("steps");
    let kinds: Vec<_> = steps[0]
        .objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ServiceAccount",
            "DaemonSet"
        ]
    );
    let first = apply(&a.api, &steps);
    assert_eq!(first.changes, 4, "{:?}", first.lines);
    let ds = get(
        &a.api,
        "apps/v1",
        "DaemonSet",
        Some("kube-system"),
        "kindnet",
    );
    let c0 = &ds["spec"]["template"]["spec"]["containers"][0];
    let (_, path) = upstream_image
        .split_once('/')
        .expect("a registry in the upstream image");
    assert_eq!(c0["image"], format!("{MIRROR}/{path}"));
    assert_eq!(ds["spec"]["template"]["spec"]["hostNetwork"], json!(true));
    let names: Vec<_> = c0["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        names.last(),
        Some(&"CONTROL_PLANE_ENDPOINT"),
        "patched in last, as kind's JSON patch `env/-` does: {names:?}"
    );
    let env_of = |n: &str| {
        c0["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == n)
            .map(|e| e["value"].clone())
    };
    assert_eq!(env_of("POD_SUBNET"), Some(json!("10.244.0.0/16")));
    assert_eq!(
        env_of("CONTROL_PLANE_ENDPOINT"),
        Some(json!(input.endpoint))
    );
    for (kind, ns, name) in [
        ("ClusterRole", None, "kindnet"),
        ("ClusterRoleBinding", None, "kindnet"),
        ("ServiceAccount", Some("kube-system"), "kindnet"),
    ] {
        let api_version = if kind == "ServiceAccount" {
            "v1"
        } else {
            "rbac.authorization.k8s.io/v1"
        };
        get(&a.api, api_version, kind, ns, name);
    }
    // Idempotent: a re-apply, and the real kubectl's server-side apply with the same field manager.
    let objects = &steps[0].objects;
    let before = resource_versions(&a.api, objects);
    let again = apply(&a.api, &steps);
    assert_eq!(again.changes, 0, "{:?}", again.lines);
    assert!(
        again.words().iter().all(|w| *w == "unchanged"),
        "{:?}",
        again.lines
    );
    let out = kubectl_apply(bins.path("kubectl"), &a.kubeconfig, objects);
    assert!(out.contains("serverside-applied"), "{out}");
    assert_eq!(
        resource_versions(&a.api, objects),
        before,
        "neither a re-apply nor kubectl's changes anything"
    );

    // cni: none — what wait-ready waits for instead of Ready nodes: the control plane's static pods.
    let none = cluster(dir.path(), "none", "10.244.0.0/16");
    assert!(
        for_cluster(&none, None).expect("ok").is_none(),
        "nothing to install"
    );
    let node = "cp1";
    let pods = |api: &KubeClusterApi| api.pods().expect("pods");
    let missing = control_plane_not_ready(&pods(&a.api), &[node]);
    assert_eq!(missing.len(), 4, "{missing:?}");
    assert!(
        missing.iter().all(|m| m.ends_with("(no pod yet)")),
        "{missing:?}"
    );
    env.create(
        "/api/v1/namespaces/kube-system/serviceaccounts",
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
    )
    .ok();
    for comp in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        let name = format!("{comp}-{node}");
        env.create(
            "/api/v1/namespaces/kube-system/pods",
            &json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "labels": {"component": comp, "tier": "control-plane"}},
                    "spec": {"nodeName": node, "automountServiceAccountToken": false,
                             "containers": [{"name": comp, "image": format!("registry.k8s.io/{comp}:v1.34.1")}]}}),
        )
        .expect("pod");
        let ready = if comp == "kube-scheduler" {
            "False"
        } else {
            "True"
        };
        env.merge_patch(
            &format!("/api/v1/namespaces/kube-system/pods/{name}/status"),
            &json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]}}),
        )
        .expect("status");
    }
    assert_eq!(
        control_plane_not_ready(&pods(&a.api), &[node]),
        ["kube-scheduler-cp1 (not Ready)"]
    );
    env.merge_patch(
        "/api/v1/namespaces/kube-system/pods/kube-scheduler-cp1/status",
        &json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .expect("status");
    assert!(control_plane_not_ready(&pods(&a.api), &[node]).is_empty());
}

/// Runs the real `helm` with `args` against the control plane (Helm's own directories in `home`).
fn helm(helm: &Path, home: &Path, args: &[String]) -> String {
    let out = Command::new(helm)
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("helm runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "helm {args:?}: {text}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn cilium_is_installed_with_helm_once_per_chart_and_values() {
    use clusterctl_render::cni::install::{
        helm_release_current, helm_upgrade_args, CILIUM_RELEASE,
    };
    let Some(bins) = require_programs(DEFAULT_VERSION, &["helm", "cilium-chart"]) else {
        return;
    };
    let Some(env) = Envtest::require_own() else {
        return;
    };
    let a = client(&env);
    let dir = tempfile::tempdir().expect("tempdir");
    let chart = bins.path("cilium-chart");
    let chart_sha = sha256_hex(&std::fs::read(chart).expect("chart"));
    let kc = a.kubeconfig.display().to_string();
    let status = |home: &Path| {
        helm(
            bins.path("helm"),
            home,
            &[
                "status".into(),
                CILIUM_RELEASE.into(),
                "--namespace".into(),
                "kube-system".into(),
                "--kubeconfig".into(),
                kc.clone(),
                "-o".into(),
                "json".into(),
            ],
        )
    };
    // What the `cni` phase does on the first control plane, with the values render writes.
    let install = |c: &ValidCluster| -> (String, bool) {
        let (_, rendered) = prepared(c);
        let values = rendered["cilium-values.yaml"].clone();
        let values_sha = sha256_hex(&values);
        let path = dir
            .path()
            .join(format!("{}.yaml", clusterctl_testbed::unique_name("v")));
        std::fs::write(&path, &values).expect("values");
        let current = std::process::Command::new(bins.path("helm"))
            .args([
                "status",
                CILIUM_RELEASE,
                "--namespace",
                "kube-system",
                "--kubeconfig",
                &kc,
                "-o",
                "json",
            ])
            .env("HELM_CACHE_HOME", dir.path().join("cache"))
            .env("HELM_CONFIG_HOME", dir.path().join("config"))
            .env("HELM_DATA_HOME", dir.path().join("data"))
            .output()
            .map(|o| {
                helm_release_current(&String::from_utf8_lossy(&o.stdout), &chart_sha, &values_sha)
            })
            .unwrap_or(false);
        if !current {
            let args = helm_upgrade_args(
                &chart.display().to_string(),
                &path.display().to_string(),
                &kc,
                &chart_sha,
                &values_sha,
            );
            helm(bins.path("helm"), dir.path(), &args);
        }
        (values_sha, !current)
    };
    let c = cluster(dir.path(), "cilium", "10.244.0.0/16");
    let (values_sha, ran) = install(&c);
    assert!(ran, "the first install runs helm");
    let st: Value = serde_json::from_str(&status(dir.path())).expect("status json");
    assert_eq!(st["info"]["status"], "deployed");
    assert_eq!(st["version"], 1);
    assert!(helm_release_current(
        &status(dir.path()),
        &chart_sha,
        &values_sha
    ));
    let ds = get(
        &a.api,
        "apps/v1",
        "DaemonSet",
        Some("kube-system"),
        "cilium",
    );
    let images = images_of(std::slice::from_ref(&ds));
    assert!(!images.is_empty());
    for i in &images {
        assert!(i.starts_with(&format!("{MIRROR}/cilium/cilium:")), "{i}");
    }
    let op = get(
        &a.api,
        "apps/v1",
        "Deployment",
        Some("kube-system"),
        "cilium-operator",
    );
    for i in images_of(std::slice::from_ref(&op)) {
        assert!(i.starts_with(&format!("{MIRROR}/cilium/operator")), "{i}");
    }
    // The same chart and values: nothing runs, no new revision.
    let (_, ran) = install(&c);
    assert!(!ran, "a second up leaves the release alone");
    let st: Value = serde_json::from_str(&status(dir.path())).expect("status json");
    assert_eq!(st["version"], 1);
    // A changed value (the pod MTU) is a new revision that carries it.
    let file = dir.path().join("mtu.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: cnitest}}\nspec:\n  kubernetesVersion: v1.34.1\n  networking: {{podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/16, cni: {{plugin: cilium, mtu: 1400}}}}\n  registry: {{mirror: \"{MIRROR}\"}}\n  provider: ssh\n  controlPlane: {{endpoint: 10.88.0.11:6443}}\n  ssh: {{user: root}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: 10.88.0.11}}\n"
        ),
    )
    .expect("cluster file");
    let c2 = clusterctl_spec::validate(&clusterctl_spec::load(&file).expect("load"))
        .expect("valid")
        .cluster;
    let (sha2, ran) = install(&c2);
    assert!(ran && sha2 != values_sha, "a changed value upgrades");
    let st: Value = serde_json::from_str(&status(dir.path())).expect("status json");
    assert_eq!(st["version"], 2);
    assert_eq!(st["info"]["status"], "deployed");
    let cm = get(
        &a.api,
        "v1",
        "ConfigMap",
        Some("kube-system"),
        "cilium-config",
    );
    assert_eq!(cm["data"]["mtu"], "1400", "the new value rolled out");
}
