//! A hostile user and a hostile registry against `airgap bundle` and `airgap import`: bundles that
//! are internally consistent (every entry listed in `SHA256SUMS` with its right sha256) but lie in
//! `manifest.json` or the OCI layout, damaged or foreign files, output and record paths that name an
//! input, and a registry (a tiny HTTP server in the test, on loopback) that serves endless or
//! oversized bodies, absurd sizes and wrong digests, or refuses credentials. Each is refused with an
//! error naming what is wrong; a refused import leaves the target registry (a real loopback
//! `docker-registry`) without a single write, a refused bundle run leaves every input untouched.

use crate::common;

use clusterctl_airgap::bundle::write::layout_index;
use clusterctl_airgap::bundle::{verify_bundle, write_bundle, BundleInput, BundleManifest};
use clusterctl_airgap::pull::{pull_images, ImageRequest, PullOptions, PulledImage};
use clusterctl_airgap::registry::{ClientOptions, EnvCredentials, RegistryClient};
use clusterctl_airgap::run::{
    bundle_cluster, import_bundle, import_bundle_for_cluster, BundleOptions, ImportOptions,
};
use clusterctl_airgap::store::BlobStore;
use clusterctl_airgap::{AirgapError, Digest, ImageRef};
use clusterctl_testbed::registry::Registry;
use clusterctl_testbed::require;
use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A bundle with three images (two sharing a base layer) and one package, written from a store.
fn good_bundle(dir: &Path) -> PathBuf {
    let (store, input) = good_input(dir);
    let out = dir.join("good.tar");
    write_bundle(&out, &store, &input).expect("write");
    out
}

/// The store and input of [`good_bundle`]: three images sharing a base layer, one package.
fn good_input(dir: &Path) -> (BlobStore, BundleInput) {
    stored_input(
        dir,
        &Stored {
            seed: 11,
            cluster: "hostile",
            images: 3,
            repo: "hostile",
            name: "h",
            mirror: "mirror.site.test/lib",
            layer_sizes: (32 << 10, 8 << 10),
            package: ("tool", "packages/any-amd64/tool", "any", 5000),
        },
    )
}

#[test]
fn two_runs_writing_the_same_output_both_finish_with_one_valid_bundle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, input) = good_input(dir.path());
    let out = dir.path().join("same.tar");
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| write_bundle(&out, &store, &input)))
            .collect();
        for r in runs {
            r.join()
                .expect("thread")
                .expect("each run writes the bundle");
        }
    });
    let vb = clusterctl_airgap::bundle::verify_bundle(&out).expect("the bundle verifies");
    assert_eq!(vb.manifest.images.len(), 3);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&out).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("ls")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".partial"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// Every entry of a tar, in order.
fn entries(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut ar = tar::Archive::new(std::fs::File::open(path).expect("open"));
    let mut out = Vec::new();
    for e in ar.entries().expect("entries") {
        let mut e = e.expect("entry");
        let name = e.path().expect("path").display().to_string();
        let mut b = Vec::new();
        e.read_to_end(&mut b).expect("read");
        out.push((name, b));
    }
    out
}

/// Writes `list` as a tar with a fresh, correct `SHA256SUMS` first: a bundle whose checksums all
/// hold, so only the content checks can refuse it.
fn consistent(dst: &Path, list: &[(String, Vec<u8>)]) {
    let body: Vec<&(String, Vec<u8>)> = list.iter().filter(|(n, _)| n != "SHA256SUMS").collect();
    let sums: String = body
        .iter()
        .map(|(n, b)| format!("{}  {n}\n", Digest::of(b).hex()))
        .collect();
    let mut tb = tar::Builder::new(std::fs::File::create(dst).expect("create"));
    let mut add = |name: &str, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        tb.append_data(&mut h, name, data).expect("append");
    };
    add("SHA256SUMS", sums.as_bytes());
    for (n, b) in body {
        add(n, b);
    }
    tb.finish().expect("finish");
}

/// `list` with `manifest.json` changed by `f`, and the layout's `index.json` written for it as the
/// bundle writer would (when the changed manifest still parses), so only the change is a lie.
fn edit_manifest(
    list: &[(String, Vec<u8>)],
    f: impl FnOnce(&mut serde_json::Value),
) -> Vec<(String, Vec<u8>)> {
    let mut f = Some(f);
    let mut out: Vec<(String, Vec<u8>)> = list
        .iter()
        .map(|(n, b)| {
            if n == "manifest.json" {
                let mut v: serde_json::Value = serde_json::from_slice(b).expect("json");
                if let Some(f) = f.take() {
                    f(&mut v);
                }
                (n.clone(), serde_json::to_vec_pretty(&v).expect("json"))
            } else {
                (n.clone(), b.clone())
            }
        })
        .collect();
    let manifest = out
        .iter()
        .find(|(n, _)| n == "manifest.json")
        .and_then(|(_, b)| serde_json::from_slice::<BundleManifest>(b).ok());
    if let Some(index) = manifest.and_then(|m| layout_index(&m.images).ok()) {
        for (n, b) in out.iter_mut() {
            if n == "oci/index.json" {
                *b = index.clone();
            }
        }
    }
    out
}

/// Every request the registry received, reads included.
fn requests(reg: &Registry) -> usize {
    ["HEAD", "GET", "PUT", "POST", "PATCH", "DELETE"]
        .iter()
        .map(|m| reg.count_requests(m, "/v2/"))
        .sum()
}

fn writes(reg: &Registry) -> usize {
    ["PUT", "POST", "PATCH", "DELETE"]
        .iter()
        .map(|m| reg.count_requests(m, "/v2/"))
        .sum()
}

