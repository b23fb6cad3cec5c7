//! A real Keycloak (the upstream server distribution `org.keycloak:keycloak-quarkus-dist`, from Maven
//! Central) as an OIDC issuer for tests, on loopback with TLS from a CA made per server.
//!
//! * **Once per version** (cached outside the clone, under `<cache>/keycloak/<version>/`): `mvn
//!   dependency:get` fetches the zip into `<cache>/maven`, it is unpacked and `kc.sh build
//!   --db=dev-file` runs once, so that each start is `start --optimized` (no Quarkus re-augmentation).
//!   Java 25 ([`JAVA_HOME`]) and Maven are test-bed needs only (`scripts/packages/testbed.list`).
//! * **Once per version and realm** (`keycloak/template.rs`): a template dev-file H2 database with
//!   Keycloak's schema migrated and [`REALM`] imported, made by one server started with
//!   `--import-realm` on an empty database and stopped cleanly; kept under
//!   `<cache>/keycloak/<version>/template-<key>/`.
//!   The realm: client [`CLIENT_ID`] (public, password grant) whose tokens carry a `groups` claim
//!   and live [`TOKEN_LIFESPAN`] (a client attribute, so in the template), a second client
//!   [`OTHER_CLIENT_ID`], and user [`USER`] in group [`GROUP`]. The realm's signing keys are made
//!   with the template: every server started from one template signs with the same keys (fine for
//!   tests, whose servers each have their own issuer URL).
//! * **Per server**: a hard-linked copy of the built distribution in a temporary directory whose
//!   `data/h2` is a copy (not links: H2 writes to it) of the template's, started without any import
//!   or schema migration; a serving certificate for its address from a CA made for it, heap bound
//!   `-Xmx512m`, the C1 compiler only (`-XX:TieredStopAtLevel=1`), the local cache
//!   (`--cache=local`, no cluster), HTTPS only on `127.0.0.1:<free port>` (or on another address of
//!   this machine, [`Keycloak::start_on`]: a docker network's gateway, for API servers in node
//!   containers) with `--hostname=https://<address>:<port>`: the issuer URL names the server's own
//!   address and port (a runtime option, nothing of it is in the database).
//!   A server that exits while starting (seen once in CI, the cause lost with its temporary
//!   directory) is started again, up to [`START_ATTEMPTS`] times, each failed attempt's log excerpt
//!   printed. Stopped (killed) on drop, and by a watchdog when the test process dies.
//!   [`Keycloak::cpu_time`] says what a start cost (the `keycloak_starts` example measures starts).

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod template;

/// The Keycloak release the test bed runs.
pub const VERSION: &str = "26.4.7";
/// The Java that runs it.
pub const JAVA_HOME: &str = "/usr/lib/jvm/temurin-25-jdk-amd64";
/// The realm (in the template database).
pub const REALM: &str = "k8s";
/// The client whose ID tokens the API server accepts (their `aud`).
pub const CLIENT_ID: &str = "kubernetes";
/// Another client of the realm (its tokens have another audience).
pub const OTHER_CLIENT_ID: &str = "other";
/// The user (in [`GROUP`]).
pub const USER: &str = "alice";
/// The user's group, in the `groups` claim.
pub const GROUP: &str = "k8s-admins";
/// How long the ID and access tokens of [`CLIENT_ID`] live (Keycloak's client attribute
/// `access.token.lifespan`), so that a test can see an expired token refused.
pub const TOKEN_LIFESPAN: Duration = Duration::from_secs(30);
/// How many times [`Keycloak::start`] starts a server that exited before it answered.
pub const START_ATTEMPTS: u32 = 3;
/// The cache of every server: local, not `ispn` (the default of `start`, a cluster found through the
/// database, JDBC_PING, with mTLS between its members): one server per test needs no cluster, and
/// servers started from one template never find each other. A runtime option in 26.4.
const CACHE: &str = "--cache=local";
/// Added to the JVM's options (`JAVA_OPTS_APPEND` of `kc.sh`): the C1 compiler only, no C2. A test
/// server answers a few dozen requests; C2 compiling Keycloak's start-up paths cost about half of a
/// start's CPU time (docs/testing.md).
const JAVA_OPTS_APPEND: &str = "-XX:TieredStopAtLevel=1";
/// How long a start may take (the first JVM start on a loaded 2-core machine is slow).
const READY_TIMEOUT: Duration = Duration::from_secs(600);

