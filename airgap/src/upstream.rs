//! Pinned upstream files (a CNI's manifests, its Helm chart, the `helm` program's archive): downloaded
//! from their release address — or the cluster file's own source — into a local cache named by sha256,
//! and handed on only once the whole file has the sha256 it must have.
//!
//! * Cache: `<cache>/sha256/<hex>` holds verified files only (a file gets there by `rename` after its
//!   digest matched), so a second run downloads nothing.
//! * Interrupted downloads: the bytes received so far stay in `<cache>/partial/<key>.part` (key: the
//!   sha256 of the address); the next attempt asks for the rest (`Range: bytes=N-`) and appends when
//!   the server answers 206, or starts over when it answers 200. A connection that drops mid-body is
//!   retried like that (three attempts). The digest is always taken over the whole file.
//! * A wrong digest: the partial file is removed and the file refused — nothing is handed on, so
//!   nothing is applied.
//! * No pinned digest (a version outside the table, a source given without `sha256`): refused unless
//!   the cluster file accepts unverified files; then the digest of the first download is recorded in
//!   `<cache>/accepted.json` (address → sha256) and required from then on.
//! * Air-gapped: [`UpstreamCache::from_bundle`] takes a file from a verified air-gap bundle's
//!   `upstream/<name>` entry instead, with the same digest rules and no request to any address.

use crate::bundle::{BundleFile, VerifiedBundle};
use crate::digest::{Digest, Hashing};
use crate::error::{AirgapError, DownloadError, Result};
use crate::registry::RegistryClient;
use reqwest::StatusCode;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The most an upstream file may be (256 MiB; Calico's CRDs are 3 MB, the Helm archive 16 MB).
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// Attempts per file before an interrupted download is reported.
const ATTEMPTS: usize = 3;

/// One file to obtain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedFile {
    /// The file's name (`tigera-operator.yaml`), for messages.
    pub name: String,
    /// Where it is downloaded from.
    pub url: String,
    /// The sha256 it must have, when one is pinned.
    pub sha256: Option<Digest>,
    /// Where the pinned digest was read (or `cluster file`), for messages.
    pub digest_source: String,
}

/// How a file's digest was established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// It matched the pinned sha256.
    Pinned,
    /// No digest was pinned and the cluster file accepts unverified files: this is the digest
    /// recorded now (first download) or earlier (in `accepted.json`).
    Accepted {
        /// True when recorded by this call.
        first: bool,
    },
}

/// A file in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The cached file.
    pub path: PathBuf,
    /// Its sha256.
    pub sha256: Digest,
    /// Its size in bytes.
    pub size: u64,
    /// True when it was downloaded by this call (false: found in the cache).
    pub downloaded: bool,
    /// How its digest was established.
    pub trust: Trust,
}

/// The cache of upstream files.
#[derive(Debug, Clone)]
pub struct UpstreamCache {
    root: PathBuf,
}

fn io(p: &Path, e: std::io::Error) -> AirgapError {
    AirgapError::io(p, e)
}

fn refused(name: &str, url: &str, reason: String) -> AirgapError {
    AirgapError::Package {
        name: name.to_string(),
        reason: format!("{url}: {reason}"),
    }
}

impl UpstreamCache {
    /// Opens (creating) the cache at `root`. Errors: the directories cannot be created.
    pub fn open(root: &Path) -> Result<Self> {
        for d in ["sha256", "partial"] {
            std::fs::create_dir_all(root.join(d)).map_err(|e| io(root, e))?;
        }
        Ok(UpstreamCache {
            root: root.to_path_buf(),
        })
    }

    /// Where a verified file with `digest` is kept.
    pub fn path(&self, digest: &Digest) -> PathBuf {
        self.root.join("sha256").join(digest.hex())
    }

    fn partial(&self, url: &str) -> PathBuf {
        self.root
            .join("partial")
            .join(format!("{}.part", Digest::of(url.as_bytes()).hex()))
    }

    fn accepted_path(&self) -> PathBuf {
        self.root.join("accepted.json")
    }

