//! Cilium air-gapped on real nodes (issue 13's "an air-gapped `up` installs each from its bundle
//! without reaching out"): 1 control plane + 1 worker on the real-cluster harness (`real_support`:
//! the upstream kubeadm, kubelet and kubectl v1.34.4, the real API server), with `cni.plugin: cilium`
//! v1.20.2 (`kubeProxyReplacement: true`, `kubeProxy: disabled`), **no registry mirror** and
//! `airgap.bundle`.
//!
//! The connected side: `clusterctl airgap bundle` (its own `HOME`) downloads the chart the test bed's
//! real helm packaged from cilium's Go module and that helm as a release archive from the site mirror
//! on loopback named in `cni.sources` (`real_cilium::cilium_site`), the control plane's images from a
//! read-only registry serving the test bed's image store, and the images `airgap images` lists for
//! Cilium (`quay.io/cilium/cilium`, `quay.io/cilium/operator-generic`) from a loopback registry into
//! which the test pushed **stand-ins** under those names: the test bed's `pause` image copied by
//! skopeo (Cilium's images cannot be built here, docs/cni.md).
//!
//! The site: the site mirror is stopped and a listener counting connections takes its port (the file
//! keeps the same `cni.sources` addresses), both source registries are gone, `up`'s upstream cache is
//! empty, and on the nodes every upstream registry name resolves to `127.0.0.9`. `up --skip-phases
//! wait-ready` (the stand-ins cannot run Cilium, so the nodes stay NotReady) then asserts:
//! `cni/sources` took both files from the bundle; nothing connected to the mirror's address; `helm
//! status` on the control plane: deployed, revision 1, chart 1.20.2, the rendered values (upstream
//! image repositories, as there is no mirror), the chart's digest in the description; every image
//! Cilium's DaemonSet and Deployment name (containers and init containers) is one `airgap images`
//! lists, was loaded by `airgap/images` from the bundle on both nodes and is held by each node's
//! containerd; the kubelet started Cilium's containers from those images ("already present on
//! machine") and nothing was pulled in the cluster; a second `up` makes no new revision and contacts
//! nothing. Not run: Cilium's dataplane (the stand-ins' containers exit at once).

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::airgap_support::{
    airgap_images, bundle_with_stand_ins, dead_address, forget_cni_record, loaded_from_the_bundle,
    started_without_pulling, upstreams_unresolvable, Listed,
};
use crate::real_cilium::{check_release, cilium_site, helm_status};
use crate::real_support::{self, FileOptions, Kube};

#[test]
fn cilium_from_the_bundle_is_installed_by_up_without_reaching_out() {
    let Some(env) = real_support::available() else {
        return;
    };
    let Some(bins) = clusterctl_testbed::k8sbin::require_programs(
        real_support::VERSION,
        &["helm", "cilium-chart"],
    ) else {
        return;
    };
    let t = Instant::now();
    let site = cilium_site(&bins);
    let c = real_support::start(
        "agci",
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

    // The connected side: what the plan pulls, Cilium's under their upstream names.
    let listed = airgap_images(&c.cc, &c.file);
    let cilium: Vec<&Listed> = listed
        .iter()
        .filter(|i| i.source.starts_with("quay.io/cilium/"))
        .collect();
    let mut names: Vec<&str> = cilium.iter().map(|i| i.source.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "quay.io/cilium/cilium:v1.20.2",
            "quay.io/cilium/operator-generic:v1.20.2"
        ],
        "Cilium's images in `airgap images`"
    );
    assert!(
        cilium.iter().all(|i| i.pull == i.source),
        "no mirror: pulled by their upstream names: {cilium:?}"
    );
    let tb = Instant::now();
    bundle_with_stand_ins(&c.file, &bundle, &env.1, &listed, |i| {
        i.source.starts_with("quay.io/cilium/")
    });
    eprintln!(
        "[real] bundle written in {:.1}s",
        tb.elapsed().as_secs_f64()
    );
    let fetched = site.server.requests();
    for f in ["/cilium.tgz", "/helm-linux-amd64.tar.gz"] {
        assert!(
            fetched.iter().any(|p| p == f),
            "the bundle took {f} from cni.sources: {fetched:?}"
        );
    }

    // The site: the mirror's address answers nobody, the upstream registries lead nowhere.
    let url = site.server.url();
    let chart_sha = site.chart_sha.clone();
    drop(site);
    let dead = dead_address(&url);
    upstreams_unresolvable(&c.nodes.nodes);

    let tu = Instant::now();
    let up = c.up(&["--skip-phases", "wait-ready"]);
    let out = up.all();
    assert!(out.contains("converged"), "{out}");
    eprintln!(
        "[real] air-gapped cilium up converged in {:.1}s",
        tu.elapsed().as_secs_f64()
    );
    for f in ["cilium.tgz", "helm-linux-amd64.tar.gz"] {
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

    // The release, from the bundle's chart, with the rendered values (upstream image names).
    let cp = c.node_names()[0].clone();
    check_release(&helm_status(&c, &cp), &chart_sha, "quay.io");

    // Every image Cilium's objects name: listed, loaded from the bundle on each node, held there.
    let named = c.kubectl(
        "-n kube-system get ds/cilium deploy/cilium-operator -o jsonpath='{range .items[*]}{.spec.template.spec.initContainers[*].image} {.spec.template.spec.containers[*].image} {end}'",
    );
    let named: BTreeSet<&str> = named.split_whitespace().collect();
    let want: BTreeSet<&str> = cilium.iter().map(|i| i.source.as_str()).collect();
    assert_eq!(named, want, "the images Cilium's objects name");
    loaded_from_the_bundle(&c, &out, &want);
    // The kubelet started Cilium's containers (the agent on both nodes, the operator) from the images
    // on the node; nothing was pulled in the cluster.
    started_without_pulling(
        &c,
        "kube-system",
        &[
            ("quay.io/cilium/cilium:v1.20.2", 2),
            ("quay.io/cilium/operator-generic:v1.20.2", 1),
        ],
    );
    let kube_proxy = c.kubectl("-n kube-system get ds -o name");
    assert!(
        !kube_proxy.contains("kube-proxy"),
        "kube-proxy skipped (kubeProxyReplacement): {kube_proxy}"
    );

    // A second `up`, with the `cni` phase's record forgotten on the node so that the phase runs again
    // and must recognise the current release itself (same chart and values digests): no new
    // revision, the files from the cache, still nothing contacted.
    forget_cni_record(&c, &cp);
    let second = c.up(&["--skip-phases", "wait-ready"]).all();
    assert!(
        second.contains(&format!("[{cp}] cni: done, nothing to change")),
        "{second}"
    );
    assert_eq!(helm_status(&c, &cp)["version"], 1, "no new revision");
    assert_eq!(dead.hits.load(Ordering::SeqCst), 0);
    eprintln!(
        "[real] air-gapped cilium test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