/// Why Keycloak could not be prepared or started.
#[derive(Debug, thiserror::Error)]
pub enum KeycloakError {
    /// A program failed.
    #[error("{what} failed: {output}")]
    Program {
        /// What ran.
        what: String,
        /// Its output (tail).
        output: String,
    },
    /// A file operation or a program start failed.
    #[error("{what}")]
    Io {
        /// What was attempted.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The test CA or certificate could not be made.
    #[error("test certificate: {0}")]
    Pki(String),
    /// The server did not answer in time, or exited.
    #[error("Keycloak not ready after {secs}s: {why}; log excerpt:\n{log}")]
    NotReady {
        /// Seconds waited.
        secs: u64,
        /// Whether the server's process had exited.
        exited: bool,
        /// The last answer or the exit.
        why: String,
        /// The server's log tail.
        log: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> KeycloakError {
    let what = what.into();
    move |source| KeycloakError::Io { what, source }
}

fn run(what: &str, cmd: &mut Command) -> Result<(), KeycloakError> {
    let out = cmd.output().map_err(io(format!("starting {what}")))?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let tail: Vec<&str> = text.lines().rev().take(30).collect();
    Err(KeycloakError::Program {
        what: what.to_string(),
        output: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
    })
}

/// The built distribution of [`VERSION`] in the cache, made on first use (download, unpack,
/// `kc.sh build`); concurrent first uses each build their own and the first rename wins.
pub fn distribution() -> Result<PathBuf, KeycloakError> {
    let root = crate::k8snode::cache_root().join("keycloak").join(VERSION);
    let dist = root.join(format!("keycloak-{VERSION}"));
    if dist.join(".built").exists() {
        return Ok(dist);
    }
    let repo = crate::k8snode::cache_root().join("maven");
    let zip = repo.join(format!(
        "org/keycloak/keycloak-quarkus-dist/{VERSION}/keycloak-quarkus-dist-{VERSION}.zip"
    ));
    if !zip.exists() {
        run(
            "mvn dependency:get",
            Command::new("mvn")
                .env("JAVA_HOME", JAVA_HOME)
                .args(["-q", "-B", "dependency:get", "-Dtransitive=false"])
                .arg(format!("-Dmaven.repo.local={}", repo.display()))
                .arg(format!(
                    "-Dartifact=org.keycloak:keycloak-quarkus-dist:{VERSION}:zip"
                )),
        )?;
    }
    let work = root.join(format!("unpack-{}", crate::unique_name("kc")));
    std::fs::create_dir_all(&work).map_err(io(format!("creating {}", work.display())))?;
    run(
        "unzip",
        Command::new("unzip")
            .arg("-q")
            .arg(&zip)
            .arg("-d")
            .arg(&work),
    )?;
    let unpacked = work.join(format!("keycloak-{VERSION}"));
    run(
        "kc.sh build",
        Command::new(unpacked.join("bin/kc.sh"))
            .env("JAVA_HOME", JAVA_HOME)
            .args(["build", "--db=dev-file"]),
    )?;
    std::fs::write(unpacked.join(".built"), "").map_err(io("marking the build"))?;
    // Another process may have finished first: then its copy stays and this one is dropped.
    if std::fs::rename(&unpacked, &dist).is_err() && !dist.join(".built").exists() {
        return Err(KeycloakError::Program {
            what: format!("moving the built distribution to {}", dist.display()),
            output: String::new(),
        });
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(dist)
}

/// The realm imported into the template database (see the module doc).
pub fn realm() -> Value {
    json!({
        "realm": REALM, "enabled": true,
        "groups": [{"name": GROUP}],
        "users": [{
            "username": USER, "enabled": true, "email": format!("{USER}@example.com"),
            "emailVerified": true, "firstName": "Alice", "lastName": "Test",
            "credentials": [{"type": "password", "value": password(), "temporary": false}],
            "groups": [format!("/{GROUP}")]
        }],
        "clients": [
            {"clientId": CLIENT_ID, "enabled": true, "publicClient": true,
             "directAccessGrantsEnabled": true, "standardFlowEnabled": false,
             "attributes": {"access.token.lifespan": TOKEN_LIFESPAN.as_secs().to_string()},
             "protocolMappers": [{"name": "groups", "protocol": "openid-connect",
                "protocolMapper": "oidc-group-membership-mapper",
                "config": {"claim.name": "groups", "full.path": "false", "id.token.claim": "true",
                           "access.token.claim": "true", "userinfo.token.claim": "true"}}]},
            {"clientId": OTHER_CLIENT_ID, "enabled": true, "publicClient": true,
             "directAccessGrantsEnabled": true, "standardFlowEnabled": false}
        ]
    })
}

/// The user's password (test data, never printed by the test bed).
pub fn password() -> &'static str {
    "pw-alice-test-only"
}

/// A CA and a serving certificate for `host` (and `localhost`): (CA PEM, certificate PEM, key PEM).
fn tls(host: Ipv4Addr) -> Result<(String, String, String), KeycloakError> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
    let e = |err: rcgen::Error| KeycloakError::Pki(err.to_string());
    let ca_key = KeyPair::generate().map_err(e)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "clusterctl test Keycloak CA");
    let ca_pem = ca.self_signed(&ca_key).map_err(e)?.pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().map_err(e)?;
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).map_err(e)?;
    leaf.subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(host)));
    let cert = leaf.signed_by(&key, &issuer).map_err(e)?;
    Ok((ca_pem, cert.pem(), key.serialize_pem()))
}

