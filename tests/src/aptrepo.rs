//! A real signed apt repository for the packages tests, laid out as the upstream one is: `.deb`
//! packages built with `dpkg-deb` from real programs ([`build_deb`]), a flat repository per Kubernetes
//! minor at `core:/stable:/v1.XX/deb/` (as `https://pkgs.k8s.io/core:/stable:/v1.XX/deb/`) with
//! `Packages`, `Release` (`apt-ftparchive`), `InRelease` and `Release.gpg` signed by a key the test
//! generates with `gpg` ([`SigningKey`]) and its armored public key as `Release.key` ([`publish`]), and
//! [`FileServer`]: a small HTTP/1.1 file server bound on the test network's gateway that records every
//! path asked for, so a test can tell whether a node downloaded anything.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};

fn run(cmd: &mut Command, what: &str) -> Result<Vec<u8>> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// One file of a package: its content taken from `source` (a file here) or `text`, placed at `dest`
/// (absolute) with `mode`.
#[derive(Debug, Clone)]
pub struct DebFile {
    /// The file to copy, when not `text`.
    pub source: Option<PathBuf>,
    /// The content, when not from `source`.
    pub text: Option<String>,
    /// Absolute path in the package.
    pub dest: String,
    /// Permission bits.
    pub mode: u32,
}

impl DebFile {
    /// A copy of `source` at `dest`, mode 0755.
    pub fn program(source: &Path, dest: &str) -> Self {
        DebFile {
            source: Some(source.to_path_buf()),
            text: None,
            dest: dest.into(),
            mode: 0o755,
        }
    }

    /// `text` at `dest`, mode 0644.
    pub fn text(text: &str, dest: &str) -> Self {
        DebFile {
            source: None,
            text: Some(text.into()),
            dest: dest.into(),
            mode: 0o644,
        }
    }
}

/// Builds `<dir>/<name>_<version>_<arch>.deb` with `dpkg-deb` (root-owned files, uncompressed: the test's loopback does not need it and it saves seconds): the
/// package `name` at `version` with `depends` (a `Depends:` value, when given) holding `files`.
/// Returns the path.
pub fn build_deb(
    dir: &Path,
    name: &str,
    version: &str,
    arch: &str,
    depends: Option<&str>,
    files: &[DebFile],
) -> Result<PathBuf> {
    let root = dir.join(format!("debroot-{name}-{version}"));
    std::fs::create_dir_all(root.join("DEBIAN"))?;
    let mut control = format!(
        "Package: {name}\nVersion: {version}\nArchitecture: {arch}\nMaintainer: clusterctl tests <tests@example.invalid>\nSection: admin\nPriority: optional\n"
    );
    if let Some(d) = depends {
        control.push_str(&format!("Depends: {d}\n"));
    }
    control.push_str(&format!(
        "Description: {name} {version} (clusterctl test repository, built from the upstream Go module)\n"
    ));
    std::fs::write(root.join("DEBIAN/control"), control)?;
    for f in files {
        let dest = root.join(f.dest.trim_start_matches('/'));
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match (&f.source, &f.text) {
            (Some(src), _) => {
                std::fs::copy(src, &dest).with_context(|| format!("copy {}", src.display()))?;
            }
            (None, Some(t)) => std::fs::write(&dest, t)?,
            (None, None) => bail!("{}: no content", f.dest),
        }
        let mut perm = std::fs::metadata(&dest)?.permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, f.mode);
        std::fs::set_permissions(&dest, perm)?;
    }
    let file = dir.join(format!("{name}_{version}_{arch}.deb"));
    run(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Znone", "--build"])
            .arg(&root)
            .arg(&file),
        "dpkg-deb --build",
    )?;
    std::fs::remove_dir_all(&root)?;
    Ok(file)
}

/// A signing key made for one test in its own GnuPG home (its agent stopped on drop).
#[derive(Debug)]
pub struct SigningKey {
    home: tempfile::TempDir,
    /// The armored public key (what the repository serves as `Release.key`).
    pub armored: String,
}

