//! The dedicated CNI plugin binary (`clusterctl-cni`), carried inside clusterctl as bytes so that
//! clusterctl stays one file to distribute while nodes run the small plugin: it starts as fast as
//! the binary the benchmark measures (`cni/benches/plugin.rs` times exactly these bytes), not as
//! the multi-call clusterctl binary, whose start costs several milliseconds more on every CNI call.
//!
//! The build script builds package `clusterctl-cni` without its `agent` feature (release, stripped)
//! with a nested cargo; the bytes are [`PLUGIN`]. `up`'s `cni` phase writes them to
//! `/opt/cni/bin/clusterctl-cni` (mode 0755).

use sha2::{Digest, Sha256};
use std::io;
use std::path::Path;

/// The plugin binary: an x86-64 (the build target's) ELF executable.
pub static PLUGIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/clusterctl-cni"));

/// The file mode the plugin is installed with.
pub const MODE: u32 = 0o755;

/// SHA-256 of [`PLUGIN`], lowercase hex (what `sha256sum` prints for the installed file).
pub fn sha256() -> String {
    hex::encode(Sha256::digest(PLUGIN))
}

/// Writes [`PLUGIN`] to `path` with mode [`MODE`] unless the file there already has exactly these
/// bytes and that mode; the directory must exist. The file is written beside `path` and renamed over
/// it, so a runtime executing the plugin meanwhile never sees a half-written file. Returns whether it
/// wrote. Errors: I/O.
pub fn install(path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o7777 == MODE && std::fs::read(path)? == PLUGIN {
            return Ok(false);
        }
    }
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let tmp = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    std::fs::write(&tmp, PLUGIN)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(MODE))?;
    std::fs::rename(&tmp, path)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    #[test]
    fn the_embedded_bytes_are_the_dedicated_plugin() {
        assert_eq!(&PLUGIN[..4], b"\x7fELF", "an ELF executable");
        assert!(
            PLUGIN.len() < 8 << 20,
            "the dedicated plugin, not the multi-call clusterctl binary: {} bytes",
            PLUGIN.len()
        );
        let dir = tempfile::tempdir().unwrap();
        // Any file name: it is the plugin whatever it is called (no multi-call dispatch).
        let path = dir.path().join("plugin-under-test");
        assert!(install(&path).unwrap());
        assert!(!install(&path).unwrap(), "same bytes and mode: no write");
        let mut child = Command::new(&path)
            .env_clear()
            .env("CNI_COMMAND", "VERSION")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(br#"{"cniVersion":"1.1.0"}"#)
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["cniVersion"], "1.1.0", "{v}");
        assert!(
            v["supportedVersions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == "0.3.1"),
            "{v}"
        );
        assert_eq!(sha256().len(), 64);
    }
}
