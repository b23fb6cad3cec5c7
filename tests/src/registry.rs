//! A real OCI registry (Debian's docker-registry) on a loopback port with a temporary storage directory, stopped and removed by a drop guard.
//!
//! `Registry::start()` writes a distribution v2 config (filesystem storage in a temp dir, deletes
//! enabled, access log on), starts `docker-registry serve CONFIG` on a free `127.0.0.1` port and
//! returns once `GET /v2/` answers 200. The guard kills the process and removes the directory.
//! `Registry::start_tls` serves HTTPS with a certificate from a CA made per test ([`TestCa`], rcgen);
//! `Registry::start_tls_basic_auth` also asks for basic credentials from an htpasswd file.
//! Test images are built here from random bytes (never pulled): [`layer`] (a gzip'd tar holding one
//! file), [`image`] (OCI config with the layers' `diff_ids` and an OCI manifest), pushed with
//! [`Registry::push`] (monolithic `POST ?digest=` uploads and a manifest `PUT`, plain HTTP).
//! [`Registry::manifest`] reads a manifest back (`HEAD`/`GET`, its `Docker-Content-Digest`) with the
//! test bed's own HTTP/TLS code, independent of the product's registry client;
//! [`Registry::write_requests`] counts the writes in the access log.

use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Path of the Debian `docker-registry` binary.
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// True when the `docker-registry` binary is installed.
pub fn available() -> bool {
    Path::new(REGISTRY_BIN).exists()
}

/// How [`Registry::try_start`] starts one.
struct StartOptions<'a> {
    tls: Option<&'a TestCa>,
    htpasswd: Option<&'a str>,
    /// The address to listen on (a free port is chosen).
    ip: std::net::IpAddr,
    /// Storage to serve instead of a fresh temporary one (kept when the registry stops).
    storage: Option<&'a Path>,
    /// Serve pulls only (distribution's maintenance `readonly` mode).
    readonly: bool,
}

/// A running registry; dropping it stops the process and deletes its storage (a temporary one;
/// storage served read-only is left as it is).
pub struct Registry {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
    tls: bool,
}

impl Registry {
    /// Starts a registry on a free loopback port. Errors: binary missing, or it does not answer
    /// `GET /v2/` within 15 s (its log is included in the error).
    pub fn start() -> Result<Registry> {
        Self::start_with(None, None)
    }

    /// Starts a registry serving HTTPS on a free loopback port with `ca`'s serving certificate
    /// (names `127.0.0.1` and `localhost`). Errors: as [`Registry::start`].
    pub fn start_tls(ca: &TestCa) -> Result<Registry> {
        Self::start_with(Some(ca), None)
    }

    /// As [`Registry::start_tls`], and every request needs HTTP basic credentials listed in
    /// `htpasswd` (the text of an htpasswd file with bcrypt entries, e.g. from `htpasswd -B`):
    /// distribution's `auth.htpasswd`, answering `401` with `WWW-Authenticate: Basic realm=…`.
    pub fn start_tls_basic_auth(ca: &TestCa, htpasswd: &str) -> Result<Registry> {
        Self::start_with(Some(ca), Some(htpasswd))
    }

    /// Serves the registry storage `storage` (distribution's filesystem layout, e.g. filled once by
    /// `scripts/k8s/push.sh` and cached) read-only (distribution's maintenance `readonly` mode: pulls
    /// only, the directory is never written) over HTTPS on `ip` (a free port), with `ca`'s serving
    /// certificate — which must name `ip` ([`TestCa::for_ips`]). For node containers pulling from
    /// the gateway of their test network. Errors: as [`Registry::start`].
    pub fn serve_readonly_tls(
        storage: &Path,
        ip: std::net::IpAddr,
        ca: &TestCa,
    ) -> Result<Registry> {
        let mut last = None;
        for _ in 0..3 {
            let opts = StartOptions {
                tls: Some(ca),
                htpasswd: None,
                ip,
                storage: Some(storage),
                readonly: true,
            };
            match Self::try_start(&opts) {
                Ok(r) => return Ok(r),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("registry did not start")))
    }

