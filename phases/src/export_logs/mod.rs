//! `clusterctl export logs`: one gzip'd tarball of what is needed to find out why a cluster broke
//! (kind's and talosctl's log export), written in these phases:
//! 1. `reach`: every node of the file through its `Transport` (`reach::provider_for`); a node that
//!    cannot be reached is kept as a line of the report and a `nodes/<node>/UNREACHABLE.txt` in the
//!    archive (the result is then `degraded`), never left out silently;
//! 2. `nodes`: on each reached node the collection script of [`collect`] (journals or log files of
//!    the kubelet and the runtime, `crictl ps -a`/`pods`, pod and static-pod logs, the placed files,
//!    the state record), read back as `nodes/<node>/…` with every secret masked ([`mask`]); the
//!    script's temporary directory under `/tmp` is removed by the script itself;
//! 3. `cluster`: through the Kubernetes API (`kubeapi`) `status.yaml` (what `status -o yaml`
//!    prints) and `events.yaml` (every core/v1 Event), masked too; an API that cannot be reached is
//!    a line of the report and a `cluster/UNREACHABLE.txt`;
//! 4. `write`: the archive, bounded by [`Options::max_bytes`] of content (entries past the bound are
//!    left out, listed in the report and in `TRUNCATED.txt`), written to a temporary file renamed
//!    into place, mode 0600.
//!
//! [`run`] is the entry point; nothing on the nodes or in the cluster is changed.

pub mod collect;
pub mod mask;

use std::io::Write;
use std::path::{Path, PathBuf};

use clusterctl_exec::{Cmd, Transport};
use clusterctl_kubeapi::ClusterApi;
use clusterctl_spec::model::RuntimeKind;
use clusterctl_spec::ValidCluster;

use crate::status::Health;

/// Default bound of the archive's content (before compression).
pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// How `export logs` runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The directory the archive is written into (created when missing).
    pub dir: PathBuf,
    /// The kubeconfig for the API part (default: as `status` finds one).
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// Most bytes of content the archive holds.
    pub max_bytes: u64,
}

/// What was collected from one source (a node, or `cluster` for the API part).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// Node name, or `cluster`.
    pub name: String,
    /// Files put into the archive.
    pub files: usize,
    /// Why nothing (or not everything) came from it; `None` when all of it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The report (`export logs -o json|yaml` prints it).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Cluster name.
    pub cluster: String,
    /// `ok` when every node and the API gave their part, `degraded` when some did not (their
    /// `error` says why; the archive holds the rest).
    pub result: Health,
    /// The archive written.
    pub archive: PathBuf,
    /// Its size on disk.
    pub bytes: u64,
    /// Per node, then `cluster`.
    pub sources: Vec<Source>,
    /// Entries left out because the archive reached its bound.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub truncated: Vec<String>,
}

/// Why no archive was written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The archive could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The archive (or its directory).
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The archive's entries so far, bounded.
struct Bundle {
    entries: Vec<(String, Vec<u8>)>,
    bytes: u64,
    max: u64,
    truncated: Vec<String>,
}

impl Bundle {
    fn add(&mut self, path: String, data: Vec<u8>) -> bool {
        if self.bytes + data.len() as u64 > self.max {
            self.truncated.push(path);
            return false;
        }
        self.bytes += data.len() as u64;
        self.entries.push((path, data));
        true
    }
}

/// Collects the logs of `cluster` into `<dir>/clusterctl-logs-<cluster>-<unix time>.tar.gz` (see the
/// module doc). Errors: only the archive could not be written; an unreachable node or API makes the
/// report `degraded` instead.
pub fn run(cluster: &ValidCluster, opts: &Options) -> Result<Report, ExportError> {
    let mut bundle = Bundle {
        entries: Vec::new(),
        bytes: 0,
        max: opts.max_bytes,
        truncated: Vec::new(),
    };
    let nodes: Vec<_> = cluster.nodes().iter().collect();
    let (transports, unreachable) =
        crate::steps::reach_unless_dry_run(cluster, &nodes, opts.known_hosts.as_deref(), false);
    let runtime = match cluster.spec().runtime.kind {
        RuntimeKind::Containerd => "containerd",
        RuntimeKind::Crio => "crio",
    };
    let mut sources = Vec::new();
    for n in &nodes {
        let source = match transports.get(&n.name) {
            Some(t) => node_part(&mut bundle, &n.name, t.as_ref(), runtime),
            None => {
                let why = unreachable
                    .get(&n.name)
                    .cloned()
                    .unwrap_or_else(|| "not reached".into());
                missing(&mut bundle, &format!("nodes/{}", n.name), &n.name, why)
            }
        };
        sources.push(source);
    }
    sources.push(cluster_part(&mut bundle, cluster, opts));
    write(cluster, opts, bundle, sources)
}

/// A source that gave nothing: its `UNREACHABLE.txt` and its report line.
fn missing(bundle: &mut Bundle, folder: &str, name: &str, why: String) -> Source {
    let _ = bundle.add(
        format!("{folder}/UNREACHABLE.txt"),
        format!("{why}\n").into_bytes(),
    );
    Source {
        name: name.to_string(),
        files: 0,
        error: Some(why),
    }
}

