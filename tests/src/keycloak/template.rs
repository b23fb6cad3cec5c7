//! The template database of the test bed's Keycloak: the dev-file H2 database (`data/h2`) of a server
//! that started once on an empty database with `--import-realm` (Keycloak's whole Liquibase schema
//! migration, the master realm and [`super::realm`] imported) and was then stopped cleanly (`SIGTERM`
//! to `kc.sh`, which forwards it to the JVM, and waited for: H2 closes its file consistently).
//!
//! Kept under `<cache>/keycloak/<version>/template-<key>/h2`, `<key>` the first 16 hex digits of the
//! SHA-256 of [`super::VERSION`], the database kind of the build (`dev-file`), the cache option
//! (`--cache=local`), [`FORMAT`] and the realm's JSON: a changed realm or version makes a new
//! template. Made once, under an exclusive `flock(2)` on `template-<key>.lock` (a concurrent first
//! use waits for it instead of migrating a second database), in `template-<key>.tmp-<unique>`
//! renamed into place when complete (staging directories an interrupted preparation left are
//! removed under the lock). The servers started from it do not run `--import-realm` (which, given,
//! would skip a realm that exists): nothing is migrated or imported again.

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use super::{io, run, Data, Keycloak, KeycloakError, CACHE, VERSION};

/// Bumped when what goes into the template changes in a way the key does not see.
const FORMAT: &str = "1";
/// How long a server stopped with `SIGTERM` may take to exit.
const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// The cache key of the template: see the module doc.
pub(crate) fn key() -> String {
    let mut h = Sha256::new();
    for part in [
        VERSION,
        "dev-file",
        CACHE,
        FORMAT,
        &super::realm().to_string(),
    ] {
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())[..16].to_string()
}

/// The template directory for [`super::realm`] (holding `h2/`), made on first use (see the module doc)
/// from the built distribution `dist`.
pub(crate) fn template(dist: &Path) -> Result<PathBuf, KeycloakError> {
    let root = dist
        .parent()
        .ok_or_else(|| KeycloakError::Program {
            what: format!("the directory of {}", dist.display()),
            output: String::new(),
        })?
        .to_path_buf();
    let key = key();
    let dir = root.join(format!("template-{key}"));
    if dir.join("h2").is_dir() {
        return Ok(dir);
    }
    let _lock = lock(&root.join(format!("template-{key}.lock")))?;
    if dir.join("h2").is_dir() {
        // Made by another process while this one waited for the lock.
        return Ok(dir);
    }
    remove_stale_staging(&root, &key);
    let staging = root.join(format!("template-{key}.tmp-{}", crate::unique_name("kc")));
    let t0 = Instant::now();
    let mut kc = Keycloak::start_with(dist, Ipv4Addr::LOCALHOST, &Data::Import)?;
    kc.stop()?;
    std::fs::create_dir_all(&staging).map_err(io(format!("creating {}", staging.display())))?;
    run(
        "cp -a data/h2",
        Command::new("cp")
            .arg("-a")
            .arg(kc.home().join("data/h2"))
            .arg(staging.join("h2")),
    )?;
    std::fs::rename(&staging, &dir)
        .map_err(io(format!("moving the template to {}", dir.display())))?;
    eprintln!(
        "Keycloak {VERSION}: template database {} made in {:.1}s",
        dir.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(dir)
}

/// Staging directories of this key left by an interrupted preparation (the lock is held: no other
/// process is writing one).
fn remove_stale_staging(root: &Path, key: &str) {
    let prefix = format!("template-{key}.tmp-");
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// An exclusive `flock(2)` on `path` (created if missing), held until the file is dropped; waits for
/// another holder. The file is opened close-on-exec, so no server started meanwhile inherits it.
fn lock(path: &Path) -> Result<std::fs::File, KeycloakError> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io(format!("opening {}", path.display())))?;
    loop {
        // SAFETY: flock on a file descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(file);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(KeycloakError::Io {
                what: format!("locking {}", path.display()),
                source: err,
            });
        }
    }
}

impl Keycloak {
    /// Stops the server cleanly: `SIGTERM` to `kc.sh` (it forwards it to the JVM and waits for it),
    /// then waits at most [`STOP_TIMEOUT`] for it to exit; the log must say Keycloak stopped.
    fn stop(&mut self) -> Result<(), KeycloakError> {
        run(
            "kill -TERM kc.sh",
            Command::new("kill").args(["-TERM", &self.child.id().to_string()]),
        )?;
        let t0 = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) {
            if t0.elapsed() > STOP_TIMEOUT {
                return Err(KeycloakError::Program {
                    what: format!("stopping the template's Keycloak (SIGTERM, {STOP_TIMEOUT:?})"),
                    output: self.log_excerpt(20, 20),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let log = std::fs::read_to_string(self.dir.path().join("keycloak.log")).unwrap_or_default();
        if !log.contains("stopped in") {
            return Err(KeycloakError::Program {
                what: "stopping the template's Keycloak: no clean shutdown in its log".to_string(),
                output: self.log_excerpt(20, 20),
            });
        }
        Ok(())
    }
}
