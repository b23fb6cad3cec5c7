//! Loading images into a node's container runtime through `clusterctl_exec::Transport`: the images a
//! node needs are cut out of the verified bundle into an OCI archive (an OCI image layout in a tar,
//! the format `ctr images import` reads), streamed to the node with `upload_stream`, imported with
//! `ctr -n k8s.io images import` (containerd) or `skopeo copy oci-archive:… containers-storage:…`
//! (CRI-O), and removed again. The loaded digests are recorded per node so a second run skips them.

use crate::bundle::verify::blob_entry;
use crate::bundle::write::layout_index;
use crate::bundle::{BundleImage, VerifiedBundle};
use crate::digest::Digest;
use crate::error::{AirgapError, Result};
use crate::import::ImportState;
use crate::oci::OCI_LAYOUT_FILE;
use clusterctl_exec::{Cmd, FileSpec, Transport};
use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

/// The node's container runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    /// containerd: `ctr -n k8s.io images import`. `ctr` is the command prefix (e.g.
    /// `ctr --address /run/containerd/containerd.sock`).
    Containerd { ctr: String },
    /// CRI-O: `skopeo copy oci-archive:FILE:NAME containers-storage:NAME` per image.
    Crio,
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::Containerd {
            ctr: "ctr".to_string(),
        }
    }
}

/// How to load images into one node.
#[derive(Debug, Clone)]
pub struct NodeLoadOptions {
    /// The runtime and its command.
    pub runtime: Runtime,
    /// Directory on the node for the temporary archive.
    pub remote_dir: String,
}

impl Default for NodeLoadOptions {
    fn default() -> Self {
        NodeLoadOptions {
            runtime: Runtime::default(),
            remote_dir: "/var/lib/clusterctl/airgap".to_string(),
        }
    }
}

/// What loading into one node did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeLoadReport {
    /// Images loaded now.
    pub loaded: usize,
    /// Images skipped (recorded as loaded before).
    pub skipped: usize,
    /// Bytes streamed to the node.
    pub bytes: u64,
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Writes an OCI archive holding `images` (and every blob they need) from `bundle` to a temp file.
/// Deterministic like the bundle itself. Errors: a missing blob or I/O.
pub fn write_oci_archive(
    bundle: &VerifiedBundle,
    images: &[BundleImage],
) -> Result<tempfile::NamedTempFile> {
    let mut blobs = BTreeSet::new();
    for img in images {
        blobs.extend(bundle.blobs_of(&img.digest, &img.media_type)?);
    }
    let tmp =
        tempfile::NamedTempFile::new().map_err(|e| AirgapError::io(std::env::temp_dir(), e))?;
    let path = tmp.path().to_path_buf();
    let io = |e| AirgapError::io(&path, e);
    let mut tb = tar::Builder::new(std::io::BufWriter::new(tmp.reopen().map_err(io)?));
    let hdr = |size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_entry_type(tar::EntryType::Regular);
        h
    };
    tb.append_data(
        &mut hdr(OCI_LAYOUT_FILE.len() as u64),
        "oci-layout",
        OCI_LAYOUT_FILE,
    )
    .map_err(io)?;
    let index = layout_index(images)?;
    tb.append_data(&mut hdr(index.len() as u64), "index.json", index.as_slice())
        .map_err(io)?;
    for d in &blobs {
        let d: &Digest = d;
        let size = bundle.blob_size(d).ok_or_else(|| AirgapError::Entry {
            entry: blob_entry(d),
            reason: "missing".into(),
        })?;
        let reader = bundle.open(&blob_entry(d))?;
        tb.append_data(&mut hdr(size), format!("blobs/sha256/{}", d.hex()), reader)
            .map_err(io)?;
    }
    tb.into_inner().map_err(io)?.flush().map_err(io)?;
    Ok(tmp)
}

/// The shell script importing archive `file` on the node for `images`.
pub fn import_script(runtime: &Runtime, file: &str, images: &[BundleImage]) -> String {
    let q = shell_quote(file);
    match runtime {
        Runtime::Containerd { ctr } => {
            format!("{ctr} -n k8s.io images import --all-platforms {q}; rc=$?; rm -f {q}; exit $rc")
        }
        Runtime::Crio => {
            let mut s = String::from("set -e; ");
            for i in images {
                let name = crate::bundle::write::layout_name(i);
                let src = shell_quote(&format!("oci-archive:{file}:{name}"));
                let dst = shell_quote(&format!("containers-storage:{}", i.mirror));
                s.push_str(&format!("skopeo copy --quiet {src} {dst}; "));
            }
            s.push_str(&format!("rm -f {q}"));
            s
        }
    }
}

