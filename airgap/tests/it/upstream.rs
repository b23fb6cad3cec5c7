//! The upstream file fetcher (`clusterctl_airgap::upstream`) against a loopback HTTPS server made here
//! (rustls, with a test CA the client is told to trust, as a site mirror's `caFile`). The server
//! serves fixture bytes of our own (no upstream file is copied), answers `Range: bytes=N-` with 206,
//! and can be told to cut a response after some bytes (the connection closed under a declared
//! `Content-Length`) or to ignore ranges. Checks: a pinned file is downloaded once and then served
//! from the cache; a wrong digest is refused, nothing is cached and the partial bytes are dropped; a
//! download cut mid-body is resumed with a range request and verified over the whole file; a download
//! cut on every attempt fails and caches nothing, and the next run resumes from the bytes kept; a
//! server ignoring ranges restarts the file; an unpinned file is refused unless accepted, then its
//! first digest is recorded and required; an HTTP error is reported with its status.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clusterctl_airgap::registry::{ClientOptions, RegistryClient};
use clusterctl_airgap::upstream::{Trust, UpstreamCache, WantedFile};
use clusterctl_airgap::{AirgapError, Digest};
use clusterctl_testbed::registry::{Rng, TestCa};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How the server answers one path.
#[derive(Clone)]
struct Served {
    body: Vec<u8>,
    /// Cut the next this many responses after `cut_at` bytes of the body.
    cuts_left: usize,
    cut_at: usize,
    /// Answer every request with the whole file (200), ranges ignored.
    ignore_range: bool,
    /// Answer with this status and no file.
    status: Option<u16>,
}

impl Served {
    fn file(body: Vec<u8>) -> Served {
        Served {
            body,
            cuts_left: 0,
            cut_at: 0,
            ignore_range: false,
            status: None,
        }
    }
}

#[derive(Default)]
struct State {
    paths: BTreeMap<String, Served>,
    /// (path, Range header or "") per request.
    log: Vec<(String, String)>,
}