    /// The digests accepted earlier for unpinned files (address → sha256).
    pub fn accepted(&self) -> BTreeMap<String, String> {
        std::fs::read(self.accepted_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn record_accepted(&self, url: &str, d: &Digest) -> Result<()> {
        let mut all = self.accepted();
        all.insert(url.to_string(), d.hex().to_string());
        let p = self.accepted_path();
        let tmp = p.with_extension("json.tmp");
        let text = serde_json::to_vec_pretty(&all).unwrap_or_default();
        std::fs::write(&tmp, text).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &p).map_err(|e| io(&p, e))
    }

    /// The cached file for `want` without downloading: `Some` when a verified copy is there (for a
    /// file without a pinned digest, the one accepted earlier).
    pub fn cached(&self, want: &WantedFile) -> Option<Fetched> {
        let (d, trust) = match &want.sha256 {
            Some(d) => (d.clone(), Trust::Pinned),
            None => (
                Digest::from_hex(self.accepted().get(&want.url)?)?,
                Trust::Accepted { first: false },
            ),
        };
        let p = self.path(&d);
        let size = std::fs::metadata(&p).ok()?.len();
        Some(Fetched {
            path: p,
            sha256: d,
            size,
            downloaded: false,
            trust,
        })
    }

    /// Obtains `want`: from the cache, else downloaded (resuming a partial download) and verified.
    /// Errors: no pinned digest and `accept_unverified` false; a digest other than the pinned or
    /// recorded one (`DigestMismatch`, the partial file removed); HTTP or transport failures after
    /// the attempts; more than [`MAX_FILE_BYTES`]; I/O.
    pub fn fetch(
        &self,
        client: &RegistryClient,
        want: &WantedFile,
        accept_unverified: bool,
    ) -> Result<Fetched> {
        if let Some(f) = self.cached(want) {
            return Ok(f);
        }
        let recorded = self
            .accepted()
            .get(&want.url)
            .and_then(|h| Digest::from_hex(h));
        let expect = want.sha256.clone().or(recorded.clone());
        if expect.is_none() && !accept_unverified {
            return Err(refused(
                &want.name,
                &want.url,
                "no sha256 is pinned for this file: give its sha256 in spec.networking.cni.sources, \
                 or set spec.networking.cni.acceptUnverified: true to accept (and record) the digest \
                 of the first download"
                    .into(),
            ));
        }
        let part = self.partial(&want.url);
        let mut last = None;
        for _ in 0..ATTEMPTS {
            match self.attempt(client, want, &part) {
                Ok(()) => {
                    last = None;
                    break;
                }
                Err(
                    e @ AirgapError::Download {
                        status: Some(_), ..
                    },
                ) => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            return Err(e);
        }
        let f = std::fs::File::open(&part).map_err(|e| io(&part, e))?;
        let (got, size) =
            crate::digest::digest_reader(std::io::BufReader::new(f)).map_err(|e| io(&part, e))?;
        if let Some(d) = &expect {
            if &got != d {
                let _ = std::fs::remove_file(&part);
                return Err(AirgapError::DigestMismatch {
                    what: format!("{} from {}", want.name, want.url),
                    expected: format!("{d} ({})", want.digest_source),
                    actual: got.to_string(),
                });
            }
        }
        let dest = self.path(&got);
        std::fs::rename(&part, &dest).map_err(|e| io(&dest, e))?;
        let trust = if want.sha256.is_some() {
            Trust::Pinned
        } else {
            let first = recorded.is_none();
            if first {
                self.record_accepted(&want.url, &got)?;
            }
            Trust::Accepted { first }
        };
        Ok(Fetched {
            path: dest,
            sha256: got,
            size,
            downloaded: true,
            trust,
        })
    }

    /// The bundle's entry for `want` (by name), checked against the digest `want` must have: the pinned
    /// one; without one, the digest recorded earlier for its address, else — when the cluster file
    /// accepts unverified files — the one the bundle records. Reads nothing but `vb`'s manifest.
    /// Errors: the bundle does not carry the file (`Bundle`); its digest differs (`DigestMismatch`);
    /// no digest to check against and unverified files not accepted (`Package`).
    pub fn bundle_entry<'a>(
        &self,
        vb: &'a VerifiedBundle,
        want: &WantedFile,
        accept_unverified: bool,
    ) -> Result<&'a BundleFile> {
        let entry = vb
            .manifest
            .upstream
            .iter()
            .find(|f| f.name == want.name)
            .ok_or_else(|| AirgapError::Bundle {
                path: vb.path.clone(),
                reason: format!(
                    "it does not carry the CNI file {} (upstream/{}); write the bundle again with \
                     this version of clusterctl (`clusterctl airgap bundle`)",
                    want.name, want.name
                ),
            })?;
        let recorded = self
            .accepted()
            .get(&want.url)
            .and_then(|h| Digest::from_hex(h));
        let expect = match (&want.sha256, recorded) {
            (Some(d), _) => Some((d.clone(), want.digest_source.clone())),
            (None, Some(d)) => Some((d, format!("recorded in {}", self.accepted_path().display()))),
            (None, None) if accept_unverified => None,
            (None, None) => {
                return Err(refused(
                    &want.name,
                    &want.url,
                    "no sha256 is pinned for this file: give its sha256 in spec.networking.cni.sources, \
                     or set spec.networking.cni.acceptUnverified: true to accept (and record) the \
                     digest the bundle carries"
                        .into(),
                ))
            }
        };
        if let Some((d, source)) = expect {
            if entry.sha256 != d {
                return Err(AirgapError::DigestMismatch {
                    what: format!("{} in the bundle {}", want.name, vb.path.display()),
                    expected: format!("{d} ({source})"),
                    actual: entry.sha256.to_string(),
                });
            }
        }
        Ok(entry)
    }

