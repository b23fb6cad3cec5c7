//! A recording Kubernetes API test server on loopback (or a docker network's gateway): HTTPS with a CA
//! and serving certificate made per server (rcgen), answering the API paths a test registers with
//! recorded objects in the API's real JSON shapes, and recording every request (method, path, query,
//! `Content-Type`, body) so tests can assert what a real client sent — patch types included.
//!
//! Behaviour, as far as a real kube-apiserver goes for these calls:
//! - `GET` of a registered path answers its JSON; lists (objects with `items`) honour a
//!   `fieldSelector` of `a.b=c` terms (comma-joined) by filtering items on those fields;
//! - `PATCH`/`POST`/`DELETE` answer the response registered for that method and path, else the object
//!   registered for `GET` on the same path (a patch returns the object), else a 404 `Status`;
//! - anything unregistered is a 404 `Status` (kind `Status`, reason `NotFound`), as the API server says;
//! - a watch (`GET` with `watch=true` or `watch=1`) of a path registered with [`ApiServer::serve_watch`]
//!   answers its events as newline-delimited `WatchEvent` JSON and ends the stream (as a watch timeout
//!   does); without such a registration it is answered like a plain `GET`.
//!
//! The server runs on its own threads (blocking I/O, one thread per connection) and stops on drop.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use base64::Engine as _;
use serde_json::{json, Value};

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// HTTP method (`GET`, `PATCH`, …).
    pub method: String,
    /// Path without the query (`/api/v1/nodes/w1`).
    pub path: String,
    /// The raw query string (without `?`), empty when none.
    pub query: String,
    /// The `Content-Type` header, empty when none.
    pub content_type: String,
    /// The request body.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The body as JSON (`Value::Null` when empty or not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

type Routes = BTreeMap<(String, String), (u16, Value)>;

struct Shared {
    routes: Mutex<Routes>,
    recorded: Mutex<Vec<Recorded>>,
    stop: AtomicBool,
}

/// The running server; stops on drop.
pub struct ApiServer {
    addr: SocketAddr,
    ca_pem: String,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("addr", &self.addr)
            .finish()
    }
}

/// The token the kubeconfig of [`ApiServer::kubeconfig`] carries (a test value, not a secret).
pub const TEST_TOKEN: &str = "clusterctl-recorded-api-test-token";