/// Imports `bundle` into `reg` (under `prefix`, or the bundle's own mirror references when `None`)
/// and checks it is refused naming `must_name`, with no write reaching the registry.
fn refused(reg: &Registry, bundle: &Path, prefix: Option<&str>, must_name: &str) -> AirgapError {
    let before = writes(reg);
    let opts = ImportOptions {
        mirror_prefix: prefix.map(|p| format!("{}/{p}", reg.addr())),
        state: Some(bundle.with_extension("state.json")),
        ..Default::default()
    };
    let err = import_bundle(bundle, &opts).expect_err("hostile bundle must be refused");
    let msg = err.to_string();
    assert!(
        msg.contains(must_name),
        "{}: error {msg:?} should name {must_name:?}",
        bundle.display()
    );
    assert_eq!(
        writes(reg),
        before,
        "{}: refused, yet the registry was written to: {msg}",
        bundle.display()
    );
    assert!(
        !msg.chars().any(|c| c.is_control() || c == '\u{fffd}'),
        "raw bytes in the message: {msg:?}"
    );
    err
}

#[test]
fn consistent_but_lying_bundles_are_refused_before_any_write() {
    if !require("docker-registry", clusterctl_testbed::registry::available()) {
        return;
    }
    let reg = Registry::start().expect("registry");
    let work = scratch("cc-airgap-hostile-");
    let good = good_bundle(work.path());
    let list = entries(&good);
    let t = |name: &str| work.path().join(name);
    let mirror_of = |i: usize| format!("{}/site/hostile/h{i}:v1", reg.addr());
    // The bundle's own mirror references, pointed at the test registry.
    let local = |v: &mut serde_json::Value| {
        for (i, img) in v["images"]
            .as_array_mut()
            .expect("images")
            .iter_mut()
            .enumerate()
        {
            img["mirror"] = serde_json::json!(mirror_of(i));
        }
    };
    consistent(&t("local.tar"), &edit_manifest(&list, local));
    verify_bundle(&t("local.tar")).expect("re-pointed but honest bundle verifies");

    // An unparsable mirror (or source) reference on the last image: refused up front, not after
    // the first images were pushed.
    consistent(
        &t("bad-mirror.tar"),
        &edit_manifest(&list, |v| {
            local(v);
            v["images"][2]["mirror"] = serde_json::json!("Bad Ref::x");
        }),
    );
    refused(&reg, &t("bad-mirror.tar"), None, "Bad Ref::x");
    consistent(
        &t("bad-source.tar"),
        &edit_manifest(&list, |v| {
            v["images"][2]["source"] = serde_json::json!("NOT A REF")
        }),
    );
    refused(&reg, &t("bad-source.tar"), Some("p1"), "NOT A REF");

    // A media type that does not match the document: the registry would refuse the manifest only
    // after its blobs were uploaded.
    for (n, mt) in [
        (0, "text/plain"),
        (1, "application/vnd.docker.distribution.manifest.v2+json"),
        (2, "application/vnd.oci.image.index.v1+json"),
    ] {
        let name = format!("mt{n}.tar");
        consistent(
            &t(&name),
            &edit_manifest(&list, |v| {
                v["images"][n]["mediaType"] = serde_json::json!(mt)
            }),
        );
        refused(&reg, &t(&name), Some("p2"), "manifest.json");
    }

    // A size in manifest.json that is not the manifest's size.
    consistent(
        &t("size.tar"),
        &edit_manifest(&list, |v| {
            v["images"][1]["size"] = serde_json::json!(999_999)
        }),
    );
    refused(&reg, &t("size.tar"), Some("p3"), "manifest.json");

    // Two images claiming the same mirror reference with different digests.
    consistent(
        &t("same-mirror.tar"),
        &edit_manifest(&list, |v| {
            local(v);
            v["images"][1]["mirror"] = serde_json::json!(mirror_of(0));
        }),
    );
    refused(&reg, &t("same-mirror.tar"), None, &mirror_of(0));

    // A blob whose name is not a sha256 digest, in another algorithm's directory.
    let mut extra = list.clone();
    extra.push((
        format!("oci/blobs/sha512/{}", "0".repeat(128)),
        b"hello".to_vec(),
    ));
    consistent(&t("sha512.tar"), &extra);
    refused(&reg, &t("sha512.tar"), Some("p4"), "oci/blobs/sha512/");

    // A mirror reference pinning another digest than the one carried.
    consistent(
        &t("pin.tar"),
        &edit_manifest(&list, |v| {
            local(v);
            v["images"][0]["mirror"] =
                serde_json::json!(format!("{}@sha256:{}", mirror_of(0), "e".repeat(64)));
        }),
    );
    refused(&reg, &t("pin.tar"), None, "pins another digest");

    // The layout naming an image manifest.json does not carry (a runtime importing the layout
    // would take it), or a known image under another name.
    let layer = list
        .iter()
        .filter(|(n, _)| n.starts_with("oci/blobs/"))
        .max_by_key(|(_, b)| b.len())
        .map(|(n, b)| {
            (
                format!("sha256:{}", n.rsplit('/').next().unwrap_or("")),
                b.len() as u64,
            )
        })
        .expect("a layer");
    for (n, (digest, size, name)) in [
        (
            entries_digest(&list, 0),
            image_size(&list, 0),
            "registry.k8s.io/pause:3.10.1",
        ),
        (layer.0, layer.1, "registry.k8s.io/pause:3.10.1"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut l = list.clone();
        for (en, b) in l.iter_mut() {
            if en == "oci/index.json" {
                let mut v: serde_json::Value = serde_json::from_slice(b).expect("json");
                v["manifests"].as_array_mut().expect("manifests").push(serde_json::json!({
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": digest, "size": size,
                    "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name},
                }));
                *b = serde_json::to_vec(&v).expect("json");
            }
        }
        let f = format!("layout{n}.tar");
        consistent(&t(&f), &l);
        refused(&reg, &t(&f), Some("p4"), "oci/index.json");
    }

    // Terminal control sequences in what the bundle says about itself never reach the terminal.
    consistent(
        &t("escape-name.tar"),
        &edit_manifest(&list, |v| {
            v["cluster"] = serde_json::json!("\u{1b}]0;pwned\u{7}\u{1b}[2J")
        }),
    );
    let opts = ImportOptions {
        mirror_prefix: Some(format!("{}/p7", reg.addr())),
        state: Some(t("escape-name.state.json")),
        expect: Some(("hostile".into(), "v1.34.1".into())),
        ..Default::default()
    };
    let msg = import_bundle(&t("escape-name.tar"), &opts)
        .expect_err("made for another cluster")
        .to_string();
    assert!(msg.contains("pwned"), "{msg}");
    assert!(
        !msg.chars().any(char::is_control),
        "control characters in {msg:?}"
    );
    let mut escaped = list.clone();
    escaped.push(("oci/\u{1b}[2J\u{1b}]0;pwned\u{7}".into(), b"x".to_vec()));
    consistent(&t("escape-entry.tar"), &escaped);
    refused(&reg, &t("escape-entry.tar"), Some("p7"), "pwned");

    // A package name that would leave `/usr/local/bin/` on the nodes.
    consistent(
        &t("pkg-name.tar"),
        &edit_manifest(&list, |v| {
            v["packages"][0]["name"] = serde_json::json!("../../etc/cron.d/evil")
        }),
    );
    refused(
        &reg,
        &t("pkg-name.tar"),
        Some("p4"),
        "../../etc/cron.d/evil",
    );

    // A gzip-wrapped bundle is named as such; random bytes are not echoed.
    let gz = std::process::Command::new("gzip")
        .arg("-kc")
        .arg(&good)
        .output()
        .expect("gzip");
    std::fs::write(t("good.tar.gz"), gz.stdout).expect("write");
    refused(&reg, &t("good.tar.gz"), Some("p5"), "gzip");
    std::fs::write(t("noise.tar"), Rng(3).bytes(4096)).expect("write");
    refused(&reg, &t("noise.tar"), Some("p5"), "not a tar");

    // Already refused before this session, kept so they stay refused: duplicates, lists and tars
    // that disagree, a missing index child, a blob named after other content, empty files and
    // truncation at every header and in the middle of a blob.
    let mut dup = list.clone();
    let blob = dup
        .iter()
        .find(|(n, _)| n.starts_with("oci/blobs/"))
        .cloned()
        .expect("blob");
    dup.push(blob.clone());
    let raw = |dst: &Path, l: &[(String, Vec<u8>)]| {
        let mut tb = tar::Builder::new(std::fs::File::create(dst).expect("create"));
        for (n, b) in l {
            let mut h = tar::Header::new_gnu();
            h.set_size(b.len() as u64);
            h.set_mode(0o644);
            tb.append_data(&mut h, n, b.as_slice()).expect("append");
        }
        tb.finish().expect("finish");
    };
    raw(&t("dup.tar"), &dup);
    refused(&reg, &t("dup.tar"), Some("p6"), "appears twice");
    let mut unlisted = list.clone();
    unlisted.push(("oci/extra".into(), b"x".to_vec()));
    raw(&t("unlisted.tar"), &unlisted);
    refused(&reg, &t("unlisted.tar"), Some("p6"), "oci/extra");
    let mut listed = list.clone();
    listed[0].1.extend_from_slice(
        format!("{}  oci/blobs/sha256/{}\n", "0".repeat(64), "0".repeat(64)).as_bytes(),
    );
    raw(&t("listed.tar"), &listed);
    refused(&reg, &t("listed.tar"), Some("p6"), "missing");
    let mut misnamed = list.clone();
    misnamed.push(("oci/blobs/sha256/notadigest".into(), b"x".to_vec()));
    consistent(&t("misnamed.tar"), &misnamed);
    refused(&reg, &t("misnamed.tar"), Some("p6"), "notadigest");
    std::fs::write(t("empty.tar"), b"").expect("write");
    refused(&reg, &t("empty.tar"), Some("p6"), "empty or not a bundle");
    let vb = verify_bundle(&good).expect("verifies");
    let len = std::fs::metadata(&good).expect("meta").len();
    let (big, loc) = vb
        .entries
        .iter()
        .max_by_key(|(_, l)| l.size)
        .expect("entries");
    let mut cuts: Vec<u64> = vb.entries.values().map(|l| l.offset - 512).collect();
    cuts.extend([1, 511, loc.offset + loc.size / 2, loc.offset + loc.size - 1]);
    let whole = std::fs::read(&good).expect("read");
    for cut in cuts {
        std::fs::write(t("cut.tar"), &whole[..cut as usize]).expect("write");
        let err = verify_bundle(&t("cut.tar")).expect_err("truncated");
        assert!(is_bundle_refusal(&err), "cut at {cut} of {len}: {err:?}");
    }
    refused(&reg, &t("cut.tar"), Some("p6"), big);

    // And the honest, re-pointed bundle imports to its own mirror references, also with an
    // absurd --jobs (it used to start that many threads per image: 40 s for 7 images at 100000).
    let opts = ImportOptions {
        state: Some(t("local.state.json")),
        jobs: 200_000,
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let (_, report) = import_bundle(&t("local.tar"), &opts).expect("honest import");
    assert_eq!(report.images_pushed, 3);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "--jobs 200000 took {:?}",
        started.elapsed()
    );
}

/// A cluster file named `hostile` (v1.34.1) with registry mirror `mirror` (none when empty) and one
/// package.
fn cluster_file(dir: &Path, mirror: &str) -> clusterctl_spec::ValidCluster {
    std::fs::write(dir.join("tool"), "#!/bin/sh\necho tool\n").expect("package");
    let text = "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {name: hostile}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  networking: {podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/16, cni: {plugin: none}}\n  ssh: {user: root, keyFile: /nonexistent/key, port: 22, hostKeyPolicy: strict}\n  {mirror}airgap:\n    bundle: site.tar\n    packages:\n      - {name: tool, osFamily: any, arch: amd64, path: tool}\n  nodes:\n    - {name: cp1, role: control-plane, address: 10.88.0.11}\n";
    let mirror = match mirror {
        "" => String::new(),
        m => format!("registry: {{mirror: \"{m}\"}}\n  "),
    };
    let text = text.replace("{mirror}", &mirror);
    let file = dir.join("cluster.yaml");
    std::fs::write(&file, text).expect("cluster file");
    let loaded = clusterctl_spec::load(&file).expect("load");
    clusterctl_spec::validate(&loaded)
        .map_err(|d| d.to_string())
        .expect("valid")
        .cluster
}

#[test]
fn bundle_and_import_never_overwrite_an_input() {
    let work = scratch("cc-airgap-inputs-");
    let cluster = cluster_file(work.path(), "127.0.0.1:1/site");
    let run = |out: &Path| {
        let mut opts = BundleOptions {
            out: out.to_path_buf(),
            cache: Some(work.path().join("cache")),
            base_dir: work.path().to_path_buf(),
            ..Default::default()
        };
        opts.pull.retries = 0;
        opts.pull.registry_overrides = vec![("registry.k8s.io".into(), "127.0.0.1:1".into())];
        bundle_cluster(&cluster, &opts).expect_err("nothing can be pulled")
    };
    for input in ["cluster.yaml", "tool"] {
        let p = work.path().join(input);
        let before = std::fs::read(&p).expect("read");
        let msg = run(&p).to_string();
        assert!(
            msg.contains("not an air-gap bundle") && msg.contains(input),
            "-o {input}: {msg}"
        );
        assert_eq!(std::fs::read(&p).expect("read"), before, "{input} changed");
    }
    // A directory as the output is named as such.
    let dir = work.path().join("outdir");
    std::fs::create_dir(&dir).expect("mkdir");
    let msg = run(&dir).to_string();
    assert!(
        msg.contains("is a directory") && msg.contains("outdir"),
        "{msg}"
    );
    // A new output, or an earlier bundle, may be written: the run gets as far as the registry.
    let msg = run(&work.path().join("new.tar")).to_string();
    assert!(msg.contains("127.0.0.1:1"), "{msg}");

    // The import record never replaces the bundle or another file, and is checked before pushing.
    let good = good_bundle(work.path());
    let bundle_bytes = std::fs::read(&good).expect("read");
    let yaml = std::fs::read(work.path().join("cluster.yaml")).expect("read");
    for (state, what) in [
        (good.clone(), "not an import record"),
        (work.path().join("cluster.yaml"), "not an import record"),
        (work.path().join("tool/state.json"), "--state"),
    ] {
        let opts = ImportOptions {
            mirror_prefix: Some("127.0.0.1:1/x".into()),
            state: Some(state.clone()),
            ..Default::default()
        };
        let msg = import_bundle(&good, &opts)
            .expect_err("refused before any push")
            .to_string();
        assert!(msg.contains(what), "--state {}: {msg}", state.display());
        assert!(!msg.contains("127.0.0.1:1"), "reached the registry: {msg}");
    }
    assert_eq!(std::fs::read(&good).expect("read"), bundle_bytes);
    assert_eq!(
        std::fs::read(work.path().join("cluster.yaml")).expect("read"),
        yaml
    );
}

/// A registry that lies, on a loopback port, answering by repository name:
/// `overflow` — a manifest whose two layers claim 2^63 bytes each; `endless` — a manifest with one
/// 10-byte layer whose blob never ends; `bigmanifest` — a manifest that never ends; `liar` — a
/// blob whose bytes are not its digest; `auth` — answers 401 (basic) unless the `Authorization`
/// header carries the expected credentials, then serves `liar`'s manifest; `redirect` — opens
/// upload sessions on another origin (`http://localhost:PORT/steal/…`, counted as `stolen`).
struct Liar {
    addr: String,
    stop: Arc<AtomicBool>,
    /// Body bytes written per repository.
    sent: Arc<Mutex<std::collections::BTreeMap<String, u64>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const CAP: u64 = 256 << 20;

fn liar_manifest(repo: &str) -> (Vec<u8>, Vec<u8>) {
    let cfg = br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#
        .to_vec();
    let layers = match repo {
        "overflow" => serde_json::json!([
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": format!("sha256:{}", "1".repeat(64)), "size": 1u64 << 63},
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": format!("sha256:{}", "2".repeat(64)), "size": 1u64 << 63}
        ]),
        _ => serde_json::json!([
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": format!("sha256:{}", "1".repeat(64)), "size": 10}
        ]),
    };
    let m = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": Digest::of(&cfg).to_string(), "size": cfg.len()},
        "layers": layers,
    });
    (serde_json::to_vec(&m).expect("json"), cfg)
}

