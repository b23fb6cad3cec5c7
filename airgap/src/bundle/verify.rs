//! Verifying a bundle before anything is imported: one pass over the tar that refuses unsafe
//! entries (absolute paths, `..`, links, devices, duplicates), hashes every entry and compares it
//! with `SHA256SUMS` (which must come first), checks that every blob's sha256 equals its file name,
//! that nothing listed is missing (a truncated bundle) and that the manifest and `index.json` agree
//! with the blobs present. The result remembers where each entry's bytes are, so import reads them
//! straight from the tar without unpacking.

use super::manifest::{BundleManifest, BUNDLE_FORMAT};
use super::{MANIFEST_ENTRY, OCI_DIR, SUMS_ENTRY};
use crate::digest::{Digest, Hashing};
use crate::error::{AirgapError, Result};
use crate::oci::{
    is_index, is_manifest, sniff_media_type, ImageIndex, ImageManifest, ANNOTATION_CONTAINERD_NAME,
    MAX_MANIFEST,
};
use crate::reference::ImageRef;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Where a verified entry's bytes are in the bundle file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EntryLoc {
    /// Byte offset of the entry's data in the tar file.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
    /// sha256 of the data (checked).
    pub digest: Digest,
}

/// A bundle whose every byte was checked (kept in the import record, see
/// [`crate::import::VerifiedStamp`], so an unchanged file need not be read again).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct VerifiedBundle {
    /// Path of the bundle file.
    pub path: PathBuf,
    /// The bundle manifest.
    pub manifest: BundleManifest,
    /// The OCI layout's `index.json`.
    pub index: ImageIndex,
    /// Every entry by path.
    pub entries: BTreeMap<String, EntryLoc>,
    /// Total bytes hashed.
    pub bytes_verified: u64,
}

fn refuse(entry: &str, reason: impl Into<String>) -> AirgapError {
    AirgapError::Entry {
        entry: entry.to_string(),
        reason: reason.into(),
    }
}

/// True for a relative path made only of normal components (no `/` start, `..`, `.`, empty, `\`,
/// NUL or other control characters).
pub fn safe_path(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.chars().any(char::is_control)
        && !p.contains('\\')
        && !p.contains('\0')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Tar's own message made safe to print: anything but printable ASCII (raw header bytes of a file
/// that is not a tar) becomes `?`.
fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// The compression whose magic number `head` (a file's first bytes) starts with (gzip, zstd, xz,
/// bzip2), if any: a bundle is a plain tar.
fn compression(head: &[u8]) -> Option<&'static str> {
    [
        (&[0x1f, 0x8b][..], "gzip"),
        (&[0x28, 0xb5, 0x2f, 0xfd][..], "zstd"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0][..], "xz"),
        (&b"BZh"[..], "bzip2"),
    ]
    .into_iter()
    .find(|(sig, _)| head.starts_with(sig))
    .map(|(_, name)| name)
}

/// True for a plain file name: 1 to 255 of `[A-Za-z0-9._+-]`, not starting with `.` or `-`.
fn plain_name(n: &str) -> bool {
    (1..=255).contains(&n.len())
        && !n.starts_with(['.', '-'])
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'))
}

/// Blob path for `d` inside the bundle.
pub fn blob_entry(d: &Digest) -> String {
    format!("{OCI_DIR}/blobs/sha256/{}", d.hex())
}

fn parse_sums(text: &str) -> Result<BTreeMap<String, Digest>> {
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let (hex, path) = line
            .split_once("  ")
            .ok_or_else(|| refuse(SUMS_ENTRY, format!("line {} malformed", n + 1)))?;
        let d = Digest::from_hex(hex)
            .ok_or_else(|| refuse(SUMS_ENTRY, format!("line {}: bad sha256", n + 1)))?;
        if !safe_path(path) {
            return Err(refuse(path, "unsafe path listed in SHA256SUMS"));
        }
        if out.insert(path.to_string(), d).is_some() {
            return Err(refuse(path, "listed twice in SHA256SUMS"));
        }
    }
    Ok(out)
}

