//! The loader: the only I/O of this crate. It reads a cluster file and the files it references (registry
//! CA, OIDC CA, audit policy), each relative to the cluster file's directory, into a [`Loaded`] that
//! validation and rendering then use without touching the disk. Profiles load the same way from texts
//! embedded in the binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diag::{Diagnostic, Diagnostics, Source};

/// Largest cluster file accepted, in bytes (a 1000-node file is ~200 KiB).
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Largest referenced file accepted (CA bundle, audit policy), in bytes.
pub const MAX_REFERENCED_BYTES: u64 = 1024 * 1024;

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

/// Reads the cluster file at `path` and the files it references, relative to its directory.
/// Errors: the cluster file cannot be read or is larger than [`MAX_FILE_BYTES`] (one diagnostic without a
/// position). Unreadable referenced files are not errors here: validation reports them at their field.
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
    let meta = std::fs::metadata(path).map_err(|e| {
        fail(
            format!("cannot read {name}: {e}"),
            "give the path of an existing cluster file with -f",
        )
    })?;
    if !meta.is_file() {
        return Err(fail(
            format!("{name} is not a regular file"),
            "give the path of a cluster file with -f",
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(fail(
            format!(
                "{name} is {} bytes, more than the {MAX_FILE_BYTES} bytes a cluster file may have",
                meta.len()
            ),
            "check that -f names the cluster file",
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| {
        fail(
            format!("cannot read {name}: {e}"),
            "check the file's permissions",
        )
    })?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let base: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut loaded = Loaded::from_text(name, text);
    loaded.resolve_references(|p| read_referenced(&base, p));
    Ok(loaded)
}

fn read_referenced(base: &Path, p: &str) -> Referenced {
    let full = if Path::new(p).is_absolute() {
        PathBuf::from(p)
    } else {
        base.join(p)
    };
    match std::fs::metadata(&full) {
        Err(e) => Referenced::Unreadable(e.to_string()),
        Ok(m) if !m.is_file() => Referenced::Unreadable("not a regular file".to_string()),
        Ok(m) if m.len() > MAX_REFERENCED_BYTES => Referenced::Unreadable(format!(
            "{} bytes, more than the {MAX_REFERENCED_BYTES} allowed",
            m.len()
        )),
        Ok(_) => match std::fs::read(&full) {
            Ok(b) => match String::from_utf8(b) {
                Ok(t) => Referenced::Text(t),
                Err(_) => Referenced::Unreadable("not UTF-8 text".to_string()),
            },
            Err(e) => Referenced::Unreadable(e.to_string()),
        },
    }
}

/// The paths of the files a cluster text references, as written: `spec.registry.caFile`,
/// `spec.apiServer.oidc.caFile`, `spec.apiServer.audit.policy` unless it is `default`, and each
/// `spec.airgap.sourceRegistries[].caFile`. Unparseable
/// text references nothing.
pub fn referenced_paths(text: &str) -> Vec<String> {
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