struct FileServer {
    port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl FileServer {
    fn start(ca: &TestCa) -> FileServer {
        let certs =
            vec![CertificateDer::from_pem_slice(ca.server_cert_pem.as_bytes()).expect("cert")];
        let key = PrivateKeyDer::from_pem_slice(ca.server_key_pem.as_bytes()).expect("key");
        let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
        let cfg = Arc::new(cfg);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            while !sp.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((tcp, _)) => {
                        let (cfg, st) = (cfg.clone(), st.clone());
                        std::thread::spawn(move || serve(tcp, cfg, st));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        FileServer { port, state, stop }
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    fn set(&self, path: &str, s: Served) {
        self.state
            .lock()
            .expect("state")
            .paths
            .insert(path.into(), s);
    }

    fn requests(&self, path: &str) -> Vec<String> {
        let st = self.state.lock().expect("state");
        st.log
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(tcp: TcpStream, cfg: Arc<rustls::ServerConfig>, st: Arc<Mutex<State>>) {
    let _ = tcp.set_nonblocking(false);
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(conn) = rustls::ServerConnection::new(cfg) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tls.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    let range = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("range")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    let served = {
        let mut s = st.lock().expect("state");
        s.log.push((path.clone(), range.clone()));
        let served = s.paths.get(&path).cloned();
        if let Some(x) = s.paths.get_mut(&path) {
            x.cuts_left = x.cuts_left.saturating_sub(1);
        }
        served
    };
    let Some(f) = served else {
        let _ = tls.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found",
        );
        return;
    };
    if let Some(code) = f.status {
        let _ = tls.write_all(
            format!("HTTP/1.1 {code} Oops\r\nContent-Length: 4\r\nConnection: close\r\n\r\noops")
                .as_bytes(),
        );
        return;
    }
    let from = range
        .strip_prefix("bytes=")
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|_| !f.ignore_range);
    let (status, body) = match from {
        Some(n) if n < f.body.len() => ("206 Partial Content", &f.body[n..]),
        Some(_) => {
            let _ = tls.write_all(
                b"HTTP/1.1 416 Range Not Satisfiable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            return;
        }
        None => ("200 OK", &f.body[..]),
    };
    let _ = tls.write_all(
        format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    let send = if f.cuts_left > 0 {
        &body[..f.cut_at.min(body.len())]
    } else {
        body
    };
    let _ = tls.write_all(send);
    let _ = tls.flush();
    if f.cuts_left > 0 {
        // Close without the rest: the client sees the body end early.
        tls.conn.send_close_notify();
        let _ = tls.flush();
        let _ = tls.sock.shutdown(std::net::Shutdown::Both);
    }
}

struct Setup {
    server: FileServer,
    client: RegistryClient,
    cache: UpstreamCache,
    dir: tempfile::TempDir,
}

fn setup() -> Setup {
    let ca = TestCa::new("clusterctl upstream test CA").expect("CA");
    let server = FileServer::start(&ca);
    let client = RegistryClient::new(ClientOptions {
        ca_pem: Some(ca.ca_pem.clone()),
        tls_hosts: vec![format!("127.0.0.1:{}", server.port)],
        timeout: Duration::from_secs(30),
        ..ClientOptions::default()
    })
    .expect("client");
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = UpstreamCache::open(&dir.path().join("upstream")).expect("cache");
    Setup {
        server,
        client,
        cache,
        dir,
    }
}

fn want(s: &Setup, path: &str, sha: Option<&[u8]>) -> WantedFile {
    WantedFile {
        name: path.trim_start_matches('/').to_string(),
        url: s.server.url(path),
        sha256: sha.map(Digest::of),
        digest_source: "the test's fixture".into(),
    }
}

fn cached_files(s: &Setup) -> usize {
    std::fs::read_dir(s.dir.path().join("upstream/sha256"))
        .expect("cache dir")
        .count()
}

fn partials(s: &Setup) -> Vec<u64> {
    std::fs::read_dir(s.dir.path().join("upstream/partial"))
        .expect("partial dir")
        .filter_map(|e| e.ok()?.metadata().ok().map(|m| m.len()))
        .collect()
}

#[test]
fn a_pinned_file_is_downloaded_once_then_served_from_the_cache() {
    let s = setup();
    let body = Rng(7).bytes(300_000);
    s.server.set("/manifest.yaml", Served::file(body.clone()));
    let w = want(&s, "/manifest.yaml", Some(&body));
    let f = s.cache.fetch(&s.client, &w, false).expect("fetch");
    assert!(f.downloaded);
    assert_eq!(f.trust, Trust::Pinned);
    assert_eq!(f.size, body.len() as u64);
    assert_eq!(std::fs::read(&f.path).expect("cached"), body);
    let again = s.cache.fetch(&s.client, &w, false).expect("again");
    assert!(!again.downloaded, "served from the cache");
    assert_eq!(again.path, f.path);
    assert_eq!(
        s.server.requests("/manifest.yaml").len(),
        1,
        "one GET in all"
    );
    assert_eq!(
        s.cache.cached(&w).map(|c| c.sha256),
        Some(Digest::of(&body))
    );
}

#[test]
fn a_wrong_digest_is_refused_and_nothing_is_kept() {
    let s = setup();
    let body = Rng(8).bytes(50_000);
    let mut other = body.clone();
    other[10] ^= 1;
    s.server.set("/tigera-operator.yaml", Served::file(other));
    let w = want(&s, "/tigera-operator.yaml", Some(&body));
    match s.cache.fetch(&s.client, &w, false) {
        Err(AirgapError::DigestMismatch {
            what,
            expected,
            actual,
        }) => {
            assert!(what.contains("tigera-operator.yaml"), "{what}");
            assert!(expected.contains(Digest::of(&body).hex()), "{expected}");
            assert!(expected.contains("the test's fixture"), "{expected}");
            assert_ne!(actual, expected);
        }
        other => panic!("expected a digest mismatch, got {other:?}"),
    }
    assert_eq!(cached_files(&s), 0, "nothing cached");
    assert!(partials(&s).is_empty(), "the partial download removed");
    assert!(s.cache.cached(&w).is_none());
}

#[test]
fn a_download_cut_mid_body_is_resumed_and_verified_whole() {
    let s = setup();
    let body = Rng(9).bytes(400_000);
    s.server.set(
        "/cilium.tgz",
        Served {
            cuts_left: 1,
            cut_at: 150_000,
            ..Served::file(body.clone())
        },
    );
    let w = want(&s, "/cilium.tgz", Some(&body));
    let f = s.cache.fetch(&s.client, &w, false).expect("resumed");
    assert_eq!(std::fs::read(&f.path).expect("cached"), body, "whole file");
    let reqs = s.server.requests("/cilium.tgz");
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!(reqs[0], "");
    let from: u64 = reqs[1]
        .strip_prefix("bytes=")
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a range request, got {reqs:?}"));
    assert!(from > 0 && from <= 150_000, "resumed at {from}");
    assert!(partials(&s).is_empty());
}

#[test]
fn a_download_cut_every_time_caches_nothing_and_the_next_run_resumes() {
    let s = setup();
    let body = Rng(10).bytes(300_000);
    s.server.set(
        "/kube-flannel.yml",
        Served {
            cuts_left: 3,
            cut_at: 40_000,
            ..Served::file(body.clone())
        },
    );
    let w = want(&s, "/kube-flannel.yml", Some(&body));
    let e = s
        .cache
        .fetch(&s.client, &w, false)
        .expect_err("cut three times");
    assert!(
        matches!(e, AirgapError::Download { status: None, .. }),
        "a broken download: {e:?}"
    );
    assert_eq!(cached_files(&s), 0, "nothing half-downloaded is handed on");
    assert!(s.cache.cached(&w).is_none());
    let kept = partials(&s);
    assert_eq!(kept.len(), 1, "the bytes so far are kept for the next run");
    assert!(kept[0] > 0 && kept[0] < body.len() as u64, "{kept:?}");
    // The server works again: the next run asks only for the rest.
    let f = s.cache.fetch(&s.client, &w, false).expect("resumed");
    assert_eq!(std::fs::read(&f.path).expect("cached"), body);
    let reqs = s.server.requests("/kube-flannel.yml");
    assert_eq!(
        reqs.last().map(String::as_str),
        Some(format!("bytes={}-", kept[0]).as_str())
    );
}

#[test]
fn a_server_ignoring_ranges_restarts_the_file() {
    let s = setup();
    let body = Rng(11).bytes(200_000);
    s.server.set(
        "/helm.tar.gz",
        Served {
            cuts_left: 1,
            cut_at: 70_000,
            ignore_range: true,
            ..Served::file(body.clone())
        },
    );
    let w = want(&s, "/helm.tar.gz", Some(&body));
    let f = s.cache.fetch(&s.client, &w, false).expect("restarted");
    assert_eq!(
        std::fs::read(&f.path).expect("cached"),
        body,
        "no bytes doubled"
    );
    assert_eq!(s.server.requests("/helm.tar.gz").len(), 2);
}

#[test]
fn an_unpinned_file_needs_acceptance_then_its_first_digest_is_required() {
    let s = setup();
    let body = Rng(12).bytes(20_000);
    s.server
        .set("/cilium-9.9.9.tgz", Served::file(body.clone()));
    let w = want(&s, "/cilium-9.9.9.tgz", None);
    let e = s.cache.fetch(&s.client, &w, false).expect_err("unpinned");
    assert!(e.to_string().contains("acceptUnverified"), "{e}");
    assert!(
        s.server.requests("/cilium-9.9.9.tgz").is_empty(),
        "not even downloaded"
    );
    let f = s.cache.fetch(&s.client, &w, true).expect("accepted");
    assert_eq!(f.trust, Trust::Accepted { first: true });
    assert_eq!(
        s.cache.accepted().get(&w.url).map(String::as_str),
        Some(Digest::of(&body).hex())
    );
    // From now on the recorded digest is required: a changed file at that address is refused.
    std::fs::remove_file(&f.path).expect("drop the cached copy");
    let mut changed = body.clone();
    changed[0] ^= 0xff;
    s.server.set("/cilium-9.9.9.tgz", Served::file(changed));
    let e = s
        .cache
        .fetch(&s.client, &w, true)
        .expect_err("changed upstream");
    assert!(matches!(e, AirgapError::DigestMismatch { .. }), "{e:?}");
    assert_eq!(cached_files(&s), 0);
}

#[test]
fn an_http_error_names_the_status_and_address() {
    let s = setup();
    s.server.set(
        "/gone.yaml",
        Served {
            status: Some(503),
            ..Served::file(Vec::new())
        },
    );
    let w = want(&s, "/gone.yaml", Some(b"x"));
    let e = s.cache.fetch(&s.client, &w, false).expect_err("503");
    let msg = e.to_string();
    assert!(msg.contains("503") && msg.contains("/gone.yaml"), "{msg}");
    assert_eq!(
        s.server.requests("/gone.yaml").len(),
        1,
        "an HTTP error is not retried"
    );
    assert_eq!(cached_files(&s), 0);
}

/// A listener that never answers and counts the connections made to it: an address that must not
/// be contacted.
struct Unreachable {
    port: u16,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Unreachable {
    fn start() -> Unreachable {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s) = (accepted.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok(_) => {
                        a.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Unreachable {
            port,
            accepted,
            stop,
        }
    }
}

impl Drop for Unreachable {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_bundle_carries_the_upstream_files_and_an_air_gapped_cache_takes_them_without_a_request() {
    use clusterctl_airgap::bundle::{verify_bundle, write_bundle, BundleInput};
    use clusterctl_airgap::run::prepare_upstream;
    let s = setup();
    let manifest = Rng(21).bytes(120_000);
    let chart = Rng(22).bytes(60_000);
    s.server
        .set("/kube-flannel.yml", Served::file(manifest.clone()));
    s.server.set("/cilium.tgz", Served::file(chart.clone()));
    let files = vec![
        want(&s, "/kube-flannel.yml", Some(&manifest)),
        // Unpinned, accepted: the bundle records the digest of the download.
        want(&s, "/cilium.tgz", None),
    ];
    let prepared = prepare_upstream(&s.client, &s.cache, &files, true).expect("prepared");
    let store =
        clusterctl_airgap::store::BlobStore::open(s.dir.path().join("blobs")).expect("store");
    let out = s.dir.path().join("site.tar");
    let input = BundleInput {
        cluster: "c".into(),
        kubernetes_version: "v1.34.4".into(),
        extra_versions: vec![],
        platforms: vec![],
        images: vec![],
        packages: vec![],
        binaries: vec![],
        upstream: prepared,
    };
    let summary = write_bundle(&out, &store, &input).expect("written");
    let names: Vec<(&str, &str)> = summary
        .manifest
        .upstream
        .iter()
        .map(|f| (f.name.as_str(), f.path.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("cilium.tgz", "upstream/cilium.tgz"),
            ("kube-flannel.yml", "upstream/kube-flannel.yml")
        ]
    );
    let vb = verify_bundle(&out).expect("verified");
    let sums = std::fs::read_to_string({
        let mut a = tar::Archive::new(std::fs::File::open(&out).expect("open"));
        let mut e = a
            .entries()
            .expect("entries")
            .next()
            .expect("first")
            .expect("entry");
        let p = s.dir.path().join("SHA256SUMS");
        std::io::copy(&mut e, &mut std::fs::File::create(&p).expect("create")).expect("copy");
        p
    })
    .expect("sums");
    assert!(
        sums.contains(&format!(
            "{}  upstream/kube-flannel.yml",
            Digest::of(&manifest).hex()
        )),
        "{sums}"
    );

    // The disconnected side: a fresh cache, every address pointing at a listener that must not be
    // contacted.
    let dead = Unreachable::start();
    let site = tempfile::tempdir().expect("tempdir");
    let offline = UpstreamCache::open(&site.path().join("upstream")).expect("cache");
    let at_dead = |w: &WantedFile| WantedFile {
        url: format!("http://127.0.0.1:{}/{}", dead.port, w.name),
        ..w.clone()
    };
    let f = offline
        .from_bundle(&vb, &at_dead(&files[0]), false)
        .expect("from the bundle");
    assert_eq!(f.trust, Trust::Pinned);
    assert_eq!(std::fs::read(&f.path).expect("cached"), manifest);
    assert_eq!(
        offline.cached(&at_dead(&files[0])).map(|c| c.path),
        Some(f.path)
    );
    // Unpinned: refused unless accepted; accepted, the bundle's digest is recorded and required.
    let e = offline
        .from_bundle(&vb, &at_dead(&files[1]), false)
        .expect_err("unpinned, not accepted");
    assert!(e.to_string().contains("acceptUnverified"), "{e}");
    let c = offline
        .from_bundle(&vb, &at_dead(&files[1]), true)
        .expect("accepted");
    assert_eq!(c.trust, Trust::Accepted { first: true });
    assert_eq!(std::fs::read(&c.path).expect("cached"), chart);
    // A file whose pinned digest is not the one the bundle carries is refused, naming both.
    let other = WantedFile {
        sha256: Some(Digest::of(b"another release")),
        ..at_dead(&files[0])
    };
    let fresh = UpstreamCache::open(&site.path().join("other")).expect("cache");
    match fresh.from_bundle(&vb, &other, false) {
        Err(AirgapError::DigestMismatch { what, actual, .. }) => {
            assert!(what.contains("kube-flannel.yml"), "{what}");
            assert_eq!(actual, Digest::of(&manifest).to_string());
        }
        r => panic!("expected a digest mismatch, got {r:?}"),
    }
    // A file the bundle does not carry is named.
    let missing = WantedFile {
        name: "tigera-operator.yaml".into(),
        ..at_dead(&files[0])
    };
    let e = fresh
        .from_bundle(&vb, &missing, false)
        .expect_err("not carried");
    assert!(e.to_string().contains("tigera-operator.yaml"), "{e}");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        dead.accepted.load(Ordering::SeqCst),
        0,
        "the air-gapped side contacted an address"
    );
    assert_eq!(s.server.requests("/kube-flannel.yml").len(), 1);
}
