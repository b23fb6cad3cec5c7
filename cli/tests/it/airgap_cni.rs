//! Issue 13: the air-gap bundle carries the CNI's pinned upstream files, and `up` with `airgap.bundle`
//! takes them from it without reaching out. flannel with the **real** `kube-flannel.yml` v0.28.4 (from
//! flannel's Go module, `scripts/k8s/build.sh flannel-manifest`; its sha256 is the pinned one), served
//! by a loopback HTTP server of the test as the file's `cni.sources` address; every image of the plan
//! built here from random bytes and served by a loopback `docker-registry` (`airgap_support`).
//! Checks: `airgap bundle` (the library call the CLI makes) carries `upstream/kube-flannel.yml` with
//! the pinned digest, listed in `SHA256SUMS`, and the bundle verifies; then, with the source address
//! pointed at a listener that must never be contacted and an empty upstream cache, `up --dry-run`
//! runs `airgap/verify` before `cni/sources`, which takes the file from the bundle (entry and
//! sha256 named) — no connection is made; a file whose `cni.sources` pins another sha256 is refused
//! by `cni/sources`, naming both digests, before any phase that changes a node. `render --fetch`
//! writes the checked file into the render output (downloaded once, then from the cache; another
//! sha256 refused with nothing written).

use crate::airgap_support::{bundle_served, valid_file};

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clusterctl_testbed::k8sbin::{require_programs, DEFAULT_VERSION};
use clusterctl_testbed::registry::{self, Registry};
use clusterctl_testbed::require;

