//! A real Kubernetes control plane without nodes, for API tests, as controller-runtime's envtest makes
//! one: upstream `etcd` and `kube-apiserver` (built from their Go modules, [`crate::k8sbin`], version
//! [`crate::k8sbin::DEFAULT_VERSION`]) as host processes on loopback, with a test CA made per control
//! plane (rcgen), a serving certificate for `127.0.0.1`/`localhost`, a ServiceAccount signing key (so the
//! TokenRequest API works), `--authorization-mode=Node,RBAC`, and an admin client certificate (group
//! `system:masters`) — the credentials kubeadm's `admin.conf` holds. No controller-manager, scheduler or
//! kubelet runs: objects stay as the test writes them (a Pod's status is set through its `status`
//! subresource, a PodDisruptionBudget's too), and nothing garbage-collects or schedules.
//!
//! [`Envtest::start`] gives a control plane owned by the caller and stopped on drop (its temp dir
//! removed); [`Envtest::shared`] one per test process for tests that only touch objects they named
//! uniquely ([`Envtest::create_namespace`], [`crate::unique_name`]). Because a process-wide value is
//! never dropped, every control plane also has a watchdog (`sh`) that kills etcd and the API server and
//! removes the temp dir as soon as the test process is gone — also when it is killed.
//!
//! [`Envtest::request`] is a small blocking HTTPS client (admin credentials) for setting up objects;
//! [`Envtest::apply_manifest`] server-side applies multi-document YAML (as `kubectl apply
//! --server-side` does), finding each kind's resource through discovery.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use crate::k8sbin::{K8sBinError, K8sBins, DEFAULT_VERSION};

/// How long the API server may take to answer `/readyz` with 200 (the machine may be loaded).
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The ServiceAccount issuer (and default token audience) of the control plane.
pub const SA_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The admin user's name (client certificate CN); its group is `system:masters`.
pub const ADMIN_USER: &str = "clusterctl-envtest-admin";

