//! Cilium through `up`'s `cni` phase on a real cluster (issue 13): `clusterctl up -f` a file with
//! `cni.plugin: cilium` on the real-cluster harness (`real_support`: the upstream kubeadm, kubelet and
//! kubectl v1.34.4 in node containers over SSH), 1 control plane. The Cilium chart is the one the test
//! bed's real helm packaged from `install/kubernetes/cilium` of cilium's Go module at v1.20.2, and the
//! Helm archive is that helm in the release archive's layout (`linux-amd64/helm`); both come from a
//! site mirror on loopback named in `cni.sources` with their sha256 — so `cni/sources` downloads and
//! checks them, and the `cni` phase places helm and the chart on the first control plane and runs
//! `helm upgrade --install` there against the real API server, with the rendered values.
//!
//! Cilium's agent images cannot be built here (docs/cni.md), so its pods cannot run and the nodes
//! stay NotReady: `up` runs with `--skip-phases wait-ready`. Asserts: `up` converges; both files were
//! fetched from the mirror; on the node, helm's release `cilium` is deployed at revision 1 with chart
//! 1.20.2, the rendered values (`kubeProxyReplacement: true` with `kubeProxy: disabled`, as the seed
//! does) and the description recording the chart's and values' digests; the DaemonSet and the
//! operator Deployment run the registry mirror's images; kubeadm's kube-proxy addon was skipped; a
//! second `up` leaves the release at revision 1 and fetches nothing. Only small fields of `helm
//! status` are ever shown: it holds the chart's generated CA keys.

use std::time::Instant;

use clusterctl_testbed::aptrepo::FileServer;
use clusterctl_testbed::k8sbin::K8sBins;

use crate::real_support::{self, FileOptions, Kube};

/// The sha256 of the file at `path`, in hex.
fn sha256_hex(path: &std::path::Path) -> String {
    let digest = clusterctl_testbed::registry::sha256_digest(&std::fs::read(path).expect("read"));
    digest.trim_start_matches("sha256:").to_string()
}

/// Cilium's two upstream files on a site mirror on loopback, as a disconnected site serves them —
/// the chart the test bed's real helm packaged from cilium's Go module (`cilium.tgz`) and that helm
/// in a release archive's layout (`helm-linux-amd64.tar.gz`: `linux-amd64/helm`) — and the cluster
/// file's `networking` lines naming both in `cni.sources` with their sha256 (`cni.plugin: cilium`
/// v1.20.2, `kubeProxyReplacement: true`, `kubeProxy: disabled`, podSubnet 10.244.0.0/16).
pub(crate) struct CiliumSite {
    /// The server of the site mirror.
    pub(crate) server: FileServer,
    /// The `networking:` lines for `FileOptions::extra_spec`.
    pub(crate) spec: String,
    /// The chart's sha256 (hex).
    pub(crate) chart_sha: String,
    _dir: tempfile::TempDir,
}

/// Serves the test bed's Cilium chart and helm (`bins`: `cilium-chart`, `helm`) on loopback.
pub(crate) fn cilium_site(bins: &K8sBins) -> CiliumSite {
    let dir = tempfile::tempdir().expect("tempdir");
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("stage/linux-amd64")).expect("dirs");
    std::fs::copy(bins.path("cilium-chart"), site.join("cilium.tgz")).expect("chart");
    std::fs::copy(bins.path("helm"), site.join("stage/linux-amd64/helm")).expect("helm");
    let tar = std::process::Command::new("tar")
        .arg("-czf")
        .arg(site.join("helm-linux-amd64.tar.gz"))
        .arg("-C")
        .arg(site.join("stage"))
        .arg("linux-amd64/helm")
        .status()
        .expect("tar");
    assert!(tar.success());
    let (chart_sha, helm_sha) = (
        sha256_hex(&site.join("cilium.tgz")),
        sha256_hex(&site.join("helm-linux-amd64.tar.gz")),
    );
    let server = FileServer::start("127.0.0.1", &site).expect("file server");
    let url = server.url();
    let spec = format!(
        "  networking:\n    podSubnet: 10.244.0.0/16\n    kubeProxy: disabled\n    cni:\n      plugin: cilium\n      version: v1.20.2\n      kubeProxyReplacement: true\n      sources:\n        - {{name: cilium.tgz, url: \"{url}/cilium.tgz\", sha256: {chart_sha}}}\n        - {{name: helm-linux-amd64.tar.gz, url: \"{url}/helm-linux-amd64.tar.gz\", sha256: {helm_sha}}}\n"
    );
    CiliumSite {
        server,
        spec,
        chart_sha,
        _dir: dir,
    }
}