/// The sha256 of the bundle's first entry, `SHA256SUMS` (which pins every other entry), reading only
/// that entry. Errors: I/O, or the first entry is not `SHA256SUMS`.
pub fn sums_digest(path: &Path) -> Result<Digest> {
    let f = std::fs::File::open(path).map_err(|e| AirgapError::io(path, e))?;
    let mut ar = tar::Archive::new(std::io::BufReader::new(f));
    let mut entries = ar.entries().map_err(|e| AirgapError::io(path, e))?;
    let mut first = entries
        .next()
        .ok_or_else(|| refuse(SUMS_ENTRY, "missing"))?
        .map_err(|e| AirgapError::io(path, e))?;
    if first.path_bytes().as_ref() != SUMS_ENTRY.as_bytes() {
        return Err(refuse(SUMS_ENTRY, "must be the first entry"));
    }
    let (d, n) = crate::digest::digest_reader(&mut first).map_err(|e| AirgapError::io(path, e))?;
    if n != first.size() {
        return Err(refuse(SUMS_ENTRY, "truncated"));
    }
    Ok(d)
}

/// Verifies the bundle at `path`. Errors: `AirgapError::Entry` naming the first bad entry
/// (mismatch, unsafe path, link, unlisted, duplicate), `AirgapError::Bundle` for structure
/// (missing entries, truncation, bad manifest). Reads the file once, sequentially.
pub fn verify_bundle(path: &Path) -> Result<VerifiedBundle> {
    let bundle_err = |reason: String| AirgapError::Bundle {
        path: path.to_path_buf(),
        reason,
    };
    let f = std::fs::File::open(path).map_err(|e| AirgapError::io(path, e))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, f);
    // Peeked, not consumed: the bundle may be a pipe.
    let head = reader.fill_buf().map_err(|e| AirgapError::io(path, e))?;
    if let Some(kind) = compression(head) {
        return Err(bundle_err(format!(
            "it is {kind}-compressed; a bundle is a plain tar: decompress it first"
        )));
    }
    let mut ar = tar::Archive::new(reader);
    let mut sums: Option<BTreeMap<String, Digest>> = None;
    let mut entries = BTreeMap::new();
    let mut small: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut bytes_verified = 0u64;
    let mut last = String::from("(start)");
    let iter = ar.entries().map_err(|e| bundle_err(e.to_string()))?;
    for item in iter {
        let mut entry = item.map_err(|e| {
            if sums.is_none() && entries.is_empty() {
                bundle_err(
                    "not a tar archive: its first 512-byte header is not a valid tar header".into(),
                )
            } else {
                bundle_err(format!(
                    "unreadable tar header after {last:?} (truncated or corrupt): {}",
                    printable(&e.to_string())
                ))
            }
        })?;
        let name = String::from_utf8(entry.path_bytes().into_owned())
            .map_err(|_| refuse(&last, "next entry name is not UTF-8"))?;
        if !safe_path(&name) {
            return Err(refuse(
                &name,
                "unsafe path (absolute, `..` or empty component)",
            ));
        }
        let kind = entry.header().entry_type();
        if kind.is_symlink() || kind.is_hard_link() {
            return Err(refuse(&name, "links are not allowed in a bundle"));
        }
        if !kind.is_file() {
            return Err(refuse(
                &name,
                format!("entry type {kind:?} is not allowed in a bundle"),
            ));
        }
        if entries.contains_key(&name) {
            return Err(refuse(&name, "appears twice"));
        }
        let size = entry.size();
        let offset = entry.raw_file_position();
        let mut keep = name == SUMS_ENTRY
            || name == MANIFEST_ENTRY
            || name == format!("{OCI_DIR}/index.json")
            || (name.starts_with(OCI_DIR) && size <= MAX_MANIFEST);
        // A blob is held only while it may be JSON (manifests, indexes and configs start with
        // `{`); layers are hashed and let go, so memory does not grow with the bundle.
        let json_only = name.starts_with(&format!("{OCI_DIR}/blobs/"));
        let mut kept = Vec::new();
        let mut h = Hashing::new(&mut entry);
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let n = h
                .read(&mut buf)
                .map_err(|e| refuse(&name, format!("read failed: {e}")))?;
            if n == 0 {
                break;
            }
            if keep
                && json_only
                && kept.is_empty()
                && buf[..n]
                    .iter()
                    .find(|b| !b.is_ascii_whitespace())
                    .is_some_and(|b| *b != b'{')
            {
                keep = false;
            }
            if keep {
                kept.extend_from_slice(&buf[..n]);
            }
        }
        let (digest, count, _) = h.finish();
        if count != size {
            return Err(refuse(&name, format!("truncated: {count} of {size} bytes")));
        }
        bytes_verified += count;
        if name == SUMS_ENTRY {
            if sums.is_some() || !entries.is_empty() {
                return Err(refuse(&name, "SHA256SUMS must be the first entry"));
            }
            let text = String::from_utf8(kept.clone()).map_err(|_| refuse(&name, "not UTF-8"))?;
            sums = Some(parse_sums(&text)?);
        } else {
            let list = sums
                .as_ref()
                .ok_or_else(|| refuse(&name, "comes before SHA256SUMS"))?;
            let want = list
                .get(&name)
                .ok_or_else(|| refuse(&name, "not listed in SHA256SUMS"))?;
            if *want != digest {
                return Err(refuse(
                    &name,
                    format!("sha256 mismatch: listed {want}, content {digest}"),
                ));
            }
            if let Some(rest) = name.strip_prefix(&format!("{OCI_DIR}/blobs/")) {
                match rest.strip_prefix("sha256/") {
                    Some(hex) if hex == digest.hex() => {}
                    Some(_) => {
                        return Err(refuse(
                            &name,
                            format!("blob content is {digest}, not its name"),
                        ))
                    }
                    None => {
                        return Err(refuse(
                            &name,
                            "only sha256 blobs (oci/blobs/sha256/<hex>) may be in a bundle",
                        ))
                    }
                }
            }
        }
        if keep {
            small.insert(name.clone(), kept);
        }
        entries.insert(
            name.clone(),
            EntryLoc {
                offset,
                size,
                digest,
            },
        );
        last = name;
    }
    let sums =
        sums.ok_or_else(|| bundle_err("no SHA256SUMS entry (empty or not a bundle)".into()))?;
    if let Some(missing) = sums.keys().find(|p| !entries.contains_key(*p)) {
        return Err(bundle_err(format!(
            "entry {missing:?} listed in SHA256SUMS is missing (truncated bundle?)"
        )));
    }
    let manifest: BundleManifest = serde_json::from_slice(
        small
            .get(MANIFEST_ENTRY)
            .map(Vec::as_slice)
            .unwrap_or_default(),
    )
    .map_err(|e| refuse(MANIFEST_ENTRY, e.to_string()))?;
    if manifest.format != BUNDLE_FORMAT {
        return Err(refuse(
            MANIFEST_ENTRY,
            format!("unknown format {:?}", manifest.format),
        ));
    }
    let index_name = format!("{OCI_DIR}/index.json");
    let index: ImageIndex = serde_json::from_slice(
        small
            .get(&index_name)
            .map(Vec::as_slice)
            .unwrap_or_default(),
    )
    .map_err(|e| refuse(&index_name, e.to_string()))?;
    check_images(&manifest)?;
    for f in manifest.packages.iter().chain(manifest.binaries.iter()) {
        // The name becomes a file name on the nodes (`/usr/local/bin/<name>`).
        if !plain_name(&f.name) {
            return Err(refuse(
                MANIFEST_ENTRY,
                format!(
                    "{:?}: name {:?} is not a plain file name ([A-Za-z0-9._+-], not starting with `.` or `-`)",
                    f.path, f.name
                ),
            ));
        }
        match entries.get(&f.path) {
            Some(loc) if loc.digest == f.sha256 && loc.size == f.size => {}
            Some(_) => return Err(refuse(&f.path, "differs from manifest.json")),
            None => return Err(refuse(&f.path, "named in manifest.json but missing")),
        }
    }
    let vb = VerifiedBundle {
        path: path.to_path_buf(),
        manifest,
        index,
        entries,
        bytes_verified,
    };
    // Every image's whole tree must be present.
    let indexed: BTreeSet<&Digest> = vb.index.manifests.iter().map(|d| &d.digest).collect();
    for img in &vb.manifest.images {
        if !indexed.contains(&img.digest) {
            return Err(refuse(
                &index_name,
                format!("does not list {} ({})", img.mirror, img.digest),
            ));
        }
        let top = blob_entry(&img.digest);
        let size = vb.entries.get(&top).map(|l| l.size);
        if size.is_some_and(|s| s != img.size) {
            return Err(refuse(
                MANIFEST_ENTRY,
                format!(
                    "image {} gives size {}, its manifest {} has {} bytes",
                    img.mirror,
                    img.size,
                    img.digest,
                    size.unwrap_or_default()
                ),
            ));
        }
        if let Some(d) = vb.index.manifests.iter().find(|d| {
            d.digest == img.digest && (d.size != img.size || d.media_type != img.media_type)
        }) {
            return Err(refuse(
                &index_name,
                format!(
                    "lists {} as {:?} of {} bytes, manifest.json as {:?} of {} bytes",
                    d.digest, d.media_type, d.size, img.media_type, img.size
                ),
            ));
        }
        vb.image_blobs(&img.digest, &img.media_type, &small)?;
    }
    // And the layout names nothing else: a runtime or skopeo reading it would take every entry.
    for d in &vb.index.manifests {
        let name = d
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_CONTAINERD_NAME));
        let known = vb
            .manifest
            .images
            .iter()
            .any(|i| i.digest == d.digest && name.is_none_or(|n| *n == i.mirror));
        if !known {
            return Err(refuse(
                &index_name,
                format!(
                    "lists {} ({:?}) which manifest.json does not",
                    d.digest,
                    name.map(String::as_str).unwrap_or("no name")
                ),
            ));
        }
    }
    Ok(vb)
}