impl Liar {
    fn start(expected_auth: String) -> Liar {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(Mutex::new(std::collections::BTreeMap::new()));
        let (s2, sent2) = (stop.clone(), sent.clone());
        let thread = std::thread::spawn(move || {
            for conn in l.incoming() {
                if s2.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (sent, auth) = (sent2.clone(), expected_auth.clone());
                std::thread::spawn(move || Liar::serve(conn, &sent, &auth));
            }
        });
        Liar {
            addr,
            stop,
            sent,
            thread: Some(thread),
        }
    }

    fn sent(&self, repo: &str) -> u64 {
        self.sent
            .lock()
            .expect("lock")
            .get(repo)
            .copied()
            .unwrap_or(0)
    }

    fn serve(mut c: TcpStream, sent: &Mutex<std::collections::BTreeMap<String, u64>>, auth: &str) {
        let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(10)));
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match c.read(&mut b) {
                Ok(1) => head.push(b[0]),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
        let repo = path
            .strip_prefix("/v2/")
            .and_then(|p| p.split('/').next())
            .unwrap_or("")
            .to_string();
        let authorized = head.lines().any(|l| {
            l.to_ascii_lowercase().starts_with("authorization:") && l[14..].trim() == auth
        });
        let count = |n: u64| {
            if let Ok(mut m) = sent.lock() {
                *m.entry(repo.clone()).or_insert(0) += n;
            }
        };
        let reply = |c: &mut TcpStream, status: &str, headers: &str, body: &[u8]| {
            let _ = c.write_all(
                format!(
                    "HTTP/1.0 {status}\r\n{headers}Content-Length: {}\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            let _ = c.write_all(body);
        };
        if path.starts_with("/steal") {
            // The foreign origin of `redirect`: counts what reaches it, and with which header.
            let with_auth = head
                .lines()
                .any(|l| l.to_ascii_lowercase().starts_with("authorization:"));
            if let Ok(mut m) = sent.lock() {
                *m.entry("stolen".into()).or_insert(0) += 1;
                *m.entry("stolen-with-authorization".into()).or_insert(0) += u64::from(with_auth);
            }
            return reply(&mut c, "201 Created", "", b"");
        }
        if repo == "redirect" && head.starts_with("POST ") {
            // An upload session on another origin (same server, named `localhost`).
            let port = c.local_addr().map(|a| a.port()).unwrap_or(0);
            return reply(
                &mut c,
                "202 Accepted",
                &format!("Location: http://localhost:{port}/steal/upload\r\n"),
                b"",
            );
        }
        if repo == "auth" && !authorized {
            return reply(
                &mut c,
                "401 Unauthorized",
                "WWW-Authenticate: Basic realm=\"liar\"\r\n",
                b"",
            );
        }
        let endless = |c: &mut TcpStream| {
            let _ = c.write_all(b"HTTP/1.0 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\n\r\n");
            let chunk = vec![b' '; 64 << 10];
            let mut n = 0;
            while n < CAP && c.write_all(&chunk).is_ok() {
                n += chunk.len() as u64;
                count(chunk.len() as u64);
            }
        };
        let (manifest, cfg) = liar_manifest(&repo);
        if path.contains("/manifests/") {
            if repo == "bigmanifest" {
                return endless(&mut c);
            }
            return reply(
                &mut c,
                "200 OK",
                "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n",
                &manifest,
            );
        }
        if path.ends_with(&Digest::of(&cfg).to_string()) {
            return reply(&mut c, "200 OK", "", &cfg);
        }
        if path.contains("/blobs/") {
            if repo == "endless" {
                return endless(&mut c);
            }
            return reply(&mut c, "200 OK", "", b"0123456789");
        }
        reply(&mut c, "404 Not Found", "", b"")
    }
}

impl Drop for Liar {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_lying_registry_cannot_panic_exhaust_or_poison_the_cache() {
    let user_var = clusterctl_testbed::unique_name("CC_HOSTILE_USER").replace('-', "_");
    let pass_var = clusterctl_testbed::unique_name("CC_HOSTILE_PASS").replace('-', "_");
    let password = "pa:ss w\u{f6}rd \"'$`\\%&=+";
    // Names unique to this test (no other test reads them).
    std::env::set_var(&user_var, "robot$site");
    std::env::set_var(&pass_var, password);
    let b64 = {
        // Basic credentials as RFC 7617 encodes them (user ":" password, UTF-8, base64).
        const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let raw = format!("robot$site:{password}").into_bytes();
        let mut s = String::new();
        for ch in raw.chunks(3) {
            let n = ch
                .iter()
                .enumerate()
                .fold(0u32, |a, (i, b)| a | (*b as u32) << (16 - 8 * i));
            for i in 0..4 {
                if i <= ch.len() {
                    s.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    s.push('=');
                }
            }
        }
        s
    };
    let liar = Liar::start(format!("Basic {b64}"));
    let work = scratch("cc-airgap-liar-");
    let store = BlobStore::open(work.path().join("cache")).expect("store");
    let creds = |user: &str, pass: &str| ClientOptions {
        credentials: vec![EnvCredentials {
            registry: liar.addr.clone(),
            username_var: user.into(),
            password_var: pass.into(),
        }],
        ..Default::default()
    };
    let client = RegistryClient::new(creds(&user_var, &pass_var)).expect("client");
    let opts = PullOptions {
        retries: 0,
        jobs: 2,
        ..Default::default()
    };
    let pull = |client: &RegistryClient, repo: &str| {
        let r = ImageRef::parse(&format!("{}/{repo}:v1", liar.addr)).expect("ref");
        let req = ImageRequest {
            source: r.clone(),
            mirror: r,
        };
        let started = std::time::Instant::now();
        let res = pull_images(client, &store, &[req], &opts);
        (res, started.elapsed())
    };

    // Absurd sizes: an error, not an arithmetic overflow.
    let (res, _) = pull(&client, "overflow");
    assert!(res.is_err(), "two 2^63-byte layers cannot be fetched");

    // A blob that never ends is cut off once it passes its descriptor's size.
    let (res, took) = pull(&client, "endless");
    let err = res.expect_err("endless blob").to_string();
    assert!(err.contains(&"1".repeat(64)), "{err}");
    assert!(
        liar.sent("endless") < 48 << 20,
        "read {} bytes of a 10-byte blob ({took:?})",
        liar.sent("endless")
    );

    // A manifest that never ends is cut off at the 4 MiB that registries accept.
    let (res, took) = pull(&client, "bigmanifest");
    let err = res.expect_err("endless manifest").to_string();
    assert!(err.contains("bigmanifest"), "{err}");
    assert!(
        liar.sent("bigmanifest") < 48 << 20,
        "read {} bytes of a manifest ({took:?})",
        liar.sent("bigmanifest")
    );

    // Wrong bytes for a digest: refused naming the digest, and nothing lands in the cache.
    let (res, _) = pull(&client, "liar");
    let err = res.expect_err("wrong bytes").to_string();
    assert!(err.contains(&"1".repeat(64)), "{err}");
    assert!(!store
        .path(&Digest::parse(&format!("sha256:{}", "1".repeat(64))).expect("d"))
        .exists());
    let stray: Vec<_> = std::fs::read_dir(work.path().join("cache/blobs/sha256"))
        .expect("dir")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(stray.is_empty(), "temp files left: {stray:?}");

    // An upload location on another origin gets neither the blob nor the credentials.
    let data = b"0123456789".to_vec();
    let d = Digest::of(&data);
    let res = client.upload_blob(&liar.addr, "redirect", &d, data.len() as u64, &|| {
        Ok(Box::new(std::io::Cursor::new(data.clone())))
    });
    assert_eq!(
        (liar.sent("stolen"), liar.sent("stolen-with-authorization")),
        (0, 0),
        "{res:?}"
    );
    let err = res.expect_err("refused").to_string();
    assert!(
        err.contains("localhost") && err.contains("another origin"),
        "{err}"
    );

    // Credentials with odd characters reach the registry intact (it then serves `liar`'s image);
    // wrong ones are refused, and the password is never in a message.
    let (res, _) = pull(&client, "auth");
    let err = res.expect_err("the blob still lies").to_string();
    assert!(
        err.contains(&"1".repeat(64)),
        "authenticated, got to the blob: {err}"
    );
    std::env::set_var(&pass_var, format!("{password}x"));
    let (res, _) = pull(&client, "auth");
    let err = res.expect_err("wrong password").to_string();
    assert!(
        err.contains("authentication") && err.contains(&liar.addr),
        "{err}"
    );
    assert!(
        !err.contains(password) && !err.contains(&b64),
        "secret in {err}"
    );
    let (res, _) = pull(
        &RegistryClient::new(creds(&format!("{user_var}_UNSET"), &pass_var)).expect("client"),
        "auth",
    );
    let err = res.expect_err("no credentials").to_string();
    assert!(err.contains(&liar.addr), "{err}");
    assert!(!err.contains(password), "secret in {err}");
    std::env::remove_var(&user_var);
    std::env::remove_var(&pass_var);

    // A registry that is not there: a prompt transport error naming it.
    let dead = TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead_addr = dead.local_addr().expect("addr").to_string();
    drop(dead);
    let r = ImageRef::parse(&format!("{dead_addr}/x:v1")).expect("ref");
    let err = pull_images(
        &client,
        &store,
        &[ImageRequest {
            source: r.clone(),
            mirror: r,
        }],
        &opts,
    )
    .expect_err("nobody listens")
    .to_string();
    assert!(err.contains(&dead_addr), "{err}");
}

#[test]
fn an_import_goes_to_the_cluster_files_mirror_not_the_bundles() {
    if !require("docker-registry", clusterctl_testbed::registry::available()) {
        return;
    }
    let reg = Registry::start().expect("registry");
    let work = scratch("cc-airgap-mirror-");
    // A bundle made for the same cluster name and version, but bound for `reg`.
    let good = good_bundle(work.path());
    let bound = work.path().join("bound.tar");
    consistent(
        &bound,
        &edit_manifest(&entries(&good), |v| {
            for (i, img) in v["images"]
                .as_array_mut()
                .expect("images")
                .iter_mut()
                .enumerate()
            {
                img["mirror"] = serde_json::json!(format!("{}/site/hostile/h{i}:v1", reg.addr()));
            }
        }),
    );
    let opts = |prefix: Option<String>| ImportOptions {
        mirror_prefix: prefix,
        state: Some(work.path().join("state.json")),
        ..Default::default()
    };
    // The site's cluster file names another mirror: the images go there, not to the registry the
    // bundle recorded; it names none: refused, nowhere to push.
    let cluster = cluster_file(work.path(), "127.0.0.1:1/site");
    let err = import_bundle_for_cluster(&bound, &cluster, &opts(None))
        .expect_err("the file's mirror is not there")
        .to_string();
    assert!(err.contains("127.0.0.1:1"), "{err}");
    assert_eq!(
        writes(&reg),
        0,
        "pushed to the bundle's recorded mirror: {err}"
    );
    let cluster = cluster_file(work.path(), "");
    let err = import_bundle_for_cluster(&bound, &cluster, &opts(None))
        .expect_err("no mirror")
        .to_string();
    assert!(err.contains("registry.mirror"), "{err}");
    assert_eq!(writes(&reg), 0, "{err}");
    let cluster = cluster_file(work.path(), &format!("{}/other", reg.addr()));
    let (_, r) = import_bundle_for_cluster(&bound, &cluster, &opts(None)).expect("file's mirror");
    assert_eq!(r.images_pushed, 3);
    assert_eq!(reg.count_requests("PUT", "/v2/site/"), 0);
    let client = RegistryClient::new(ClientOptions::default()).expect("client");
    let vb = verify_bundle(&bound).expect("verifies");
    for img in &vb.manifest.images {
        let r = ImageRef::parse(&img.source).expect("ref");
        let served = client
            .head_manifest(reg.addr(), &format!("other/{}", r.repository), "v1")
            .expect("head");
        assert_eq!(served.as_ref(), Some(&img.digest), "{}", img.source);
    }
    // An explicit --mirror wins over the file's.
    let (_, r) = import_bundle_for_cluster(
        &bound,
        &cluster,
        &opts(Some(format!("{}/moved", reg.addr()))),
    )
    .expect("--mirror");
    assert_eq!(r.images_pushed, 3);
    assert!(reg.count_requests("PUT", "/v2/moved/") > 0);
}

/// Peak resident memory of this process, from `/proc/self/status` (`VmHWM`, kB).
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn verification_holds_manifests_in_memory_not_small_layers() {
    const CHILD: &str = "CC_HOSTILE_VERIFY_PEAK";
    if let Ok(p) = std::env::var(CHILD) {
        // In the child process: verify, then report the peak.
        verify_bundle(Path::new(&p)).expect("verifies");
        println!("VMHWM={}", peak_rss_kb());
        return;
    }
    // One image of 32 layers of 3 MiB each (under the 4 MiB up to which entries used to be kept).
    let work = scratch("cc-airgap-memory-");
    let store = BlobStore::open(work.path().join("cache")).expect("store");
    let mut rng = Rng(21);
    let mut layers = Vec::new();
    for _ in 0..32 {
        let mut b = rng.bytes(3 << 20);
        b[0] = 0x1f; // what a gzip'd layer starts with
        let d = store.put(&b).expect("put");
        layers.push(serde_json::json!({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d.to_string(), "size": b.len()}));
    }
    let cfg = br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
    let cd = store.put(cfg).expect("put");
    let m = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd.to_string(), "size": cfg.len()},
        "layers": layers,
    }))
    .expect("json");
    let md = store.put(&m).expect("put");
    let mut blobs: Vec<Digest> = layers
        .iter()
        .map(|l| Digest::parse(l["digest"].as_str().expect("digest")).expect("digest"))
        .collect();
    blobs.extend([cd, md.clone()]);
    blobs.sort();
    let source = ImageRef::parse("registry.fixture.test/big/layers:v1").expect("ref");
    let out = work.path().join("layers.tar");
    let input = BundleInput {
        cluster: "hostile".into(),
        kubernetes_version: "v1.34.1".into(),
        extra_versions: vec![],
        platforms: vec![],
        images: vec![PulledImage {
            mirror: source.clone(),
            source,
            digest: md.clone(),
            source_digest: md,
            media_type: "application/vnd.oci.image.manifest.v1+json".into(),
            size: m.len() as u64,
            platforms: vec![],
            blobs,
        }],
        packages: vec![],
        binaries: vec![],
        upstream: vec![],
    };
    let summary = write_bundle(&out, &store, &input).expect("write");
    drop(store);
    let child = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            // The test's name in this crate's one test binary (module path without the crate).
            "hostile::verification_holds_manifests_in_memory_not_small_layers",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, &out)
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&child.stdout).into_owned();
    assert!(
        child.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&child.stderr)
    );
    let peak_kb: u64 = text
        .lines()
        .find_map(|l| l.split("VMHWM=").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {text}"));
    // The bundle is 96 MiB; verification may hold its buffers and the manifests, not the layers.
    assert!(
        peak_kb * 1024 < summary.bytes / 2,
        "verifying a {} byte bundle peaked at {peak_kb} kB",
        summary.bytes
    );
}

