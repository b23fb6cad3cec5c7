//! `clusterctl render`'s writing: every file each node needs, rendered offline with assumed node facts
//! (`clusterctl_render::Facts::assumed`), written into a directory — `DIR/<node>/<absolute path on the
//! node>` and `DIR/cluster/<path>` for cluster-wide manifests and values — with the modes the files
//! get on the nodes ([`crate::local::write_tree`]: every path checked first, no link inside `DIR`
//! followed). Files an earlier render wrote there (listed in `DIR/.clusterctl-render`) that this one
//! does not are removed. With `fetch`, the pinned upstream files of a third-party CNI are obtained
//! (cache of `up`, else downloaded, each checked by sha256 before anything is written) into
//! `DIR/cluster/upstream/`. No secret is written: join tokens and certificate keys stay placeholders,
//! registry credentials are not read.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clusterctl_airgap::upstream::{Fetched, UpstreamCache, WantedFile};
use clusterctl_airgap::AirgapError;
use clusterctl_render::{RenderError, RenderedFile};
use clusterctl_spec::ValidCluster;

pub use crate::local::OutputError;

/// The list of files written, kept in the output directory so that the next render can remove the
/// files it no longer writes.
const MANIFEST: &str = ".clusterctl-render";

/// Why the files could not be rendered or written.
#[derive(Debug, thiserror::Error)]
pub enum RenderDirError {
    /// The renderer refused the cluster.
    #[error("{0}")]
    Render(#[source] RenderError),
    /// An upstream file could not be obtained or checked (`--fetch`).
    #[error("--fetch: {0}")]
    Fetch(#[source] AirgapError),
    /// No cache directory for upstream files.
    #[error(
        "--fetch: no cache directory for upstream files ($XDG_CACHE_HOME and $HOME are unset)"
    )]
    NoCache,
    /// A fetched file could not be read back from the cache.
    #[error("--fetch: reading {}: {source}", path.display())]
    ReadFetched {
        /// The cached file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A path was refused or a file could not be written.
    #[error(transparent)]
    Write(#[from] OutputError),
}

/// Writes `files` (path relative to `dir`, content, mode) under `dir` as `render` writes its tree
/// (`local::write_tree`): every path checked before anything is written, no link inside `dir`
/// followed, a `dir` that is not a directory named; for other outputs of the same kind (`profile print
/// --output-dir`). Returns the paths written. Errors: the first refused or failed path.
pub fn write_files<'a>(
    dir: &Path,
    files: impl IntoIterator<Item = (&'a str, &'a [u8], u32)>,
) -> Result<Vec<PathBuf>, OutputError> {
    crate::local::write_tree(dir, files)
}

/// One written file, as listed (fields in the order `render -o json` has always printed them).
#[derive(Debug, serde::Serialize)]
pub struct Listed {
    /// Its mode, `0644`.
    pub mode: String,
    /// Where it was written.
    pub path: String,
    /// What it is for, `kubeadm-init` (`upstream` for a fetched file).
    pub purpose: String,
}

/// What [`write`] did (`render -o json` prints it).
#[derive(Debug, serde::Serialize)]
pub struct Written {
    /// The cluster's name.
    pub cluster: String,
    /// The output directory.
    pub dir: String,
    /// The files written, node files first, then cluster files, then upstream files.
    pub files: Vec<Listed>,
    /// Files of an earlier render removed (paths).
    pub removed: Vec<String>,
    /// How many nodes got files.
    #[serde(skip)]
    pub nodes: usize,
}

/// `render`'s entry point: renders `cluster` and writes every file into `dir` (created if missing),
/// with the upstream files of its CNI when `fetch` (`on_fetch` is told of each as it is obtained,
/// before anything is written). Errors: the renderer's, a fetch's, or the first refused or failed
/// path (files before it are written).
pub fn write(
    cluster: &ValidCluster,
    dir: &Path,
    fetch: bool,
    on_fetch: &mut dyn FnMut(&WantedFile, &Fetched),
) -> Result<Written, RenderDirError> {
    let facts = clusterctl_render::Facts::assumed(cluster);
    let rendered = clusterctl_render::render(cluster, &facts).map_err(RenderDirError::Render)?;
    // Downloaded and checked before anything is written.
    let upstream = if fetch {
        fetch_upstream(cluster, on_fetch)?
    } else {
        Vec::new()
    };
    let files: Vec<(String, &RenderedFile)> = rendered
        .per_node
        .iter()
        .flat_map(|(node, fs)| fs.iter().map(move |f| (format!("{node}/{}", f.path), f)))
        .chain(
            rendered
                .cluster
                .iter()
                .map(|f| (format!("cluster/{}", f.path), f)),
        )
        .collect();
    let earlier = std::fs::read_to_string(dir.join(MANIFEST)).unwrap_or_default();
    let kept: BTreeSet<&str> = files
        .iter()
        .map(|(p, _)| p.as_str())
        .chain(upstream.iter().map(|(p, _)| p.as_str()))
        .collect();
    let manifest: String = files
        .iter()
        .map(|(p, _)| p.as_str())
        .chain(upstream.iter().map(|(p, _)| p.as_str()))
        .map(|p| format!("{p}\n"))
        .collect();
    // Every path checked before anything is written; no link inside DIR is ever followed.
    let written = crate::local::write_tree(
        dir,
        files
            .iter()
            .map(|(p, f)| (p.as_str(), f.content.as_slice(), f.mode))
            .chain(
                upstream
                    .iter()
                    .map(|(p, b)| (p.as_str(), b.as_slice(), 0o644)),
            )
            .chain(std::iter::once((MANIFEST, manifest.as_bytes(), 0o644))),
    )?;
    let removed = remove_stale(dir, earlier.lines().filter(|l| !kept.contains(l)));
    let mut listed: Vec<Listed> = written
        .iter()
        .zip(&files)
        .map(|(path, (_, f))| Listed {
            path: path.display().to_string(),
            mode: format!("{:04o}", f.mode),
            purpose: kebab(&format!("{:?}", f.purpose)),
        })
        .collect();
    listed.extend(
        written
            .iter()
            .skip(files.len())
            .take(upstream.len())
            .map(|path| Listed {
                path: path.display().to_string(),
                mode: "0644".into(),
                purpose: "upstream".into(),
            }),
    );
    Ok(Written {
        cluster: cluster.name().to_string(),
        dir: dir.display().to_string(),
        files: listed,
        removed,
        nodes: rendered.per_node.len(),
    })
}

/// The pinned upstream files of `cluster`'s CNI as (`cluster/upstream/<name>`, bytes), each from the
/// cache `up` uses or downloaded and checked against its sha256 (`clusterctl_airgap::upstream`).
/// Errors: no cache directory, a download that fails, a digest that differs, an unpinned file the
/// cluster file does not accept.
fn fetch_upstream(
    cluster: &ValidCluster,
    on_fetch: &mut dyn FnMut(&WantedFile, &Fetched),
) -> Result<Vec<(String, Vec<u8>)>, RenderDirError> {
    let platforms = clusterctl_airgap::plan::platforms(cluster).map_err(RenderDirError::Fetch)?;
    let files = clusterctl_airgap::run::upstream_files(cluster, &platforms)
        .map_err(RenderDirError::Fetch)?;
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let root = crate::up::cni_install::default_cache().ok_or(RenderDirError::NoCache)?;
    let cache = UpstreamCache::open(&root).map_err(RenderDirError::Fetch)?;
    let client = clusterctl_airgap::registry::RegistryClient::new(
        clusterctl_airgap::run::client_options(cluster),
    )
    .map_err(RenderDirError::Fetch)?;
    let accept = cluster.spec().networking.cni.accept_unverified;
    let mut out = Vec::new();
    for w in &files {
        let got = cache
            .fetch(&client, w, accept)
            .map_err(RenderDirError::Fetch)?;
        on_fetch(w, &got);
        let bytes = std::fs::read(&got.path).map_err(|source| RenderDirError::ReadFetched {
            path: got.path.clone(),
            source,
        })?;
        out.push((format!("cluster/upstream/{}", w.name), bytes));
    }
    Ok(out)
}

/// `KubeadmInit` → `kubeadm-init`, `RegistryCa` → `registry-ca`.
fn kebab(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Removes the files an earlier render wrote (`stale`, paths relative to `dir` as its manifest lists
/// them) that this render did not write: only regular files reached through real directories (no
/// symbolic link followed, no `..`), then the directories left empty. Returns the paths removed.
fn remove_stale<'a>(dir: &Path, stale: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut removed = Vec::new();
    for rel in stale {
        let Some(p) = stale_file(dir, rel) else {
            continue;
        };
        if std::fs::remove_file(&p).is_ok() {
            removed.push(p.display().to_string());
            // Directories the file leaves empty, up to (not including) DIR.
            let mut d = p.parent().map(Path::to_path_buf);
            while let Some(cur) = d {
                if cur == dir || std::fs::remove_dir(&cur).is_err() {
                    break;
                }
                d = cur.parent().map(Path::to_path_buf);
            }
        }
    }
    removed
}

/// `dir/rel` when it is a regular file reached through real directories (no symbolic link, no `.`
/// or `..`); paths are `node//etc/…` (the node's absolute path under its directory).
fn stale_file(dir: &Path, rel: &str) -> Option<PathBuf> {
    let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
    if comps.is_empty() || comps.iter().any(|c| *c == "." || *c == "..") {
        return None;
    }
    let mut p = dir.to_path_buf();
    for (i, c) in comps.iter().enumerate() {
        p.push(c);
        let m = std::fs::symlink_metadata(&p).ok()?;
        let last = i + 1 == comps.len();
        if (last && !m.file_type().is_file()) || (!last && !m.file_type().is_dir()) {
            return None;
        }
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purposes_are_kebab_case() {
        assert_eq!(kebab("KubeadmInit"), "kubeadm-init");
        assert_eq!(kebab("RegistryCa"), "registry-ca");
    }

    #[test]
    fn only_regular_files_inside_the_directory_are_stale() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("n/etc")).expect("mkdir");
        std::fs::write(dir.path().join("n/etc/a.conf"), "a").expect("write");
        std::os::unix::fs::symlink(dir.path().join("n"), dir.path().join("link")).expect("link");
        let removed = remove_stale(
            dir.path(),
            ["n//etc/a.conf", "link/etc/a.conf", "../x", "n/etc"].into_iter(),
        );
        assert_eq!(removed.len(), 1, "{removed:?}");
        assert!(!dir.path().join("n").exists(), "empty directories removed");
    }
}