/// The checks on `manifest.json`'s image list that need no blob: every source and mirror reference
/// parses, every media type is an image manifest or index, and no reference is listed twice with
/// different digests (one tag cannot serve both). Errors: `Entry` naming `manifest.json`.
fn check_images(manifest: &BundleManifest) -> Result<()> {
    let mut seen: BTreeMap<&str, &Digest> = BTreeMap::new();
    for img in &manifest.images {
        // A reference that pins a digest must pin the one carried (the mirror) or served (the source).
        for (r, want) in [
            (&img.source, &img.source_digest),
            (&img.mirror, &img.digest),
        ] {
            let parsed = ImageRef::parse(r).map_err(|e| refuse(MANIFEST_ENTRY, e.to_string()))?;
            if parsed.digest.as_ref().is_some_and(|d| d != want) {
                return Err(refuse(
                    MANIFEST_ENTRY,
                    format!("{r} pins another digest than the {want} listed for it"),
                ));
            }
        }
        if !is_index(&img.media_type) && !is_manifest(&img.media_type) {
            return Err(refuse(
                MANIFEST_ENTRY,
                format!(
                    "image {}: mediaType {:?} is not an image manifest or index",
                    img.mirror, img.media_type
                ),
            ));
        }
        for r in [&img.source, &img.mirror] {
            if let Some(d) = seen.insert(r, &img.digest).filter(|d| **d != img.digest) {
                return Err(refuse(
                    MANIFEST_ENTRY,
                    format!(
                        "{r} is listed twice with different digests ({d}, {})",
                        img.digest
                    ),
                ));
            }
        }
    }
    Ok(())
}

