//! A real OCI registry (Debian's docker-registry) on a loopback port with a temporary storage directory, stopped and removed by a drop guard.
//!
//! `Registry::start()` writes a distribution v2 config (filesystem storage in a temp dir, deletes
//! enabled, access log on), starts `docker-registry serve CONFIG` on a free `127.0.0.1` port and
//! returns once `GET /v2/` answers 200. The guard kills the process and removes the directory.

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

/// A running registry; dropping it stops the process and deletes its storage.
pub struct Registry {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry on a free loopback port. Errors: binary missing, or it does not answer
    /// `GET /v2/` within 15 s (its log is included in the error).
    pub fn start() -> Result<Registry> {
        let mut last = None;
        for _ in 0..3 {
            match Self::try_start() {
                Ok(r) => return Ok(r),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("registry did not start")))
    }

    fn try_start() -> Result<Registry> {
        if !available() {
            bail!("{REGISTRY_BIN} is not installed (Debian package docker-registry)");
        }
        let dir = tempfile::Builder::new().prefix("cc-registry-").tempdir()?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let addr = format!("127.0.0.1:{port}");
        let storage = dir.path().join("storage");
        std::fs::create_dir_all(&storage)?;
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
            storage.display()
        );
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
        let reg = Registry { child, addr, dir };
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

    /// `127.0.0.1:PORT`, the registry's host for image references.
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

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
