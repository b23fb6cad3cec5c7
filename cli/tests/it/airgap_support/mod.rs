//! Shared set-up of the `airgap_up*` tests: node containers made air-gapped (stand-ins installed, no
//! default route), the cluster file validated, every image of its plan built here and served by a
//! loopback registry under its upstream path, the bundle written from it, each role's share of the
//! bundle, and the `up` arguments every such test uses.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use clusterctl_airgap::bundle::BundleSummary;
use clusterctl_airgap::plan::{list_images, node_images, select};
use clusterctl_airgap::run::{bundle_cluster, BundleOptions};
use clusterctl_spec::ValidCluster;
use clusterctl_testbed::cli::{install_standins, serve_upstream_images};
use clusterctl_testbed::docker::TestNode;
use clusterctl_testbed::registry::Registry;

/// Installs the kubeadm/kubelet/kubectl stand-ins on each node and removes its default route, so
/// it reaches nothing but the test network (checked). Panics on failure (tests only).
pub(crate) fn air_gapped(nodes: &[TestNode]) {
    for n in nodes {
        install_standins(n).expect("stand-ins");
        n.sh("ip route del default 2>/dev/null || true")
            .expect("route");
        assert_eq!(
            n.sh("ip -4 route show default").expect("routes"),
            "",
            "{} still has a default route",
            n.name
        );
        assert!(
            n.exec("ip route get 1.1.1.1", b"").expect("exec").0 != 0,
            "{} still has a route out",
            n.name
        );
    }
}

/// Asserts that no air-gap phase has written on any of `nodes` (no `/var/lib/clusterctl/airgap`),
/// as after a bundle or cluster file refused by `airgap/verify`.
pub(crate) fn untouched(nodes: &[TestNode]) {
    for n in nodes {
        assert_eq!(
            n.sh("test -e /var/lib/clusterctl/airgap && echo yes || echo no")
                .expect("exec"),
            "no",
            "{} touched",
            n.name
        );
    }
}

/// Writes `text` to `file`, then loads and validates it. Panics when invalid.
pub(crate) fn valid_file(file: &Path, text: &str) -> ValidCluster {
    std::fs::write(file, text).expect("cluster file");
    let loaded = clusterctl_spec::load(file).expect("load");
    clusterctl_spec::validate(&loaded)
        .map_err(|d| d.to_string())
        .expect("valid")
        .cluster
}

/// Serves every image of `cluster`'s plan (`airgap images`) from `reg`, built from random bytes
/// seeded by `seed`, and writes the bundle to `out` (relative paths against `base`) with the upstream
/// registries overridden to `reg`. Returns the bundle's summary.
pub(crate) fn bundle_served(
    cluster: &ValidCluster,
    reg: &Registry,
    seed: u64,
    base: &Path,
    out: &Path,
) -> BundleSummary {
    let sources: Vec<String> = list_images(cluster).into_iter().map(|i| i.source).collect();
    assert!(sources.len() >= 6, "{sources:?}");
    let upstreams = serve_upstream_images(reg, &sources, seed).expect("images served");
    let mut opts = BundleOptions {
        out: out.to_path_buf(),
        base_dir: base.to_path_buf(),
        ..Default::default()
    };
    opts.pull.registry_overrides = upstreams
        .iter()
        .map(|u| (u.clone(), reg.addr().to_string()))
        .collect();
    bundle_cluster(cluster, &opts).expect("bundle").0
}

/// Every image of the bundle: mirror reference → manifest digest.
pub(crate) fn bundle_images(summary: &BundleSummary) -> BTreeMap<String, String> {
    summary
        .manifest
        .images
        .iter()
        .map(|i| (i.mirror.clone(), i.digest.to_string()))
        .collect()
}

/// What a control plane (`control_plane`) or a worker needs of the bundle at the file's version, as
/// mirror reference → manifest digest.
pub(crate) fn role_images(
    cluster: &ValidCluster,
    summary: &BundleSummary,
    control_plane: bool,
) -> BTreeMap<String, String> {
    let sources: Vec<String> = node_images(cluster, control_plane)
        .into_iter()
        .map(|i| i.source)
        .collect();
    select(&summary.manifest, &sources)
        .expect("bundle carries the current version")
        .into_iter()
        .map(|i| (i.mirror, i.digest.to_string()))
        .collect()
}

/// `up -f FILE --known-hosts KH` with the flags the stand-ins need (the nodes' clocks and
/// br_netfilter are the host's; labels and readiness go through an API the stand-ins do not serve),
/// then `extra`.
pub(crate) fn up_args(file: &Path, known_hosts: &Path, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "up",
        "-f",
        &file.display().to_string(),
        "--known-hosts",
        &known_hosts.display().to_string(),
        "--ready-timeout",
        "30",
        "--ignore-preflight",
        "time-sync,module/br_netfilter,node-environment,resolv-conf",
        "--skip-phases",
        "labels,wait-ready",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}
