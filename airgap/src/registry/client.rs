//! A blocking OCI distribution-spec v1.1 client built on `reqwest` with rustls (ring provider).
//! Endpoints used: `GET/HEAD /v2/<name>/manifests/<ref>`, `PUT /v2/<name>/manifests/<ref>`,
//! `GET/HEAD /v2/<name>/blobs/<digest>`, `POST /v2/<name>/blobs/uploads/` (optionally with
//! `mount=&from=`), `PATCH`/`PUT` on the upload location. One client is shared by worker threads.

use super::auth::{parse_challenge, Challenge, EnvCredentials};
use crate::digest::{Digest, Hashing};
use crate::error::{AirgapError, RequestError, Result, TokenError};
use crate::oci::{sniff_media_type, MANIFEST_ACCEPT, MAX_MANIFEST};
use reqwest::blocking::{Client, RequestBuilder, Response};
use reqwest::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode, Url};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How to reach registries.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// A PEM file of extra CA certificates trusted besides the system roots (e.g. a Harbor CA).
    pub ca_file: Option<PathBuf>,
    /// Extra CA certificates given as PEM text (e.g. the mirror's `caFile` as read by the loader).
    pub ca_pem: Option<String>,
    /// Registries (host[:port]) spoken to over plain HTTP. Loopback hosts are too, unless listed in
    /// `tls_hosts`.
    pub plain_http: Vec<String>,
    /// Registries (host[:port]) spoken to over HTTPS even on loopback (a mirror given with a CA).
    pub tls_hosts: Vec<String>,
    /// Basic credentials per registry, read from environment variables.
    pub credentials: Vec<EnvCredentials>,
    /// CAs trusted for one registry only, `(host[:port], PEM)` (e.g. a source registry's `caFile`):
    /// requests to that host trust the built-in roots, `ca_file`/`ca_pem` and this CA.
    pub host_cas: Vec<(String, String)>,
    /// Whole-request timeout.
    pub timeout: Duration,
    /// Uploads larger than this many bytes go in chunks (`PATCH` with `Content-Range`) of this size.
    pub chunk_size: u64,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            ca_file: None,
            ca_pem: None,
            plain_http: Vec::new(),
            tls_hosts: Vec::new(),
            credentials: Vec::new(),
            host_cas: Vec::new(),
            timeout: Duration::from_secs(600),
            chunk_size: 64 << 20,
        }
    }
}

/// A manifest as fetched: its exact bytes (never re-serialised), media type and digest.
#[derive(Debug, Clone)]
pub struct FetchedManifest {
    /// The manifest bytes as the registry sent them.
    pub bytes: Vec<u8>,
    /// `Content-Type`, or the document's own `mediaType`.
    pub media_type: String,
    /// sha256 of `bytes`.
    pub digest: Digest,
}

/// A registry client. Cheap to share across threads (`&RegistryClient` is `Sync`).
pub struct RegistryClient {
    /// For `http://` URLs: no TLS, so no trust roots loaded (that load is most of a client's set-up).
    plain: Client,
    /// For `https://` URLs: the built-in roots plus the configured CA, built on first use.
    tls: OnceLock<std::result::Result<Client, Arc<AirgapError>>>,
    /// For `https://` URLs of a host with its own CA (`host_cas`), built on first use.
    host_tls: HashMap<String, OnceLock<std::result::Result<Client, Arc<AirgapError>>>>,
    opts: ClientOptions,
    /// Bearer tokens by "registry/repository".
    tokens: Mutex<HashMap<String, String>>,
}

