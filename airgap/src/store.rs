//! The blob cache that makes bundle runs resumable: a directory `<cache>/blobs/sha256/<hex>` in OCI
//! image-layout form. A file is only ever created by renaming a fully written and verified temp file
//! into place, so anything present is complete; an interrupted run leaves at most temp files, which
//! the next run ignores.

use crate::digest::{digest_reader, Digest};
use crate::error::{AirgapError, Result};
use std::path::{Path, PathBuf};

/// Temp files untouched this long are left over from a killed run (a download in progress writes
/// its temp file continuously), and are removed when a store is opened.
pub const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the temp files (`.tmp…`, see [`BlobStore::put`]) in `dir` not modified for
/// [`STALE_TEMP`]: what a run killed mid-download leaves, which nothing else would ever remove.
/// Best effort: errors are ignored.
fn remove_stale_temps(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let stale = e.file_name().to_string_lossy().starts_with(".tmp")
            && e.metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .is_some_and(|t| t.elapsed().is_ok_and(|age| age > STALE_TEMP));
        if stale {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A content-addressed blob directory.
#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
}

impl BlobStore {
    /// Opens (creating) the store at `root`. Errors: the directory cannot be created.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        let dir = root.join("blobs/sha256");
        std::fs::create_dir_all(&dir).map_err(|e| AirgapError::io(&dir, e))?;
        remove_stale_temps(&dir);
        Ok(BlobStore { root })
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where blob `d` lives (whether or not it is there).
    pub fn path(&self, d: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(d.hex())
    }

    /// True when blob `d` is present with `size` bytes (when a size is given).
    pub fn has(&self, d: &Digest, size: Option<u64>) -> bool {
        match std::fs::metadata(self.path(d)) {
            Ok(m) => m.is_file() && size.is_none_or(|s| s == m.len()),
            Err(_) => false,
        }
    }

    /// Stores `bytes` under their own digest (atomically) and returns the digest.
    pub fn put(&self, bytes: &[u8]) -> Result<Digest> {
        let d = Digest::of(bytes);
        if self.has(&d, Some(bytes.len() as u64)) {
            return Ok(d);
        }
        let dest = self.path(&d);
        let dir = self.root.join("blobs/sha256");
        let mut tmp =
            tempfile::NamedTempFile::new_in(&dir).map_err(|e| AirgapError::io(&dir, e))?;
        std::io::Write::write_all(&mut tmp, bytes).map_err(|e| AirgapError::io(&dest, e))?;
        tmp.persist(&dest)
            .map_err(|e| AirgapError::io(&dest, e.error))?;
        Ok(d)
    }

    /// Reads blob `d` whole (used for manifests, which are small). Errors: missing or mismatching.
    pub fn read(&self, d: &Digest) -> Result<Vec<u8>> {
        let p = self.path(d);
        let bytes = std::fs::read(&p).map_err(|e| AirgapError::io(&p, e))?;
        d.verify(&bytes, &format!("cached blob {}", p.display()))?;
        Ok(bytes)
    }

    /// Re-hashes blob `d`; removes it and returns false when it is corrupt.
    pub fn check(&self, d: &Digest) -> bool {
        let p = self.path(d);
        let ok = std::fs::File::open(&p)
            .ok()
            .and_then(|f| digest_reader(std::io::BufReader::new(f)).ok())
            .is_some_and(|(got, _)| &got == d);
        if !ok {
            let _ = std::fs::remove_file(&p);
        }
        ok
    }
}
