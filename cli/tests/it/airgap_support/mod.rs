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
    bundle_served_with(cluster, reg, seed, base, out, Vec::new())
}

/// [`bundle_served`] carrying the CNI agents `agents` (`(arch, file)`, as `airgap bundle --agent`).
pub(crate) fn bundle_served_with(
    cluster: &ValidCluster,
    reg: &Registry,
    seed: u64,
    base: &Path,
    out: &Path,
    agents: Vec<(String, std::path::PathBuf)>,
) -> BundleSummary {
    let sources: Vec<String> = list_images(cluster).into_iter().map(|i| i.source).collect();
    assert!(sources.len() >= 6, "{sources:?}");
    let upstreams = serve_upstream_images(reg, &sources, seed).expect("images served");
    let mut opts = BundleOptions {
        out: out.to_path_buf(),
        base_dir: base.to_path_buf(),
        agents,
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

/// One entry of `clusterctl airgap images -o json`.
#[derive(serde::Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Listed {
    /// What uses it.
    pub(crate) component: String,
    /// The upstream reference.
    pub(crate) source: String,
    /// The reference the nodes pull.
    pub(crate) pull: String,
}

/// `clusterctl airgap images -f FILE -o json` (`cc`), as the connected side lists what it must carry.
pub(crate) fn airgap_images(cc: &clusterctl_testbed::cli::Clusterctl, file: &Path) -> Vec<Listed> {
    let f = file.display().to_string();
    let r = cc
        .run(&["airgap", "images", "-f", &f, "-o", "json"])
        .expect("airgap images");
    assert_eq!(r.code, 0, "airgap images: {}", r.all());
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
}

/// `host/path:tag` → (`host`, `path:tag`).
pub(crate) fn split_host(reference: &str) -> (&str, &str) {
    reference
        .split_once('/')
        .unwrap_or_else(|| panic!("{reference}: no registry host"))
}

/// `skopeo copy` of `from` to `to` (both `host:port/path:tag` on loopback registries, plain HTTP).
fn copy_image(from: &str, to: &str) {
    let out = std::process::Command::new("skopeo")
        .args([
            "copy",
            "--quiet",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
            &format!("docker://{from}"),
            &format!("docker://{to}"),
        ])
        .output()
        .expect("skopeo");
    assert!(
        out.status.success(),
        "skopeo copy {from} {to}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The connected side of a real cluster whose CNI images cannot be built here: every image of
/// `listed` (`airgap images`) for which `stand_in` holds is served under its upstream path by a
/// loopback registry holding a **stand-in** (the image store's `pause`, copied by skopeo), every other
/// one by a read-only registry of the image store (`store`); [`bundle_on_the_connected_side`] then
/// writes `file`'s bundle to `bundle` from them (each host the plan's images come from overridden to
/// the registry serving it; a host cannot be split between the two). Both registries are stopped on
/// return.
pub(crate) fn bundle_with_stand_ins(
    file: &Path,
    bundle: &Path,
    store: &clusterctl_testbed::k8snode::ImageStore,
    listed: &[Listed],
    stand_in: impl Fn(&Listed) -> bool,
) {
    let source = Registry::serve_readonly(&store.storage).expect("source registry");
    let stand_ins = Registry::start().expect("stand-in registry");
    let pause = listed
        .iter()
        .find(|i| i.component == "pause")
        .unwrap_or_else(|| panic!("no pause image in {listed:?}"));
    let (_, pause_path) = split_host(&pause.source);
    let mut hosts: BTreeMap<String, String> = BTreeMap::new();
    for i in listed {
        let (host, path) = split_host(&i.source);
        let to = if stand_in(i) {
            copy_image(
                &format!("{}/{pause_path}", source.addr()),
                &format!("{}/{path}", stand_ins.addr()),
            );
            stand_ins.addr()
        } else {
            source.addr()
        };
        let was = hosts.insert(host.to_string(), to.to_string());
        assert!(
            was.is_none_or(|w| w == to),
            "{host}: images both stand-in and from the store"
        );
    }
    let overrides: Vec<(String, String)> = hosts.into_iter().collect();
    let connected = tempfile::tempdir().expect("tempdir");
    bundle_on_the_connected_side(file, bundle, connected.path(), &overrides);
}

/// Asserts that `airgap/images` loaded each of `images` from the bundle on every node of `c` (a
/// `[node] airgap/images: load …` line of `up`'s output `out` naming it) and that each node's
/// containerd holds it under that name.
pub(crate) fn loaded_from_the_bundle(
    c: &crate::real_support::RealCluster,
    out: &str,
    images: &std::collections::BTreeSet<&str>,
) {
    use crate::real_support::Kube;
    for n in c.node_names() {
        let held = c.node_sh(&n, "ctr -n k8s.io images ls -q");
        for image in images {
            assert!(
                out.lines().any(
                    |l| l.contains(&format!("[{n}] airgap/images: load ")) && l.contains(image)
                ),
                "{n}: {image} loaded from the bundle:\n{out}"
            );
            assert!(held.lines().any(|l| l == *image), "{n}: {image} in\n{held}");
        }
    }
}

/// Waits (60 s) until the kubelet reports, in namespace `ns`, each image of `want` "already present
/// on machine" on at least its number of nodes — it started containers from the image loaded on the
/// node — then asserts that no image was pulled anywhere in the cluster (no `Pulling` event).
pub(crate) fn started_without_pulling(
    c: &crate::real_support::RealCluster,
    ns: &str,
    want: &[(&str, usize)],
) {
    let present = |image: &str| format!("Container image \"{image}\" already present on machine");
    crate::real_support::wait_for(
        "containers started from the loaded images",
        std::time::Duration::from_secs(60),
        || {
            let events = c.kubectl(&format!(
                "-n {ns} get events --field-selector reason=Pulled -o jsonpath='{{range .items[*]}}{{.source.host}} {{.message}}{{\"\\n\"}}{{end}}'"
            ));
            let short: Vec<String> = want
                .iter()
                .filter_map(|(image, nodes)| {
                    let on: std::collections::BTreeSet<&str> = events
                        .lines()
                        .filter(|l| l.contains(&present(image)))
                        .filter_map(|l| l.split_whitespace().next())
                        .collect();
                    (on.len() < *nodes).then(|| format!("{image} on {on:?}, want {nodes} node(s)"))
                })
                .collect();
            if short.is_empty() {
                Ok(())
            } else {
                Err(format!("{}:\n{events}", short.join("; ")))
            }
        },
    );
    let pulling = c.kubectl("get events -A --field-selector reason=Pulling -o name");
    assert!(pulling.is_empty(), "images pulled: {pulling}");
}

/// Forgets the `cni` phase's record in the state file on `node` (its inputs digest replaced), so the
/// next `up` runs the phase again and it must find by itself that there is nothing to change.
pub(crate) fn forget_cni_record(c: &crate::real_support::RealCluster, node: &str) {
    use crate::real_support::Kube;
    c.node_sh(
        node,
        r#"sed -i '/^    "cni": {$/,/}/s/"inputs": "[0-9a-f]*"/"inputs": "forgotten"/' /var/lib/clusterctl/state.json && grep -q '"inputs": "forgotten"' /var/lib/clusterctl/state.json"#,
    );
}