#[test]
fn a_killed_runs_temp_files_do_not_pile_up_in_the_cache() {
    // What `kill -9` in the middle of a download leaves: a temp file in the blob directory.
    let work = scratch("cc-airgap-stale-");
    let dir = work.path().join("cache/blobs/sha256");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let old = dir.join(".tmpKILLED");
    let fresh = dir.join(".tmpRUNNING");
    for p in [&old, &fresh] {
        std::fs::write(p, vec![0u8; 4096]).expect("write");
    }
    let two_hours = std::time::SystemTime::now() - 2 * clusterctl_airgap::store::STALE_TEMP;
    std::fs::File::options()
        .write(true)
        .open(&old)
        .and_then(|f| f.set_modified(two_hours))
        .expect("set mtime");
    BlobStore::open(work.path().join("cache")).expect("store");
    assert!(!old.exists(), "a stale temp file stays forever");
    assert!(
        fresh.exists(),
        "a download in progress (another run) must not lose its file"
    );
}

#[test]
fn a_bundle_on_a_fifo_is_refused_without_blocking() {
    // Issue 17, finding 9: `up --dry-run` hung when airgap.bundle named a FIFO (nobody writing
    // to it): opening it for reading waited for a writer. Every reader of a bundle refuses it first.
    let work = scratch("cc-airgap-pipe-");
    let fifo = work.path().join("bundle.fifo");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(st.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let f = fifo.clone();
    std::thread::spawn(move || {
        let verify = verify_bundle(&f).map(|_| ()).map_err(|e| e.to_string());
        let sums = clusterctl_airgap::bundle::verify::sums_digest(&f)
            .map(|_| ())
            .map_err(|e| e.to_string());
        let opts = ImportOptions {
            mirror_prefix: Some("127.0.0.1:1/x".into()),
            state: Some(f.with_extension("state.json")),
            ..Default::default()
        };
        let import = import_bundle(&f, &opts)
            .map(|_| ())
            .map_err(|e| e.to_string());
        let _ = tx.send((verify, sums, import));
    });
    let (verify, sums, import) = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("refused at once, not waiting for a writer");
    for r in [verify, sums] {
        let e = r.expect_err("a FIFO is not a bundle");
        assert!(
            e.contains("FIFO") && e.contains("not a regular file"),
            "{e}"
        );
    }
    assert!(import.expect_err("a FIFO").contains("not a regular file"));
}

/// Runs `test` of this binary again in a child process with `CC_HOSTILE_VERIFY_PEAK` set to `arg`;
/// returns what the child printed as `VMHWM=<kB>`.
fn child_peak_kb(test: &str, arg: &Path) -> u64 {
    let name = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{test}"),
        None => test.to_string(),
    };
    let child = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args(["--exact", &name, "--nocapture", "--test-threads=1"])
        .env("CC_HOSTILE_VERIFY_PEAK", arg)
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&child.stdout).into_owned();
    assert!(
        child.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&child.stderr)
    );
    text.lines()
        .find_map(|l| l.split("VMHWM=").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {text}"))
}

