//! Kubernetes' own conformance tests against a real cluster (issue 24): `scripts/conformance.sh ci`, the
//! `e2e.test` and `ginkgo` of [`VERSION`] built from `k8s.io/kubernetes` (`scripts/k8s/build.sh VERSION
//! conformance`), run with the cluster's kubeconfig; the suite's images (agnhost, jessie-dnsutils, busybox,
//! pause) come from the test's registry mirror, which `registry.k8s.io` is routed through.

use std::process::{Command, Stdio};
use std::time::Instant;

use super::{RealCluster, VERSION};

/// The suite's programs (e2e.test, ginkgo, agnhost), built when missing. Call it before
/// [`super::available`], so `scripts/k8s/images.sh` writes the suite's images too (it writes them only
/// for a version whose e2e.test is built). `false` after a `SKIP:` line outside CI (a failure in CI).
pub(crate) fn require_suite() -> bool {
    clusterctl_testbed::k8sbin::require_programs(VERSION, &["e2e.test", "ginkgo", "agnhost"])
        .is_some()
}

/// Runs the CI focus (`scripts/conformance.sh ci`, two ginkgo processes) against `c` through its VIP
/// kubeconfig, JUnit under `<cache>/conformance/<cluster name>/ci`; prints the summary line and panics
/// unless every spec of the focus ran and passed. By hand, `CLUSTERCTL_CONFORMANCE=full` runs the
/// script's `full` config instead and `CLUSTERCTL_CONFORMANCE_FOCUS=RE` narrows it (`--focus`).
pub(crate) fn run_ci_focus(c: &RealCluster) {
    let config = std::env::var("CLUSTERCTL_CONFORMANCE").unwrap_or_else(|_| "ci".to_string());
    let focus = std::env::var("CLUSTERCTL_CONFORMANCE_FOCUS").ok();
    run_config(c, &config, focus.as_deref());
}

/// Runs upstream's NetworkPolicy e2e tests (issue 28) against `c`: the script's `netpol-ci` focus, or
/// `CLUSTERCTL_NETPOL` (`netpol`: every spec of `test/e2e/network/netpol`) narrowed by
/// `CLUSTERCTL_NETPOL_FOCUS`; panics unless every spec ran and passed.
pub(crate) fn run_netpol_focus(c: &RealCluster) {
    let config = std::env::var("CLUSTERCTL_NETPOL").unwrap_or_else(|_| "netpol-ci".to_string());
    let focus = std::env::var("CLUSTERCTL_NETPOL_FOCUS").ok();
    run_config(c, &config, focus.as_deref());
}

/// `scripts/conformance.sh CONFIG [--focus FOCUS]` against `c`, JUnit under
/// `<cache>/conformance/<cluster name>/<CONFIG>`; panics unless it passed.
pub(crate) fn run_config(c: &RealCluster, config: &str, focus: Option<&str>) {
    let t = Instant::now();
    let dir = clusterctl_testbed::k8snode::cache_root()
        .join("conformance")
        .join(&c.name)
        .join(config);
    let script = clusterctl_testbed::k8sbin::scripts_dir().join("../conformance.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(config)
        .arg("--kubeconfig")
        .arg(c.cc.kubeconfig())
        .arg("--junit-dir")
        .arg(&dir)
        .arg("--version")
        .arg(VERSION)
        .args(focus.iter().flat_map(|f| ["--focus", f]))
        .stdin(Stdio::null())
        .output()
        .expect("running scripts/conformance.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "[real] {} (after {:.1}s)",
        stdout.trim(),
        t.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success() && stdout.contains(" 0 failed"),
        "conformance {config} failed ({}):\n{stdout}\n{}\nginkgo's log: {}/*/ginkgo.log",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        dir.display()
    );
}
