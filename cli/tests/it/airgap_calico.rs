//! Calico air-gapped on real nodes (issue 13's "an air-gapped `up` installs each from its bundle
//! without reaching out"): 1 control plane + 1 worker on the real-cluster harness (`real_support`:
//! the upstream kubeadm, kubelet and kubectl v1.34.4, the real API server), with `cni.plugin: calico`
//! (the default pinned release), **no registry mirror** and `airgap.bundle`.
//!
//! Calico's two upstream files are **the real ones** of the pinned release (`../shared/upstream/calico/`,
//! read by `clusterctl_testbed::upstream`; the Go module proxy serves neither projectcalico nor
//! tigera, docs/cni.md). The connected side: a site mirror on loopback serves them, named in
//! `cni.sources` by address only, so that their pinned sha256 is what they are checked against;
//! `clusterctl airgap bundle` (its own `HOME`) takes them from there, the control plane's images from a
//! read-only registry of the test bed's image store, and every image `airgap images` lists from
//! quay.io (the tigera operator and Calico's components) from a loopback registry holding
//! **stand-ins** under those names (the test bed's `pause`).
//!
//! The site: the mirror replaced by a listener counting connections on its port, both registries
//! gone, an empty upstream cache, every upstream registry name at `127.0.0.9` on the nodes. `up
//! --skip-phases wait-ready` (no operator acts on the `Installation`, so the nodes stay NotReady and
//! no TigeraStatus comes) then asserts: `cni/sources` took both files from the bundle; nothing
//! connected to the mirror's address; the `cni` phase applied the CRDs, waited until they were
//! Established and only then applied the operator and the `Installation` and `APIServer` (the order
//! of its API calls); on the real API server the CRDs are Established, the `Installation` carries the
//! podSubnet pool and no registry (there is no mirror), applied by field manager `clusterctl`, the
//! `APIServer` exists, the operator Deployment names the upstream image; every Calico and tigera image
//! was loaded from the bundle on both nodes and is held by their containerd; the kubelet started the
//! operator from the loaded image and nothing was pulled; with the `cni` record forgotten a second
//! `up` runs the phase again, which reports every object `unchanged` and counts no change (`done,
//! nothing to change`) and changes no object (same resourceVersions), contacting nothing. Not
//! run: the tigera operator and Calico (stand-in images: the kubelet starts the operator's container
//! from the loaded image, which has no `operator` program).

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Instant;

use clusterctl_spec::cni_versions::CalicoRelease;
use clusterctl_testbed::aptrepo::FileServer;

use crate::airgap_support::{
    airgap_images, bundle_with_stand_ins, dead_address, forget_cni_record, loaded_from_the_bundle,
    started_without_pulling, upstreams_unresolvable,
};
use crate::real_support::{self, FileOptions, Kube, RealCluster};

/// Some of the CRDs `up` applies first (the real file holds every Calico CRD).
const CRDS: [&str; 3] = [
    "installations.operator.tigera.io",
    "apiservers.operator.tigera.io",
    "tigerastatuses.operator.tigera.io",
];

/// Calico's files on a site mirror on loopback, and the `networking` lines naming them.
struct CalicoSite {
    server: FileServer,
    spec: String,
    _dir: tempfile::TempDir,
}

/// Serves the real files of Calico `release` (`../shared/upstream/calico/`) on loopback, named in
/// `cni.sources` by address only: `up` and `airgap bundle` check them against the pinned sha256.
/// `None` when the files are missing outside CI.
fn calico_site(release: &CalicoRelease) -> Option<CalicoSite> {
    let real = clusterctl_testbed::upstream::calico(release.version, release.crds_file)?;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = FileServer::start("127.0.0.1", dir.path()).expect("file server");
    let mut spec = "  networking:\n    podSubnet: 10.244.0.0/16\n    cni:\n      plugin: calico\n      sources:\n".to_string();
    for (name, served, bytes) in [
        ("operator-crds.yaml", release.crds_file, &real.crds),
        (
            "tigera-operator.yaml",
            "tigera-operator.yaml",
            &real.operator,
        ),
    ] {
        std::fs::write(dir.path().join(served), bytes).expect("file");
        spec.push_str(&format!(
            "        - {{name: {name}, url: \"{}/{served}\"}}\n",
            server.url()
        ));
    }
    Some(CalicoSite {
        server,
        spec,
        _dir: dir,
    })
}

/// `metadata.resourceVersion` of each of `objects` (`kubectl get` arguments).
fn resource_versions(c: &RealCluster, objects: &str) -> String {
    c.kubectl(&format!(
        "get {objects} -o jsonpath='{{range .items[*]}}{{.kind}}/{{.metadata.name}}={{.metadata.resourceVersion}} {{end}}'"
    ))
}

