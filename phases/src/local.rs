//! Local file helpers: atomic writes with a given mode (files holding credentials are created 0600 from
//! the start, never widened), and the cache directory `~/.cache/clusterctl/<cluster>/`.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Writes `data` to `path` atomically (temp file in the same directory, then rename) with `mode`;
/// creates parent directories (0700). Errors: any I/O error.
pub fn write_private(path: &Path, mode: u32, data: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// The cache directory of `cluster`: `$XDG_CACHE_HOME/clusterctl/<cluster>` or
/// `$HOME/.cache/clusterctl/<cluster>`; `None` when neither variable is set.
pub fn cache_dir(cluster: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("clusterctl").join(cluster))
}