#[test]
fn verification_memory_does_not_grow_with_padding_or_unreferenced_blobs() {
    // Issue 17, finding 11: a whitespace-padded manifest.json, or many unreferenced blobs that
    // look like JSON, were held in memory whole (1.06 GB for a 1 GiB bundle), and the blobs were
    // accepted. Both are refused now, in constant memory.
    const TEST: &str = "verification_memory_does_not_grow_with_padding_or_unreferenced_blobs";
    if let Ok(p) = std::env::var("CC_HOSTILE_VERIFY_PEAK") {
        let e = verify_bundle(Path::new(&p))
            .expect_err("refused")
            .to_string();
        println!("ERROR={e}");
        println!("VMHWM={}", peak_rss_kb());
        return;
    }
    let work = scratch("cc-airgap-padding-");
    let good = good_bundle(work.path());
    let list = entries(&good);
    // manifest.json followed by 96 MiB of spaces: valid JSON, over the 16 MiB cap.
    let padded = work.path().join("padded.tar");
    consistent(
        &padded,
        &list
            .iter()
            .map(|(n, b)| {
                let mut b = b.clone();
                if n == "manifest.json" {
                    b.resize(b.len() + (96 << 20), b' ');
                }
                (n.clone(), b)
            })
            .collect::<Vec<_>>(),
    );
    // 24 blobs of 4 MiB (96 MiB) that start with `{`, named by their digests, referenced by nothing.
    let extra = work.path().join("extra.tar");
    let mut with_extra = list.clone();
    let mut rng = Rng(17);
    for _ in 0..24 {
        let mut b = rng.bytes(4 << 20);
        b[0] = b'{';
        with_extra.push((format!("oci/blobs/sha256/{}", Digest::of(&b).hex()), b));
    }
    consistent(&extra, &with_extra);
    drop(with_extra);
    for (bundle, says) in [
        (&padded, "more than the limit of 16777216 bytes"),
        (&extra, "not referenced by manifest.json"),
    ] {
        let e = verify_bundle(bundle).expect_err("refused").to_string();
        assert!(e.contains(says), "{e}");
        let size = std::fs::metadata(bundle).expect("stat").len();
        let peak = child_peak_kb(TEST, bundle);
        assert!(
            peak * 1024 < size / 2,
            "verifying {} ({size} bytes) peaked at {peak} kB",
            bundle.display()
        );
    }
}