fn status_json(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

impl ApiServer {
    /// Starts a server on `127.0.0.1` (a free port).
    pub fn start() -> Result<ApiServer> {
        Self::start_on(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    /// Starts a server on `ip` (a free port); the serving certificate names `ip`, `127.0.0.1` and
    /// `localhost`.
    pub fn start_on(ip: IpAddr) -> Result<ApiServer> {
        Self::start_named(ip, &[])
    }

    /// Like [`ApiServer::start_on`], the certificate also naming the DNS names `names` (e.g. a
    /// cluster's `controlPlaneEndpoint` host, for clients that reach the server through a forward and
    /// check the certificate against that name, kubeconfig `tls-server-name`).
    pub fn start_named(ip: IpAddr, names: &[&str]) -> Result<ApiServer> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
            SanType,
        };
        let ca_key = KeyPair::generate().context("CA key")?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).context("CA params")?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "clusterctl recorded API test CA");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params
            .self_signed(&ca_key)
            .context("self-signing the CA")?;
        let ca_pem = ca_cert.pem();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().context("server key")?;
        let mut dns = vec!["localhost".to_string(), "kubernetes".to_string()];
        dns.extend(names.iter().map(|n| n.to_string()));
        let mut leaf = CertificateParams::new(dns).context("server params")?;
        leaf.distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        leaf.subject_alt_names.push(SanType::IpAddress(ip));
        if ip != IpAddr::V4(Ipv4Addr::LOCALHOST) {
            leaf.subject_alt_names
                .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        }
        let leaf_cert = leaf
            .signed_by(&leaf_key, &issuer)
            .context("signing the server certificate")?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| anyhow!("TLS versions: {e}"))?
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf_cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
            )
            .map_err(|e| anyhow!("TLS server config: {e}"))?;
        let config = Arc::new(config);
        let listener = TcpListener::bind((ip, 0)).with_context(|| format!("binding {ip}:0"))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            routes: Mutex::new(BTreeMap::new()),
            recorded: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let s2 = shared.clone();
        let thread = std::thread::spawn(move || {
            while !s2.stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let s3 = s2.clone();
                        let cfg = config.clone();
                        std::thread::spawn(move || {
                            let _ = serve_connection(stream, cfg, &s3);
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(ApiServer {
            addr,
            ca_pem,
            shared,
            thread: Some(thread),
        })
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://<ip>:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The test CA certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Registers the answer `body` with HTTP `status` for `method` on `path` (no query).
    pub fn respond(&self, method: &str, path: &str, status: u16, body: Value) {
        if let Ok(mut r) = self.shared.routes.lock() {
            r.insert((method.to_string(), path.to_string()), (status, body));
        }
    }

    /// Registers `GET path` → 200 `body`.
    pub fn serve(&self, path: &str, body: Value) {
        self.respond("GET", path, 200, body);
    }

    /// Registers the events a watch of `path` answers with (each a `WatchEvent`: `{"type": "ADDED",
    /// "object": {…}}`), one JSON line each; the stream then ends.
    pub fn serve_watch(&self, path: &str, events: Vec<Value>) {
        self.respond("WATCH", path, 200, Value::Array(events));
    }

    /// Every request received so far, in arrival order.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.shared
            .recorded
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// A kubeconfig (YAML text) with one cluster, user and context, all named `name`, pointing at this
    /// server with its CA and [`TEST_TOKEN`].
    pub fn kubeconfig(&self, name: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes());
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: {name}-admin\n  user:\n    token: {TEST_TOKEN}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}-admin\ncurrent-context: {name}\n",
            self.url()
        )
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_connection(
    stream: TcpStream,
    cfg: Arc<rustls::ServerConfig>,
    shared: &Shared,
) -> Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    let conn = rustls::ServerConnection::new(cfg)?;
    let tls = rustls::StreamOwned::new(conn, stream);
    let mut reader = BufReader::new(tls);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        if method.is_empty() {
            return Ok(());
        }
        let mut content_type = String::new();
        let mut length = 0usize;
        let mut close = false;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let v = v.trim();
                match k.to_ascii_lowercase().as_str() {
                    "content-type" => content_type = v.to_string(),
                    "content-length" => length = v.parse().unwrap_or(0),
                    "connection" => close = v.eq_ignore_ascii_case("close"),
                    _ => {}
                }
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p.to_string(), q.to_string()),
            None => (target.clone(), String::new()),
        };
        if let Ok(mut r) = shared.recorded.lock() {
            r.push(Recorded {
                method: method.clone(),
                path: path.clone(),
                query: query.clone(),
                content_type,
                body,
            });
        }
        let watch = method == "GET"
            && query
                .split('&')
                .any(|kv| kv == "watch=true" || kv == "watch=1");
        let (code, answer) = match watch.then(|| answer(shared, "WATCH", &path, "")) {
            Some((200, Value::Array(events))) => (200, Value::Array(events)),
            _ => answer(shared, &method, &path, &query),
        };
        let text = match (&answer, watch) {
            (Value::Array(events), true) => events
                .iter()
                .flat_map(|e| {
                    let mut line = serde_json::to_vec(e).unwrap_or_default();
                    line.push(b'\n');
                    line
                })
                .collect(),
            _ => serde_json::to_vec(&answer).unwrap_or_default(),
        };
        let head = format!(
            "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            reason_phrase(code),
            text.len()
        );
        let w = reader.get_mut();
        w.write_all(head.as_bytes())?;
        w.write_all(&text)?;
        w.flush()?;
        if close {
            w.conn.send_close_notify();
            let _ = w.flush();
            return Ok(());
        }
    }
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        404 => "Not Found",
        429 => "Too Many Requests",
        _ => "Status",
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `fieldSelector` terms of `query` as (JSON pointer, value): `involvedObject.name=x` →
/// (`/involvedObject/name`, `x`).
fn field_selector(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| *k == "fieldSelector")
        .flat_map(|(_, v)| {
            percent_decode(v)
                .split(',')
                .filter_map(|t| t.split_once('='))
                .map(|(f, v)| (format!("/{}", f.replace('.', "/")), v.to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn answer(shared: &Shared, method: &str, path: &str, query: &str) -> (u16, Value) {
    let routes = match shared.routes.lock() {
        Ok(r) => r.clone(),
        Err(_) => return (500, status_json(500, "InternalError", "lock poisoned")),
    };
    let found = routes
        .get(&(method.to_string(), path.to_string()))
        .or_else(|| {
            (method != "GET")
                .then(|| routes.get(&("GET".to_string(), path.to_string())))
                .flatten()
        })
        .cloned();
    let Some((code, mut body)) = found else {
        return (
            404,
            status_json(404, "NotFound", &format!("{path} not found")),
        );
    };
    let sel = field_selector(query);
    if method == "GET" && !sel.is_empty() {
        if let Some(items) = body.get_mut("items").and_then(Value::as_array_mut) {
            items.retain(|it| {
                sel.iter()
                    .all(|(p, v)| it.pointer(p).and_then(Value::as_str) == Some(v.as_str()))
            });
        }
    }
    (code, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_selector_terms_become_pointers() {
        let s = field_selector(
            "fieldSelector=involvedObject.kind%3DPod%2CinvolvedObject.name%3Dweb&limit=5",
        );
        assert_eq!(
            s,
            vec![
                ("/involvedObject/kind".to_string(), "Pod".to_string()),
                ("/involvedObject/name".to_string(), "web".to_string())
            ]
        );
    }
}