/// `helm status cilium -o json` on `node` (the first control plane), parsed. Never printed whole: it
/// holds the chart's generated CA keys.
pub(crate) fn helm_status(c: &dyn Kube, node: &str) -> serde_json::Value {
    let out = c.node_sh(
        node,
        "/var/lib/clusterctl/bin/helm status cilium --namespace kube-system --kubeconfig /etc/kubernetes/admin.conf -o json",
    );
    serde_json::from_str::<serde_json::Value>(&out)
        .unwrap_or_else(|e| panic!("helm status is not JSON ({} bytes): {e}", out.len()))
}

/// The release `cilium` as the first `up` leaves it (asserted on `status`): deployed at revision 1
/// with chart 1.20.2, the rendered values (`kubeProxyReplacement: true`, the image repositories
/// `images`/cilium/…) and the chart's digest (`chart_sha`) in its description. Only small fields are
/// shown on failure.
pub(crate) fn check_release(s: &serde_json::Value, chart_sha: &str, images: &str) {
    assert_eq!(s["info"]["status"], "deployed");
    assert_eq!(s["version"], 1);
    let manifest = s["manifest"].as_str().unwrap_or_default();
    assert!(
        manifest.contains("helm.sh/chart: cilium-1.20.2"),
        "the release is chart 1.20.2"
    );
    assert_eq!(
        s["config"]["kubeProxyReplacement"], true,
        "the rendered values were used"
    );
    assert_eq!(
        s["config"]["image"]["repository"],
        format!("{images}/cilium/cilium"),
        "the rendered image repository"
    );
    let description = s["info"]["description"].as_str().unwrap_or_default();
    assert!(
        description.contains(&format!("chart={chart_sha}")),
        "{description}"
    );
}

#[test]
fn cilium_is_installed_with_helm_by_ups_cni_phase_on_a_real_cluster() {
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
    // The site mirror: the chart and a Helm release archive of the test bed's helm.
    let site = cilium_site(&bins);
    let server = &site.server;
    let c = real_support::start(
        "rcl",
        1,
        0,
        FileOptions {
            extra_spec: site.spec.clone(),
            ..Default::default()
        },
        &env,
    );
    let up = c.up(&["--skip-phases", "wait-ready"]);
    assert!(up.all().contains("converged"), "{}", up.all());
    eprintln!(
        "[real] cilium up converged after {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let fetched = server.requests();
    for f in ["/cilium.tgz", "/helm-linux-amd64.tar.gz"] {
        assert!(fetched.iter().any(|p| p == f), "{f}: {fetched:?}");
    }
    let cp = c.node_names()[0].clone();
    let status = || helm_status(&c, &cp);
    let mirror = c.registry.addr();
    check_release(&status(), &site.chart_sha, mirror);
    let ds = c.kubectl(
        "-n kube-system get ds cilium -o jsonpath='{.spec.template.spec.containers[*].image}'",
    );
    assert!(
        !ds.is_empty() && ds.split(' ').all(|i| i.starts_with(mirror)),
        "cilium DaemonSet images under {mirror}: {ds}"
    );
    let op = c.kubectl(
        "-n kube-system get deploy cilium-operator -o jsonpath='{.spec.template.spec.containers[*].image}'",
    );
    assert!(
        op.starts_with(mirror),
        "cilium-operator image under {mirror}: {op}"
    );
    let kube_proxy = c.kubectl("-n kube-system get ds -o name");
    assert!(
        !kube_proxy.contains("kube-proxy"),
        "kube-proxy skipped (kubeProxyReplacement): {kube_proxy}"
    );

    // A second `up`: the release is current (same chart and values digests), no new revision.
    let before = server.requests().len();
    c.up(&["--skip-phases", "wait-ready"]);
    assert_eq!(status()["version"], 1, "no new revision");
    assert_eq!(server.requests().len(), before, "nothing fetched again");
}