#[test]
fn an_import_record_placed_beside_a_bundle_steers_no_request() {
    // Issue 17, finding 12: a `site.tar.imported.json` beside a bundle, listing an unrelated
    // registry, made `airgap import` send it a HEAD although the bundle itself was refused. A record
    // is trusted only for the bundle whose SHA256SUMS it names, and only the registry the import
    // pushes to is asked anything.
    if !require("docker-registry", clusterctl_testbed::registry::available()) {
        return;
    }
    let mirror = Registry::start().expect("registry");
    let evil = Registry::start().expect("registry");
    // The test bed's own readiness probe.
    let probed = requests(&evil);
    let work = scratch("cc-airgap-record-");
    let good = good_bundle(work.path());
    let sums = clusterctl_airgap::bundle::verify::sums_digest(&good).expect("sums");
    let vb = verify_bundle(&good).expect("verifies");
    // A tampered copy: its SHA256SUMS no longer holds for one blob.
    let bad = work.path().join("site.tar");
    let mut list = entries(&good);
    let blob = list
        .iter()
        .position(|(n, _)| n.starts_with("oci/blobs/"))
        .expect("blob");
    list[blob].1[0] ^= 1;
    {
        let mut tb = tar::Builder::new(std::fs::File::create(&bad).expect("create"));
        for (n, b) in &list {
            let mut h = tar::Header::new_gnu();
            h.set_size(b.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            tb.append_data(&mut h, n, b.as_slice()).expect("append");
        }
        tb.finish().expect("finish");
    }
    let bad_sums = clusterctl_airgap::bundle::verify::sums_digest(&bad).expect("sums");
    let forged = |bundle: Option<&Digest>| {
        let registry: serde_json::Map<String, serde_json::Value> = vb
            .manifest
            .images
            .iter()
            .enumerate()
            .map(|(i, img)| {
                (
                    format!("{}/stolen/i{i}:v1", evil.addr()),
                    serde_json::json!(img.digest.to_string()),
                )
            })
            .collect();
        let mut r = serde_json::json!({ "registry": registry });
        if let Some(d) = bundle {
            r["bundle"] = serde_json::json!(d.to_string());
        }
        serde_json::to_vec(&r).expect("json")
    };
    let opts = |state: PathBuf| ImportOptions {
        mirror_prefix: Some(format!("{}/site", mirror.addr())),
        state: Some(state),
        ..Default::default()
    };
    let record = clusterctl_airgap::import::ImportState::default_path(&bad);
    // Unbound, and bound to the refused bundle's own SHA256SUMS: the bundle is refused, and the
    // registry the record names hears nothing.
    for bound in [None, Some(&bad_sums)] {
        std::fs::write(&record, forged(bound)).expect("write");
        let e = import_bundle(&bad, &opts(record.clone()))
            .expect_err("tampered")
            .to_string();
        assert!(e.contains("sha256 mismatch"), "{e}");
        assert_eq!(
            requests(&evil),
            probed,
            "the record's registry was contacted: {}",
            evil.log()
        );
    }
    // A sound bundle with a record bound to it that lists another registry: the import goes to
    // the mirror, the other registry hears nothing.
    let good_record = clusterctl_airgap::import::ImportState::default_path(&good);
    std::fs::write(&good_record, forged(Some(&sums))).expect("write");
    let (_, r) = import_bundle(&good, &opts(good_record.clone())).expect("imports");
    assert_eq!(r.images_pushed, 3);
    assert_eq!(
        requests(&evil),
        probed,
        "the record's registry was contacted: {}",
        evil.log()
    );
    // And the record written now names this bundle.
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&good_record).expect("record")).expect("json");
    assert_eq!(saved["bundle"], serde_json::json!(sums.to_string()));
    let pushed = saved["registry"]
        .as_object()
        .expect("registry")
        .keys()
        .filter(|k| k.starts_with(mirror.addr()))
        .count();
    assert_eq!(pushed, 3);
}