/// Why the control plane or a request failed.
#[derive(Debug, thiserror::Error)]
pub enum EnvtestError {
    /// etcd or kube-apiserver could not be built or found.
    #[error(transparent)]
    Programs(#[from] K8sBinError),
    /// Making a certificate or key failed.
    #[error("test PKI: {0}")]
    Pki(String),
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The API server did not become ready in time (the tails of both logs).
    #[error("kube-apiserver not ready after {secs} s ({last})\n--- etcd log ---\n{etcd_log}\n--- kube-apiserver log ---\n{apiserver_log}")]
    NotReady {
        /// Seconds waited.
        secs: u64,
        /// The last answer or error of `/readyz`.
        last: String,
        /// Tail of etcd's log.
        etcd_log: String,
        /// Tail of the API server's log.
        apiserver_log: String,
    },
    /// A TLS or HTTP exchange with the API server failed.
    #[error("{method} {path}: {reason}")]
    Http {
        /// The HTTP method.
        method: String,
        /// The request path.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The API server answered with a status outside 2xx.
    #[error("{method} {path}: HTTP {code}: {body}")]
    Status {
        /// The HTTP method.
        method: String,
        /// The request path.
        path: String,
        /// The HTTP status code.
        code: u16,
        /// The answer (usually a `Status` object).
        body: String,
    },
    /// A manifest document could not be applied as given.
    #[error("manifest: {0}")]
    Manifest(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> EnvtestError {
    let what = what.into();
    move |source| EnvtestError::Io { what, source }
}

/// One HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// HTTP status code.
    pub code: u16,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as JSON (`Value::Null` when empty or not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// The PEM material of the control plane's test PKI.
struct Pki {
    ca_pem: String,
    serving_cert_pem: String,
    serving_key_pem: String,
    admin_cert_pem: String,
    admin_key_pem: String,
    admin_cert_der: Vec<u8>,
    admin_key_der: Vec<u8>,
    sa_key_pem: String,
    sa_pub_pem: String,
}

fn pki() -> Result<Pki, EnvtestError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose, SanType,
    };
    let e = |what: &str| {
        let what = what.to_string();
        move |err: rcgen::Error| EnvtestError::Pki(format!("{what}: {err}"))
    };
    let ca_key = KeyPair::generate().map_err(e("CA key"))?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(e("CA params"))?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "clusterctl envtest CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(e("CA certificate"))?;
    let ca_pem = ca_cert.pem();
    let issuer = Issuer::new(ca, ca_key);

    let serving_key = KeyPair::generate().map_err(e("serving key"))?;
    let mut serving = CertificateParams::new(vec![
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
    ])
    .map_err(e("serving params"))?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving
        .signed_by(&serving_key, &issuer)
        .map_err(e("serving certificate"))?;

    let admin_key = KeyPair::generate().map_err(e("admin key"))?;
    let mut admin = CertificateParams::new(Vec::<String>::new()).map_err(e("admin params"))?;
    admin
        .distinguished_name
        .push(DnType::CommonName, ADMIN_USER);
    admin
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_cert = admin
        .signed_by(&admin_key, &issuer)
        .map_err(e("admin certificate"))?;

    let sa_key = KeyPair::generate().map_err(e("service-account key"))?;
    Ok(Pki {
        ca_pem,
        serving_cert_pem: serving_cert.pem(),
        serving_key_pem: serving_key.serialize_pem(),
        admin_cert_pem: admin_cert.pem(),
        admin_key_pem: admin_key.serialize_pem(),
        admin_cert_der: admin_cert.der().to_vec(),
        admin_key_der: admin_key.serialize_der(),
        sa_key_pem: sa_key.serialize_pem(),
        sa_pub_pem: sa_key.public_key_pem(),
    })
}

fn free_port() -> Result<u16, EnvtestError> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(io_err("binding a free port"))?;
    Ok(l.local_addr().map_err(io_err("local address"))?.port())
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The watchdog: waits until its parent (the test process) is gone — its own parent pid changes when
/// the parent dies — then kills every pid listed in `$dir/pids` and removes `$dir`.
const WATCHDOG: &str = r#"parent=$1; dir=$2
while [ "$(cut -d' ' -f4 /proc/$$/stat)" = "$parent" ]; do sleep 1; done
[ -f "$dir/pids" ] && kill -KILL $(cat "$dir/pids") 2>/dev/null
rm -rf "$dir""#;

/// A running etcd + kube-apiserver; stopped on drop.
pub struct Envtest {
    dir: Option<tempfile::TempDir>,
    addr: SocketAddr,
    pki: Pki,
    tls: Arc<rustls::ClientConfig>,
    children: Mutex<Vec<Child>>,
    bins: K8sBins,
    started_in: Duration,
}

impl std::fmt::Debug for Envtest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Envtest")
            .field("addr", &self.addr)
            .field("version", &self.bins.version())
            .finish_non_exhaustive()
    }
}

static SHARED: OnceLock<Result<Envtest, String>> = OnceLock::new();

impl Envtest {
    /// Starts a control plane of [`DEFAULT_VERSION`] owned by the caller (building etcd and
    /// kube-apiserver first when missing). Tries up to three times, since a free port picked here may
    /// be taken by another process before the server binds it.
    pub fn start() -> Result<Envtest, EnvtestError> {
        Self::start_with_flags(&[])
    }

    /// [`Envtest::start`] with `extra` kube-apiserver flags (`--name=value`, after the test bed's own;
    /// e.g. the audit or OIDC flags a test renders). The API server's output (standard output and
    /// error) is in [`Envtest::apiserver_log`].
    pub fn start_with_flags(extra: &[String]) -> Result<Envtest, EnvtestError> {
        let bins = crate::k8sbin::ensure(DEFAULT_VERSION, &["etcd", "kube-apiserver"])?;
        let mut last = None;
        for _ in 0..3 {
            match Self::start_with(&bins, extra) {
                Ok(e) => return Ok(e),
                Err(e @ EnvtestError::NotReady { .. }) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| EnvtestError::Manifest("no attempt".into())))
    }

    /// The control plane shared by every test of this process, started on first use. Only for tests
    /// that create uniquely named objects and do not depend on the absence of others' objects (a test
    /// that lists every Node of the cluster needs its own, [`Envtest::start`]).
    pub fn shared() -> Result<&'static Envtest, EnvtestError> {
        match SHARED.get_or_init(|| Self::start().map_err(|e| e.to_string())) {
            Ok(e) => Ok(e),
            Err(msg) => Err(EnvtestError::Manifest(format!(
                "the shared control plane did not start: {msg}"
            ))),
        }
    }

