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
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clusterctl_testbed::registry::Registry;

use crate::airgap_support::{bundle_on_the_connected_side, dead_address, upstreams_unresolvable};
use crate::real_cilium::{check_release, cilium_site, helm_status};
use crate::real_support::{self, wait_for, FileOptions, Kube};

/// One entry of `clusterctl airgap images -o json`.
#[derive(serde::Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Listed {
    component: String,
    source: String,
    pull: String,
}

/// `clusterctl airgap images -f FILE -o json`, as the connected side lists what it must carry.
fn airgap_images(cc: &clusterctl_testbed::cli::Clusterctl, file: &std::path::Path) -> Vec<Listed> {
    let f = file.display().to_string();
    let r = cc
        .run(&["airgap", "images", "-f", &f, "-o", "json"])
        .expect("airgap images");
    assert_eq!(r.code, 0, "airgap images: {}", r.all());
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
}

/// `skopeo copy` of `from` to `to` (both `host:port/path:tag` on loopback registries, plain HTTP).
fn copy_image(from: &str, to: &str) {
    let out = Command::new("skopeo")
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

/// `host/path:tag` → (`host`, `path:tag`).
fn split_host(reference: &str) -> (&str, &str) {
    reference
        .split_once('/')
        .unwrap_or_else(|| panic!("{reference}: no registry host"))
}

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
    let source = Registry::serve_readonly(&env.1.storage).expect("source registry");
    let standins = Registry::start().expect("stand-in registry");
    let pause = listed
        .iter()
        .find(|i| i.component == "pause")
        .unwrap_or_else(|| panic!("no pause image in {listed:?}"));
    let (_, pause_path) = split_host(&pause.source);
    for i in &cilium {
        let (_, path) = split_host(&i.source);
        copy_image(
            &format!("{}/{pause_path}", source.addr()),
            &format!("{}/{path}", standins.addr()),
        );
    }
    let mut overrides: Vec<(String, String)> = listed
        .iter()
        .map(|i| split_host(&i.source).0.to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|h| {
            let to = if h == "quay.io" {
                standins.addr()
            } else {
                source.addr()
            };
            (h, to.to_string())
        })
        .collect();
    overrides.sort();
    let connected = tempfile::tempdir().expect("tempdir");
    let tb = Instant::now();
    bundle_on_the_connected_side(&c.file, &bundle, connected.path(), &overrides);
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
    drop(standins);
    drop(source);

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
    for n in c.node_names() {
        let held = c.node_sh(&n, "ctr -n k8s.io images ls -q");
        for image in &want {
            assert!(
                out.lines().any(
                    |l| l.contains(&format!("[{n}] airgap/images: load ")) && l.contains(image)
                ),
                "{n}: {image} loaded from the bundle:\n{out}"
            );
            assert!(held.lines().any(|l| l == *image), "{n}: {image} in\n{held}");
        }
    }
    // The kubelet started Cilium's containers (the agent on both nodes, the operator) from the images
    // on the node; nothing was pulled in the cluster.
    let present = |image: &str| format!("Container image \"{image}\" already present on machine");
    wait_for(
        "Cilium's containers started from the loaded images",
        Duration::from_secs(60),
        || {
            let events = c.kubectl(
                "-n kube-system get events --field-selector reason=Pulled -o jsonpath='{range .items[*]}{.source.host} {.message}{\"\\n\"}{end}'",
            );
            let nodes_with = |image: &str| -> BTreeSet<String> {
                events
                    .lines()
                    .filter(|l| l.contains(&present(image)))
                    .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                    .collect()
            };
            let agent = nodes_with("quay.io/cilium/cilium:v1.20.2");
            let operator = nodes_with("quay.io/cilium/operator-generic:v1.20.2");
            if agent.len() == 2 && !operator.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "agent on {agent:?}, operator on {operator:?}:\n{events}"
                ))
            }
        },
    );
    let pulling = c.kubectl("get events -A --field-selector reason=Pulling -o name");
    assert!(pulling.is_empty(), "images pulled: {pulling}");
    let kube_proxy = c.kubectl("-n kube-system get ds -o name");
    assert!(
        !kube_proxy.contains("kube-proxy"),
        "kube-proxy skipped (kubeProxyReplacement): {kube_proxy}"
    );

    // A second `up`, with the `cni` phase's record forgotten on the node so that the phase runs again
    // and must recognise the current release itself (same chart and values digests): no new
    // revision, the files from the cache, still nothing contacted.
    c.node_sh(
        &cp,
        r#"sed -i '/^    "cni": {$/,/}/s/"inputs": "[0-9a-f]*"/"inputs": "forgotten"/' /var/lib/clusterctl/state.json && grep -q '"inputs": "forgotten"' /var/lib/clusterctl/state.json"#,
    );
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