impl VerifiedBundle {
    /// Every blob of the image rooted at `digest` (manifests first, then configs and layers), each
    /// checked to be present. Errors: a referenced blob missing, or an unreadable manifest.
    fn image_blobs(
        &self,
        digest: &Digest,
        media_type: &str,
        cache: &BTreeMap<String, Vec<u8>>,
    ) -> Result<Vec<Digest>> {
        let mut out = vec![digest.clone()];
        let read = |d: &Digest| -> Result<Vec<u8>> {
            let name = blob_entry(d);
            if self.blob_size(d).is_some_and(|s| s > MAX_MANIFEST) {
                return Err(refuse(&name, "larger than 4 MiB: not a manifest"));
            }
            match cache.get(&name) {
                Some(b) => Ok(b.clone()),
                None => self.read_blob(d),
            }
        };
        let top = read(digest)?;
        let own = sniff_media_type(&top);
        if own.as_deref() != Some(media_type) {
            return Err(refuse(
                MANIFEST_ENTRY,
                format!(
                    "gives mediaType {media_type:?} for {digest}, which is {:?}",
                    own.as_deref().unwrap_or("not a manifest")
                ),
            ));
        }
        let mut manifests = Vec::new();
        if is_index(media_type) {
            let idx: ImageIndex = serde_json::from_slice(&top)
                .map_err(|e| refuse(&blob_entry(digest), e.to_string()))?;
            for c in idx.manifests {
                out.push(c.digest.clone());
                let bytes = read(&c.digest)?;
                let own = sniff_media_type(&bytes).unwrap_or_default();
                if !is_manifest(&own)
                    || (!c.media_type.is_empty() && c.media_type != own)
                    || c.size != bytes.len() as u64
                {
                    return Err(refuse(
                        &blob_entry(digest),
                        format!(
                            "lists {} as {:?} of {} bytes; it is {own:?} of {} bytes",
                            c.digest,
                            c.media_type,
                            c.size,
                            bytes.len()
                        ),
                    ));
                }
                manifests.push((c.digest.clone(), bytes));
            }
        } else {
            manifests.push((digest.clone(), top));
        }
        for (d, bytes) in manifests {
            let m: ImageManifest = serde_json::from_slice(&bytes)
                .map_err(|e| refuse(&blob_entry(&d), e.to_string()))?;
            for b in std::iter::once(&m.config).chain(m.layers.iter()) {
                let loc = self.entries.get(&blob_entry(&b.digest)).ok_or_else(|| {
                    refuse(&blob_entry(&b.digest), format!("needed by {d} but missing"))
                })?;
                if loc.size != b.size {
                    return Err(refuse(
                        &blob_entry(&b.digest),
                        "size differs from its descriptor",
                    ));
                }
                out.push(b.digest.clone());
            }
        }
        Ok(out)
    }