    /// A plain-HTTP registry on a free loopback port whose storage is `storage` (kept when the
    /// registry stops): for filling a storage directory once ([`crate::k8snode::ImageStore`]).
    /// Errors: as [`Registry::start`].
    pub fn serve_readwrite(storage: &Path) -> Result<Registry> {
        Self::serve_loopback(storage, false)
    }

    /// `storage` served read-only over plain HTTP on a free loopback port (e.g. the source of
    /// `clusterctl airgap bundle`, which speaks plain HTTP to loopback registries). Errors: as
    /// [`Registry::start`].
    pub fn serve_readonly(storage: &Path) -> Result<Registry> {
        Self::serve_loopback(storage, true)
    }

    fn serve_loopback(storage: &Path, readonly: bool) -> Result<Registry> {
        let opts = StartOptions {
            tls: None,
            htpasswd: None,
            ip: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            storage: Some(storage),
            readonly,
        };
        Self::try_start(&opts)
    }

    fn start_with(tls: Option<&TestCa>, htpasswd: Option<&str>) -> Result<Registry> {
        let mut last = None;
        for _ in 0..3 {
            let opts = StartOptions {
                tls,
                htpasswd,
                ip: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
                storage: None,
                readonly: false,
            };
            match Self::try_start(&opts) {
                Ok(r) => return Ok(r),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("registry did not start")))
    }

