//! `clusterctl etcd snapshot save`: one phase, `etcd-snapshot/save`, over the control planes one at a
//! time until one gives a snapshot (a member that fails is reported and the next is asked):
//! 1. the member's data directory and image read from its etcd static pod manifest;
//! 2. `etcdctl snapshot save` inside the running etcd container into `<data-dir>/clusterctl-save-….db`
//!    (the data directory is a hostPath, so the node sees the file), then `etcdutl snapshot status`
//!    of it there (hash, revision, keys, size);
//! 3. the file read back to this machine (never shown), the node's copy removed;
//! 4. its integrity checked here ([`super::check_snapshot`]) and written to the output 0600.
//!
//! The output is refused when it exists, unless asked to overwrite it; a dry run plans the steps on
//! the first control plane and contacts nothing. [`run`] is the entry point.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clusterctl_exec::shell::quote_word;
use clusterctl_exec::Cmd;
use clusterctl_spec::{ValidCluster, ValidNode};

use super::{check_snapshot, Member, SnapshotStatus, ETCD_MANIFEST};
use crate::ctx::{Change, Mode, NodeCtx, PlanEntry, PlanKind, Secrets};
use crate::engine::{Engine, Options as EngineOptions, Phase, Targets};
use crate::error::PhaseError;
use crate::report::Reporter;
use crate::steps::reason;

/// How `etcd snapshot save` runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the snapshot is written (mode 0600).
    pub output: PathBuf,
    /// Replace an existing output instead of refusing.
    pub overwrite: bool,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// Report every check and the output of every command.
    pub verbose: bool,
    /// Change nothing: contact no node, plan the steps.
    pub dry_run: bool,
}

/// A snapshot saved.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Saved {
    /// The control plane whose etcd member gave it.
    pub node: String,
    /// Where it was written.
    pub output: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// The file's sha256.
    pub sha256: String,
    /// `etcdutl snapshot status` of it.
    pub status: SnapshotStatus,
}

/// What `etcd snapshot save` did, or planned.
#[derive(Debug)]
pub struct Report {
    /// The snapshot, `None` in a dry run.
    pub saved: Option<Saved>,
    /// The control planes asked before, each with why it gave no snapshot.
    pub tried: Vec<(String, String)>,
    /// The control planes, in file order (for grouping the plan).
    pub nodes: Vec<ValidNode>,
    /// The dry-run plan.
    pub plan: Vec<PlanEntry>,
    /// Changes made or planned.
    pub changes: usize,
}

/// Why no snapshot was saved.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// The output exists and overwriting was not asked for (nothing was contacted).
    #[error("{} already exists: give another --output, or --overwrite to replace it", .0.display())]
    Exists(PathBuf),
    /// No control plane gave a snapshot.
    #[error("no control plane gave an etcd snapshot: {}", tried.iter().map(|(n, w)| format!("{n}: {w}")).collect::<Vec<_>>().join("; "))]
    NoMember {
        /// Each control plane with why.
        tried: Vec<(String, String)>,
    },
}

impl SaveError {
    /// True when the input was refused before anything was contacted (exit 2).
    pub fn refused(&self) -> bool {
        matches!(self, SaveError::Exists(_))
    }
}

/// What the phase shares between the control planes.
struct Data<'a> {
    opts: &'a Options,
    /// The node-side file name (unique per run).
    file: String,
    unreachable: std::collections::BTreeMap<String, String>,
    saved: Mutex<Option<Saved>>,
    planned: Mutex<bool>,
    tried: Mutex<Vec<(String, String)>>,
}

