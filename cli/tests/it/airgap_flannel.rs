//! flannel air-gapped for real (issue 13's "an air-gapped `up` installs each from its bundle without
//! reaching out"): 1 control plane + 1 worker on the real-cluster harness (`real_support`), with
//! `cni.plugin: flannel`, **no registry mirror** and `airgap.bundle`.
//!
//! The connected side: `clusterctl airgap bundle` (its own `HOME`, so its upstream cache is not the
//! site's) downloads the pinned `kube-flannel.yml` from the site mirror on loopback named in
//! `cni.sources` (`real_flannel::flannel_site`) and every image of the plan — the control plane's, the
//! flannel and flannel-cni-plugin images `scripts/k8s/images.sh` built and the preloaded workload — from
//! a read-only registry serving the test bed's image store (`--source-registry-override`).
//!
//! The site: the manifest server is stopped and a listener that counts connections takes its port (the
//! file keeps the same `cni.sources` address), the source registry is gone, `up`'s upstream cache is
//! empty, and on the nodes every upstream registry name resolves to `127.0.0.9` (a pull would fail).
//! Asserts: `up` converges; `cni/sources` took `kube-flannel.yml` from the bundle; nothing connected to
//! the manifest's address; each node's containerd holds flannel's two images, imported from the bundle;
//! then flannel at work as in `real_flannel` (`check_flannel`: the DaemonSet with the upstream image
//! names, one Ready pod per node, the rendered `net-conf.json`, leases in the podCIDRs, `flannel.1`,
//! flanneld's masquerade chain, pod-to-pod across nodes through `flannel.1`, the Service and its name,
//! packets counted on both VXLAN devices); no image was pulled (no `Pulling` event in the cluster).

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::airgap_support::{bundle_on_the_connected_side, dead_address, upstreams_unresolvable};
use crate::real_flannel::{check_flannel, flannel_site};
use crate::real_support::{self, FileOptions, Kube, RealCluster};
use clusterctl_testbed::registry::Registry;

/// The workload image, preloaded from the bundle (`images.preload`).
const WORKLOAD: &str = "clusterctl.test/busybox:1";

/// The real cluster with the preloaded workload image instead of the mirror's (there is no mirror).
struct Offline<'a>(&'a RealCluster);

impl Kube for Offline<'_> {
    fn kubectl(&self, args: &str) -> String {
        self.0.kubectl(args)
    }
    fn apply(&self, yaml: &str) {
        self.0.apply(yaml)
    }
    fn node_sh(&self, node: &str, script: &str) -> String {
        Kube::node_sh(self.0, node, script)
    }
    fn node_names(&self) -> Vec<String> {
        Kube::node_names(self.0)
    }
    fn workload_image(&self) -> String {
        WORKLOAD.to_string()
    }
    fn vip(&self) -> Option<String> {
        None
    }
}

#[test]
fn flannel_from_the_bundle_carries_pod_traffic_without_reaching_out() {
    let Some(env) = real_support::available() else {
        return;
    };
    let Some(bins) =
        clusterctl_testbed::k8sbin::require_programs(real_support::VERSION, &["flannel-manifest"])
    else {
        return;
    };
    let t = Instant::now();
    let site = flannel_site(&bins);
    let c = real_support::start(
        "agfl",
        1,
        1,
        FileOptions {
            extra_spec: site.spec.clone(),
            ..Default::default()
        },
        &env,
    );
    // No registry mirror: the images come from the bundle into each node's containerd.
    let bundle = c.air_gapped_file(&format!("  images:\n    preload: [{WORKLOAD}]\n"));

    // The connected side writes the bundle.
    let connected = tempfile::tempdir().expect("tempdir");
    let source = Registry::serve_readonly(&env.1.storage).expect("source registry");
    let tb = Instant::now();
    let overrides: Vec<(String, String)> = ["registry.k8s.io", "ghcr.io", "clusterctl.test"]
        .iter()
        .map(|h| (h.to_string(), source.addr().to_string()))
        .collect();
    bundle_on_the_connected_side(&c.file, &bundle, connected.path(), &overrides);
    eprintln!(
        "[real] bundle written in {:.1}s",
        tb.elapsed().as_secs_f64()
    );
    assert!(
        site.server
            .requests()
            .iter()
            .any(|p| p == "/kube-flannel.yml"),
        "the bundle took kube-flannel.yml from cni.sources: {:?}",
        site.server.requests()
    );
    drop(source);

    // The site: the manifest's address answers nobody, the upstream registries lead nowhere.
    let url = site.server.url();
    drop(site);
    let dead = dead_address(&url);
    upstreams_unresolvable(&c.nodes.nodes);

    let tu = Instant::now();
    let up = c.up(&[]);
    let out = up.all();
    assert!(out.contains("converged"), "{out}");
    eprintln!(
        "[real] air-gapped flannel up converged in {:.1}s",
        tu.elapsed().as_secs_f64()
    );
    assert!(
        out.contains("cni/sources: kube-flannel.yml from the air-gap bundle"),
        "{out}"
    );
    assert_eq!(
        dead.hits.load(Ordering::SeqCst),
        0,
        "the air-gapped up connected to the manifest's address"
    );
    // flannel's images were imported from the bundle into every node's containerd.
    let o = Offline(&c);
    for n in o.node_names() {
        for image in ["flannel:v0.28.4", "flannel-cni-plugin:v1.9.1-flannel1"] {
            assert!(
                out.lines().any(
                    |l| l.contains(&format!("[{n}] airgap/images: load ")) && l.contains(image)
                ),
                "{n}: {image} loaded from the bundle:\n{out}"
            );
        }
        let held = o.node_sh(&n, "ctr -n k8s.io images ls -q");
        for image in [
            "ghcr.io/flannel-io/flannel:v0.28.4",
            "ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel1",
        ] {
            assert!(held.lines().any(|l| l == image), "{n}: {image} in\n{held}");
        }
    }
    check_flannel(&o, "ghcr.io");
    // Every container started from an image already on its node: nothing was pulled.
    let pulling = c.kubectl("get events -A --field-selector reason=Pulling -o name");
    assert!(pulling.is_empty(), "images pulled: {pulling}");
    assert_eq!(dead.hits.load(Ordering::SeqCst), 0);
    eprintln!(
        "[real] air-gapped flannel test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