    fn try_start(o: &StartOptions<'_>) -> Result<Registry> {
        let (tls, htpasswd) = (o.tls, o.htpasswd);
        if !available() {
            bail!("{REGISTRY_BIN} is not installed (Debian package docker-registry)");
        }
        let dir = tempfile::Builder::new().prefix("cc-registry-").tempdir()?;
        let port = TcpListener::bind((o.ip, 0))?.local_addr()?.port();
        let addr = std::net::SocketAddr::new(o.ip, port).to_string();
        let storage = match o.storage {
            Some(s) => s.to_path_buf(),
            None => dir.path().join("storage"),
        };
        std::fs::create_dir_all(&storage)?;
        let maintenance = if o.readonly {
            "  maintenance:\n    readonly:\n      enabled: true\n    uploadpurging:\n      enabled: false\n"
        } else {
            "  delete:\n    enabled: true\n"
        };
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\n{maintenance}http:\n  addr: {addr}\n",
            storage.display()
        );
        if let Some(ca) = tls {
            let cert = dir.path().join("server.crt");
            let key = dir.path().join("server.key");
            std::fs::write(&cert, &ca.server_cert_pem)?;
            std::fs::write(&key, &ca.server_key_pem)?;
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                cert.display(),
                key.display()
            ));
        }
        if let Some(users) = htpasswd {
            let file = dir.path().join("htpasswd");
            std::fs::write(&file, users)?;
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: clusterctl-test\n    path: {}\n",
                file.display()
            ));
        }
        let cfg = dir.path().join("config.yml");
        std::fs::write(&cfg, config)?;
        let log = std::fs::File::create(dir.path().join("registry.log"))?;
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("spawning docker-registry")?;
        let reg = Registry {
            child,
            addr,
            dir,
            tls: tls.is_some(),
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if reg.ping() {
                return Ok(reg);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!(
            "docker-registry on {} did not answer: {}",
            reg.addr,
            reg.log()
        )
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(&self.addr) else {
            return false;
        };
        if self.tls {
            // The TLS listener accepts once the certificate loaded; a TLS handshake is left to the
            // client under test.
            return true;
        }
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(format!("GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).as_bytes())
            .is_err()
        {
            return false;
        }
        let mut buf = [0u8; 32];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).contains(" 200")
    }

    /// `127.0.0.1:PORT` (or `IP:PORT` of [`Registry::serve_readonly_tls`]), the registry's host for image
    /// references.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The storage root (distribution's filesystem driver layout under `docker/registry/v2`).
    pub fn storage(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    /// The registry's access and error log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// How many requests in the access log so far match `method` and contain `path_part`
    /// (e.g. `("PUT", "/blobs/uploads/")` counts finished blob uploads).
    pub fn count_requests(&self, method: &str, path_part: &str) -> usize {
        let needle = format!("\"{method} ");
        self.log()
            .lines()
            .filter(|l| l.contains(&needle) && l.contains(path_part))
            .count()
    }

    /// Number of blobs stored (files named `data` under `blobs/sha256`).
    pub fn blob_count(&self) -> usize {
        fn walk(p: &Path, n: &mut usize) {
            if let Ok(rd) = std::fs::read_dir(p) {
                for e in rd.flatten() {
                    let path = e.path();
                    if path.is_dir() {
                        walk(&path, n);
                    } else if path.file_name().is_some_and(|f| f == "data") {
                        *n += 1;
                    }
                }
            }
        }
        let mut n = 0;
        walk(
            &self.storage().join("docker/registry/v2/blobs/sha256"),
            &mut n,
        );
        n
    }
}

impl Registry {
    fn request(&self, method: &str, path: &str, ctype: &str, body: &[u8]) -> Result<(u16, String)> {
        if self.tls {
            bail!("Registry::push speaks plain HTTP only");
        }
        let mut s = TcpStream::connect(&self.addr)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let head = format!(
            "{method} {path} HTTP/1.0\r\nHost: {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        s.write_all(head.as_bytes())?;
        s.write_all(body)?;
        let mut resp = Vec::new();
        s.read_to_end(&mut resp)?;
        let text = String::from_utf8_lossy(&resp).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        Ok((status, text))
    }

    /// Pushes `img` as `repo:tag` (each blob by `POST /v2/<repo>/blobs/uploads/` and one `PUT` of
    /// the whole blob to the upload location with `?digest=`, then the manifest). Errors: the
    /// registry refused a step.
    pub fn push(&self, repo: &str, tag: &str, img: &TestImage) -> Result<()> {
        for b in &img.blobs {
            let (st, text) = self.request(
                "POST",
                &format!("/v2/{repo}/blobs/uploads/"),
                "application/octet-stream",
                b"",
            )?;
            let location = text
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("location")
                        .then(|| v.trim().to_string())
                })
                .filter(|_| st == 202)
                .with_context(|| format!("upload start in {repo}: {st}: {text}"))?;
            let path = match location.find("/v2/") {
                Some(i) => location[i..].to_string(),
                None => bail!("upload location {location:?}"),
            };
            let sep = if path.contains('?') { '&' } else { '?' };
            let (st, text) = self.request(
                "PUT",
                &format!("{path}{sep}digest={}", b.digest),
                "application/octet-stream",
                &b.bytes,
            )?;
            if st != 201 {
                bail!("blob upload {} to {repo}: {st}: {text}", b.digest);
            }
        }
        let (st, text) = self.request(
            "PUT",
            &format!("/v2/{repo}/manifests/{tag}"),
            &img.manifest.media_type,
            &img.manifest.bytes,
        )?;
        if st != 201 {
            bail!("manifest {repo}:{tag}: {st}: {text}");
        }
        Ok(())
    }
}

/// A CA made for one test with a serving certificate for `127.0.0.1` and `localhost` (rcgen).
pub struct TestCa {
    /// The CA certificate (PEM): what the client under test is told to trust.
    pub ca_pem: String,
    /// The serving certificate (PEM), signed by the CA.
    pub server_cert_pem: String,
    /// The serving certificate's private key (PKCS#8 PEM).
    pub server_key_pem: String,
}

impl TestCa {
    /// Makes a CA named `name` and its serving certificate. Errors: key generation or signing.
    pub fn new(name: &str) -> Result<TestCa> {
        Self::for_ips(name, &[])
    }

    /// As [`TestCa::new`], with the serving certificate also naming `ips` (e.g. a docker network's
    /// gateway, where a registry serves node containers).
    pub fn for_ips(name: &str, ips: &[std::net::IpAddr]) -> Result<TestCa> {
        Self::for_names(name, &[], ips)
    }

    /// As [`TestCa::for_ips`], with the serving certificate also naming the DNS names `dns` (e.g.
    /// `pkgs.k8s.io`, which a test's nodes resolve to the test's server).
    pub fn for_names(name: &str, dns: &[&str], ips: &[std::net::IpAddr]) -> Result<TestCa> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
            SanType,
        };
        let ca_key = KeyPair::generate().context("CA key")?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).context("CA params")?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, name);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).context("self-signing the CA")?;
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().context("server key")?;
        let mut names = vec!["localhost".to_string()];
        names.extend(dns.iter().map(|d| d.to_string()));
        let mut leaf = CertificateParams::new(names).context("server params")?;
        leaf.distinguished_name.push(DnType::CommonName, "registry");
        leaf.subject_alt_names
            .push(SanType::IpAddress(std::net::IpAddr::V4(
                std::net::Ipv4Addr::LOCALHOST,
            )));
        for ip in ips {
            leaf.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        let cert = leaf
            .signed_by(&key, &issuer)
            .context("signing the server certificate")?;
        Ok(TestCa {
            ca_pem: ca_cert.pem(),
            server_cert_pem: cert.pem(),
            server_key_pem: key.serialize_pem(),
        })
    }
}