/// What a server's `data/` starts from.
enum Data<'a> {
    /// An empty database and [`realm`] imported at start (`--import-realm`): the template's server.
    Import,
    /// A copy of the template's `h2/` (the directory [`template::template`] returned), no import.
    Template(&'a Path),
}

/// A running Keycloak; killed on drop.
pub struct Keycloak {
    child: Child,
    dir: tempfile::TempDir,
    host: Ipv4Addr,
    port: u16,
    ca_pem: String,
    started_in: Duration,
}

/// Kills the server's process group (`$2`: `kc.sh` and its JVM) when the test process (`$1`) is gone.
const WATCHDOG: &str = r#"parent=$1; pid=$2
while [ "$(cut -d' ' -f4 /proc/$$/stat)" = "$parent" ] && kill -0 "$pid" 2>/dev/null; do sleep 1; done
kill -KILL -- "-$pid" 2>/dev/null"#;

impl Keycloak {
    /// [`Keycloak::start`] as a test gate: `None` after [`crate::require`] said why (which fails the
    /// test in CI).
    pub fn require() -> Option<Keycloak> {
        match Self::start() {
            Ok(k) => Some(k),
            Err(e) => {
                crate::require(&format!("a real Keycloak {VERSION}: {e}"), false);
                None
            }
        }
    }

    /// Starts a server (see the module doc) on a copy of the template database, made first when the
    /// cache has none (or waited for while another process makes it), and waits until the realm's
    /// discovery document answers; a server that exited before answering is started again (fresh
    /// directory and port), at most [`START_ATTEMPTS`] times in all. Errors: the last attempt's, or
    /// the first that is not an exit.
    pub fn start() -> Result<Keycloak, KeycloakError> {
        Self::start_on(Ipv4Addr::LOCALHOST)
    }

    /// [`Keycloak::start`] listening on `host` (an address of this machine) instead of loopback; the
    /// issuer URL and the serving certificate name it.
    pub fn start_on(host: Ipv4Addr) -> Result<Keycloak, KeycloakError> {
        let dist = distribution()?;
        let template = template::template(&dist)?;
        Self::start_with(&dist, host, &Data::Template(&template))
    }