#[test]
fn calico_from_the_bundle_is_applied_by_up_without_reaching_out() {
    let Some(env) = real_support::available() else {
        return;
    };
    let pinned = &clusterctl_spec::cni_versions::CALICO[0];
    let operator_image = format!("quay.io/tigera/operator:{}", pinned.operator);
    let t = Instant::now();
    let Some(site) = calico_site(pinned) else {
        return;
    };
    let c = real_support::start(
        "agca",
        1,
        1,
        FileOptions {
            extra_spec: site.spec.clone(),
            ..Default::default()
        },
        &env,
    );
    // No registry mirror: the images come from the bundle into each node's containerd.
    let bundle = c.air_gapped_file("");

    // The connected side: every quay.io image of the plan (tigera's and Calico's) is a stand-in.
    let listed = airgap_images(&c.cc, &c.file);
    let calico: BTreeSet<&str> = listed
        .iter()
        .filter(|i| i.source.starts_with("quay.io/"))
        .map(|i| i.source.as_str())
        .collect();
    assert!(
        calico.contains(operator_image.as_str())
            && calico.iter().any(|i| i.starts_with("quay.io/calico/node:")),
        "the operator's and Calico's images in `airgap images`: {calico:?}"
    );
    assert!(
        listed
            .iter()
            .filter(|i| calico.contains(i.source.as_str()))
            .all(|i| i.pull == i.source),
        "no mirror: pulled by their upstream names"
    );
    let tb = Instant::now();
    bundle_with_stand_ins(&c.file, &bundle, &env.1, &listed, |i| {
        i.source.starts_with("quay.io/")
    });
    eprintln!(
        "[real] bundle written in {:.1}s",
        tb.elapsed().as_secs_f64()
    );
    let fetched = site.server.requests();
    for f in [pinned.crds_file, "tigera-operator.yaml"] {
        assert!(
            fetched.iter().any(|p| *p == format!("/{f}")),
            "the bundle took {f} from cni.sources: {fetched:?}"
        );
    }

    // The site: the mirror's address answers nobody, the upstream registries lead nowhere.
    let url = site.server.url();
    drop(site);
    let dead = dead_address(&url);
    upstreams_unresolvable(&c.nodes.nodes);

    let tu = Instant::now();
    // `-v`: the `cni` phase's API queries (the Established wait) are shown too.
    let up = c.up(&["-v", "--skip-phases", "wait-ready"]);
    let out = up.all();
    assert!(out.contains("converged"), "{out}");
    eprintln!(
        "[real] air-gapped calico up converged in {:.1}s",
        tu.elapsed().as_secs_f64()
    );
    for f in ["operator-crds.yaml", "tigera-operator.yaml"] {
        assert!(
            out.contains(&format!("cni/sources: {f} from the air-gap bundle")),
            "{f}:\n{out}"
        );
    }
    assert_eq!(
        dead.hits.load(Ordering::SeqCst),
        0,
        "the air-gapped up connected to the site mirror's address"
    );

    // The order of the `cni` phase's API calls: the CRDs, the Established wait, then the operator and
    // the custom resources.
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" cni: ")).collect();
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no cni line with {needle:?}:\n{out}"))
    };
    let crds_applied = CRDS
        .iter()
        .map(|n| at(&format!("server-side apply CustomResourceDefinition {n}")))
        .max()
        .expect("CRDs");
    let wait = "check: api: get customresourcedefinitions (Established)";
    let first_wait = at(wait);
    let last_wait = lines.iter().rposition(|l| l.contains(wait)).expect("wait");
    let operator = at("server-side apply Deployment tigera-operator/tigera-operator");
    let installation = at("server-side apply Installation default");
    assert!(
        crds_applied < first_wait && last_wait < operator && operator < installation,
        "CRDs applied ({crds_applied}) < Established wait ({first_wait}..{last_wait}) < operator ({operator}) < Installation ({installation}):\n{}",
        lines.join("\n")
    );

    // What the real API server holds.
    for crd in CRDS {
        let cond = c.kubectl(&format!(
            "get crd {crd} -o jsonpath='{{.status.conditions[?(@.type==\"Established\")].status}}'"
        ));
        assert_eq!(cond, "True", "{crd} Established");
    }
    let inst: serde_json::Value =
        serde_json::from_str(&c.kubectl("get installation default -o json --show-managed-fields"))
            .expect("json");
    let pool = &inst["spec"]["calicoNetwork"]["ipPools"][0];
    assert_eq!(pool["cidr"], "10.244.0.0/16", "the podSubnet pool");
    assert!(
        inst["spec"].get("registry").is_none(),
        "no mirror, no registry: {}",
        inst["spec"]
    );
    let managers: BTreeSet<&str> = inst["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(managers, BTreeSet::from(["clusterctl"]), "field manager");
    c.kubectl("get apiserver default -o name");
    let op = c.kubectl(
        "-n tigera-operator get deploy tigera-operator -o jsonpath='{.spec.template.spec.containers[*].image}'",
    );
    assert_eq!(op, operator_image, "the operator's upstream image");

    // The images: loaded from the bundle on both nodes, the operator started from there.
    loaded_from_the_bundle(&c, &out, &calico);
    started_without_pulling(&c, "tigera-operator", &[(&operator_image, 1)]);

    // A second `up`, with the `cni` phase's record forgotten on the node so that the phase runs
    // again: every object as it was, still nothing contacted.
    let objects = "crd/installations.operator.tigera.io installation/default apiserver/default -n tigera-operator deploy/tigera-operator";
    let before = resource_versions(&c, objects);
    let cp = c.node_names()[0].clone();
    forget_cni_record(&c, &cp);
    let second = c.up(&["--skip-phases", "wait-ready"]).all();
    assert!(
        second.contains(&format!("[{cp}] cni: done, nothing to change")),
        "the rerun counts no change:\n{second}"
    );
    // Each object is reported, as unchanged.
    let applied: Vec<&str> = second
        .lines()
        .filter(|l| l.contains(&format!("[{cp}] cni: api: server-side apply ")))
        .collect();
    assert!(
        applied.len() > 30,
        "every object of the real files: {second}"
    );
    assert!(
        applied.iter().all(|l| l.ends_with(": unchanged")),
        "{}",
        applied.join("\n")
    );
    assert_eq!(resource_versions(&c, objects), before, "no object changed");
    assert_eq!(dead.hits.load(Ordering::SeqCst), 0);
    eprintln!(
        "[real] air-gapped calico test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