/// A tiny deterministic PRNG (xorshift64*): random-looking, reproducible test content.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = if self.0 == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            self.0
        };
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// A blob of a test image with its descriptor facts.
#[derive(Clone, Debug)]
pub struct TestBlob {
    /// Content.
    pub bytes: Vec<u8>,
    /// `sha256:<hex>` of the content.
    pub digest: String,
    /// OCI media type.
    pub media_type: String,
    /// `sha256:<hex>` of the uncompressed tar (layers only).
    pub diff_id: Option<String>,
}

impl TestBlob {
    fn new(bytes: Vec<u8>, media_type: &str, diff_id: Option<String>) -> TestBlob {
        TestBlob {
            digest: sha256_digest(&bytes),
            bytes,
            media_type: media_type.to_string(),
            diff_id,
        }
    }
    /// The OCI descriptor `{mediaType, digest, size}`.
    pub fn desc(&self) -> serde_json::Value {
        serde_json::json!({"mediaType": self.media_type, "digest": self.digest, "size": self.bytes.len()})
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// A test image: its manifest and the blobs it needs (config first, then layers).
#[derive(Clone, Debug)]
pub struct TestImage {
    /// The OCI image manifest.
    pub manifest: TestBlob,
    /// Config, then layers.
    pub blobs: Vec<TestBlob>,
    /// Architecture in the config (`amd64`, `arm64`).
    pub arch: String,
}

/// A gzip'd tar layer (OCI `layer.v1.tar+gzip`) holding file `name` of `size` random bytes.
/// Errors: none in practice (in-memory writes).
pub fn layer(rng: &mut Rng, name: &str, size: usize) -> Result<TestBlob> {
    let data = rng.bytes(size);
    let mut tb = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    tb.append_data(&mut h, name, data.as_slice())?;
    let raw = tb.into_inner()?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw)?;
    Ok(TestBlob::new(
        gz.finish()?,
        "application/vnd.oci.image.layer.v1.tar+gzip",
        Some(sha256_digest(&raw)),
    ))
}

/// An OCI image (linux/`arch`) of `layers` whose config carries label `fixture=<label>`.
pub fn image(layers: &[TestBlob], arch: &str, label: &str) -> TestImage {
    let diff_ids: Vec<&str> = layers.iter().filter_map(|l| l.diff_id.as_deref()).collect();
    let config = serde_json::json!({
        "architecture": arch, "os": "linux",
        "config": {"Labels": {"fixture": label}, "Cmd": ["/bin/true"]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids}
    });
    let config = TestBlob::new(
        config.to_string().into_bytes(),
        "application/vnd.oci.image.config.v1+json",
        None,
    );
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config.desc(),
        "layers": layers.iter().map(TestBlob::desc).collect::<Vec<_>>()
    });
    let manifest = TestBlob::new(
        manifest.to_string().into_bytes(),
        "application/vnd.oci.image.manifest.v1+json",
        None,
    );
    let mut blobs = vec![config];
    blobs.extend(layers.iter().cloned());
    TestImage {
        manifest,
        blobs,
        arch: arch.to_string(),
    }
}