/// Phase `nodes`, one node: the collection script, its tar read back masked.
fn node_part(bundle: &mut Bundle, node: &str, t: &dyn Transport, runtime: &str) -> Source {
    let folder = format!("nodes/{node}");
    let out = match t.run(&Cmd::new(collect::script(runtime)).sudo()) {
        Ok(o) if o.success() => o,
        Ok(o) => {
            let why = format!(
                "the collection script failed (exit {}): {}",
                o.status,
                mask::mask(String::from_utf8_lossy(&o.stderr).trim())
            );
            return missing(bundle, &folder, node, why);
        }
        Err(e) => return missing(bundle, &folder, node, format!("cannot reach: {e}")),
    };
    match collect::entries(&out.stdout) {
        Ok(entries) => {
            let files = entries
                .into_iter()
                .filter(|e| bundle.add(format!("{folder}/{}", e.path), e.data.clone()))
                .count();
            Source {
                name: node.to_string(),
                files,
                error: None,
            }
        }
        Err(e) => missing(
            bundle,
            &folder,
            node,
            format!("its collection is no tar: {e}"),
        ),
    }
}

/// Phase `cluster`: `status.yaml` and `events.yaml` through the API.
fn cluster_part(bundle: &mut Bundle, cluster: &ValidCluster, opts: &Options) -> Source {
    let api = match crate::access::api::cluster_api(
        cluster,
        opts.kubeconfig.as_deref(),
        opts.known_hosts.as_deref(),
    ) {
        Ok(a) => a,
        Err(e) => return missing(bundle, "cluster", "cluster", format!("no API: {e}")),
    };
    let mut files = 0;
    let mut errors = Vec::new();
    match crate::status::report(cluster, &api, opts.known_hosts.as_deref()) {
        Ok(r) => match serde_yaml::to_string(&r) {
            Ok(y) => {
                files += usize::from(
                    bundle.add("cluster/status.yaml".into(), mask::mask(&y).into_bytes()),
                )
            }
            Err(e) => errors.push(format!("status: {e}")),
        },
        Err(e) => errors.push(format!("status: {e}")),
    }
    match api.list_objects("v1", "Event") {
        Ok(events) => match serde_yaml::to_string(&events) {
            Ok(y) => {
                files += usize::from(
                    bundle.add("cluster/events.yaml".into(), mask::mask(&y).into_bytes()),
                )
            }
            Err(e) => errors.push(format!("events: {e}")),
        },
        Err(e) => errors.push(format!("events: {e}")),
    }
    Source {
        name: "cluster".into(),
        files,
        error: (!errors.is_empty()).then(|| errors.join("; ")),
    }
}

/// Phase `write`: the archive, renamed into place once complete.
fn write(
    cluster: &ValidCluster,
    opts: &Options,
    mut bundle: Bundle,
    sources: Vec<Source>,
) -> Result<Report, ExportError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ExportError::Write { path, source }
    };
    std::fs::create_dir_all(&opts.dir).map_err(err(&opts.dir))?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let path = opts
        .dir
        .join(format!("clusterctl-logs-{}-{stamp}.tar.gz", cluster.name()));
    let tmp = path.with_extension("partial");
    if !bundle.truncated.is_empty() {
        let list = format!(
            "left out, the archive reached its bound of {} bytes:\n{}\n",
            opts.max_bytes,
            bundle.truncated.join("\n")
        );
        bundle
            .entries
            .push(("TRUNCATED.txt".into(), list.into_bytes()));
    }
    write_archive(&tmp, &bundle.entries).map_err(err(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(err(&path))?;
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let result = if sources.iter().all(|s| s.error.is_none()) {
        Health::Ok
    } else {
        Health::Degraded
    };
    Ok(Report {
        cluster: cluster.name().to_string(),
        result,
        archive: path,
        bytes,
        sources,
        truncated: bundle.truncated,
    })
}

/// `entries` as a gzip'd tar at `path` (mode 0600), each under `clusterctl-logs/`.
fn write_archive(path: &Path, entries: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?
    };
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (name, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o600);
        h.set_cksum();
        tar.append_data(&mut h, format!("clusterctl-logs/{name}"), data.as_slice())?;
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    gz.finish()?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_leaves_entries_out_and_names_them() {
        let mut b = Bundle {
            entries: Vec::new(),
            bytes: 0,
            max: 10,
            truncated: Vec::new(),
        };
        assert!(b.add("a".into(), vec![0; 6]));
        assert!(!b.add("b".into(), vec![0; 6]));
        assert!(b.add("c".into(), vec![0; 4]));
        assert_eq!(b.truncated, vec!["b".to_string()]);
        assert_eq!(b.bytes, 10);
    }

    #[test]
    fn an_unreachable_source_is_a_file_and_an_error() {
        let mut b = Bundle {
            entries: Vec::new(),
            bytes: 0,
            max: 1024,
            truncated: Vec::new(),
        };
        let s = missing(&mut b, "nodes/w1", "w1", "cannot reach: paused".into());
        assert_eq!(s.error.as_deref(), Some("cannot reach: paused"));
        assert_eq!(b.entries[0].0, "nodes/w1/UNREACHABLE.txt");
    }

    #[test]
    fn the_archive_is_private_and_gzip_tar() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("x.tar.gz");
        write_archive(&p, &[("nodes/c1/kubelet.log".into(), b"hello".to_vec())]).expect("write");
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let gz = flate2::read::GzDecoder::new(std::fs::File::open(&p).expect("open"));
        let mut t = tar::Archive::new(gz);
        let names: Vec<String> = t
            .entries()
            .expect("entries")
            .map(|e| {
                e.expect("entry")
                    .path()
                    .expect("path")
                    .display()
                    .to_string()
            })
            .collect();
        assert_eq!(names, vec!["clusterctl-logs/nodes/c1/kubelet.log"]);
    }
}
