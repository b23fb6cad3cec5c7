//! Importing a verified bundle into a registry mirror: for each image, blobs first (a `HEAD` skips
//! what the registry has, a cross-repository mount is tried where the blob is known in another
//! repository of the same registry, otherwise an upload from the bundle), then child manifests by
//! digest, then the top manifest under the mirror tag. What was imported is recorded in a state file,
//! so a second import only asks the registry for each top manifest's digest.

use crate::bundle::verify::blob_entry;
use crate::bundle::VerifiedBundle;
use crate::digest::Digest;
use crate::error::{AirgapError, Result};
use crate::oci::{is_index, sniff_media_type, ImageIndex};
use crate::reference::{self, ImageRef};
use crate::registry::RegistryClient;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What an import run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Images pushed in this run.
    pub images_pushed: usize,
    /// Images skipped because the record and the registry agree they are there.
    pub images_skipped: usize,
    /// Blobs uploaded.
    pub blobs_uploaded: usize,
    /// Blobs mounted from another repository.
    pub blobs_mounted: usize,
    /// Blobs the registry already had.
    pub blobs_present: usize,
    /// Bytes uploaded.
    pub bytes_uploaded: u64,
    /// Manifests (and indexes) put.
    pub manifests_put: usize,
}

/// The identity of a bundle file as the file system reports it: canonical path, device, inode, size,
/// modification and status-change times (ns). Any write to the file changes its ctime, which no
/// user-level call can set back, so an equal stamp means the same unchanged file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    /// Canonical path.
    pub path: PathBuf,
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_size` in bytes.
    pub size: u64,
    /// `st_mtime` in ns since the epoch.
    pub mtime_ns: i128,
    /// `st_ctime` in ns since the epoch.
    pub ctime_ns: i128,
}

impl FileStamp {
    /// The stamp of the file at `path`. Errors: I/O (missing file, unreadable metadata).
    pub fn of(path: &Path) -> Result<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let canon = std::fs::canonicalize(path).map_err(|e| AirgapError::io(path, e))?;
        let m = std::fs::metadata(&canon).map_err(|e| AirgapError::io(path, e))?;
        Ok(FileStamp {
            path: canon,
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
        })
    }
}

/// A full verification remembered in the import record: the file it was made on, the sha256 of its
/// `SHA256SUMS` entry, and the verified bundle (manifest, index, entry table).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerifiedStamp {
    /// The file verified.
    pub file: FileStamp,
    /// sha256 of its `SHA256SUMS` entry.
    pub sums: Digest,
    /// What the verification found.
    pub bundle: VerifiedBundle,
}

/// The record of past imports (`<bundle>.imported.json` unless chosen otherwise): target reference
/// → digest pushed, node → digests loaded, and the last full verification of the bundle. Holds no
/// secrets. A record is trusted only for the bundle it describes: it carries the sha256 of that
/// bundle's `SHA256SUMS` entry (which pins every other entry), and [`ImportState::load_for`] ignores
/// a record made for another bundle, or for none (a record placed beside a bundle by someone else
/// steers nothing).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ImportState {
    /// sha256 of the `SHA256SUMS` entry of the bundle this record describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<Digest>,
    /// Mirror reference → manifest digest pushed there.
    #[serde(default)]
    pub registry: BTreeMap<String, Digest>,
    /// Node name → image digests loaded into its runtime.
    #[serde(default)]
    pub nodes: BTreeMap<String, Vec<Digest>>,
    /// The last full verification (written after an import that verified the whole bundle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<VerifiedStamp>,
}

/// Largest import record read (it holds the verified bundle's entry table).
pub const MAX_RECORD_BYTES: u64 = 64 << 20;

impl ImportState {
    /// The default state file for a bundle: `<bundle>.imported.json`.
    pub fn default_path(bundle: &Path) -> PathBuf {
        let mut s = bundle.as_os_str().to_owned();
        s.push(".imported.json");
        PathBuf::from(s)
    }

    /// Reads the record at `path` as it is, whatever bundle it describes: `None` when it is missing,
    /// not a regular file (never waited on), larger than [`MAX_RECORD_BYTES`] or not a record.
    pub fn read(path: &Path) -> Option<ImportState> {
        let bytes = clusterctl_spec::load::read_regular(path, MAX_RECORD_BYTES).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// The record at `path` when it describes the bundle whose `SHA256SUMS` hashes to `sums`;
    /// otherwise (missing, unreadable, another bundle's, or bound to none) an empty record for that
    /// bundle. It is only an optimisation: an empty record costs a `HEAD` per image.
    pub fn load_for(path: &Path, sums: &Digest) -> ImportState {
        match Self::read(path) {
            Some(r) if r.bundle.as_ref() == Some(sums) => r,
            _ => ImportState {
                bundle: Some(sums.clone()),
                ..Default::default()
            },
        }
    }

    /// Saves the state atomically. Errors: I/O.
    pub fn save(&self, path: &Path) -> Result<()> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| AirgapError::io(dir, e))?;
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| AirgapError::io(path, std::io::Error::other(e)))?;
        std::io::Write::write_all(&mut tmp, &bytes).map_err(|e| AirgapError::io(path, e))?;
        tmp.persist(path)
            .map_err(|e| AirgapError::io(path, e.error))?;
        Ok(())
    }
}

/// How to import into a registry.
#[derive(Debug, Clone, Default)]
pub struct RegistryImportOptions {
    /// Rewrite every image to this prefix (`host[:port][/path]`) instead of the bundle's mirror references.
    pub mirror_prefix: Option<String>,
    /// Parallel blob uploads per image (at least 1).
    pub jobs: usize,
}

/// Most worker threads started for one batch of uploads or downloads, however large `--jobs` is.
pub const MAX_JOBS: usize = 64;

/// Worker threads for `items` pieces of work with `jobs` asked for: at least 1, at most the work
/// and [`MAX_JOBS`] (an absurd `--jobs` used to start that many threads per image).
pub fn workers(jobs: usize, items: usize) -> usize {
    jobs.min(items).clamp(1, MAX_JOBS)
}

/// Where each image goes: the bundle's mirror reference, or its source repository under `prefix`.
pub fn target_ref(source: &str, mirror: &str, prefix: Option<&str>) -> Result<ImageRef> {
    match prefix {
        Some(p) => reference::under_prefix(&reference::parse(source)?, p),
        None => reference::parse(mirror),
    }
}

/// Pushes every image of `bundle` to its mirror reference. `state` is consulted and updated (the
/// caller saves it). Errors: the first failing request; images before it stay pushed and recorded.
pub fn import_to_registry(
    client: &RegistryClient,
    bundle: &VerifiedBundle,
    opts: &RegistryImportOptions,
    state: &mut ImportState,
) -> Result<ImportReport> {
    import_to_registry_with(client, bundle, opts, state, &HashMap::new())
}

/// Asks the registry for the digest of every reference recorded in `state` whose registry is one of
/// `registries` (read-only `HEAD`s, safe to run while the bundle is still being verified; no other
/// host is ever contacted, whatever the record lists). Unanswered references are left out.
pub fn precheck(
    client: &RegistryClient,
    state: &ImportState,
    registries: &[String],
) -> HashMap<String, Option<Digest>> {
    let wanted: Vec<(&String, &Digest)> = state
        .registry
        .iter()
        .filter(|(key, _)| reference::parse(key).is_ok_and(|r| registries.contains(&r.registry)))
        .collect();
    let n = wanted.len();
    let queue = Mutex::new(wanted);
    let out = Mutex::new(HashMap::new());
    std::thread::scope(|s| {
        for _ in 0..n.clamp(1, 8) {
            s.spawn(|| loop {
                let Some((key, digest)) = queue.lock().ok().and_then(|mut q| q.pop()) else {
                    return;
                };
                let Ok(r) = reference::parse(key) else {
                    continue;
                };
                let reference = r.tag.clone().unwrap_or_else(|| digest.to_string());
                if let Ok(got) = client.head_manifest(&r.registry, &r.repository, &reference) {
                    if let Ok(mut o) = out.lock() {
                        o.insert(key.clone(), got);
                    }
                }
            });
        }
    });
    out.into_inner().unwrap_or_default()
}

/// As [`import_to_registry`], with the registry's answers from [`precheck`] (reference → digest it
/// serves) used instead of asking again.
pub fn import_to_registry_with(
    client: &RegistryClient,
    bundle: &VerifiedBundle,
    opts: &RegistryImportOptions,
    state: &mut ImportState,
    heads: &HashMap<String, Option<Digest>>,
) -> Result<ImportReport> {
    let mut report = ImportReport::default();
    // Blob digest → repositories of the target registry known to hold it (for mounts).
    let mut known: HashMap<(String, Digest), String> = HashMap::new();
    // Every target first, so that a reference that does not parse, or two images bound for one
    // target, is refused before anything is written.
    let mut targets = Vec::new();
    let mut seen: HashMap<String, &Digest> = HashMap::new();
    for img in &bundle.manifest.images {
        let target = target_ref(&img.source, &img.mirror, opts.mirror_prefix.as_deref())?;
        if let Some(d) = seen
            .insert(target.to_string(), &img.digest)
            .filter(|d| **d != img.digest)
        {
            return Err(AirgapError::Manifest {
                what: target.to_string(),
                reason: format!("two images of the bundle go there ({d}, {})", img.digest),
            });
        }
        targets.push(target);
    }
    for (img, target) in bundle.manifest.images.iter().zip(targets) {
        let key = target.to_string();
        let tag_or_digest = target.tag.clone().unwrap_or_else(|| img.digest.to_string());
        let recorded = state.registry.get(&key) == Some(&img.digest);
        let served = match (recorded, heads.get(&key)) {
            (false, _) => None,
            (true, Some(d)) => d.clone(),
            (true, None) => {
                client.head_manifest(&target.registry, &target.repository, &tag_or_digest)?
            }
        };
        if recorded && served.as_ref() == Some(&img.digest) {
            report.images_skipped += 1;
            continue;
        }
        let top = bundle.read_blob(&img.digest)?;
        let mut children = Vec::new();
        if is_index(&img.media_type) {
            let idx: ImageIndex =
                serde_json::from_slice(&top).map_err(|source| AirgapError::ManifestJson {
                    what: img.source.clone(),
                    source,
                })?;
            for c in idx.manifests {
                let bytes = bundle.read_blob(&c.digest)?;
                children.push((c.digest, c.media_type, bytes));
            }
        }
        // All config and layer blobs of the image.
        let mut blobs: Vec<Digest> = bundle.blobs_of(&img.digest, &img.media_type)?;
        blobs.retain(|d| *d != img.digest && !children.iter().any(|(cd, _, _)| cd == d));
        blobs.sort();
        blobs.dedup();
        push_blobs(
            client,
            bundle,
            &target,
            &blobs,
            opts.jobs.max(1),
            &mut known,
            &mut report,
        )?;
        for (d, mt, bytes) in &children {
            let mt = if mt.is_empty() {
                sniff_media_type(bytes).unwrap_or_default()
            } else {
                mt.clone()
            };
            client.put_manifest(
                &target.registry,
                &target.repository,
                &d.to_string(),
                &mt,
                bytes,
            )?;
            report.manifests_put += 1;
        }
        client.put_manifest(
            &target.registry,
            &target.repository,
            &tag_or_digest,
            &img.media_type,
            &top,
        )?;
        report.manifests_put += 1;
        report.images_pushed += 1;
        state.registry.insert(key, img.digest.clone());
    }
    Ok(report)
}

fn push_blobs(
    client: &RegistryClient,
    bundle: &VerifiedBundle,
    target: &ImageRef,
    blobs: &[Digest],
    jobs: usize,
    known: &mut HashMap<(String, Digest), String>,
    report: &mut ImportReport,
) -> Result<()> {
    let reg = &target.registry;
    let repo = &target.repository;
    let queue = Mutex::new(blobs.to_vec());
    let shared = Mutex::new((
        std::mem::take(known),
        std::mem::take(report),
        None::<AirgapError>,
    ));
    std::thread::scope(|s| {
        for _ in 0..workers(jobs, blobs.len()) {
            s.spawn(|| loop {
                let Some(d) = queue.lock().ok().and_then(|mut q| q.pop()) else {
                    return;
                };
                let from = shared
                    .lock()
                    .ok()
                    .and_then(|g| g.0.get(&(reg.clone(), d.clone())).cloned());
                let res = (|| -> Result<(u8, u64)> {
                    if client.head_blob(reg, repo, &d)? {
                        return Ok((0, 0));
                    }
                    if let Some(from) = from.filter(|f| f != repo) {
                        if client.mount_blob(reg, repo, &d, &from)? {
                            return Ok((1, 0));
                        }
                    }
                    let size = bundle.blob_size(&d).ok_or_else(|| AirgapError::Entry {
                        entry: blob_entry(&d),
                        reason: "missing".into(),
                    })?;
                    let name = blob_entry(&d);
                    client.upload_blob(reg, repo, &d, size, &|| bundle.open(&name))?;
                    Ok((2, size))
                })();
                let Ok(mut g) = shared.lock() else { return };
                match res {
                    Ok((kind, size)) => {
                        match kind {
                            0 => g.1.blobs_present += 1,
                            1 => g.1.blobs_mounted += 1,
                            _ => {
                                g.1.blobs_uploaded += 1;
                                g.1.bytes_uploaded += size;
                            }
                        }
                        g.0.insert((reg.clone(), d.clone()), repo.clone());
                    }
                    Err(e) => {
                        g.2.get_or_insert(e);
                        return;
                    }
                }
            });
        }
    });
    let (k, r, err) = shared.into_inner().map_err(|_| AirgapError::Transport {
        url: reg.clone(),
        reason: "worker panicked".into(),
    })?;
    *known = k;
    *report = r;
    match err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