    /// [`Envtest::shared`] as a test gate: the control plane, or `None` after a `SKIP:` line when it
    /// cannot run outside CI; with `CI` set, a failure panics with the reason.
    pub fn require_shared() -> Option<&'static Envtest> {
        match Self::shared() {
            Ok(e) => Some(e),
            Err(e) => {
                crate::require(
                    &format!("a real control plane (etcd + kube-apiserver): {e}"),
                    false,
                );
                None
            }
        }
    }

    /// [`Envtest::start`] as a test gate (see [`Envtest::require_shared`]).
    pub fn require_own() -> Option<Envtest> {
        match Self::start() {
            Ok(e) => Some(e),
            Err(e) => {
                crate::require(
                    &format!("a real control plane (etcd + kube-apiserver): {e}"),
                    false,
                );
                None
            }
        }
    }

    fn start_with(bins: &K8sBins, extra: &[String]) -> Result<Envtest, EnvtestError> {
        let t0 = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-", crate::unique_name("envt")))
            .tempdir()
            .map_err(io_err("temp dir"))?;
        let d = dir.path().to_path_buf();
        let pki = pki()?;
        let write = |name: &str, text: &str| -> Result<PathBuf, EnvtestError> {
            let p = d.join(name);
            std::fs::write(&p, text).map_err(io_err(format!("writing {}", p.display())))?;
            Ok(p)
        };
        let ca = write("ca.crt", &pki.ca_pem)?;
        let cert = write("apiserver.crt", &pki.serving_cert_pem)?;
        let key = write("apiserver.key", &pki.serving_key_pem)?;
        let sa_key = write("sa.key", &pki.sa_key_pem)?;
        let sa_pub = write("sa.pub", &pki.sa_pub_pem)?;

        let mut children = Vec::new();
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("envtest-watchdog")
            .arg(std::process::id().to_string())
            .arg(&d)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(io_err("starting the watchdog"))?;
        children.push(watchdog);
        let mut env = Envtest {
            dir: Some(dir),
            addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            tls: Arc::new(client_config(&pki)?),
            pki,
            children: Mutex::new(children),
            bins: bins.clone(),
            started_in: Duration::ZERO,
        };

        let etcd_port = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd_log = d.join("etcd.log");
        env.spawn(
            Command::new(bins.path("etcd"))
                .arg(format!("--data-dir={}", d.join("etcd").display()))
                .arg(format!("--listen-client-urls={etcd_url}"))
                .arg(format!("--advertise-client-urls={etcd_url}"))
                .arg("--listen-peer-urls=http://127.0.0.1:0")
                .arg("--unsafe-no-fsync=true")
                .arg("--log-level=warn"),
            &etcd_log,
        )?;

        let port = free_port()?;
        env.addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        let apiserver_log = d.join("kube-apiserver.log");
        env.spawn(
            Command::new(bins.path("kube-apiserver"))
                .arg(format!("--etcd-servers={etcd_url}"))
                .arg("--bind-address=127.0.0.1")
                .arg("--advertise-address=127.0.0.1")
                .arg(format!("--secure-port={port}"))
                .arg(format!("--cert-dir={}", d.join("certs").display()))
                .arg(format!("--tls-cert-file={}", cert.display()))
                .arg(format!("--tls-private-key-file={}", key.display()))
                .arg(format!("--client-ca-file={}", ca.display()))
                .arg("--authorization-mode=Node,RBAC")
                .arg("--service-cluster-ip-range=10.0.0.0/24")
                .arg("--allow-privileged=true")
                .arg(format!("--service-account-issuer={SA_ISSUER}"))
                .arg(format!("--service-account-key-file={}", sa_pub.display()))
                .arg(format!(
                    "--service-account-signing-key-file={}",
                    sa_key.display()
                ))
                .arg("--endpoint-reconciler-type=none")
                .arg("--v=1")
                .args(extra),
            &apiserver_log,
        )?;

        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let last = match env.request("GET", "/readyz", None, None) {
                Ok(r) if r.code == 200 => break,
                Ok(r) => format!("HTTP {}: {}", r.code, String::from_utf8_lossy(&r.body)),
                Err(e) => e.to_string(),
            };
            let exited = env
                .children
                .lock()
                .map(|mut c| {
                    c.iter_mut()
                        .skip(1)
                        .any(|c| matches!(c.try_wait(), Ok(Some(_))))
                })
                .unwrap_or(false);
            if exited || Instant::now() >= deadline {
                return Err(EnvtestError::NotReady {
                    secs: t0.elapsed().as_secs(),
                    last: if exited {
                        format!("a process exited; {last}")
                    } else {
                        last
                    },
                    etcd_log: tail(&etcd_log, 20),
                    apiserver_log: tail(&apiserver_log, 40),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        env.started_in = t0.elapsed();
        Ok(env)
    }

    fn spawn(&self, cmd: &mut Command, log: &Path) -> Result<(), EnvtestError> {
        let out =
            std::fs::File::create(log).map_err(io_err(format!("creating {}", log.display())))?;
        let err = out.try_clone().map_err(io_err("log file"))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(io_err(format!("starting {:?}", cmd.get_program())))?;
        let pids = self.dir().join("pids");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&pids)
            .map_err(io_err("pids file"))?;
        writeln!(f, "{}", child.id()).map_err(io_err("pids file"))?;
        if let Ok(mut c) = self.children.lock() {
            c.push(child);
        }
        Ok(())
    }

    fn dir(&self) -> &Path {
        self.dir
            .as_ref()
            .map(|d| d.path())
            .unwrap_or(Path::new("/"))
    }

    /// What the API server wrote so far to its standard output and error (empty when unreadable).
    pub fn apiserver_log(&self) -> String {
        std::fs::read_to_string(self.dir().join("kube-apiserver.log")).unwrap_or_default()
    }

    /// The process ids of etcd and kube-apiserver (and the watchdog, first).
    pub fn pids(&self) -> Vec<u32> {
        self.children
            .lock()
            .map(|c| c.iter().map(Child::id).collect())
            .unwrap_or_default()
    }

    /// The control plane's temp dir (PKI, etcd data, logs `etcd.log` and `kube-apiserver.log`).
    pub fn dir_path(&self) -> &Path {
        self.dir()
    }

    /// How long the start took (processes started to `/readyz` 200).
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The Kubernetes version of the API server (`v1.34.4`).
    pub fn version(&self) -> &str {
        self.bins.version()
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The API server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The test CA certificate (PEM): it signed the serving and the admin certificates.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
    }

    fn kubeconfig_for(&self, name: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: {name}-user\n  user:\n{user}contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}-user\ncurrent-context: {name}\n",
            self.url(),
            Self::b64(&self.pki.ca_pem)
        )
    }

    /// A kubeconfig (YAML) with one cluster, user and context, all named after `name`, holding the
    /// admin client certificate and key (group `system:masters`), like kubeadm's `admin.conf`.
    pub fn kubeconfig(&self, name: &str) -> String {
        let user = format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            Self::b64(&self.pki.admin_cert_pem),
            Self::b64(&self.pki.admin_key_pem)
        );
        self.kubeconfig_for(name, &user)
    }

    /// A kubeconfig like [`Envtest::kubeconfig`] whose user authenticates with the bearer `token`
    /// (e.g. a ServiceAccount token from the TokenRequest API).
    pub fn kubeconfig_with_token(&self, name: &str, token: &str) -> String {
        self.kubeconfig_for(name, &format!("    token: {token}\n"))
    }

    /// One request with the admin credentials: `body` sent with `content_type` (default
    /// `application/json`). Any HTTP status is returned; only TLS/HTTP failures are errors.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&[u8]>,
    ) -> Result<Response, EnvtestError> {
        let herr = |reason: String| EnvtestError::Http {
            method: method.to_string(),
            path: path.to_string(),
            reason,
        };
        let tcp = TcpStream::connect_timeout(&self.addr, Duration::from_secs(10))
            .map_err(|e| herr(format!("connect: {e}")))?;
        tcp.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| herr(e.to_string()))?;
        let name = rustls::pki_types::ServerName::try_from("localhost")
            .map_err(|e| herr(e.to_string()))?;
        let conn = rustls::ClientConnection::new(self.tls.clone(), name)
            .map_err(|e| herr(format!("TLS: {e}")))?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let body = body.unwrap_or_default();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\nUser-Agent: clusterctl-envtest\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if !body.is_empty() {
            head.push_str(&format!(
                "Content-Type: {}\r\n",
                content_type.unwrap_or("application/json")
            ));
        }
        head.push_str("\r\n");
        tls.write_all(head.as_bytes())
            .and_then(|_| tls.write_all(body))
            .and_then(|_| tls.flush())
            .map_err(|e| herr(format!("send: {e}")))?;
        let mut raw = Vec::new();
        match tls.read_to_end(&mut raw) {
            Ok(_) => {}
            // Go may close without close_notify; what arrived is checked below.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
            Err(e) => return Err(herr(format!("receive: {e}"))),
        }
        parse_response(&raw).map_err(herr)
    }

    /// `request`, with a non-2xx status as [`EnvtestError::Status`] and the body as JSON.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Value, EnvtestError> {
        let bytes = body.map(|b| serde_json::to_vec(b).unwrap_or_default());
        let r = self.request(method, path, content_type, bytes.as_deref())?;
        if !(200..300).contains(&r.code) {
            return Err(EnvtestError::Status {
                method: method.to_string(),
                path: path.to_string(),
                code: r.code,
                body: String::from_utf8_lossy(&r.body).into_owned(),
            });
        }
        Ok(r.json())
    }

    /// `GET path` (JSON).
    pub fn get(&self, path: &str) -> Result<Value, EnvtestError> {
        self.call("GET", path, None, None)
    }

    /// `POST path` with `object` (create).
    pub fn create(&self, path: &str, object: &Value) -> Result<Value, EnvtestError> {
        self.call("POST", path, None, Some(object))
    }

    /// `PATCH path` with a JSON merge patch (`application/merge-patch+json`); `path` may name a
    /// subresource (`…/status`).
    pub fn merge_patch(&self, path: &str, patch: &Value) -> Result<Value, EnvtestError> {
        self.call(
            "PATCH",
            path,
            Some("application/merge-patch+json"),
            Some(patch),
        )
    }

    /// `DELETE path`; a missing object is not an error.
    pub fn delete(&self, path: &str) -> Result<(), EnvtestError> {
        match self.call("DELETE", path, None, None) {
            Ok(_) | Err(EnvtestError::Status { code: 404, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates a Node `name` and sets its status to `status` (e.g. addresses and conditions) through
    /// the `status` subresource. `spec` may set `podCIDR`, `taints`, … Returns the stored Node.
    pub fn create_node(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
        spec: Value,
        status: Value,
    ) -> Result<Value, EnvtestError> {
        self.create(
            "/api/v1/nodes",
            &json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels}, "spec": spec}),
        )?;
        self.merge_patch(
            &format!("/api/v1/nodes/{name}/status"),
            &json!({ "status": status }),
        )
    }

    /// Creates a namespace named `<prefix><unique>` with its `default` ServiceAccount (which a
    /// controller-manager would make; the ServiceAccount admission plugin needs it for Pods). Returns
    /// the name. Namespaces are not removed: each control plane is thrown away whole.
    pub fn create_namespace(&self, prefix: &str) -> Result<String, EnvtestError> {
        let name = crate::unique_name(prefix);
        self.create(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )?;
        self.create(
            &format!("/api/v1/namespaces/{name}/serviceaccounts"),
            &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
        )?;
        Ok(name)
    }

    /// The collection path of `kind` in `api_version` and whether it is namespaced, from discovery.
    fn resource_of(&self, api_version: &str, kind: &str) -> Result<(String, bool), EnvtestError> {
        let base = if api_version.contains('/') {
            format!("/apis/{api_version}")
        } else {
            format!("/api/{api_version}")
        };
        let list = self.get(&base)?;
        let found = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["kind"] == kind && !r["name"].as_str().unwrap_or("/").contains('/'))
            .ok_or_else(|| {
                EnvtestError::Manifest(format!("no resource of kind {kind} in {api_version}"))
            })?;
        Ok((
            format!("{base}/{}", found["name"].as_str().unwrap_or_default()),
            found["namespaced"].as_bool().unwrap_or(false),
        ))
    }

    /// Server-side applies every document of the multi-document YAML `text` (field manager `manager`,
    /// conflicts forced), as `kubectl apply --server-side --force-conflicts` does. A namespaced object
    /// without a namespace goes to `default`. Returns `kind namespace/name` per document.
    pub fn apply_manifest(&self, text: &str, manager: &str) -> Result<Vec<String>, EnvtestError> {
        use serde::Deserialize as _;
        let mut applied = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(text) {
            let v = serde_yaml::Value::deserialize(doc)
                .map_err(|e| EnvtestError::Manifest(format!("YAML: {e}")))?;
            let v: Value = serde_json::to_value(&v)
                .map_err(|e| EnvtestError::Manifest(format!("as JSON: {e}")))?;
            if v.is_null() {
                continue;
            }
            let (api_version, kind, name) = (
                v["apiVersion"].as_str().unwrap_or_default(),
                v["kind"].as_str().unwrap_or_default(),
                v["metadata"]["name"].as_str().unwrap_or_default(),
            );
            if api_version.is_empty() || kind.is_empty() || name.is_empty() {
                return Err(EnvtestError::Manifest(format!(
                    "a document without apiVersion, kind or metadata.name: {v}"
                )));
            }
            let (collection, namespaced) = self.resource_of(api_version, kind)?;
            let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
            let path = if namespaced {
                let (prefix, resource) = collection.rsplit_once('/').unwrap_or_default();
                format!("{prefix}/namespaces/{ns}/{resource}/{name}")
            } else {
                format!("{collection}/{name}")
            };
            self.call(
                "PATCH",
                &format!("{path}?fieldManager={manager}&force=true"),
                Some("application/apply-patch+yaml"),
                Some(&v),
            )?;
            applied.push(if namespaced {
                format!("{kind} {ns}/{name}")
            } else {
                format!("{kind} {name}")
            });
        }
        Ok(applied)
    }
}