/// True for `localhost` and loopback addresses (`127.0.0.0/8`, `[::1]`), with or without a port;
/// a name that merely starts with `127.` (`127.example.com`) is not.
fn is_loopback(host: &str) -> bool {
    let h = match host.rsplit_once(':') {
        Some((h, port)) if !h.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    };
    let h = h.trim_start_matches('[').trim_end_matches(']');
    h == "localhost"
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `host[:port]` of `url` as registries are named (`[::1]:5000`, no port when it is the scheme's
/// default); `None` when `url` does not parse or has no host.
fn url_host(url: &str) -> Option<String> {
    let u = Url::parse(url).ok()?;
    let host = u.host_str()?;
    Some(match u.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    })
}

/// The certificates of `host`'s own CA. Errors: `Transport` naming the host when `pem` holds none.
fn host_certs(host: &str, pem: &str) -> Result<Vec<reqwest::Certificate>> {
    let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|source| {
        request(
            host,
            RequestError::Certificates {
                what: format!("CA of registry {host}"),
                source,
            },
        )
    })?;
    if certs.is_empty() {
        return Err(transport_err(
            host,
            format!("CA of registry {host}: no certificate in the PEM text"),
        ));
    }
    Ok(certs)
}

/// A request clusterctl refuses, in its own words.
fn transport_err(url: &str, reason: impl Into<String>) -> AirgapError {
    AirgapError::Transport {
        url: url.to_string(),
        reason: reason.into(),
    }
}

/// A request that broke, with the library's error as the source.
fn request(url: &str, source: RequestError) -> AirgapError {
    AirgapError::Request {
        url: url.to_string(),
        source,
    }
}

/// A request error with its causes in the message (e.g. rustls's `invalid peer certificate:
/// UnknownIssuer` under reqwest's `error sending request`), so a wrong CA is named.
fn request_err(url: &str, e: reqwest::Error) -> AirgapError {
    request(url, RequestError::Send(e))
}

fn status_err(method: &str, url: &str, resp: Response) -> AirgapError {
    let status = resp.status().as_u16();
    let mut body = String::new();
    let _ = resp.take(512).read_to_string(&mut body);
    AirgapError::Http {
        method: method.to_string(),
        url: url.to_string(),
        status,
        body: body.trim().to_string(),
    }
}

impl RegistryClient {
    /// Builds a client. Errors: the CA file cannot be read or parsed, or TLS cannot be set up.
    pub fn new(opts: ClientOptions) -> Result<Self> {
        // rustls needs one process-wide crypto provider; a second install is a harmless no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Read and parse the CA now, so a bad CA file is an error here and not at the first request.
        let _checked = Self::builder(&opts, true)?;
        for (host, pem) in &opts.host_cas {
            host_certs(host, pem)?;
        }
        let plain = Self::builder(&opts, false)?
            .build()
            .map_err(|e| request("client", RequestError::Http(e)))?;
        let host_tls = opts
            .host_cas
            .iter()
            .map(|(h, _)| (h.clone(), OnceLock::new()))
            .collect();
        Ok(RegistryClient {
            plain,
            tls: OnceLock::new(),
            host_tls,
            opts,
            tokens: Mutex::new(HashMap::new()),
        })
    }