/// Image `i` of `list`'s `manifest.json`.
fn listed_image(list: &[(String, Vec<u8>)], i: usize) -> serde_json::Value {
    let m = list
        .iter()
        .find(|(n, _)| n == "manifest.json")
        .map(|(_, b)| serde_json::from_slice::<serde_json::Value>(b).expect("json"))
        .expect("manifest.json");
    m["images"][i].clone()
}

/// The digest `manifest.json` lists for image `i` of `list`.
fn entries_digest(list: &[(String, Vec<u8>)], i: usize) -> String {
    listed_image(list, i)["digest"]
        .as_str()
        .expect("digest")
        .to_string()
}

/// The size `manifest.json` lists for image `i` of `list`.
fn image_size(list: &[(String, Vec<u8>)], i: usize) -> u64 {
    listed_image(list, i)["size"].as_u64().expect("size")
}

#[test]
fn an_endless_package_download_is_cut_off_at_its_cap_with_nothing_written() {
    let liar = Liar::start(String::new());
    let dir = tempfile::tempdir().expect("tempdir");
    let dest = dir.path().join("kubeadm.deb");
    let client = RegistryClient::new(ClientOptions::default()).expect("client");
    let url = format!("http://{}/v2/endless/blobs/package", liar.addr);
    let want = Digest::of(b"what the file pins");
    let err = client
        .download_to_capped(&url, &want, &dest, 1 << 20)
        .expect_err("an endless body is refused");
    assert!(
        err.to_string().contains("larger than 1048576 bytes"),
        "{err}"
    );
    assert!(!dest.exists(), "nothing written at the destination");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("ls")
        .filter_map(|e| e.ok())
        .collect();
    assert!(left.is_empty(), "temporary file left: {left:?}");
    // The server stops once the connection is dropped: far less than its 256 MiB was taken.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(liar.sent("endless") < 64 << 20, "{}", liar.sent("endless"));
}
