//! Writing a bundle: a deterministic tar (GNU headers, entries in a fixed order, mtime 0, uid/gid 0,
//! no user names, mode 0644 or 0755), so that the same inputs give the same bytes. The file is
//! written to a unique temporary file beside it (`.<name>.XXXXXX.partial`) and renamed into place
//! only once complete; every blob and file is
//! re-hashed while it is copied in, so a corrupt cache cannot produce a bundle.

use super::manifest::{BundleFile, BundleImage, BundleManifest, BUNDLE_FORMAT};
use super::{MANIFEST_ENTRY, OCI_DIR, SUMS_ENTRY};
use crate::digest::{Digest, Hashing};
use crate::error::{AirgapError, Result};
use crate::oci::{
    Descriptor, ImageIndex, ANNOTATION_CONTAINERD_NAME, ANNOTATION_REF_NAME, OCI_INDEX,
    OCI_LAYOUT_FILE,
};
use crate::pull::PulledImage;
use crate::reference::ImageRef;
use crate::store::BlobStore;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A package or binary ready to be written: its manifest entry and where its bytes are.
#[derive(Debug, Clone)]
pub struct PreparedFile {
    /// The manifest entry (path in the bundle, size, sha256).
    pub entry: BundleFile,
    /// Local file holding the content.
    pub source: PathBuf,
    /// Unix mode in the tar (0o644 for packages, 0o755 for binaries).
    pub mode: u32,
}

/// Opens a file to carry (a package, a binary, a cached blob) without blocking on it: it must be a
/// regular file (a FIFO or device named as a package is refused, never waited on).
/// Errors: `Io` naming the path.
fn open_source(path: &Path) -> Result<std::fs::File> {
    clusterctl_spec::load::open_regular(path)
        .map(|(f, _)| f)
        .map_err(|e| match e {
            clusterctl_spec::load::ReadError::Io { source, .. } => AirgapError::io(path, source),
            other => AirgapError::io(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, other.reason()),
            ),
        })
}

impl PreparedFile {
    /// Hashes local file `source` and describes it as bundle entry `path` (no `extract_to`; set
    /// `entry.extract_to` for an archive to unpack). Errors: unreadable file.
    pub fn from_path(
        name: &str,
        path: &str,
        source: &Path,
        mode: u32,
        os: Option<String>,
        arch: Option<String>,
    ) -> Result<Self> {
        let f = open_source(source)?;
        let (sha256, size) = crate::digest::digest_reader(std::io::BufReader::new(f))
            .map_err(|e| AirgapError::io(source, e))?;
        Ok(PreparedFile {
            entry: BundleFile {
                name: name.to_string(),
                path: path.to_string(),
                os,
                arch,
                size,
                sha256,
                extract_to: None,
                kubernetes_version: None,
            },
            source: source.to_path_buf(),
            mode,
        })
    }
}

/// Everything a bundle is made of.
#[derive(Debug, Clone)]
pub struct BundleInput {
    /// Cluster name.
    pub cluster: String,
    /// Kubernetes version.
    pub kubernetes_version: String,
    /// Further versions whose images are included.
    pub extra_versions: Vec<String>,
    /// Platforms images were narrowed to.
    pub platforms: Vec<String>,
    /// Images, all present in the store.
    pub images: Vec<PulledImage>,
    /// Packages (`packages/…`).
    pub packages: Vec<PreparedFile>,
    /// Binaries (`bin/…`).
    pub binaries: Vec<PreparedFile>,
    /// The CNI's pinned upstream files (`upstream/<name>`, see [`crate::run::prepare_upstream`]).
    pub upstream: Vec<PreparedFile>,
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleSummary {
    /// Size of the bundle file in bytes.
    pub bytes: u64,
    /// Number of tar entries.
    pub entries: usize,
    /// Number of distinct blobs in the OCI layout.
    pub blobs: usize,
    /// Sum of the sizes of those blobs.
    pub blob_bytes: u64,
    /// The bundle manifest as written.
    pub manifest: BundleManifest,
}

/// The name an image gets in the OCI layout's `index.json`: the mirror reference (what nodes pull)
/// without a digest when it has a tag (read by [`ImageRef::parse`]; the text is kept as written).
pub fn layout_name(image: &BundleImage) -> String {
    match ImageRef::parse(&image.mirror) {
        Ok(ImageRef {
            tag: Some(_),
            digest: Some(d),
            ..
        }) => image
            .mirror
            .strip_suffix(&format!("@{d}"))
            .unwrap_or(&image.mirror)
            .to_string(),
        _ => image.mirror.clone(),
    }
}

/// Builds the OCI layout `index.json` for `images` (one descriptor per distinct name, sorted).
pub fn layout_index(images: &[BundleImage]) -> Result<Vec<u8>> {
    let mut by_name: BTreeMap<String, &BundleImage> = BTreeMap::new();
    for i in images {
        by_name.entry(layout_name(i)).or_insert(i);
    }
    let manifests = by_name
        .into_iter()
        .map(|(name, i)| Descriptor {
            media_type: i.media_type.clone(),
            digest: i.digest.clone(),
            size: i.size,
            platform: None,
            annotations: Some(BTreeMap::from([
                (ANNOTATION_CONTAINERD_NAME.to_string(), i.mirror.clone()),
                (ANNOTATION_REF_NAME.to_string(), name),
            ])),
            extra: BTreeMap::new(),
        })
        .collect();
    let idx = ImageIndex {
        schema_version: 2,
        media_type: Some(OCI_INDEX.to_string()),
        manifests,
        extra: Default::default(),
    };
    serde_json::to_vec_pretty(&idx).map_err(|source| AirgapError::ManifestJson {
        what: "index.json".into(),
        source,
    })
}

fn header(size: u64, mode: u32) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h.set_entry_type(tar::EntryType::Regular);
    h
}