    /// A client builder with the timeouts; `tls`: the built-in trust roots plus the configured CA
    /// (file or PEM), else no trust roots at all (only for `http://`). Errors: the CA cannot be read or
    /// parsed.
    fn builder(opts: &ClientOptions, tls: bool) -> Result<reqwest::blocking::ClientBuilder> {
        let b = Client::builder()
            .timeout(opts.timeout)
            .connect_timeout(Duration::from_secs(20));
        if !tls {
            return Ok(b.tls_certs_only(Vec::new()));
        }
        let mut b = b;
        if let Some(ca) = &opts.ca_file {
            let pem = std::fs::read(ca).map_err(|e| AirgapError::io(ca, e))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
                request(
                    &ca.display().to_string(),
                    RequestError::Certificates {
                        what: "CA file".into(),
                        source,
                    },
                )
            })?;
            b = b.tls_certs_merge(certs);
        }
        if let Some(pem) = &opts.ca_pem {
            let certs =
                reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|source| {
                    request(
                        "registry CA",
                        RequestError::Certificates {
                            what: "CA PEM".into(),
                            source,
                        },
                    )
                })?;
            b = b.tls_certs_merge(certs);
        }
        Ok(b)
    }

    /// The client for `url`: the root-less one for `http://`, else the TLS one (built on first use).
    /// Errors: the TLS client cannot be built.
    pub(crate) fn http_for(&self, url: impl AsRef<str>) -> Result<&Client> {
        if url.as_ref().starts_with("http://") {
            return Ok(&self.plain);
        }
        if let Some((host, cell)) =
            url_host(url.as_ref()).and_then(|h| self.host_tls.get(&h).map(|c| (h, c)))
        {
            let built = cell.get_or_init(|| {
                let pem = self
                    .opts
                    .host_cas
                    .iter()
                    .find(|(h, _)| *h == host)
                    .map(|(_, p)| p.as_str())
                    .unwrap_or_default();
                Self::builder(&self.opts, true)
                    .and_then(|b| Ok(b.tls_certs_merge(host_certs(&host, pem)?)))
                    .and_then(|b| {
                        b.build()
                            .map_err(|e| request("client", RequestError::Http(e)))
                    })
                    .map_err(Arc::new)
            });
            return built.as_ref().map_err(|e| AirgapError::Client {
                what: format!("TLS client for {host}"),
                source: Arc::clone(e),
            });
        }
        let built = self.tls.get_or_init(|| {
            Self::builder(&self.opts, true)
                .and_then(|b| {
                    b.build()
                        .map_err(|e| request("client", RequestError::Http(e)))
                })
                .map_err(Arc::new)
        });
        built.as_ref().map_err(|e| AirgapError::Client {
            what: "TLS client".to_string(),
            source: Arc::clone(e),
        })
    }

    /// The options this client was built with.
    pub fn options(&self) -> &ClientOptions {
        &self.opts
    }

    fn base(&self, registry: &str) -> String {
        let api = if registry == "docker.io" {
            "registry-1.docker.io"
        } else {
            registry
        };
        let tls = self
            .opts
            .tls_hosts
            .iter()
            .any(|p| p == registry || p == api);
        let plain = (is_loopback(api) && !tls)
            || self
                .opts
                .plain_http
                .iter()
                .any(|p| p == registry || p == api);
        format!("{}://{api}", if plain { "http" } else { "https" })
    }

    fn url(&self, registry: &str, repo: &str, tail: &str) -> String {
        format!("{}/v2/{repo}/{tail}", self.base(registry))
    }

    fn creds(&self, registry: &str) -> Option<(String, String)> {
        self.configured(registry).and_then(EnvCredentials::resolve)
    }

    /// Sends a request built by `make`, answering one auth challenge if the registry asks.
    fn send(
        &self,
        registry: &str,
        repo: &str,
        make: &dyn Fn() -> Result<RequestBuilder>,
    ) -> Result<Response> {
        let key = format!("{registry}/{repo}");
        let token = self.tokens.lock().ok().and_then(|t| t.get(&key).cloned());
        let mut req = make()?;
        if let Some(t) = &token {
            req = req.bearer_auth(t);
        } else if let Some((u, p)) = self.creds(registry) {
            req = req.basic_auth(u, Some(p));
        }
        let resp = req.send().map_err(|e| request_err(&key, e))?;
        if resp.status() != StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        let challenge = resp
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_challenge)
            .ok_or_else(|| AirgapError::Auth {
                registry: registry.to_string(),
                reason: "401 without a usable challenge".into(),
            })?;
        let req = match challenge {
            Challenge::Basic => {
                let (u, p) = self.creds(registry).ok_or_else(|| AirgapError::Auth {
                    registry: registry.to_string(),
                    reason: self.missing_creds(registry),
                })?;
                make()?.basic_auth(u, Some(p))
            }
            Challenge::Bearer {
                realm,
                service,
                scope,
            } => {
                let t = self.fetch_token(registry, &realm, service.as_deref(), scope.as_deref())?;
                if let Ok(mut map) = self.tokens.lock() {
                    map.insert(key.clone(), t.clone());
                }
                make()?.bearer_auth(t)
            }
        };
        let resp = req.send().map_err(|e| request_err(&key, e))?;
        if resp.status() == StatusCode::UNAUTHORIZED {
            let from = self
                .configured(registry)
                .map(|c| format!(" (from ${} and ${})", c.username_var, c.password_var))
                .unwrap_or_default();
            return Err(AirgapError::Auth {
                registry: registry.to_string(),
                reason: format!("credentials{from} refused"),
            });
        }
        Ok(resp)
    }

    /// The credential variables configured for `registry`, if any.
    fn configured(&self, registry: &str) -> Option<&EnvCredentials> {
        self.opts
            .credentials
            .iter()
            .find(|c| c.registry == registry)
    }

    /// Why no basic credentials could be sent to `registry`: the variables named for it are unset or
    /// empty (their names, never values), or none are named.
    fn missing_creds(&self, registry: &str) -> String {
        match self.configured(registry) {
            Some(c) => format!(
                "the registry asks for basic credentials, but ${} or ${} is unset or empty: export both before running clusterctl",
                c.username_var, c.password_var
            ),
            None => "the registry asks for basic credentials and none are configured for it: name the variables holding them (usernameEnv/passwordEnv) in airgap.sourceRegistries, or in registry for the mirror".into(),
        }
    }

    fn fetch_token(
        &self,
        registry: &str,
        realm: &str,
        service: Option<&str>,
        scope: Option<&str>,
    ) -> Result<String> {
        let mut url = Url::parse(realm).map_err(|e| AirgapError::Token {
            registry: registry.into(),
            source: TokenError::Realm(e),
        })?;
        {
            let mut q = url.query_pairs_mut();
            if let Some(s) = service {
                q.append_pair("service", s);
            }
            if let Some(s) = scope {
                q.append_pair("scope", s);
            }
        }
        let mut req = self.http_for(&url)?.get(url.clone());
        if let Some((u, p)) = self.creds(registry) {
            req = req.basic_auth(u, Some(p));
        }
        let resp = req.send().map_err(|e| request_err(realm, e))?;
        if !resp.status().is_success() {
            return Err(AirgapError::Auth {
                registry: registry.into(),
                reason: format!("token endpoint answered {}", resp.status()),
            });
        }
        let v: serde_json::Value = resp.json_value().map_err(|source| AirgapError::Token {
            registry: registry.into(),
            source,
        })?;
        v.get("token")
            .or_else(|| v.get("access_token"))
            .and_then(|t| t.as_str())
            .map(str::to_string)
            .ok_or_else(|| AirgapError::Auth {
                registry: registry.into(),
                reason: "token response without token".into(),
            })
    }

    /// Fetches a manifest or index by tag or digest, with every supported media type accepted.
    /// The bytes are verified against `reference` when it is a digest, and against the registry's
    /// `Docker-Content-Digest` header when given. Errors: HTTP status, digest mismatch, transport.
    pub fn get_manifest(
        &self,
        registry: &str,
        repo: &str,
        reference: &str,
    ) -> Result<FetchedManifest> {
        let url = self.url(registry, repo, &format!("manifests/{reference}"));
        let resp = self.send(registry, repo, &|| {
            Ok(self
                .http_for(&url)?
                .get(&url)
                .header(ACCEPT, MANIFEST_ACCEPT))
        })?;
        if !resp.status().is_success() {
            return Err(status_err("GET", &url, resp));
        }
        let header_digest = resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let ct = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.split(';').next().unwrap_or("").trim().to_string());
        let what = format!("{registry}/{repo}@{reference}");
        let mut bytes = Vec::new();
        resp.take(MAX_MANIFEST + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| request(&url, RequestError::Body(e)))?;
        if bytes.len() as u64 > MAX_MANIFEST {
            return Err(AirgapError::Manifest {
                what,
                reason: "larger than 4 MiB (the most a registry accepts)".into(),
            });
        }
        let digest = Digest::of(&bytes);
        if let Ok(want) = Digest::parse(reference) {
            want.verify(&bytes, &what)?;
        }
        if let Some(h) = header_digest.and_then(|h| Digest::parse(&h).ok()) {
            h.verify(&bytes, &what)?;
        }
        let media_type = sniff_media_type(&bytes)
            .or(ct.filter(|c| !c.is_empty() && c != "application/json"))
            .ok_or_else(|| AirgapError::Manifest {
                what: what.clone(),
                reason: "no media type".into(),
            })?;
        Ok(FetchedManifest {
            bytes,
            media_type,
            digest,
        })
    }

    /// The digest a manifest tag or digest resolves to, or `None` when the registry does not have it.
    pub fn head_manifest(
        &self,
        registry: &str,
        repo: &str,
        reference: &str,
    ) -> Result<Option<Digest>> {
        let url = self.url(registry, repo, &format!("manifests/{reference}"));
        let resp = self.send(registry, repo, &|| {
            Ok(self
                .http_for(&url)?
                .head(&url)
                .header(ACCEPT, MANIFEST_ACCEPT))
        })?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status().is_success() {
            return Err(status_err("HEAD", &url, resp));
        }
        Ok(resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .and_then(|h| Digest::parse(h).ok()))
    }

    /// Streams blob `digest` into `dest` (a temp file next to it, renamed once the sha256 and
    /// `size` match, so `dest` never holds partial or wrong content). Returns the byte count.
    /// `progress` receives each chunk's length. Errors: HTTP status, mismatch, I/O.
    pub fn get_blob_to_file(
        &self,
        registry: &str,
        repo: &str,
        digest: &Digest,
        size: Option<u64>,
        dest: &Path,
        progress: &dyn Fn(u64),
    ) -> Result<u64> {
        let url = self.url(registry, repo, &format!("blobs/{digest}"));
        let resp = self.send(registry, repo, &|| Ok(self.http_for(&url)?.get(&url)))?;
        if !resp.status().is_success() {
            return Err(status_err("GET", &url, resp));
        }
        let dir = dest.parent().unwrap_or(Path::new("."));
        let tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| AirgapError::io(dir, e))?;
        let mut w = Hashing::new(std::io::BufWriter::new(tmp));
        let mut resp = resp;
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let n = resp
                .read(&mut buf)
                .map_err(|e| request(&url, RequestError::Body(e)))?;
            if n == 0 {
                break;
            }
            w.write_all(&buf[..n])
                .map_err(|e| AirgapError::io(dest, e))?;
            progress(n as u64);
            if let Some(s) = size.filter(|s| w.count() > *s) {
                return Err(AirgapError::DigestMismatch {
                    what: format!("blob from {registry}/{repo}"),
                    expected: format!("{digest} of {s} bytes"),
                    actual: "more bytes than that".into(),
                });
            }
        }
        let (got, count, bw) = w.finish();
        if &got != digest || size.is_some_and(|s| s != count) {
            return Err(AirgapError::DigestMismatch {
                what: format!("blob from {registry}/{repo}"),
                expected: digest.to_string(),
                actual: got.to_string(),
            });
        }
        let tmp = bw
            .into_inner()
            .map_err(|e| AirgapError::io(dest, e.into_error()))?;
        tmp.persist(dest)
            .map_err(|e| AirgapError::io(dest, e.error))?;
        Ok(count)
    }

    /// True when the registry has blob `digest` in `repo` (`HEAD /v2/<repo>/blobs/<digest>`).
    pub fn head_blob(&self, registry: &str, repo: &str, digest: &Digest) -> Result<bool> {
        let url = self.url(registry, repo, &format!("blobs/{digest}"));
        let resp = self.send(registry, repo, &|| Ok(self.http_for(&url)?.head(&url)))?;
        match resp.status() {
            s if s.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(status_err("HEAD", &url, resp)),
        }
    }

    /// Asks the registry to mount `digest` from repository `from` into `repo`. `Ok(true)` when it
    /// did (201); `Ok(false)` when it declined (it then opened an upload session, which is left to expire).
    pub fn mount_blob(
        &self,
        registry: &str,
        repo: &str,
        digest: &Digest,
        from: &str,
    ) -> Result<bool> {
        let url = self.url(
            registry,
            repo,
            &format!("blobs/uploads/?mount={digest}&from={from}"),
        );
        let resp = self.send(registry, repo, &|| {
            Ok(self.http_for(&url)?.post(&url).header(CONTENT_LENGTH, 0))
        })?;
        match resp.status() {
            StatusCode::CREATED => Ok(true),
            StatusCode::ACCEPTED => Ok(false),
            _ => Err(status_err("POST", &url, resp)),
        }
    }

    fn resolve_location(&self, registry: &str, url: &str, resp: &Response) -> Result<Url> {
        let loc = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| AirgapError::Http {
                method: "POST".into(),
                url: url.into(),
                status: resp.status().as_u16(),
                body: "no Location".into(),
            })?;
        let base = Url::parse(&format!("{}/", self.base(registry)))
            .map_err(|e| request(url, RequestError::Url(e)))?;
        let to = base
            .join(loc)
            .map_err(|e| request(url, RequestError::Url(e)))?;
        // The blob and the registry's credentials go to the location: never to another origin
        // (another host, port or scheme, e.g. plain HTTP behind a TLS proxy).
        if to.origin() != base.origin() {
            return Err(transport_err(
                url,
                format!(
                    "the registry gave an upload location on another origin ({}); refusing to send the blob and credentials there",
                    to.origin().ascii_serialization()
                ),
            ));
        }
        Ok(to)
    }

    fn with_digest(mut loc: Url, digest: &Digest) -> Url {
        loc.query_pairs_mut()
            .append_pair("digest", &digest.to_string());
        loc
    }

    /// Uploads `size` bytes from `open()` (called once per attempt; the reader must yield exactly the
    /// blob) as blob `digest` into `repo`: monolithic (`POST` then one `PUT`) up to the chunk size,
    /// chunked (`PATCH` with `Content-Range`, then `PUT`) above it. The registry checks the digest.
    pub fn upload_blob(
        &self,
        registry: &str,
        repo: &str,
        digest: &Digest,
        size: u64,
        open: &dyn Fn() -> Result<Box<dyn Read + Send>>,
    ) -> Result<()> {
        let start = self.url(registry, repo, "blobs/uploads/");
        let resp = self.send(registry, repo, &|| {
            Ok(self
                .http_for(&start)?
                .post(&start)
                .header(CONTENT_LENGTH, 0))
        })?;
        if resp.status() != StatusCode::ACCEPTED {
            return Err(status_err("POST", &start, resp));
        }
        let mut loc = self.resolve_location(registry, &start, &resp)?;
        let chunk = self.opts.chunk_size.max(1);
        if size <= chunk {
            let put = Self::with_digest(loc, digest);
            let resp = self.send(registry, repo, &|| {
                let r = open()?;
                Ok(self
                    .http_for(&put)?
                    .put(put.clone())
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .body(reqwest::blocking::Body::sized(r, size)))
            })?;
            if resp.status() != StatusCode::CREATED {
                return Err(status_err("PUT", put.as_str(), resp));
            }
            return Ok(());
        }
        let reader = std::sync::Arc::new(Mutex::new(open()?));
        let mut sent = 0u64;
        while sent < size {
            let n = chunk.min(size - sent);
            let mut data = vec![0u8; n as usize];
            reader
                .lock()
                .map_err(|_| transport_err(loc.as_str(), "reader poisoned"))?
                .read_exact(&mut data)
                .map_err(|e| AirgapError::io(format!("blob {digest}"), e))?;
            let range = format!("{}-{}", sent, sent + n - 1);
            let here = loc.clone();
            let resp = self.send(registry, repo, &|| {
                Ok(self
                    .http_for(&here)?
                    .request(Method::PATCH, here.clone())
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .header("Content-Range", range.clone())
                    .body(data.clone()))
            })?;
            if resp.status() != StatusCode::ACCEPTED {
                return Err(status_err("PATCH", loc.as_str(), resp));
            }
            loc = self.resolve_location(registry, loc.as_str(), &resp)?;
            sent += n;
        }
        let put = Self::with_digest(loc, digest);
        let resp = self.send(registry, repo, &|| {
            Ok(self
                .http_for(&put)?
                .put(put.clone())
                .header(CONTENT_LENGTH, 0))
        })?;
        if resp.status() != StatusCode::CREATED {
            return Err(status_err("PUT", put.as_str(), resp));
        }
        Ok(())
    }

    /// Pushes manifest `bytes` of `media_type` under `reference` (a tag or its digest).
    pub fn put_manifest(
        &self,
        registry: &str,
        repo: &str,
        reference: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> Result<()> {
        let url = self.url(registry, repo, &format!("manifests/{reference}"));
        let resp = self.send(registry, repo, &|| {
            Ok(self
                .http_for(&url)?
                .put(&url)
                .header(CONTENT_TYPE, media_type)
                .body(bytes.to_vec()))
        })?;
        if resp.status() != StatusCode::CREATED {
            return Err(status_err("PUT", &url, resp));
        }
        Ok(())
    }
}

