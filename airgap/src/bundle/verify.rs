//! Verifying a bundle before anything is imported: one pass over the tar that refuses unsafe
//! entries (absolute paths, `..`, links, devices, duplicates), hashes every entry and compares it
//! with `SHA256SUMS` (which must come first), checks that every blob's sha256 equals its file name,
//! that nothing listed is missing (a truncated bundle), that the manifest and `index.json` agree
//! with the blobs present, and that the bundle holds nothing its images, packages and binaries do
//! not need. The result remembers where each entry's bytes are, so import reads them straight from
//! the tar without unpacking.
//!
//! Memory does not grow with the bundle: the bundle must be a regular file (checked before any read,
//! so a FIFO or device is refused rather than waited on); `SHA256SUMS`, `manifest.json` and
//! `oci/index.json` are capped at [`MAX_LIST_BYTES`] each (on their tar header, before reading) and
//! the latter two are parsed as they stream by; every blob is hashed and let go, and the image
//! manifests are read again from the file, one at a time, after the pass.

use super::manifest::{BundleManifest, BUNDLE_FORMAT};
use super::{MANIFEST_ENTRY, OCI_DIR, SUMS_ENTRY, UPSTREAM_DIR};
use crate::digest::{Digest, Hashing};
use crate::error::{AirgapError, Result};
use crate::oci::{
    is_index, is_manifest, sniff_media_type, ImageIndex, ImageManifest, ANNOTATION_CONTAINERD_NAME,
    MAX_MANIFEST,
};
use crate::reference;
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

/// Largest `SHA256SUMS`, `manifest.json` or `oci/index.json` accepted (a bundle of 10,000 images
/// needs about 6 MiB of manifest).
pub const MAX_LIST_BYTES: u64 = 16 << 20;

/// Opens the bundle at `path` for reading, refusing anything but a regular file before any read can
/// block on it. Errors: `Bundle` (a FIFO, device, socket or directory) or `Io`.
pub fn open_bundle(path: &Path) -> Result<std::fs::File> {
    use clusterctl_spec::load::{open_regular, ReadError};
    match open_regular(path) {
        Ok((f, _)) => Ok(f),
        Err(ReadError::NotRegular { kind, .. }) => Err(AirgapError::Bundle {
            path: path.to_path_buf(),
            reason: format!(
                "it is {kind}, not a regular file: a bundle is read twice (verified, then imported \
                 from its entries), never from a pipe or device; copy it to a file first"
            ),
        }),
        Err(ReadError::Io { source, .. }) => Err(AirgapError::io(path, source)),
        Err(e) => Err(AirgapError::io(path, std::io::Error::other(e))),
    }
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

/// The sha256 of the bundle's first entry, `SHA256SUMS` (which pins every other entry), and the list
/// it holds, reading only that entry. Errors: I/O, not a regular file, or the first entry is not a
/// well-formed `SHA256SUMS` within [`MAX_LIST_BYTES`].
pub fn read_sums(path: &Path) -> Result<(Digest, BTreeMap<String, Digest>)> {
    let f = open_bundle(path)?;
    let mut ar = tar::Archive::new(std::io::BufReader::new(f));
    let mut entries = ar.entries().map_err(|e| AirgapError::io(path, e))?;
    let mut first = entries
        .next()
        .ok_or_else(|| refuse(SUMS_ENTRY, "missing"))?
        .map_err(|e| AirgapError::io(path, e))?;
    if first.path_bytes().as_ref() != SUMS_ENTRY.as_bytes() {
        return Err(refuse(SUMS_ENTRY, "must be the first entry"));
    }
    if first.size() > MAX_LIST_BYTES {
        return Err(over_cap(SUMS_ENTRY, first.size()));
    }
    let mut h = Hashing::new(&mut first);
    let mut text = Vec::new();
    h.read_to_end(&mut text)
        .map_err(|e| AirgapError::io(path, e))?;
    let (d, n, _) = h.finish();
    if n != first.size() {
        return Err(refuse(SUMS_ENTRY, "truncated"));
    }
    let text = String::from_utf8(text).map_err(|_| refuse(SUMS_ENTRY, "not UTF-8"))?;
    Ok((d, parse_sums(&text)?))
}

/// The sha256 of the bundle's first entry, `SHA256SUMS` (which pins every other entry), reading only
/// that entry. Errors: as [`read_sums`].
pub fn sums_digest(path: &Path) -> Result<Digest> {
    read_sums(path).map(|(d, _)| d)
}

fn over_cap(entry: &str, size: u64) -> AirgapError {
    refuse(
        entry,
        format!("{size} bytes, more than the limit of {MAX_LIST_BYTES} bytes for this entry"),
    )
}

/// Parses JSON of type `T` from `r` as it streams by, and requires nothing but whitespace after it.
fn stream_json<T: serde::de::DeserializeOwned>(
    r: impl Read,
) -> std::result::Result<T, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(r));
    let v = T::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// A JSON entry parsed as it streamed by: refused as `missing` when it never came, with the