impl Drop for Envtest {
    fn drop(&mut self) {
        if let Ok(mut children) = self.children.lock() {
            // The API server first, then etcd, then the watchdog (first in the list).
            for c in children.iter_mut().rev() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if let Some(d) = self.dir.take() {
            let _ = d.close();
        }
    }
}

fn client_config(pki: &Pki) -> Result<rustls::ClientConfig, EnvtestError> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let mut roots = rustls::RootCertStore::empty();
    let ca_der = pem_der(&pki.ca_pem).ok_or_else(|| EnvtestError::Pki("CA PEM".into()))?;
    roots
        .add(CertificateDer::from(ca_der))
        .map_err(|e| EnvtestError::Pki(format!("CA into the trust store: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| EnvtestError::Pki(format!("TLS versions: {e}")))?
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![CertificateDer::from(pki.admin_cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.admin_key_der.clone())),
        )
        .map_err(|e| EnvtestError::Pki(format!("client certificate: {e}")))
}

/// The DER bytes of the first PEM block of `pem`.
fn pem_der(pem: &str) -> Option<Vec<u8>> {
    let b64: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// Parses an HTTP/1.1 answer read to the end of the connection: status line, headers, and a body
/// that is either chunked or everything after the headers.
fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no complete HTTP head in {} bytes", raw.len()))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.lines();
    let code: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let rest = &raw[split + 4..];
    let body = if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        dechunk(rest)?
    } else if let Some(n) = headers
        .get("content-length")
        .and_then(|n| n.parse::<usize>().ok())
    {
        if rest.len() < n {
            return Err(format!("body cut short: {} of {n} bytes", rest.len()));
        }
        rest[..n].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response { code, body })
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size line cut short")?;
        let size_text = String::from_utf8_lossy(&b[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|e| format!("chunk size {size_text:?}: {e}"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err("chunk cut short".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_parse_plain_and_chunked() {
        let r = parse_response(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!((r.code, r.body.as_slice()), (201, b"{}".as_slice()));
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;x=y\r\n\":1}\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.json(), json!({"a": 1}));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}").is_err());
    }
}