enum Source<'a> {
    Mem(Vec<u8>),
    File(PathBuf, &'a Digest, u64),
}

/// Writes the bundle for `input` to `out`, reading blobs from `store`. Errors: a blob missing or
/// corrupt in the store (it is removed, so the next run fetches it again), a package that changed
/// since it was hashed, or I/O. On error no file is left at `out`.
pub fn write_bundle(out: &Path, store: &BlobStore, input: &BundleInput) -> Result<BundleSummary> {
    let mut images: Vec<BundleImage> = input
        .images
        .iter()
        .map(|p| BundleImage {
            source: p.source.to_string(),
            mirror: p.mirror.to_string(),
            digest: p.digest.clone(),
            source_digest: p.source_digest.clone(),
            media_type: p.media_type.clone(),
            size: p.size,
            platforms: p.platforms.clone(),
        })
        .collect();
    images.sort_by(|a, b| a.source.cmp(&b.source));
    images.dedup_by(|a, b| a.source == b.source && a.mirror == b.mirror);
    let mut packages: Vec<BundleFile> = input.packages.iter().map(|p| p.entry.clone()).collect();
    packages.sort_by(|a, b| a.path.cmp(&b.path));
    let mut binaries: Vec<BundleFile> = input.binaries.iter().map(|p| p.entry.clone()).collect();
    binaries.sort_by(|a, b| a.path.cmp(&b.path));
    let mut upstream: Vec<BundleFile> = input.upstream.iter().map(|p| p.entry.clone()).collect();
    upstream.sort_by(|a, b| a.path.cmp(&b.path));
    let manifest = BundleManifest {
        format: BUNDLE_FORMAT.to_string(),
        cluster: input.cluster.clone(),
        kubernetes_version: input.kubernetes_version.clone(),
        extra_versions: input.extra_versions.clone(),
        platforms: input.platforms.clone(),
        images: images.clone(),
        packages,
        binaries,
        upstream,
    };
    let manifest_bytes =
        serde_json::to_vec_pretty(&manifest).map_err(|source| AirgapError::ManifestJson {
            what: MANIFEST_ENTRY.into(),
            source,
        })?;
    let index_bytes = layout_index(&images)?;

    // Every entry after SHA256SUMS, in order: manifest, then sorted paths.
    let mut entries: BTreeMap<String, (Source, u32)> = BTreeMap::new();
    entries.insert(
        format!("{OCI_DIR}/oci-layout"),
        (Source::Mem(OCI_LAYOUT_FILE.to_vec()), 0o644),
    );
    entries.insert(
        format!("{OCI_DIR}/index.json"),
        (Source::Mem(index_bytes), 0o644),
    );
    let blobs: BTreeSet<&Digest> = input.images.iter().flat_map(|i| i.blobs.iter()).collect();
    let mut blob_bytes = 0u64;
    for d in &blobs {
        let p = store.path(d);
        let size = std::fs::metadata(&p)
            .map_err(|e| AirgapError::io(&p, e))?
            .len();
        blob_bytes += size;
        entries.insert(
            format!("{OCI_DIR}/blobs/sha256/{}", d.hex()),
            (Source::File(p, d, size), 0o644),
        );
    }
    for f in input
        .packages
        .iter()
        .chain(input.binaries.iter())
        .chain(input.upstream.iter())
    {
        entries.insert(
            f.entry.path.clone(),
            (
                Source::File(f.source.clone(), &f.entry.sha256, f.entry.size),
                f.mode,
            ),
        );
    }
    let mut sums = String::new();
    sums.push_str(&format!(
        "{}  {MANIFEST_ENTRY}\n",
        Digest::of(&manifest_bytes).hex()
    ));
    let mut listed: Vec<(String, String)> = entries
        .iter()
        .map(|(path, (src, _))| {
            let hex = match src {
                Source::Mem(b) => Digest::of(b).hex().to_string(),
                Source::File(_, d, _) => d.hex().to_string(),
            };
            (path.clone(), hex)
        })
        .collect();
    listed.sort();
    for (path, hex) in &listed {
        sums.push_str(&format!("{hex}  {path}\n"));
    }

    // A unique temporary file next to `out` (two runs writing the same output never share one),
    // removed when dropped unwritten, renamed into place once complete.
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bundle".into());
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".partial")
        .tempfile_in(dir)
        .map_err(|e| AirgapError::io(dir, e))?;
    let partial = tmp.path().to_path_buf();
    let result = (|| -> Result<()> {
        let f = tmp.reopen().map_err(|e| AirgapError::io(&partial, e))?;
        let mut tb = tar::Builder::new(BufWriter::with_capacity(1 << 20, f));
        tb.mode(tar::HeaderMode::Deterministic);
        let io = |e| AirgapError::io(&partial, e);
        tb.append_data(
            &mut header(sums.len() as u64, 0o644),
            SUMS_ENTRY,
            sums.as_bytes(),
        )
        .map_err(io)?;
        tb.append_data(
            &mut header(manifest_bytes.len() as u64, 0o644),
            MANIFEST_ENTRY,
            manifest_bytes.as_slice(),
        )
        .map_err(io)?;
        for (path, (src, mode)) in &entries {
            match src {
                Source::Mem(b) => tb
                    .append_data(&mut header(b.len() as u64, *mode), path, b.as_slice())
                    .map_err(io)?,
                Source::File(p, d, size) => {
                    let file = open_source(p)?;
                    let mut h = Hashing::new(file.take(*size));
                    tb.append_data(&mut header(*size, *mode), path, &mut h)
                        .map_err(io)?;
                    let (got, n, _) = h.finish();
                    if &got != *d || n != *size {
                        let cached = p.starts_with(store.root());
                        if cached {
                            let _ = std::fs::remove_file(p);
                        }
                        return Err(AirgapError::DigestMismatch {
                            what: if cached {
                                format!(
                                    "{} (removed from the cache; run again to fetch it)",
                                    p.display()
                                )
                            } else {
                                p.display().to_string()
                            },
                            expected: d.to_string(),
                            actual: got.to_string(),
                        });
                    }
                }
            }
        }
        let mut w = tb.into_inner().map_err(io)?;
        w.flush().map_err(io)?;
        w.get_ref().sync_all().map_err(io)?;
        Ok(())
    })();
    result?;
    // Readable like any file the user writes (the temporary file is created 0600).
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o644))
        .map_err(|e| AirgapError::io(&partial, e))?;
    tmp.persist(out)
        .map_err(|e| AirgapError::io(out, e.error))?;
    let bytes = std::fs::metadata(out)
        .map_err(|e| AirgapError::io(out, e))?
        .len();
    Ok(BundleSummary {
        bytes,
        entries: entries.len() + 2,
        blobs: blobs.len(),
        blob_bytes,
        manifest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_that_is_a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("kubeadm.deb");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(st.success());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = PreparedFile::from_path(
                "kubeadm",
                "packages/kubeadm.deb",
                &fifo,
                0o644,
                None,
                None,
            )
            .map(|_| ())
            .map_err(|e| e.to_string());
            let _ = tx.send(r);
        });
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("refused at once")
            .expect_err("a FIFO");
        assert!(e.contains("FIFO"), "{e}");
    }
}