impl SigningKey {
    /// Generates an RSA 3072 signing key without passphrase.
    pub fn generate() -> Result<SigningKey> {
        // Short path: gpg-agent's socket lives in the home directory.
        let home = tempfile::Builder::new().prefix("gpg").tempdir_in("/tmp")?;
        let mut perm = std::fs::metadata(home.path())?.permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o700);
        std::fs::set_permissions(home.path(), perm)?;
        let mut key = SigningKey {
            home,
            armored: String::new(),
        };
        run(
            key.gpg().args([
                "--passphrase",
                "",
                "--quick-gen-key",
                "clusterctl test repository <repo@example.invalid>",
                "rsa3072",
                "sign",
                "never",
            ]),
            "gpg --quick-gen-key",
        )?;
        key.armored = String::from_utf8(run(
            key.gpg().args(["--armor", "--export"]),
            "gpg --export",
        )?)?;
        Ok(key)
    }

    fn gpg(&self) -> Command {
        let mut c = Command::new("gpg");
        c.arg("--homedir").arg(self.home.path()).args([
            "--batch",
            "--yes",
            "--pinentry-mode",
            "loopback",
        ]);
        c
    }

    /// Writes `InRelease` (clear-signed) and `Release.gpg` (detached) for `dir/Release`.
    pub fn sign_release(&self, dir: &Path) -> Result<()> {
        let release = dir.join("Release");
        run(
            self.gpg()
                .args(["--digest-algo", "SHA256", "--clearsign", "-o"])
                .arg(dir.join("InRelease"))
                .arg(&release),
            "gpg --clearsign",
        )?;
        run(
            self.gpg()
                .args(["--digest-algo", "SHA256", "-abs", "-o"])
                .arg(dir.join("Release.gpg"))
                .arg(&release),
            "gpg --detach-sign",
        )?;
        Ok(())
    }
}

impl Drop for SigningKey {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .arg("--homedir")
            .arg(self.home.path())
            .args(["--kill", "gpg-agent"])
            .output();
    }
}