/// Loads `images` (those not yet recorded for this node in `state`) into the node behind `transport`.
/// Errors: upload or import failure, with the command's output (`AirgapError::Node`).
pub fn load_into_node(
    transport: &dyn Transport,
    bundle: &VerifiedBundle,
    images: &[BundleImage],
    opts: &NodeLoadOptions,
    state: &mut ImportState,
) -> Result<NodeLoadReport> {
    let node = transport.node().to_string();
    let done: BTreeSet<Digest> = state
        .nodes
        .get(&node)
        .map(|v| v.iter().cloned().collect())
        .unwrap_or_default();
    let todo: Vec<BundleImage> = images
        .iter()
        .filter(|i| !done.contains(&i.digest))
        .cloned()
        .collect();
    let mut report = NodeLoadReport {
        skipped: images.len() - todo.len(),
        ..Default::default()
    };
    if todo.is_empty() {
        return Ok(report);
    }
    let archive = write_oci_archive(bundle, &todo)?;
    let mut f = archive
        .reopen()
        .map_err(|e| AirgapError::io(archive.path(), e))?;
    let size = f
        .seek(SeekFrom::End(0))
        .and_then(|n| f.seek(SeekFrom::Start(0)).map(|_| n))
        .map_err(|e| AirgapError::io(archive.path(), e))?;
    let remote = format!(
        "{}/images-{}.tar",
        opts.remote_dir.trim_end_matches('/'),
        todo[0].digest.hex().get(..12).unwrap_or("x")
    );
    let spec = FileSpec {
        path: PathBuf::from(&remote),
        mode: 0o600,
        owner: None,
    };
    let node_err = |reason: String| AirgapError::Node {
        node: node.clone(),
        reason,
    };
    transport
        .upload_stream(&mut f as &mut dyn Read, size, &spec, &mut |_| {})
        .map_err(|e| node_err(e.to_string()))?;
    let out = transport
        .run(&Cmd::new(import_script(&opts.runtime, &remote, &todo)).sudo())
        .map_err(|e| node_err(e.to_string()))?;
    if !out.success() {
        return Err(node_err(format!(
            "image import exited {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    report.loaded = todo.len();
    report.bytes = size;
    let entry = state.nodes.entry(node).or_default();
    entry.extend(todo.iter().map(|i| i.digest.clone()));
    entry.sort();
    entry.dedup();
    Ok(report)
}

/// Streams the bundle's packages for a node (`os_family` and `arch` equal, or `any`) and its
/// binaries to `<remote_dir>/packages/<file>` and `<remote_dir>/bin/<file>` on the node (mode 0644,
/// binaries 0755), checking each again on the way. Returns the remote paths written, in bundle
/// order; installing them (dnf/apt/dpkg) is the packages phase's job. Errors: upload failures.
pub fn upload_packages(
    transport: &dyn Transport,
    bundle: &VerifiedBundle,
    os_family: &str,
    arch: &str,
    remote_dir: &str,
) -> Result<Vec<String>> {
    let node = transport.node().to_string();
    let mut written = Vec::new();
    let wanted = bundle
        .manifest
        .packages
        .iter()
        .filter(|p| {
            p.os.as_deref().is_none_or(|o| o == os_family || o == "any")
                && p.arch.as_deref().is_none_or(|a| a == arch)
        })
        .map(|p| (p, "packages", 0o644))
        .chain(bundle.manifest.binaries.iter().map(|b| (b, "bin", 0o755)));
    for (file, dir, mode) in wanted {
        let name = file.path.rsplit('/').next().unwrap_or(&file.name);
        let remote = format!("{}/{dir}/{name}", remote_dir.trim_end_matches('/'));
        let mut reader = crate::digest::Hashing::new(bundle.open(&file.path)?);
        let spec = FileSpec {
            path: PathBuf::from(&remote),
            mode,
            owner: None,
        };
        transport
            .upload_stream(&mut reader, file.size, &spec, &mut |_| {})
            .map_err(|e| AirgapError::Node {
                node: node.clone(),
                reason: format!("upload of {}: {e}", file.path),
            })?;
        let (got, n, _) = reader.finish();
        if got != file.sha256 || n != file.size {
            return Err(AirgapError::Entry {
                entry: file.path.clone(),
                reason: "changed since verification".into(),
            });
        }
        written.push(remote);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(mirror: &str) -> BundleImage {
        BundleImage {
            source: "registry.k8s.io/pause:3.10.1".into(),
            mirror: mirror.into(),
            digest: Digest::of(b"x"),
            source_digest: Digest::of(b"x"),
            media_type: crate::oci::OCI_MANIFEST.into(),
            size: 1,
            platforms: vec![],
        }
    }

    #[test]
    fn import_scripts_per_runtime() {
        let images = [img("harbor.example.com/library/pause:3.10.1")];
        let c = import_script(
            &Runtime::default(),
            "/var/lib/clusterctl/airgap/images-a.tar",
            &images,
        );
        assert_eq!(
            c,
            "ctr -n k8s.io images import --all-platforms '/var/lib/clusterctl/airgap/images-a.tar'; rc=$?; rm -f '/var/lib/clusterctl/airgap/images-a.tar'; exit $rc"
        );
        let o = import_script(&Runtime::Crio, "/tmp/i.tar", &images);
        assert_eq!(
            o,
            "set -e; skopeo copy --quiet 'oci-archive:/tmp/i.tar:harbor.example.com/library/pause:3.10.1' 'containers-storage:harbor.example.com/library/pause:3.10.1'; rm -f '/tmp/i.tar'"
        );
        assert_eq!(shell_quote("a'b"), "'a'\\''b'");
    }
}