/// Saves a snapshot of `cluster`'s etcd to `opts.output` (see the module doc); progress goes to
/// `reporter`. Errors: the output exists ([`SaveError::Exists`], before anything is contacted), or
/// no control plane gave a snapshot.
pub fn run(
    cluster: &ValidCluster,
    opts: &Options,
    reporter: Arc<dyn Reporter>,
) -> Result<Report, SaveError> {
    if opts.output.exists() && !opts.overwrite {
        return Err(SaveError::Exists(opts.output.clone()));
    }
    let cps: Vec<&ValidNode> = cluster
        .nodes()
        .iter()
        .filter(|n| n.is_control_plane())
        .collect();
    let (transports, unreachable) = crate::steps::reach_unless_dry_run(
        cluster,
        &cps,
        opts.known_hosts.as_deref(),
        opts.dry_run,
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let data = Data {
        opts,
        file: format!("clusterctl-save-{}-{nanos}.db", std::process::id()),
        unreachable,
        saved: Mutex::new(None),
        planned: Mutex::new(false),
        tried: Mutex::new(Vec::new()),
    };
    let nodes: Vec<ValidNode> = cps.into_iter().cloned().collect();
    let engine = Engine::new(
        nodes.clone(),
        transports,
        EngineOptions {
            cluster: cluster.name().to_string(),
            mode: Mode {
                dry_run: opts.dry_run,
                verbose: opts.verbose,
                ..Mode::default()
            },
            parallel: 1,
            skip: Vec::new(),
            only: Vec::new(),
            cache: None,
        },
        reporter,
        Secrets::default(),
    );
    let phase = Phase {
        name: "etcd-snapshot/save",
        targets: Targets::ControlPlanes,
        serial: true,
        record: false,
        required: false,
        inputs: |_, _| String::new(),
        run: save,
    };
    let (summary, result) = engine.run(&[phase], &data);
    let mut tried = data.tried.into_inner().unwrap_or_default();
    if let Err(e) = result {
        tried.extend(e.0.iter().map(|pe| (pe.node().to_string(), reason(pe))));
    }
    let saved = data.saved.into_inner().unwrap_or_default();
    if saved.is_none() && !opts.dry_run {
        return Err(SaveError::NoMember { tried });
    }
    Ok(Report {
        saved,
        tried,
        nodes,
        changes: summary.total_changes(),
        plan: summary.plan,
    })
}

/// The phase on one control plane: nothing when a snapshot is already saved (or planned), else this
/// member's snapshot; a failure is recorded and the next control plane asked.
fn save(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    let name = ctx.name().to_string();
    let done = data
        .saved
        .lock()
        .ok()
        .and_then(|s| s.as_ref().map(|s| s.node.clone()));
    if let Some(from) = done {
        ctx.info(&format!("not asked: the snapshot came from {from}"));
        return Ok(());
    }
    if data.planned.lock().map(|p| *p).unwrap_or(false) {
        ctx.info("asked only when the control planes before it give no snapshot");
        return Ok(());
    }
    if ctx.unreachable() {
        let why = data.unreachable.get(&name).cloned().unwrap_or_default();
        ctx.reporter()
            .note(&format!("etcd snapshot: {name} not reached: {why}"));
        push(&data.tried, name, format!("not reached: {why}"));
        return Ok(());
    }
    match save_on(ctx, data) {
        Ok(Some(saved)) => {
            if let Ok(mut s) = data.saved.lock() {
                *s = Some(saved);
            }
        }
        Ok(None) => {
            if let Ok(mut p) = data.planned.lock() {
                *p = true;
            }
        }
        Err(e) => {
            let why = reason(&e);
            ctx.reporter().note(&format!(
                "etcd snapshot: {name} gave no snapshot ({why}); asking the next control plane"
            ));
            push(&data.tried, name, why);
        }
    }
    Ok(())
}

fn push(v: &Mutex<Vec<(String, String)>>, node: String, why: String) {
    if let Ok(mut v) = v.lock() {
        v.push((node, why));
    }
}

/// The snapshot of this control plane's member (`None` in a dry run).
fn save_on(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<Option<Saved>, PhaseError> {
    let member = ctx
        .read_labelled(
            &format!("cat {ETCD_MANIFEST}"),
            Some("read the etcd manifest"),
        )?
        .map(|y| {
            Member::from_manifest(&y).ok_or_else(|| {
                ctx.local_error(format!(
                    "{ETCD_MANIFEST}: no etcd --name/--initial-advertise-peer-urls/image in it"
                ))
            })
        })
        .transpose()?;
    let dir = member
        .as_ref()
        .map_or("/var/lib/etcd", |m| m.data_dir.as_str());
    let image = quote_word(member.as_ref().map_or("-", |m| m.image.as_str()));
    let file = format!("{dir}/{}", data.file);
    let script = format!(
        "set -e\numask 077\n{}rm -f {file}.part\netcdctl_in snapshot save {file} >&2\netcdutl_in {image} {dir} snapshot status {file} --write-out=json\n",
        super::tools()
    );
    let what = format!(
        "etcdctl snapshot save {file} in the running etcd container, then etcdutl snapshot status of it"
    );
    let taken = ctx.change(Change::new(PlanKind::Run, what), |ctx| {
        let mut cmd = Cmd::new(script.clone());
        cmd.timeout = Some(std::time::Duration::from_secs(300));
        let t = ctx.connection("the etcd snapshot")?;
        let out = t.run(&cmd).map_err(|e| ctx.local_error_from(&e))?;
        if !out.success() {
            return Err(ctx.command_error(&cmd, &out));
        }
        Ok(out.stdout_str())
    });
    let fetched = match taken {
        Ok(Some(status)) => fetch(ctx, &file).map(|b| b.map(|b| (status, b))),
        Ok(None) => fetch(ctx, &file).map(|_| None),
        Err(e) => Err(e),
    };
    // The node's copy goes whatever happened (a partial file of a failed save too).
    ctx.run_script(&format!("rm -f {file} {file}.part"))?;
    let Some((status_out, bytes)) = fetched? else {
        write_output(ctx, data.opts, &[])?;
        return Ok(None);
    };
    check_snapshot(&bytes).map_err(|e| ctx.local_error_in("the snapshot read back", &e))?;
    let status = SnapshotStatus::parse(&status_out).ok_or_else(|| {
        ctx.local_error(format!(
            "etcdutl snapshot status printed no status: {}",
            status_out.trim()
        ))
    })?;
    write_output(ctx, data.opts, &bytes)?;
    Ok(Some(Saved {
        node: ctx.name().to_string(),
        output: data.opts.output.clone(),
        bytes: bytes.len() as u64,
        sha256: crate::util::sha256_hex(&bytes),
        status,
    }))
}

/// The node's snapshot file, read back (never shown: a failure shows only what `cat` printed on
/// stderr). `None` in a dry run.
fn fetch(ctx: &mut NodeCtx, file: &str) -> Result<Option<Vec<u8>>, PhaseError> {
    let cmd = Cmd::new(format!("cat {file}"));
    let Some(out) = ctx.query_labelled(cmd, Some(&format!("read {file} back to this machine")))?
    else {
        return Ok(None);
    };
    if !out.success() {
        return Err(ctx.local_error(format!(
            "reading {file} back: exit {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(Some(out.stdout))
}

/// Writes the snapshot to the output, 0600 (through a temporary file renamed over it), unless it
/// appeared meanwhile and overwriting was not asked for.
fn write_output(ctx: &mut NodeCtx, opts: &Options, bytes: &[u8]) -> Result<(), PhaseError> {
    let out: &Path = &opts.output;
    let what = format!("write {} (mode 0600)", out.display());
    ctx.local_change(&what, || {
        if out.exists() && !opts.overwrite {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "it appeared while the snapshot was taken",
            ));
        }
        crate::local::write_private(out, 0o600, bytes)
    })
}