/// A loopback listener on a thread: answers each connection with `body` (HTTP 200) when given,
/// else closes it; counts the connections.
pub(crate) struct Listener {
    pub(crate) port: u16,
    pub(crate) hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Listener {
    fn start(body: Option<Vec<u8>>) -> Listener {
        Listener::start_on("127.0.0.1:0", body)
    }

    /// The listener on `addr` (`127.0.0.1:0`: any free port).
    pub(crate) fn start_on(addr: &str, body: Option<Vec<u8>>) -> Listener {
        let l = TcpListener::bind(addr).expect("bind");
        let port = l.local_addr().expect("addr").port();
        l.set_nonblocking(true).expect("nonblocking");
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (hits.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok((mut c, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                h.fetch_add(1, Ordering::SeqCst);
                let Some(b) = &body else { continue };
                let _ = c.set_nonblocking(false);
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                let mut req = [0u8; 4096];
                let _ = c.read(&mut req);
                let _ = write!(
                    c,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    b.len()
                );
                let _ = c.write_all(b);
            }
        });
        Listener { port, hits, stop }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn cluster_yaml(dir: &Path, source_url: &str, sha256: Option<&str>) -> String {
    let sha = sha256.map(|s| format!(", sha256: {s}")).unwrap_or_default();
    format!(
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: agcni}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  networking:\n    podSubnet: 10.244.0.0/16\n    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: flannel\n      sources: [{{name: kube-flannel.yml, url: \"{source_url}\"{sha}}}]\n  ssh: {{user: root, keyFile: {}, port: 22, hostKeyPolicy: strict}}\n  packages: {{source: preinstalled}}\n  airgap: {{bundle: site.tar}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: 192.0.2.10}}\n    - {{name: w1, role: worker, address: 192.0.2.11}}\n",
        dir.join("id_test").display()
    )
}

/// `up --dry-run -f FILE` with `home` as `HOME` and an empty `PATH`: exit code and output.
pub(crate) fn dry_run(file: &Path, home: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(["up", "--dry-run", "--verbose", "-f"])
        .arg(file)
        .env_clear()
        .env("PATH", home.join("empty-path"))
        .env("HOME", home)
        .output()
        .expect("run clusterctl");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn the_bundle_carries_flannels_manifest_and_up_takes_it_from_there_without_reaching_out() {
    if !require("docker-registry", registry::available()) {
        return;
    }
    let Some(bins) = require_programs(DEFAULT_VERSION, &["flannel-manifest"]) else {
        return;
    };
    let manifest = std::fs::read(bins.path("flannel-manifest")).expect("kube-flannel.yml");
    let pinned = clusterctl_render::cni::versions::FLANNEL[0].manifest_sha256;
    let digest = clusterctl_airgap::Digest::of(&manifest);
    assert_eq!(
        digest.hex(),
        pinned,
        "the test bed's kube-flannel.yml is the pinned one"
    );

    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        work.path().join("id_test"),
        "not a key; nothing is contacted\n",
    )
    .expect("key");
    let upstream = Listener::start(Some(manifest.clone()));
    let file = work.path().join("cluster.yaml");
    let url = format!("http://127.0.0.1:{}/kube-flannel.yml", upstream.port);
    let valid = valid_file(&file, &cluster_yaml(work.path(), &url, None));
    let reg = Registry::start().expect("registry");
    let bundle = work.path().join("site.tar");
    let summary = bundle_served(&valid, &reg, 1300, work.path(), &bundle);
    let carried: Vec<(&str, &str, String)> = summary
        .manifest
        .upstream
        .iter()
        .map(|f| (f.name.as_str(), f.path.as_str(), f.sha256.hex().to_string()))
        .collect();
    assert_eq!(
        carried,
        [(
            "kube-flannel.yml",
            "upstream/kube-flannel.yml",
            pinned.to_string()
        )]
    );
    assert_eq!(upstream.hits.load(Ordering::SeqCst), 1, "downloaded once");
    assert!(
        summary
            .manifest
            .images
            .iter()
            .any(|i| i.source.contains("/flannel:")),
        "the CNI's images are carried too"
    );
    let vb = clusterctl_airgap::bundle::verify_bundle(&bundle).expect("the bundle verifies");
    assert_eq!(vb.entries["upstream/kube-flannel.yml"].digest, digest);
    drop(upstream);

    // The site: the address now leads to a listener that must never be contacted, the cache is empty.
    let dead = Listener::start(None);
    let site = tempfile::tempdir().expect("tempdir");
    let dead_url = format!("http://127.0.0.1:{}/kube-flannel.yml", dead.port);
    std::fs::write(&file, cluster_yaml(work.path(), &dead_url, None)).expect("file");
    let (code, out) = dry_run(&file, site.path());
    assert_eq!(code, 0, "{out}");
    let phases: Vec<&str> = out
        .lines()
        .find_map(|l| l.strip_prefix("phases: "))
        .unwrap_or_else(|| panic!("no phases line: {out}"))
        .split(" → ")
        .collect();
    let at = |n: &str| phases.iter().position(|x| *x == n).unwrap_or(usize::MAX);
    assert!(at("airgap/verify") < at("cni/sources"), "{phases:?}");
    assert!(at("cni/sources") < at("preflight"), "{phases:?}");
    assert!(
        out.contains(&format!(
            "take kube-flannel.yml from the air-gap bundle (upstream/kube-flannel.yml, sha256:{pinned})"
        )),
        "{out}"
    );
    assert!(!out.contains("download kube-flannel.yml"), "{out}");

    // Another digest pinned by the file: refused before any node phase, both digests named.
    let other = "ab".repeat(32);
    std::fs::write(&file, cluster_yaml(work.path(), &dead_url, Some(&other))).expect("file");
    let (code, out) = dry_run(&file, site.path());
    assert_ne!(code, 0, "{out}");
    assert!(out.contains(&other) && out.contains(pinned), "{out}");
    assert!(out.contains("kube-flannel.yml"), "{out}");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        dead.hits.load(Ordering::SeqCst),
        0,
        "the air-gapped up contacted the source address"
    );
}

/// `render --fetch`: the pinned file is downloaded once into `DIR/cluster/upstream/`, a second render
/// takes it from the cache, and a file pinned to another sha256 is refused with nothing written.
#[test]
fn render_fetch_writes_the_checked_upstream_file_into_the_output() {
    let Some(bins) = require_programs(DEFAULT_VERSION, &["flannel-manifest"]) else {
        return;
    };
    let manifest = std::fs::read(bins.path("flannel-manifest")).expect("kube-flannel.yml");
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(work.path().join("id_test"), "not a key\n").expect("key");
    let server = Listener::start(Some(manifest.clone()));
    let url = format!("http://127.0.0.1:{}/kube-flannel.yml", server.port);
    let file = work.path().join("cluster.yaml");
    std::fs::write(&file, cluster_yaml(work.path(), &url, None)).expect("file");
    let render = |out: &Path| {
        let o = Command::new(env!("CARGO_BIN_EXE_clusterctl"))
            .args(["render", "--fetch", "-f"])
            .arg(&file)
            .arg("--output-dir")
            .arg(out)
            .env_clear()
            .env("HOME", work.path())
            .output()
            .expect("run clusterctl");
        let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&o.stderr));
        (o.status.code().unwrap_or(-1), text)
    };
    let out = work.path().join("out");
    let (code, text) = render(&out);
    assert_eq!(code, 0, "{text}");
    let pinned = clusterctl_render::cni::versions::FLANNEL[0].manifest_sha256;
    assert!(
        text.contains("downloaded kube-flannel.yml") && text.contains(pinned),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("/out/cluster/upstream/kube-flannel.yml")
                && l.ends_with("  0644  upstream")),
        "{text}"
    );
    assert_eq!(
        std::fs::read(out.join("cluster/upstream/kube-flannel.yml")).expect("written"),
        manifest
    );
    let (code, text) = render(&out);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("cached kube-flannel.yml"), "{text}");
    assert_eq!(server.hits.load(Ordering::SeqCst), 1, "downloaded once");

    let other = "cd".repeat(32);
    std::fs::write(&file, cluster_yaml(work.path(), &url, Some(&other))).expect("file");
    let out2 = work.path().join("out2");
    let (code, text) = render(&out2);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains(&other) && text.contains(pinned), "{text}");
    assert!(!out2.exists(), "nothing written: {text}");

    // A download that fails is named as one, with its address, once prefixed (breaker finding U6:
    // "render: render --fetch: registry request … failed").
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let gone = format!("http://127.0.0.1:{port}/kube-flannel.yml");
    std::fs::write(&file, cluster_yaml(work.path(), &gone, Some(&other))).expect("file");
    let (code, text) = render(&work.path().join("out3"));
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!("render: --fetch: download of {gone} failed")),
        "{text}"
    );
    assert!(
        !text.contains("registry request") && !text.contains("render: render"),
        "{text}"
    );
}
