//! The loader: the only I/O of this crate. It reads a cluster file and the files it references (registry
//! CA, OIDC CA, audit policy), each relative to the cluster file's directory, into a [`Loaded`] that
//! validation and rendering then use without touching the disk. Profiles load the same way from texts
//! embedded in the binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diag::{Diagnostic, Diagnostics, Source};
use crate::limits::{self, CLUSTER_FILE, REFERENCED_FILE};

/// Largest cluster file accepted, in bytes (a 16,000-node file is about 1 MiB).
pub const MAX_FILE_BYTES: u64 = CLUSTER_FILE.max_bytes;
/// Largest referenced file accepted (CA bundle, audit policy), in bytes.
pub const MAX_REFERENCED_BYTES: u64 = REFERENCED_FILE.max_bytes;

/// Why a path could not be read: it is not a regular file, it is over its size limit, or the
/// operating system said no.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A FIFO, device, socket or directory: refused before any read could block on it.
    #[error("{} is {kind}, not a regular file", .path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is, e.g. `a FIFO (named pipe)`.
        kind: &'static str,
    },
    /// Larger than allowed (checked on the metadata and again while reading).
    #[error("{} is more than the limit of {limit} bytes", .path.display())]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
    /// Opening, inspecting or reading failed.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl ReadError {
    /// The reason without the path (for messages that name the path themselves).
    pub fn reason(&self) -> String {
        match self {
            ReadError::NotRegular { kind, .. } => format!("it is {kind}, not a regular file"),
            ReadError::TooLarge { limit, .. } => format!("more than the limit of {limit} bytes"),
            ReadError::Io { source, .. } => source.to_string(),
        }
    }
}

/// What a file type is called in messages, for anything but a regular file.
fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading without ever blocking on it: the open does not wait for a FIFO's writer
/// (`O_NONBLOCK`) nor take a terminal (`O_NOCTTY`), and the type of what was opened (`fstat` on the
/// descriptor, so nothing can be swapped in between) must be a regular file — a FIFO, device,
/// socket or directory is refused before any read. Symbolic links are followed. The descriptor is
/// then switched back to blocking reads. Errors: [`ReadError::NotRegular`] or [`ReadError::Io`].
pub fn open_regular(path: &Path) -> Result<(std::fs::File, std::fs::Metadata), ReadError> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
        });
    }
    // SAFETY: fcntl on a descriptor we own, with flags read from it.
    let fd = f.as_raw_fd();
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags >= 0 {
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) };
    }
    Ok((f, meta))
}

/// Reads the regular file at `path` whole, refusing it when it is larger than `limit` bytes (on its
/// metadata, and while reading, should it grow). Errors: as [`open_regular`], or
/// [`ReadError::TooLarge`].
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    let (f, meta) = open_regular(path)?;
    let too_large = || ReadError::TooLarge {
        path: path.to_path_buf(),
        limit,
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    f.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(|source| ReadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if buf.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(buf)
}

/// A referenced file as the loader found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Referenced {
    /// The file's text.
    Text(String),
    /// It could not be read; the reason (e.g. `No such file or directory`), reported by validation at the
    /// field that names it.
    Unreadable(String),
}

/// A cluster file and the files it references, read but not yet checked.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Display name, e.g. `cluster.yaml` or `profiles/lab.yaml`.
    pub source_name: String,
    /// The cluster file's text (invalid UTF-8 replaced by U+FFFD).
    pub source_text: String,
    /// Referenced files, keyed by the path exactly as written in the cluster file.
    pub referenced: BTreeMap<String, Referenced>,
}

impl Loaded {
    /// A cluster file given as text, with no referenced files yet (tests, stdin).
    pub fn from_text(source_name: impl Into<String>, source_text: impl Into<String>) -> Self {
        Loaded {
            source_name: source_name.into(),
            source_text: source_text.into(),
            referenced: BTreeMap::new(),
        }
    }

    /// Adds a referenced file's content under the path as written in the cluster file.
    pub fn with_file(mut self, path: impl Into<String>, text: impl Into<String>) -> Self {
        self.referenced
            .insert(path.into(), Referenced::Text(text.into()));
        self
    }

    /// The text of a referenced file, if it was read.
    pub fn file(&self, path: &str) -> Option<&str> {
        match self.referenced.get(path) {
            Some(Referenced::Text(t)) => Some(t),
            _ => None,
        }
    }