/// Makes `dir` (holding `.deb` files) a flat, signed apt repository as pkgs.k8s.io's are: `Packages`,
/// `Packages.gz`, `Release` (`apt-ftparchive`), `InRelease`, `Release.gpg`, and `Release.key` (the
/// armored public key).
pub fn publish(dir: &Path, key: &SigningKey) -> Result<()> {
    let packages = run(
        Command::new("apt-ftparchive")
            .args(["packages", "."])
            .current_dir(dir),
        "apt-ftparchive packages",
    )?;
    std::fs::write(dir.join("Packages"), &packages)?;
    run(
        Command::new("gzip")
            .args(["-9", "-k", "-f", "Packages"])
            .current_dir(dir),
        "gzip Packages",
    )?;
    for f in ["Release", "InRelease", "Release.gpg"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let release = run(
        Command::new("apt-ftparchive")
            .args([
                "-o",
                "APT::FTPArchive::Release::Origin=clusterctl-test",
                "-o",
                "APT::FTPArchive::Release::Label=clusterctl-test",
                "release",
                ".",
            ])
            .current_dir(dir),
        "apt-ftparchive release",
    )?;
    std::fs::write(dir.join("Release"), release)?;
    key.sign_release(dir)?;
    std::fs::write(dir.join("Release.key"), &key.armored)?;
    Ok(())
}

/// Writes `<file>.sha256sum` next to `file` in `sha256sum`'s format; returns the digest.
pub fn write_sha256sum(file: &Path) -> Result<String> {
    let out = run(
        Command::new("sha256sum")
            .arg(file.file_name().context("file name")?)
            .current_dir(file.parent().context("parent")?),
        "sha256sum",
    )?;
    let text = String::from_utf8(out)?;
    let mut sum = file.as_os_str().to_owned();
    sum.push(".sha256sum");
    std::fs::write(&sum, &text)?;
    Ok(text
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string())
}

/// A static HTTP/1.1 file server (GET and HEAD, `Connection: close`) over `root`, recording each
/// path asked for; stopped on drop.
pub struct FileServer {
    addr: SocketAddr,
    scheme: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FileServer {
    /// Serves `root` on `ip`, a free port.
    pub fn start(ip: &str, root: &Path) -> Result<FileServer> {
        Self::start_on(ip, 0, root, None)
    }

    /// Serves `root` over HTTPS on `ip:port` (443 for the upstream host names a node resolves to
    /// `ip`) with the serving certificate and key (PEM) of `ca` ([`crate::registry::TestCa`]).
    pub fn start_tls(
        ip: &str,
        port: u16,
        root: &Path,
        ca: &crate::registry::TestCa,
    ) -> Result<FileServer> {
        use rustls::pki_types::pem::PemObject as _;
        let certs =
            rustls::pki_types::CertificateDer::pem_slice_iter(ca.server_cert_pem.as_bytes())
                .collect::<std::result::Result<Vec<_>, _>>()
                .context("serving certificate")?;
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(ca.server_key_pem.as_bytes())
            .context("serving key")?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS versions")?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .context("TLS server configuration")?;
        Self::start_on(ip, port, root, Some(Arc::new(cfg)))
    }

    fn start_on(
        ip: &str,
        port: u16,
        root: &Path,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Result<FileServer> {
        let listener =
            TcpListener::bind((ip, port)).with_context(|| format!("bind {ip}:{port}"))?;
        let addr = listener.local_addr()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l2, s2, root) = (log.clone(), stop.clone(), root.to_path_buf());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (l3, root, tls) = (l2.clone(), root.clone(), tls.clone());
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
                    match tls {
                        None => {
                            let _ = serve(conn, &root, &l3);
                        }
                        Some(cfg) => {
                            let Ok(sc) = rustls::ServerConnection::new(cfg) else {
                                return;
                            };
                            let mut stream = rustls::StreamOwned::new(sc, conn);
                            if serve(&mut stream, &root, &l3).is_ok() {
                                stream.conn.send_close_notify();
                                let _ = stream.flush();
                            }
                        }
                    }
                });
            }
        });
        Ok(FileServer {
            addr,
            scheme,
            log,
            stop,
            thread: Some(thread),
        })
    }

    /// `http://ip:port` (`https://` for [`FileServer::start_tls`]).
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// The paths asked for so far (decoded), in order.
    pub fn requests(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Forgets the recorded paths.
    pub fn clear(&self) {
        if let Ok(mut l) = self.log.lock() {
            l.clear();
        }
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn decode(path: &str) -> String {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&path[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn serve<S: Read + Write>(mut conn: S, root: &Path, log: &Mutex<Vec<String>>) -> Result<()> {
    // A GET or HEAD has no body: what the reader reads ahead is only the rest of the headers.
    let mut reader = BufReader::new(&mut conn);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
    }
    drop(reader);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
    let path = decode(target.split('?').next().unwrap_or("/"));
    if let Ok(mut l) = log.lock() {
        l.push(path.clone());
    }
    let rel = Path::new(path.trim_start_matches('/'));
    let safe = rel.components().all(|c| matches!(c, Component::Normal(_)));
    let file = root.join(rel);
    match std::fs::File::open(&file) {
        Ok(mut f) if safe && file.is_file() => {
            let len = f.metadata()?.len();
            write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
            )?;
            if method != "HEAD" {
                let mut buf = vec![0u8; 1 << 16];
                loop {
                    let n = f.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    conn.write_all(&buf[..n])?;
                }
            }
        }
        _ => {
            write!(
                conn,
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )?;
        }
    }
    conn.flush()?;
    Ok(())
}

/// The kubelet unit of the upstream kubelet package (kubernetes/release, `cmd/krel/templates/latest/
/// kubelet/kubelet.service`), at `/usr/lib/systemd/system/kubelet.service`.
pub const KUBELET_SERVICE: &str = "[Unit]\nDescription=kubelet: The Kubernetes Node Agent\nDocumentation=https://kubernetes.io/docs/\nWants=network-online.target\nAfter=network-online.target\n\n[Service]\nExecStart=/usr/bin/kubelet\nRestart=always\nStartLimitInterval=0\nRestartSec=10\n\n[Install]\nWantedBy=multi-user.target\n";

/// Where the upstream kubeadm package puts kubeadm's kubelet drop-in (kubernetes/release,
/// `cmd/krel/templates/latest/kubeadm/10-kubeadm.conf`; its text is [`crate::k8snode::KUBEADM_DROPIN`]).
pub const KUBEADM_DROPIN_PATH: &str = "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf";

/// Builds and signs pkgs.k8s.io's repository of `bins`' minor under `root`
/// (`core:/stable:/vX.Y/deb/`), packaged as upstream's: kubeadm (with its kubelet drop-in), kubelet
/// (its unit; `Depends: kubernetes-cni (>= 1.2.0), mount, util-linux`) and kubectl at `X.Y.Z-1.1`,
/// cri-tools (crictl) at `X.Y.0-1.1`, kubernetes-cni 1.10.0-1.1 (loopback, portmap, bridge, host-local
/// of `cni-plugins`). `bins` holds kubeadm, kubelet, kubectl, crictl and cni-plugins. Returns the
/// repository directory. Errors: `dpkg-deb`, `apt-ftparchive` or `gpg` failed.
pub fn kubernetes_repository(
    root: &Path,
    bins: &crate::k8sbin::K8sBins,
    key: &SigningKey,
) -> Result<PathBuf> {
    let v = bins.version().trim_start_matches('v');
    let parts: Vec<&str> = v.split('.').collect();
    if parts.len() != 3 {
        bail!("version {v} is not X.Y.Z");
    }
    let dir = root.join(format!("core:/stable:/v{}.{}/deb", parts[0], parts[1]));
    std::fs::create_dir_all(&dir)?;
    let rev = format!("{v}-1.1");
    build_deb(
        &dir,
        "kubeadm",
        &rev,
        "amd64",
        None,
        &[
            DebFile::program(bins.path("kubeadm"), "/usr/bin/kubeadm"),
            DebFile::text(crate::k8snode::KUBEADM_DROPIN, KUBEADM_DROPIN_PATH),
        ],
    )?;
    build_deb(
        &dir,
        "kubectl",
        &rev,
        "amd64",
        None,
        &[DebFile::program(bins.path("kubectl"), "/usr/bin/kubectl")],
    )?;
    build_deb(
        &dir,
        "kubelet",
        &rev,
        "amd64",
        Some("kubernetes-cni (>= 1.2.0), mount, util-linux"),
        &[
            DebFile::program(bins.path("kubelet"), "/usr/bin/kubelet"),
            DebFile::text(KUBELET_SERVICE, "/usr/lib/systemd/system/kubelet.service"),
        ],
    )?;
    build_deb(
        &dir,
        "cri-tools",
        &format!("{}.{}.0-1.1", parts[0], parts[1]),
        "amd64",
        None,
        &[DebFile::program(bins.path("crictl"), "/usr/bin/crictl")],
    )?;
    let plugins: Vec<DebFile> = ["loopback", "portmap", "bridge", "host-local"]
        .iter()
        .map(|p| {
            DebFile::program(
                &bins.path("cni-plugins").join(p),
                &format!("/opt/cni/bin/{p}"),
            )
        })
        .collect();
    build_deb(
        &dir,
        "kubernetes-cni",
        "1.10.0-1.1",
        "amd64",
        None,
        &plugins,
    )?;
    publish(&dir, key)?;
    Ok(dir)
}

/// containerd's and runc's release files under `root` at their GitHub paths, as the product's
/// version table names them: `containerd/containerd/releases/download/v<containerd>/containerd-
/// <containerd>-linux-amd64.tar.gz` (containerd, containerd-shim-runc-v2 and ctr of `bins` under
/// `bin/`, root-owned, as the release archive) with its `.sha256sum`, and
/// `opencontainers/runc/releases/download/v<runc>/runc.amd64` with `runc.sha256sum`. Errors: I/O,
/// `tar` or `sha256sum` failed.
pub fn release_files(
    root: &Path,
    bins: &crate::k8sbin::K8sBins,
    containerd: &str,
    runc: &str,
) -> Result<()> {
    let cd = root.join(format!(
        "containerd/containerd/releases/download/v{containerd}"
    ));
    std::fs::create_dir_all(&cd)?;
    let stage = tempfile::tempdir()?;
    std::fs::create_dir_all(stage.path().join("bin"))?;
    for p in ["containerd", "containerd-shim-runc-v2", "ctr"] {
        std::fs::copy(bins.path(p), stage.path().join("bin").join(p))
            .with_context(|| format!("copy {p}"))?;
    }
    let tgz = cd.join(format!("containerd-{containerd}-linux-amd64.tar.gz"));
    run(
        Command::new("tar")
            .arg("-C")
            .arg(stage.path())
            .args(["--owner=0", "--group=0", "-czf"])
            .arg(&tgz)
            .arg("bin"),
        "tar -czf",
    )?;
    write_sha256sum(&tgz)?;
    let rd = root.join(format!("opencontainers/runc/releases/download/v{runc}"));
    std::fs::create_dir_all(&rd)?;
    std::fs::copy(bins.path("runc"), rd.join("runc.amd64")).context("copy runc")?;
    let sum = write_sha256sum(&rd.join("runc.amd64"))?;
    std::fs::write(rd.join("runc.sha256sum"), format!("{sum}  runc.amd64\n"))?;
    Ok(())
}