    /// Every blob of the image rooted at `digest`, manifests first. Errors: as `verify_bundle`.
    pub fn blobs_of(&self, digest: &Digest, media_type: &str) -> Result<Vec<Digest>> {
        self.image_blobs(digest, media_type, &BTreeMap::new())
    }

    /// A reader over entry `name`'s bytes. Errors: no such entry, or I/O.
    pub fn open(&self, name: &str) -> Result<Box<dyn Read + Send>> {
        let loc = self
            .entries
            .get(name)
            .ok_or_else(|| refuse(name, "no such entry"))?;
        let mut f = std::fs::File::open(&self.path).map_err(|e| AirgapError::io(&self.path, e))?;
        f.seek(SeekFrom::Start(loc.offset))
            .map_err(|e| AirgapError::io(&self.path, e))?;
        Ok(Box::new(f.take(loc.size)))
    }

    /// Blob `d` read whole and checked again. Errors: missing, I/O, or changed since verification.
    pub fn read_blob(&self, d: &Digest) -> Result<Vec<u8>> {
        let name = blob_entry(d);
        let mut buf = Vec::new();
        self.open(&name)?
            .read_to_end(&mut buf)
            .map_err(|e| AirgapError::io(&self.path, e))?;
        d.verify(&buf, &name)?;
        Ok(buf)
    }

    /// Size of blob `d`, if present.
    pub fn blob_size(&self, d: &Digest) -> Option<u64> {
        self.entries.get(&blob_entry(d)).map(|l| l.size)
    }
}
