//! Shared set-up of the `airgap_up*` tests: node containers made air-gapped (stand-ins installed, no
//! default route), the cluster file validated, every image of its plan built here and served by a
//! loopback registry under its upstream path, the bundle written from it, each role's share of the
//! bundle, and the `up` arguments every such test uses; for the air-gapped tests on real nodes
//! (`airgap_flannel`, `airgap_cilium`), the connected side's `airgap bundle`, the upstream registry
//! names made unresolvable on the nodes and the stopped site mirror's address watched.
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

/// The registries the images of the real-cluster plans come from (and flannel's manifest host): on an
/// air-gapped site's nodes these resolve to `127.0.0.9` ([`upstreams_unresolvable`]), so a pull would
/// fail.
pub(crate) const UPSTREAM_HOSTS: &[&str] = &[
    "registry.k8s.io",
    "ghcr.io",
    "clusterctl.test",
    "docker.io",
    "registry-1.docker.io",
    "quay.io",
    "raw.githubusercontent.com",
];

/// Points every name of [`UPSTREAM_HOSTS`] at `127.0.0.9` in each node's `/etc/hosts`.
pub(crate) fn upstreams_unresolvable(nodes: &[TestNode]) {
    for n in nodes {
        n.sh(&format!(
            "echo '127.0.0.9 {}' >> /etc/hosts",
            UPSTREAM_HOSTS.join(" ")
        ))
        .expect("/etc/hosts");
    }
}

/// `clusterctl airgap bundle` as the connected machine runs it: its own `HOME` (`home`, so its
/// upstream cache is not the site's), the images of each registry `FROM` fetched from `TO`
/// (`overrides`, `--source-registry-override`) and recorded under their upstream names, the bundle
/// written to `bundle`. Panics when it fails (its output shown).
pub(crate) fn bundle_on_the_connected_side(
    file: &Path,
    bundle: &Path,
    home: &Path,
    overrides: &[(String, String)],
) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_clusterctl"));
    cmd.args(["airgap", "bundle", "--no-self", "-f"])
        .arg(file)
        .arg("--bundle-file")
        .arg(bundle);
    for (from, to) in overrides {
        cmd.args(["--source-registry-override", &format!("{from}={to}")]);
    }
    let out = cmd
        .current_dir(home)
        .env("HOME", home)
        .env_remove("XDG_CACHE_HOME")
        .output()
        .expect("airgap bundle");
    assert!(
        out.status.success(),
        "airgap bundle:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The site's view of a stopped site mirror: a listener counting connections on the address of
/// `url` (`http://HOST:PORT`), taken as soon as the stopped server has released it (within 10 s).
pub(crate) fn dead_address(url: &str) -> crate::airgap_cni::Listener {
    let addr = url.trim_start_matches("http://").to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpListener::bind(&addr).is_err() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    crate::airgap_cni::Listener::start_on(&addr, None)
}