    /// [`Keycloak::start_on`] with `data/` made as `data` says, started again when it exits early.
    fn start_with(dist: &Path, host: Ipv4Addr, data: &Data) -> Result<Keycloak, KeycloakError> {
        let mut attempt = 1;
        loop {
            match Self::start_once(dist, host, data) {
                Err(e @ KeycloakError::NotReady { exited: true, .. })
                    if attempt < START_ATTEMPTS =>
                {
                    eprintln!(
                        "Keycloak start {attempt}/{START_ATTEMPTS} failed, starting again: {e}"
                    );
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// One start in a fresh temporary directory on a fresh port.
    fn start_once(dist: &Path, host: Ipv4Addr, data: &Data) -> Result<Keycloak, KeycloakError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-", crate::unique_name("kc")))
            .tempdir()
            .map_err(io("temp dir"))?;
        let home = dir.path().join("kc");
        run("cp -al", Command::new("cp").arg("-al").arg(dist).arg(&home))?;
        let write =
            |p: &Path, t: &str| std::fs::write(p, t).map_err(io(format!("{}", p.display())));
        match data {
            Data::Import => {
                let import = home.join("data/import");
                std::fs::create_dir_all(&import).map_err(io("data/import"))?;
                write(&import.join("realm.json"), &realm().to_string())?;
            }
            Data::Template(template) => {
                std::fs::create_dir_all(home.join("data")).map_err(io("data"))?;
                // A copy, not hard links: H2 writes to its files.
                run(
                    "cp -a <template>/h2",
                    Command::new("cp")
                        .arg("-a")
                        .arg(template.join("h2"))
                        .arg(home.join("data/h2")),
                )?;
            }
        }
        let (ca_pem, cert, key) = tls(host)?;
        let cert_path = dir.path().join("tls.crt");
        let key_path = dir.path().join("tls.key");
        write(&cert_path, &cert)?;
        write(&key_path, &key)?;
        let port = TcpListener::bind((host, 0))
            .and_then(|l| l.local_addr())
            .map_err(io("a free port"))?
            .port();
        let log = std::fs::File::create(dir.path().join("keycloak.log")).map_err(io("log"))?;
        let err = log.try_clone().map_err(io("log"))?;
        let t0 = Instant::now();
        // Its own process group: `kc.sh` runs the JVM as its child, and both go together.
        let child = Command::new(home.join("bin/kc.sh"))
            .process_group(0)
            .env("JAVA_HOME", JAVA_HOME)
            .env("JAVA_OPTS_KC_HEAP", "-Xms64m -Xmx512m")
            .env("JAVA_OPTS_APPEND", JAVA_OPTS_APPEND)
            .args(["start", "--optimized", CACHE, "--http-enabled=false"])
            .args(matches!(data, Data::Import).then_some("--import-realm"))
            .arg(format!("--http-host={host}"))
            .arg(format!("--https-port={port}"))
            .arg(format!("--hostname=https://{host}:{port}"))
            .arg(format!("--https-certificate-file={}", cert_path.display()))
            .arg(format!(
                "--https-certificate-key-file={}",
                key_path.display()
            ))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(io("starting kc.sh"))?;
        let _ = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("keycloak-watchdog")
            .arg(std::process::id().to_string())
            .arg(child.id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut kc = Keycloak {
            child,
            dir,
            host,
            port,
            ca_pem,
            started_in: Duration::ZERO,
        };
        kc.wait_ready(t0)?;
        kc.started_in = t0.elapsed();
        Ok(kc)
    }

    fn wait_ready(&mut self, t0: Instant) -> Result<(), KeycloakError> {
        let url = format!("{}/.well-known/openid-configuration", self.issuer_url());
        loop {
            let why = match self.curl(&["-o", "/dev/null", "-w", "%{http_code}", &url]) {
                Ok(code) if code == "200" => return Ok(()),
                Ok(code) => format!("HTTP {code}"),
                Err(e) => e.to_string(),
            };
            let exited = matches!(self.child.try_wait(), Ok(Some(_)));
            if exited || t0.elapsed() > READY_TIMEOUT {
                return Err(KeycloakError::NotReady {
                    secs: t0.elapsed().as_secs(),
                    exited,
                    why: if exited {
                        format!("exited; {why}")
                    } else {
                        why
                    },
                    log: self.log_excerpt(20, 20),
                });
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// `curl -s --cacert <CA> ARGS`: its standard output.
    fn curl(&self, args: &[&str]) -> Result<String, KeycloakError> {
        let ca = self.dir.path().join("ca.crt");
        if !ca.exists() {
            std::fs::write(&ca, &self.ca_pem).map_err(io("ca.crt"))?;
        }
        let out = Command::new("curl")
            .args(["-s", "--max-time", "30", "--cacert"])
            .arg(&ca)
            .args(args)
            .output()
            .map_err(io("starting curl"))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The server log's lines that say why it stopped (`ERROR`, `Caused by`, the first `max_errors`
    /// of them) and then its last `tail` lines: a start that failed early logs its cause well above
    /// the shutdown lines that end the log.
    pub fn log_excerpt(&self, max_errors: usize, tail: usize) -> String {
        let text =
            std::fs::read_to_string(self.dir.path().join("keycloak.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let errors = lines
            .iter()
            .filter(|l| l.contains("ERROR") || l.contains("Caused by"))
            .take(max_errors)
            .copied();
        let last = lines[lines.len().saturating_sub(tail)..].iter().copied();
        errors
            .chain(std::iter::once("…"))
            .chain(last)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The server's Keycloak home: the hard-linked copy of the distribution with its own `data/`.
    fn home(&self) -> PathBuf {
        self.dir.path().join("kc")
    }

    /// The realm's issuer URL (`https://<host>:<port>/realms/k8s`).
    pub fn issuer_url(&self) -> String {
        format!("https://{}:{}/realms/{REALM}", self.host, self.port)
    }

    /// The PEM CA that signed the server's certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// From spawning `kc.sh` until the realm's discovery document answered.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The CPU time (user + system) the server's processes have used so far: `kc.sh` and its `java`
    /// child, from `/proc/<pid>/stat` (`utime` + `stime`, in clock ticks).
    pub fn cpu_time(&self) -> Option<Duration> {
        // SAFETY: sysconf reads a constant of the system; no memory is involved.
        let ticks = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
        let ticks_used: u64 = self
            .pids()
            .iter()
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
            .filter_map(|stat| {
                // Fields after the command name (which may hold spaces), `(…)`: state is field 3,
                // utime and stime are fields 14 and 15.
                let rest = stat.rsplit_once(')')?.1;
                let f: Vec<&str> = rest.split_whitespace().collect();
                Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
            })
            .sum();
        Some(Duration::from_millis(ticks_used * 1000 / ticks.max(1)))
    }

    /// `kc.sh`'s pid and its children's (the `java` it runs).
    fn pids(&self) -> Vec<String> {
        let children =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.child.id()))
                .unwrap_or_default();
        std::iter::once(self.child.id().to_string())
            .chain(children.split_whitespace().map(str::to_string))
            .collect()
    }

    /// The resident memory of the server's JVM (the `java` child of `kc.sh`), in KiB.
    pub fn rss_kib(&self) -> Option<u64> {
        self.pids()
            .iter()
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
            .filter_map(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .max()
    }

    /// The ID token of a password grant for `client_id`, user [`USER`] (scope `openid`).
    pub fn id_token(&self, client_id: &str) -> Result<String, KeycloakError> {
        let url = format!("{}/protocol/openid-connect/token", self.issuer_url());
        let body = self.curl(&[
            "-d",
            "grant_type=password",
            "-d",
            &format!("client_id={client_id}"),
            "-d",
            &format!("username={USER}"),
            "-d",
            &format!("password={}", password()),
            "-d",
            "scope=openid",
            &url,
        ])?;
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        v["id_token"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| KeycloakError::Program {
                what: format!("the password grant of {client_id}"),
                output: v["error"].to_string(),
            })
    }
}

/// Whether `out`, the table `kubectl auth whoami` prints, names [`USER`] as the user and [`GROUP`]
/// among the groups, both with `prefix` (`Username  <prefix>alice`, `Groups  [<prefix>k8s-admins …]`).
pub fn whoami_names(out: &str, prefix: &str) -> bool {
    let user = format!("{prefix}{USER}");
    let group = format!("{prefix}{GROUP}");
    out.lines()
        .any(|l| l.starts_with("Username") && l.ends_with(&user))
        && out
            .lines()
            .any(|l| l.starts_with("Groups") && l.contains(&group))
}

/// The `exp` claim (Unix seconds) of a JWT: its payload, the second dot-separated part, base64url
/// without padding (RFC 7519). `None` when the token is not a JWT or has no numeric `exp`.
pub fn token_expiry(token: &str) -> Option<u64> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice::<Value>(&bytes).ok()?["exp"].as_u64()
}

impl Drop for Keycloak {
    fn drop(&mut self) {
        // The group this server was started in: kc.sh and the JVM it runs.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}