/// An OCI image index over `images`, each entry with its platform (`linux/<arch>`).
pub fn index(images: &[TestImage]) -> TestBlob {
    let manifests: Vec<serde_json::Value> = images
        .iter()
        .map(|i| {
            let mut d = i.manifest.desc();
            d["platform"] = serde_json::json!({"os": "linux", "architecture": i.arch});
            d
        })
        .collect();
    let bytes = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": manifests
    })
    .to_string()
    .into_bytes();
    TestBlob::new(bytes, "application/vnd.oci.image.index.v1+json", None)
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A registry's answer to one manifest request ([`Registry::manifest`]).
#[derive(Debug, Clone)]
pub struct ManifestReply {
    /// HTTP status (200 when the registry serves the manifest, 404 when it does not).
    pub status: u16,
    /// The `Docker-Content-Digest` header (`sha256:<hex>`), if sent (distribution spec, "Pulling
    /// manifests": the digest of the manifest bytes).
    pub digest: Option<String>,
    /// The `Content-Type` header, if sent.
    pub media_type: Option<String>,
    /// The body (empty for `HEAD`).
    pub body: Vec<u8>,
}

/// Every manifest media type a client accepts (OCI image-spec v1.1 and Docker schema 2).
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json";

impl Registry {
    /// Requests in the access log so far that write (`POST`, `PUT`, `PATCH`, `DELETE` under `/v2/`).
    pub fn write_requests(&self) -> usize {
        ["POST", "PUT", "PATCH", "DELETE"]
            .iter()
            .map(|m| self.count_requests(m, "/v2/"))
            .sum()
    }

    /// `method` (`HEAD` or `GET`) `/v2/<repo>/manifests/<reference>` with every manifest media type in
    /// `Accept`, read independently of the product's registry client: plain HTTP for a registry
    /// started with [`Registry::start`], HTTPS trusting only `ca` (required) for one started with
    /// [`Registry::start_tls`]. Errors: connection, TLS handshake (e.g. an unknown issuer) or an
    /// unparseable answer; a 404 is an `Ok` reply.
    pub fn manifest(
        &self,
        method: &str,
        repo: &str,
        reference: &str,
        ca: Option<&TestCa>,
    ) -> Result<ManifestReply> {
        let req = format!(
            "{method} /v2/{repo}/manifests/{reference} HTTP/1.0\r\nHost: {}\r\nAccept: {MANIFEST_ACCEPT}\r\n\r\n",
            self.addr
        );
        let tcp = TcpStream::connect(&self.addr)?;
        tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut resp = Vec::new();
        if self.tls {
            let Some(ca) = ca else {
                bail!("{} serves HTTPS: give the CA to trust", self.addr);
            };
            let mut roots = rustls::RootCertStore::empty();
            use rustls::pki_types::pem::PemObject as _;
            let cert = rustls::pki_types::CertificateDer::from_pem_slice(ca.ca_pem.as_bytes())
                .context("the test CA's PEM")?;
            roots.add(cert).context("adding the test CA")?;
            let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
            let cfg = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .context("TLS versions")?
                .with_root_certificates(roots)
                .with_no_client_auth();
            let host = self
                .addr
                .rsplit_once(':')
                .map_or(self.addr.as_str(), |h| h.0);
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .with_context(|| format!("server name {host}"))?;
            let conn = rustls::ClientConnection::new(std::sync::Arc::new(cfg), name)?;
            let mut s = rustls::StreamOwned::new(conn, tcp);
            s.write_all(req.as_bytes())?;
            if let Err(e) = s.read_to_end(&mut resp) {
                // A peer that closes without close_notify after a complete HTTP/1.0 answer.
                if e.kind() != std::io::ErrorKind::UnexpectedEof || resp.is_empty() {
                    return Err(e).context(format!("reading from https://{}", self.addr));
                }
            }
        } else {
            let mut s = tcp;
            s.write_all(req.as_bytes())?;
            s.read_to_end(&mut resp)?;
        }
        let split = resp
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .with_context(|| format!("no HTTP header from {}", self.addr))?;
        let head = String::from_utf8_lossy(&resp[..split]).into_owned();
        let body = resp[split + 4..].to_vec();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .with_context(|| format!("no status in {head:?}"))?;
        let header = |name: &str| {
            head.lines().skip(1).find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_string())
            })
        };
        Ok(ManifestReply {
            status,
            digest: header("Docker-Content-Digest"),
            media_type: header("Content-Type"),
            body,
        })
    }
}
