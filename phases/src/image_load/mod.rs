//! `clusterctl image load` as phases run by the engine through `NodeCtx` (so `--dry-run` prints the
//! plan, contacts no node and changes nothing): puts local images into every node's runtime, like
//! `kind load docker-image`.
//! 1. `archive` (this machine): the images saved from the local Docker engine (`docker save`, one
//!    archive for all of them, in a private temporary directory removed afterwards) — or the archive
//!    given (`docker save` tarball or OCI archive), used as it is;
//! 2. `load` (every selected node, in parallel): the archive streamed to [`STAGING_DIR`]
//!    (`upload_stream`, never held in memory whole), imported into containerd's `k8s.io` namespace
//!    with `ctr -n k8s.io images import` (CRI-O nodes: `podman load`), removed, and each named image
//!    then looked up in the node's runtime ([`LIST_IMAGES`]). Every node gets a result line; a node
//!    that fails does not stop the others.
//!
//! [`run`] is the entry point.

mod archive;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use clusterctl_exec::Cmd;
use clusterctl_spec::model::RuntimeKind;
use clusterctl_spec::ValidCluster;

use crate::ctx::NodeCtx;
use crate::engine::{Phase, Targets};
use crate::error::PhaseError;
use crate::steps::{reason, RunReport, Sink, StepLine, StepOutcome, StepRun, Steps};
use clusterctl_exec::shell::quote_word;
use clusterctl_spec::ValidNode;

/// Where the archive is staged on a node while it is imported (removed afterwards).
pub const STAGING_DIR: &str = "/var/lib/clusterctl/images";

/// Lists the runtime's images, one reference per line: containerd through `ctr` (namespace k8s.io),
/// CRI-O through `crictl images` (`IMAGE:TAG`).
pub const LIST_IMAGES: &str = "if command -v ctr >/dev/null 2>&1; then ctr -n k8s.io images ls -q; \
elif command -v crictl >/dev/null 2>&1; then crictl images 2>/dev/null | awk 'NR>1{print $1\":\"$2}'; \
else echo 'no ctr or crictl on this node' >&2; exit 3; fi";

/// How `image load` runs.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Images, exactly as the pod specs name them (e.g. `cka-api:v4`). With `archive`, the images to
    /// check for after the import (optional).
    pub images: Vec<String>,
    /// Load this archive instead of asking the local Docker engine.
    pub archive: Option<PathBuf>,
    /// Only these nodes (names from the cluster file); empty: every node.
    pub nodes: Vec<String>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// Change nothing: contact no node, save no archive, record every step in the plan.
    pub dry_run: bool,
}

/// Why `image load` refused to start (nothing was contacted or changed).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Neither an image nor an archive.
    #[error("name at least one image, or give --archive FILE.tar")]
    Nothing,
    /// Nodes the file does not declare.
    #[error("not nodes of cluster {cluster}: {nodes}")]
    UnknownNodes {
        /// The cluster's name.
        cluster: String,
        /// The unknown names, comma-separated.
        nodes: String,
    },
    /// The given archive cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Archive {
        /// The archive.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// What the phases of one run share.
pub struct Data<'a> {
    opts: &'a Options,
    runtime: RuntimeKind,
    /// Where `docker save` writes (a private temporary directory).
    staging: PathBuf,
    /// The archive and its size, once known.
    archive: Mutex<Option<(PathBuf, u64)>>,
    unreachable: BTreeMap<String, String>,
    steps: Steps<'a>,
}

impl Data<'_> {
    /// What is loaded, for the result lines: the images, or the archive's path.
    fn what(&self) -> String {
        if self.opts.images.is_empty() {
            self.opts
                .archive
                .as_ref()
                .map(|a| a.display().to_string())
                .unwrap_or_default()
        } else {
            self.opts.images.join(", ")
        }
    }
}

/// The phases of `image load`, in order (see the module doc).
pub fn phases<'a>() -> Vec<Phase<Data<'a>>> {
    vec![
        Phase::step("archive", Targets::Local, archive::run),
        Phase::step("load", Targets::All, load),
    ]
}

/// The `load` phase: one node's import and its result line.
fn load(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    let outcome = if ctx.unreachable() {
        let why = data
            .unreachable
            .get(ctx.name())
            .cloned()
            .unwrap_or_default();
        StepOutcome::Failed(format!("cannot reach: {why}"))
    } else {
        match load_on_node(ctx, data) {
            Ok(Some(size)) => StepOutcome::Done(format!("loaded {} ({size} bytes)", data.what())),
            Ok(None) => StepOutcome::Done(format!("{} planned (dry run)", data.what())),
            Err(e) => StepOutcome::Failed(reason(&e)),
        }
    };
    data.steps.push(StepLine::new(ctx.name(), outcome));
    Ok(())
}