    /// Reads every file this cluster text references through `read` (given the path as written). Used by
    /// [`load`] with the file system and by profiles with embedded texts.
    pub fn resolve_references(&mut self, read: impl Fn(&str) -> Referenced) {
        for p in referenced_paths(&self.source_text) {
            if let std::collections::btree_map::Entry::Vacant(e) = self.referenced.entry(p) {
                let r = read(e.key());
                e.insert(r);
            }
        }
    }
}

/// Reads the cluster file at `path` and the files it references, relative to its directory; `-` reads
/// the file from standard input (as kubectl's `-f -`), its references relative to the working
/// directory. Errors: the cluster file cannot be read or is larger than [`MAX_FILE_BYTES`] (one
/// diagnostic without a position). Unreadable referenced files are not errors here: validation
/// reports them at their field.
pub fn load(path: &Path) -> Result<Loaded, Diagnostics> {
    let name = path.display().to_string();
    let fail = |msg: String, help: &str| {
        let src = Arc::new(Source {
            name: name.clone(),
            text: Arc::new(String::new()),
        });
        Diagnostics::single(
            src,
            Diagnostic::error("spec::read", msg).help(help.to_string()),
        )
    };
    let read = if path.as_os_str() == "-" {
        read_stdin(MAX_FILE_BYTES)
    } else {
        read_regular(path, MAX_FILE_BYTES)
    };
    let bytes = read.map_err(|e| {
        let help = match e {
            ReadError::NotRegular { .. } => "give the path of a cluster file with -f",
            ReadError::TooLarge { .. } => "check that -f names the cluster file",
            ReadError::Io { .. } => "give the path of an existing, readable cluster file with -f",
        };
        fail(e.to_string(), help)
    })?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let base: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut loaded = Loaded::from_text(name, text);
    loaded.resolve_references(|p| read_referenced(&base, p));
    Ok(loaded)
}

/// Standard input, at most `max` bytes. Errors: [`ReadError::Io`], [`ReadError::TooLarge`].
fn read_stdin(max: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| ReadError::Io {
            path: PathBuf::from("-"),
            source,
        })?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge {
            path: PathBuf::from("-"),
            limit: max,
        });
    }
    Ok(bytes)
}

fn read_referenced(base: &Path, p: &str) -> Referenced {
    let full = if Path::new(p).is_absolute() {
        PathBuf::from(p)
    } else {
        base.join(p)
    };
    match read_regular(&full, MAX_REFERENCED_BYTES) {
        Err(e) => Referenced::Unreadable(e.reason()),
        Ok(b) => match String::from_utf8(b) {
            Ok(t) => Referenced::Text(t),
            Err(_) => Referenced::Unreadable("not UTF-8 text".to_string()),
        },
    }
}

/// The paths of the files a cluster text references, as written: `spec.registry.caFile`,
/// `spec.packages.mirror.caFile`, `spec.apiServer.oidc.caFile`, `spec.apiServer.audit.policy` unless it is `default`, and each
/// `spec.airgap.sourceRegistries[].caFile`. Text that is over the cluster file's budget or is not
/// YAML references nothing (it is refused by validation, and never reaches the decoder here).
pub fn referenced_paths(text: &str) -> Vec<String> {
    if !matches!(limits::check_yaml(text, &CLUSTER_FILE), Ok(None)) {
        return Vec::new();
    }
    let Ok(v) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return Vec::new();
    };
    let get = |path: &[&str]| -> Option<String> {
        let mut cur = &v;
        for k in path {
            cur = cur.get(*k)?;
        }
        cur.as_str().map(str::to_string)
    };
    let mut out = Vec::new();
    if let Some(p) = get(&["spec", "registry", "caFile"]) {
        out.push(p);
    }
    if let Some(p) = get(&["spec", "packages", "mirror", "caFile"]) {
        out.push(p);
    }
    if let Some(p) = get(&["spec", "apiServer", "oidc", "caFile"]) {
        out.push(p);
    }
    if let Some(p) = get(&["spec", "apiServer", "audit", "policy"]) {
        if p != "default" {
            out.push(p);
        }
    }
    if let Some(list) = v
        .get("spec")
        .and_then(|s| s.get("airgap"))
        .and_then(|a| a.get("sourceRegistries"))
        .and_then(|l| l.as_sequence())
    {
        out.extend(
            list.iter()
                .filter_map(|r| r.get("caFile")?.as_str().map(str::to_string)),
        );
    }
    out.retain(|p| !p.is_empty());
    out.dedup();
    out
}