    /// Obtains `want` from the verified bundle `vb` (entry `upstream/<name>`, checked by
    /// [`UpstreamCache::bundle_entry`]) into the cache — or from the cache when it is there — without
    /// any request to any address. The bytes are hashed again on the way (the bundle may have
    /// changed since it was verified). Errors: as [`UpstreamCache::bundle_entry`]; the entry's bytes
    /// differ from its digest (`DigestMismatch`); I/O.
    pub fn from_bundle(
        &self,
        vb: &VerifiedBundle,
        want: &WantedFile,
        accept_unverified: bool,
    ) -> Result<Fetched> {
        let entry = self.bundle_entry(vb, want, accept_unverified)?;
        let unpinned = want.sha256.is_none();
        let trust = |first| {
            if unpinned {
                Trust::Accepted { first }
            } else {
                Trust::Pinned
            }
        };
        let dest = self.path(&entry.sha256);
        if let Ok(m) = std::fs::metadata(&dest) {
            return Ok(Fetched {
                path: dest,
                sha256: entry.sha256.clone(),
                size: m.len(),
                downloaded: false,
                trust: trust(false),
            });
        }
        let tmp = self
            .root
            .join("partial")
            .join(format!("{}.bundle", entry.sha256.hex()));
        let copied = (|| -> Result<(Digest, u64)> {
            let mut out = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
            let mut w = Hashing::new(&mut out);
            std::io::copy(&mut vb.open(&entry.path)?, &mut w).map_err(|e| io(&vb.path, e))?;
            let (got, n, _) = w.finish();
            out.flush().map_err(|e| io(&tmp, e))?;
            Ok((got, n))
        })();
        let (got, size) = match copied {
            Ok(x) => x,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        if got != entry.sha256 {
            let _ = std::fs::remove_file(&tmp);
            return Err(AirgapError::DigestMismatch {
                what: format!("{} in the bundle {}", entry.path, vb.path.display()),
                expected: entry.sha256.to_string(),
                actual: got.to_string(),
            });
        }
        std::fs::rename(&tmp, &dest).map_err(|e| io(&dest, e))?;
        let first = unpinned && !self.accepted().contains_key(&want.url);
        if first {
            self.record_accepted(&want.url, &got)?;
        }
        Ok(Fetched {
            path: dest,
            sha256: got,
            size,
            downloaded: false,
            trust: trust(first),
        })
    }

    /// One GET of `want.url` into `part`: the rest when `part` has bytes and the server answers 206,
    /// else the whole file. Errors: an HTTP status other than 200/206 (`Http`), transport, too large.
    fn attempt(&self, client: &RegistryClient, want: &WantedFile, part: &Path) -> Result<()> {
        let have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
        let http = client.http_for(&want.url)?;
        let mut req = http.get(&want.url);
        if have > 0 {
            req = req.header(reqwest::header::RANGE, format!("bytes={have}-"));
        }
        let mut resp = req.send().map_err(|e| AirgapError::Download {
            url: want.url.clone(),
            source: DownloadError::Request(e),
            status: None,
        })?;
        let (mut file, start) = match resp.status() {
            StatusCode::PARTIAL_CONTENT if have > 0 => (
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(part)
                    .map_err(|e| io(part, e))?,
                have,
            ),
            StatusCode::OK => (std::fs::File::create(part).map_err(|e| io(part, e))?, 0),
            StatusCode::RANGE_NOT_SATISFIABLE => {
                // What we have is longer than the file: start over next time.
                let _ = std::fs::remove_file(part);
                return Err(AirgapError::Download {
                    url: want.url.clone(),
                    source: DownloadError::LongerPartial,
                    status: None,
                });
            }
            s => {
                let mut body = String::new();
                let _ = (&mut resp).take(512).read_to_string(&mut body);
                return Err(AirgapError::Download {
                    url: want.url.clone(),
                    source: DownloadError::Status {
                        status: s.to_string(),
                        body: body.trim().to_string(),
                    },
                    status: Some(s.as_u16()),
                });
            }
        };
        let mut w = Hashing::new(&mut file);
        let left = MAX_FILE_BYTES.saturating_sub(start);
        let copied = std::io::copy(&mut (&mut resp).take(left.saturating_add(1)), &mut w);
        let (_, n, _) = w.finish();
        file.flush().map_err(|e| io(part, e))?;
        if n > left {
            let _ = std::fs::remove_file(part);
            return Err(refused(
                &want.name,
                &want.url,
                format!("larger than {MAX_FILE_BYTES} bytes; refused"),
            ));
        }
        copied.map_err(|source| AirgapError::Download {
            url: want.url.clone(),
            source: DownloadError::Interrupted {
                after: start + n,
                source,
            },
            status: None,
        })?;
        Ok(())
    }
}