/// Streams the archive to the node, imports it into the runtime, removes it, and checks that every
/// named image is then listed by the runtime. Returns the archive's size (`None` in a dry run).
fn load_on_node(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<Option<u64>, PhaseError> {
    let remote = format!("{STAGING_DIR}/load-{}.tar", std::process::id());
    let archive = data.archive.lock().ok().and_then(|a| a.clone());
    match &archive {
        Some((path, _)) => {
            ctx.put_local_file(path, &remote, 0o600)?;
        }
        None => ctx.info(&format!(
            "write {remote} (mode 0600, the archive `docker save` makes, streamed from this machine)"
        )),
    }
    let q = quote_word(&remote);
    let import = match data.runtime {
        RuntimeKind::Containerd => format!("ctr -n k8s.io images import {q}"),
        RuntimeKind::Crio => format!("podman load -i {q}"),
    };
    let ran = ctx.run_script(&format!("{import}; rc=$?; rm -f {q}; exit $rc"))?;
    let size = archive.filter(|_| ran.is_some()).map(|(_, size)| size);
    if data.opts.images.is_empty() {
        return Ok(size);
    }
    // Offline (dry run) the check is only planned.
    let Some(listed) = ctx.query(Cmd::new(LIST_IMAGES))? else {
        return Ok(None);
    };
    let listed: Vec<String> = listed.stdout_str().lines().map(str::to_string).collect();
    let absent: Vec<&str> = data
        .opts
        .images
        .iter()
        .filter(|i| {
            !listed
                .iter()
                .any(|l| clusterctl_spec::image::same_image(i, l))
        })
        .map(String::as_str)
        .collect();
    if !absent.is_empty() {
        return Err(ctx.check_error(vec![format!(
            "imported, but the runtime does not list {}",
            absent.join(", ")
        )]));
    }
    Ok(size)
}

/// Removes a directory when dropped (the `docker save` staging directory).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Loads the images of `opts` into the runtimes of the selected nodes of `cluster` (see the module
/// doc); each node's result line goes to `sink` as it ends. Errors: nothing to load, unknown nodes, an
/// unreadable archive — before anything is contacted.
pub fn run(cluster: &ValidCluster, opts: &Options, sink: Sink<'_>) -> Result<RunReport, Refused> {
    if opts.archive.is_none() && opts.images.is_empty() {
        return Err(Refused::Nothing);
    }
    let unknown: Vec<&str> = opts
        .nodes
        .iter()
        .filter(|n| cluster.node(n).is_none())
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(Refused::UnknownNodes {
            cluster: cluster.name().to_string(),
            nodes: unknown.join(", "),
        });
    }
    let archive = match &opts.archive {
        Some(a) => {
            let refused = |source| Refused::Archive {
                path: a.clone(),
                source,
            };
            let meta = std::fs::metadata(a).map_err(refused)?;
            // A device, FIFO or directory would block the upload or read forever (`/dev/zero`).
            if !meta.is_file() {
                return Err(refused(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "not a regular file (give an image archive written by `docker save`)",
                )));
            }
            Some((a.clone(), meta.len()))
        }
        None => None,
    };
    let selected: Vec<_> = cluster
        .nodes()
        .iter()
        .filter(|n| opts.nodes.is_empty() || opts.nodes.contains(&n.name))
        .collect();
    let (transports, unreachable) = crate::steps::reach_unless_dry_run(
        cluster,
        &selected,
        opts.known_hosts.as_deref(),
        opts.dry_run,
    );
    let staging = std::env::temp_dir().join(format!("clusterctl-image-{}", std::process::id()));
    let _cleanup = RemoveOnDrop(staging.clone());
    let nodes: Vec<ValidNode> = selected.iter().copied().cloned().collect();
    let data = Data {
        opts,
        runtime: cluster.spec().runtime.kind,
        staging,
        archive: Mutex::new(archive),
        unreachable,
        steps: Steps::new(sink),
    };
    let parallel = nodes.len();
    let run = StepRun {
        cluster: cluster.name().to_string(),
        nodes,
        transports,
        dry_run: opts.dry_run,
        parallel,
    };
    let (mut report, result) = run.run(&phases(), &data);
    report.lines = data.steps.lines();
    if let Err(e) = &result {
        // A phase that stopped the run (the local archive: an image the engine does not have) is a
        // failed line too, so that every failure is a line of the report (and an entry of the dry
        // run's `failures`); not passed to the sink: `stopped` says the same, and the command prints it.
        report.lines.extend(e.0.iter().map(|pe| StepLine {
            subject: pe.node().to_string(),
            step: Some(pe.phase().to_string()),
            outcome: StepOutcome::Failed(reason(pe)),
        }));
    }
    report.stopped = result
        .err()
        .map(|e| e.0.iter().map(reason).collect::<Vec<_>>().join("\n"));
    Ok(report)
}