/// decoder's error as the cause when it did not decode.
fn parsed<T>(entry: &str, parsed: Option<std::result::Result<T, serde_json::Error>>) -> Result<T> {
    match parsed {
        None => Err(refuse(entry, "missing")),
        Some(r) => r.map_err(|source| AirgapError::EntryJson {
            entry: entry.to_string(),
            source,
        }),
    }
}

/// Verifies the bundle at `path`. Errors: `AirgapError::Entry` naming the first bad entry
/// (mismatch, unsafe path, link, unlisted, duplicate, over its size cap, not referenced by the
/// manifest), `AirgapError::Bundle` for structure (not a regular file, missing entries, truncation,
/// bad manifest). Reads the file once, sequentially, then the image manifests again by offset.
pub fn verify_bundle(path: &Path) -> Result<VerifiedBundle> {
    let bundle_err = |reason: String| AirgapError::Bundle {
        path: path.to_path_buf(),
        reason,
    };
    let f = open_bundle(path)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, f);
    let head = reader.fill_buf().map_err(|e| AirgapError::io(path, e))?;
    if let Some(kind) = compression(head) {
        return Err(bundle_err(format!(
            "it is {kind}-compressed; a bundle is a plain tar: decompress it first"
        )));
    }
    let index_name = format!("{OCI_DIR}/index.json");
    let mut ar = tar::Archive::new(reader);
    let mut sums: Option<BTreeMap<String, Digest>> = None;
    let mut entries = BTreeMap::new();
    // Parsed as they stream by; an error is reported after the entry's digest is checked.
    let mut manifest: Option<std::result::Result<BundleManifest, serde_json::Error>> = None;
    let mut index: Option<std::result::Result<ImageIndex, serde_json::Error>> = None;
    let mut bytes_verified = 0u64;
    let mut last = String::from("(start)");
    let mut buf = vec![0u8; 256 << 10];
    let iter = ar.entries().map_err(|source| AirgapError::BundleRead {
        path: path.to_path_buf(),
        source,
    })?;
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
        let listed = name == SUMS_ENTRY || name == MANIFEST_ENTRY || name == index_name;
        if listed && size > MAX_LIST_BYTES {
            return Err(over_cap(&name, size));
        }
        let mut h = Hashing::new(&mut entry);
        let mut sums_text = Vec::new();
        if name == SUMS_ENTRY {
            h.read_to_end(&mut sums_text)
                .map_err(|source| AirgapError::EntryRead {
                    entry: name.clone(),
                    source,
                })?;
        } else if name == MANIFEST_ENTRY {
            manifest = Some(stream_json(&mut h));
        } else if name == index_name {
            index = Some(stream_json(&mut h));
        }
        // The rest (all of a blob or package) is hashed and let go.
        loop {
            let n = h.read(&mut buf).map_err(|source| AirgapError::EntryRead {
                entry: name.clone(),
                source,
            })?;
            if n == 0 {
                break;
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
            let text = String::from_utf8(sums_text).map_err(|_| refuse(&name, "not UTF-8"))?;
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
    let manifest: BundleManifest = parsed(MANIFEST_ENTRY, manifest)?;
    if manifest.format != BUNDLE_FORMAT {
        return Err(refuse(
            MANIFEST_ENTRY,
            format!("unknown format {:?}", manifest.format),
        ));
    }
    let index: ImageIndex = parsed(&index_name, index)?;
    check_images(&manifest)?;
    // What the bundle may hold: its lists, its layout, its files, and the blobs of its images.
    let mut referenced: BTreeSet<String> = [
        SUMS_ENTRY.to_string(),
        MANIFEST_ENTRY.to_string(),
        index_name.clone(),
        format!("{OCI_DIR}/oci-layout"),
    ]
    .into();
    for f in manifest
        .packages
        .iter()
        .chain(manifest.binaries.iter())
        .chain(manifest.upstream.iter())
    {
        if manifest.upstream.contains(f) && f.path != format!("{UPSTREAM_DIR}/{}", f.name) {
            return Err(refuse(
                MANIFEST_ENTRY,
                format!(
                    "upstream file {:?} must be carried as {UPSTREAM_DIR}/{}",
                    f.path, f.name
                ),
            ));
        }
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
        referenced.insert(f.path.clone());
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
    let mut walked: BTreeSet<(&Digest, &str)> = BTreeSet::new();
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
        // An image shared by several references is walked once.
        if walked.insert((&img.digest, &img.media_type)) {
            for d in vb.blobs_of(&img.digest, &img.media_type)? {
                referenced.insert(blob_entry(&d));
            }
        }
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
    // Nor does the bundle carry anything else: every entry is needed by an image, a package or a
    // binary of its manifest.
    if let Some(extra) = vb.entries.keys().find(|k| !referenced.contains(*k)) {
        return Err(refuse(
            extra,
            "not referenced by manifest.json (no image, package or binary of the bundle needs it)",
        ));
    }
    Ok(vb)
}

/// The checks on `manifest.json`'s image list that need no blob: every source and mirror reference
/// parses, every media type is an image manifest or index, and no reference is listed twice with
/// different digests (one tag cannot serve both). Errors: `Entry` or `EntryReference` naming
/// `manifest.json`.
fn check_images(manifest: &BundleManifest) -> Result<()> {
    let mut seen: BTreeMap<&str, &Digest> = BTreeMap::new();
    for img in &manifest.images {
        // A reference that pins a digest must pin the one carried (the mirror) or served (the source).
        for (r, want) in [
            (&img.source, &img.source_digest),
            (&img.mirror, &img.digest),
        ] {
            let parsed =
                reference::parse_reference(r).map_err(|source| AirgapError::EntryReference {
                    entry: MANIFEST_ENTRY.to_string(),
                    source,
                })?;
            if parsed
                .digest
                .as_ref()
                .is_some_and(|d| *d != want.to_string())
            {
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
    /// checked to be present; the manifests are read from the bundle file (and checked again).
    /// Errors: a referenced blob missing, or an unreadable manifest.
    pub fn blobs_of(&self, digest: &Digest, media_type: &str) -> Result<Vec<Digest>> {
        let mut out = vec![digest.clone()];
        let read = |d: &Digest| -> Result<Vec<u8>> {
            let name = blob_entry(d);
            if self.blob_size(d).is_some_and(|s| s > MAX_MANIFEST) {
                return Err(refuse(&name, "larger than 4 MiB: not a manifest"));
            }
            self.read_blob(d)
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
            let idx: ImageIndex =
                serde_json::from_slice(&top).map_err(|source| AirgapError::EntryJson {
                    entry: blob_entry(digest),
                    source,
                })?;
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
            let m: ImageManifest =
                serde_json::from_slice(&bytes).map_err(|source| AirgapError::EntryJson {
                    entry: blob_entry(&d),
                    source,
                })?;
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

    /// A reader over entry `name`'s bytes. Errors: no such entry, or I/O.
    pub fn open(&self, name: &str) -> Result<Box<dyn Read + Send>> {
        let loc = self
            .entries
            .get(name)
            .ok_or_else(|| refuse(name, "no such entry"))?;
        let mut f = open_bundle(&self.path)?;
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
