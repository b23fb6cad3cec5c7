//! How the `upgrade` command named the cluster ([`ClusterSource`]): read by the entry point (`run.rs`),
//! the version checks and the errors' hints, below all three so that none imports `run.rs` for it.

use std::path::{Path, PathBuf};

/// How the command named the cluster: its file (paths it names are relative to it), or a built-in
/// profile (paths relative to the current directory).
#[derive(Debug, Clone)]
pub enum ClusterSource {
    /// `-f FILE`.
    File(PathBuf),
    /// `--profile NAME`.
    Profile(String),
}

impl ClusterSource {
    /// The flag that names this cluster again, for a hint: `-f FILE` or `--profile NAME`.
    pub fn flag(&self) -> String {
        match self {
            ClusterSource::Profile(p) => format!("--profile {p}"),
            ClusterSource::File(f) => format!("-f {}", f.display()),
        }
    }

    /// The file whose directory the file's relative paths start from (`.` for a profile).
    pub(super) fn file(&self) -> &Path {
        match self {
            ClusterSource::File(f) => f,
            ClusterSource::Profile(_) => Path::new("."),
        }
    }
}