/// Reads a response body as JSON without needing reqwest's `json` feature.
trait JsonValue {
    fn json_value(self) -> std::result::Result<serde_json::Value, TokenError>;
}

impl JsonValue for Response {
    fn json_value(self) -> std::result::Result<serde_json::Value, TokenError> {
        // A token answer is small; a registry that sends more is cut off.
        let mut b = Vec::new();
        self.take(1 << 20)
            .read_to_end(&mut b)
            .map_err(TokenError::Read)?;
        serde_json::from_slice(&b).map_err(TokenError::Json)
    }
}

/// The most a package download may be, in bytes (4 GiB): only its sha256 is pinned, so without a
/// bound a hostile server could fill the disk before the mismatch shows. No node package comes near.
pub(crate) const MAX_DOWNLOAD_BYTES: u64 = 4 << 30;

impl RegistryClient {
    /// Downloads `url` to `dest` (atomically), checking it against `digest`; at most
    /// [`MAX_DOWNLOAD_BYTES`]. Errors: HTTP status, transport, too large, mismatch, I/O.
    pub fn download_to(&self, url: &str, digest: &Digest, dest: &Path) -> Result<u64> {
        self.download_to_capped(url, digest, dest, MAX_DOWNLOAD_BYTES)
    }

    /// [`RegistryClient::download_to`] with a cap of `max` bytes: a body longer than that is cut
    /// off (the connection dropped) and refused with nothing written to `dest`.
    pub fn download_to_capped(
        &self,
        url: &str,
        digest: &Digest,
        dest: &Path,
        max: u64,
    ) -> Result<u64> {
        let mut resp = self
            .http_for(url)?
            .get(url)
            .send()
            .map_err(|e| request(url, RequestError::Http(e)))?;
        if !resp.status().is_success() {
            return Err(status_err("GET", url, resp));
        }
        let dir = dest.parent().unwrap_or(Path::new("."));
        let tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| AirgapError::io(dir, e))?;
        let mut w = Hashing::new(std::io::BufWriter::new(tmp));
        std::io::copy(&mut (&mut resp).take(max.saturating_add(1)), &mut w)
            .map_err(|e| request(url, RequestError::Body(e)))?;
        let (got, n, bw) = w.finish();
        if n > max {
            return Err(transport_err(
                url,
                format!("the download is larger than {max} bytes; refused (check the URL)"),
            ));
        }
        if &got != digest {
            return Err(AirgapError::DigestMismatch {
                what: url.to_string(),
                expected: digest.to_string(),
                actual: got.to_string(),
            });
        }
        let tmp = bw
            .into_inner()
            .map_err(|e| AirgapError::io(dest, e.into_error()))?;
        tmp.persist(dest)
            .map_err(|e| AirgapError::io(dest, e.error))?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::is_loopback;

    #[test]
    fn only_loopback_addresses_are_spoken_to_in_plain_http() {
        for h in [
            "127.0.0.1:5000",
            "127.8.9.10",
            "localhost:5000",
            "localhost",
            "[::1]:5000",
            "[::1]",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in [
            "127.example.com:5000",
            "127.0.0.1.nip.io",
            "localhost.example.com",
            "10.0.0.1:5000",
            "harbor.example.com",
            "[::2]:5000",
        ] {
            assert!(!is_loopback(h), "{h}");
        }
    }
}
