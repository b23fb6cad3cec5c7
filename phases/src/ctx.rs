//! `NodeCtx`: what a phase uses to act on one node. Every action is either a read-only query or a
//! change; in `--dry-run` changes are only recorded in the plan, and queries run only with `--probe`
//! (offline otherwise: a query then answers "unknown" and the phase plans as if nothing were done).
//! Every change goes through one primitive, [`NodeCtx::change`] (count, record in a dry run, report,
//! perform); `run`, `put_file`, `put_local_file`, `api_change`, `local_change` and `put_local` are
//! built on it. Every text shown or stored passes through the shared redaction list.

use crate::error::{Cause, PhaseError};
use crate::report::Reporter;
use crate::util::output_tail;
use clusterctl_exec::shell::quote_word;
use clusterctl_exec::{Cmd, FileSpec, Output, Transport};
use clusterctl_spec::ValidNode;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// How a run treats the nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mode {
    /// Change nothing; record every change in the plan.
    pub dry_run: bool,
    /// With `dry_run`: also run read-only queries on the nodes to show what is already done.
    pub probe: bool,
    /// Apply the fixable preflight failures.
    pub fix: bool,
    /// Show command output.
    pub verbose: bool,
    /// With `dry_run` and a reached node: each file write carries a unified diff of the node's
    /// current content against the new one, secrets masked ([`crate::diff`]).
    pub diff: bool,
}

/// The strings redacted everywhere (join token, certificate key, registry passwords). Shared by every
/// node of a run; values are added as soon as they are generated or read.
#[derive(Debug, Clone, Default)]
pub struct Secrets(Arc<Mutex<Vec<String>>>);

impl Secrets {
    /// Adds `value` (ignored when shorter than 6 characters, to keep redaction meaningful).
    pub fn add(&self, value: &str) {
        if value.len() >= 6 {
            if let Ok(mut v) = self.0.lock() {
                if !v.iter().any(|s| s == value) {
                    v.push(value.to_string());
                }
            }
        }
    }
    /// Every secret known so far.
    pub fn all(&self) -> Vec<String> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
    /// `text` with every known secret replaced by `<redacted>`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in self.all() {
            out = out.replace(&s, "<redacted>");
        }
        out
    }
}

/// The error of a change's call in [`NodeCtx::api_change`] and [`NodeCtx::local_change`]: any error
/// (its causes are kept as the [`PhaseError`]'s source) or a message (`"no API client".into()`).
pub(crate) type CallError = Box<dyn std::error::Error + Send + Sync>;

/// What a dry-run plan entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanKind {
    /// A read-only check that could not run offline (its result is assumed "not done").
    Check,
    /// A command that changes the node.
    Run,
    /// A file written on the node.
    Write,
    /// A change on the local machine (kubeconfig, cache).
    Local,
    /// Information (e.g. "already done").
    Info,
    /// A change made through the Kubernetes API from this machine (e.g. a Node label patch).
    Api,
    /// A probe (`--dry-run --probe`) found the phase would fail here; the text is the failure. The
    /// dry run goes on with the next phases, so the plan shows every phase.
    Failed,
}

/// One line of the `--dry-run` plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanEntry {
    /// Node name (or `local`).
    pub node: String,
    /// Phase path.
    pub phase: String,
    /// Kind of step.
    pub kind: PlanKind,
    /// The command or write, redacted.
    pub text: String,
    /// For a file write with [`Mode::diff`]: the unified diff of the node's content against the new
    /// one, secrets masked.
    pub diff: Option<String>,
}

/// How a change is counted in the phase's [`NodeCtx::changes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Count {
    /// One change, planned or made.
    Once,
    /// Not counted: a step around a counted change (a download into this machine's cache, an upload
    /// the install that follows uses, a plan line only an offline run writes).
    Never,
    /// One in a dry run; in a real run the perform counts what it actually changed.
    ByPerform,
}

/// A change as the dry-run plan and the run's report show it, given to [`NodeCtx::change`]. By default
/// it counts as one change and a real run reports `WHAT` (`run: WHAT` for [`PlanKind::Run`], `api:
/// WHAT` for [`PlanKind::Api`]) before making it.
#[derive(Debug, Clone)]
pub struct Change {
    kind: PlanKind,
    what: String,
    reported: Option<String>,
    explained: Option<String>,
    count: Count,
    diff: Option<String>,
}

impl Change {
    /// A change of `kind` described by `what` (redacted when shown).
    pub fn new(kind: PlanKind, what: impl Into<String>) -> Self {
        let what = what.into();
        let reported = Some(match kind {
            PlanKind::Run => format!("run: {what}"),
            PlanKind::Api => format!("api: {what}"),
            _ => what.clone(),
        });
        Change {
            kind,
            what,
            reported,
            explained: None,
            count: Count::Once,
            diff: None,
        }
    }
    /// A real run reports `line` instead of the default.
    pub fn reported_as(mut self, line: impl Into<String>) -> Self {
        self.reported = Some(line.into());
        self
    }
    /// The perform reports and counts what it actually changed (e.g. none of the images when the
    /// mirror has them all, or through the [`NodeCtx`] methods it calls); a dry run counts one.
    pub fn reports_itself(mut self) -> Self {
        self.reported = None;
        if self.count == Count::Once {
            self.count = Count::ByPerform;
        }
        self
    }
    /// Not counted as a change.
    pub fn uncounted(mut self) -> Self {
        self.count = Count::Never;
        self
    }
    /// A dry run records `detail` (an information line: what the change will do) before the change.
    pub fn explained(mut self, detail: impl Into<String>) -> Self {
        self.explained = Some(detail.into());
        self
    }
}

/// A phase's handle on one node.
pub struct NodeCtx {
    /// The node.
    pub node: ValidNode,
    /// The phase being run (set by the engine).
    pub phase: String,
    /// How the run treats nodes.
    pub mode: Mode,
    transport: Option<Arc<dyn Transport>>,
    reporter: Arc<dyn Reporter>,
    secrets: Secrets,
    /// Dry-run plan entries recorded so far.
    pub plan: Vec<PlanEntry>,
    /// Changes made (or planned) in the current phase.
    pub changes: usize,
    /// Files this phase placed or found in place: (path, sha256). Merged into the state record.
    pub placed: Vec<(String, String)>,
    /// Whether the node's state record, as loaded at the start of the run (from the node, or the
    /// local cache when the node is not reached), holds the current phase with any inputs: the phase
    /// ran on this node before. Set by the engine before each phase.
    pub ran_before: bool,
}

impl NodeCtx {
    /// A context for `node`; `transport` is `None` offline (dry-run without `--probe`, or local steps).
    pub fn new(
        node: ValidNode,
        transport: Option<Arc<dyn Transport>>,
        mode: Mode,
        reporter: Arc<dyn Reporter>,
        secrets: Secrets,
    ) -> Self {
        NodeCtx {
            node,
            phase: String::new(),
            mode,
            transport,
            reporter,
            secrets,
            plan: Vec::new(),
            changes: 0,
            placed: Vec::new(),
            ran_before: false,
        }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.node.name
    }
    /// The shared secrets list.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }
    /// The transport, when the node is reachable in this run.
    pub fn transport(&self) -> Option<&Arc<dyn Transport>> {
        self.transport.as_ref()
    }
    /// The reporter.
    pub fn reporter(&self) -> &Arc<dyn Reporter> {
        &self.reporter
    }
    /// True when queries reach the node (not offline).
    pub fn can_query(&self) -> bool {
        self.transport.is_some() && (!self.mode.dry_run || self.mode.probe)
    }

    fn with_secrets(&self, mut cmd: Cmd) -> Cmd {
        cmd.secrets.extend(self.secrets.all());
        cmd.sudo = true;
        cmd
    }

    fn record(&mut self, kind: PlanKind, text: &str) {
        self.record_with(kind, text, None);
    }

    /// Records a plan entry with a file write's `diff` (already masked; redacted again here).
    fn record_with(&mut self, kind: PlanKind, text: &str, diff: Option<&str>) {
        let text = self.secrets.redact(text);
        let diff = diff.map(|d| self.secrets.redact(d));
        self.plan.push(PlanEntry {
            node: self.node.name.clone(),
            phase: self.phase.clone(),
            kind,
            text,
            diff,
        });
    }

    /// Records an information line in the plan (shown in dry-run output).
    pub fn info(&mut self, text: &str) {
        self.record(PlanKind::Info, text);
    }

    /// Records `why` in the plan and, when the run changes things, reports it as the reason for the
    /// changes that follow (itself not a change: those are counted as they are made).
    pub fn announce(&mut self, why: &str) {
        self.info(why);
        if !self.mode.dry_run {
            self.reporter
                .change(&self.phase, &self.node.name, &self.secrets.redact(why));
        }
    }

    /// The one way a phase changes anything (on the node, through the API, on this machine). Counts
    /// `change` in [`NodeCtx::changes`]; in a dry run only records it in the plan (after its
    /// explanation, [`Change::explained`]) and returns `Ok(None)`; otherwise reports it and runs
    /// `perform`, returning its value. Every text shown passes through the redaction list. Errors:
    /// `perform`'s, which it makes with the context's error constructors (naming phase and node).
    pub fn change<T>(
        &mut self,
        change: Change,
        perform: impl FnOnce(&mut Self) -> Result<T, PhaseError>,
    ) -> Result<Option<T>, PhaseError> {
        self.changes += match change.count {
            Count::Once => 1,
            Count::ByPerform if self.mode.dry_run => 1,
            Count::ByPerform | Count::Never => 0,
        };
        if self.mode.dry_run {
            if let Some(detail) = &change.explained {
                self.record(PlanKind::Info, detail);
            }
            self.record_with(change.kind, &change.what, change.diff.as_deref());
            return Ok(None);
        }
        if let Some(line) = &change.reported {
            let line = self.secrets.redact(line);
            self.reporter.change(&self.phase, &self.node.name, &line);
        }
        perform(self).map(Some)
    }

    /// The transport, for a change `what` that needs the node. Errors: no connection to the node.
    pub fn connection(&self, what: &str) -> Result<Arc<dyn Transport>, PhaseError> {
        self.transport
            .clone()
            .ok_or_else(|| self.local_error(format!("no connection to {what}")))
    }

    /// True in a run that changes things but has no connection to the node (it was not reached): a
    /// best-effort command says so instead of running the node's steps. A dry run is never
    /// unreachable: it plans offline.
    pub fn unreachable(&self) -> bool {
        self.transport.is_none() && !self.mode.dry_run
    }

    fn transport_err(&self, what: &str, e: impl std::error::Error + 'static) -> PhaseError {
        PhaseError::Transport {
            phase: self.phase.clone(),
            node: self.node.name.clone(),
            command: self.secrets.redact(what),
            reason: self.secrets.redact(&e.to_string()),
            source: Some(self.cause(&e)),
        }
    }

    /// `e` with its causes as a [`Cause`], every level redacted.
    fn cause(&self, e: &(dyn std::error::Error + 'static)) -> Cause {
        Cause::new(e, &|t| self.secrets.redact(t))
    }

    /// A [`PhaseError::Command`] for `cmd` that ended with `out`.
    pub fn command_error(&self, cmd: &Cmd, out: &Output) -> PhaseError {
        let cmd = self.with_secrets(cmd.clone());
        PhaseError::Command {
            phase: self.phase.clone(),
            node: self.node.name.clone(),
            command: cmd.redact(&cmd.script),
            status: out.status,
            output_tail: cmd.redact(&output_tail(&out.stdout, &out.stderr, 15)),
        }
    }

    /// A [`PhaseError::Check`] listing `problems`.
    pub fn check_error(&self, problems: Vec<String>) -> PhaseError {
        PhaseError::Check {
            phase: self.phase.clone(),
            node: self.node.name.clone(),
            problems,
        }
    }

    /// A [`PhaseError::Local`] with `reason` (a problem the phase found itself: no `source`).
    pub fn local_error(&self, reason: impl std::fmt::Display) -> PhaseError {
        PhaseError::Local {
            phase: self.phase.clone(),
            node: self.node.name.clone(),
            reason: self.secrets.redact(&reason.to_string()),
            source: None,
        }
    }

    /// A [`PhaseError::Local`] caused by `e`: the reason is `e`'s message, the source `e` with its
    /// causes (each redacted).
    pub fn local_error_from(&self, e: &(dyn std::error::Error + 'static)) -> PhaseError {
        PhaseError::Local {
            phase: self.phase.clone(),
            node: self.node.name.clone(),
            reason: self.secrets.redact(&e.to_string()),
            source: Some(self.cause(e)),
        }
    }

    /// A [`PhaseError::Local`] of step `what` caused by `e`: the reason is `what: <e's message>`, the
    /// source `e` with its causes (each redacted).
    pub fn local_error_in(
        &self,
        what: impl std::fmt::Display,
        e: &(dyn std::error::Error + 'static),
    ) -> PhaseError {
        PhaseError::Local {
            phase: self.phase.clone(),
            node: self.node.name.clone(),
            reason: self.secrets.redact(&format!("{what}: {e}")),
            source: Some(self.cause(e)),
        }
    }

    /// Runs a read-only command (as root). `Ok(None)` offline; a non-zero exit is returned, not an error.
    /// Errors: the transport failed.
    pub fn query(&mut self, cmd: Cmd) -> Result<Option<Output>, PhaseError> {
        self.query_labelled(cmd, None)
    }

    /// Like [`NodeCtx::query`]; offline, the plan shows `label` instead of the script.
    pub fn query_labelled(
        &mut self,
        cmd: Cmd,
        label: Option<&str>,
    ) -> Result<Option<Output>, PhaseError> {
        let cmd = self.with_secrets(cmd);
        let shown = cmd.redact(&cmd.script);
        let Some(t) = self.transport.clone().filter(|_| self.can_query()) else {
            self.record(PlanKind::Check, label.unwrap_or(&shown));
            return Ok(None);
        };
        self.reporter.query(&self.phase, &self.node.name, &shown);
        t.run(&cmd)
            .map(Some)
            .map_err(|e| self.transport_err(&shown, e))
    }

    /// Runs `script` read-only; `Some(true)` when it exits 0, `None` offline.
    pub fn test(&mut self, script: &str) -> Result<Option<bool>, PhaseError> {
        Ok(self.query(Cmd::new(script))?.map(|o| o.success()))
    }

    /// Runs `script` read-only and returns its trimmed stdout; `None` offline.
    /// Errors: non-zero exit ([`PhaseError::Command`]) or transport failure.
    pub fn read(&mut self, script: &str) -> Result<Option<String>, PhaseError> {
        self.read_labelled(script, None)
    }

    /// Like [`NodeCtx::read`]; offline, the plan shows `label` instead of the script.
    pub fn read_labelled(
        &mut self,
        script: &str,
        label: Option<&str>,
    ) -> Result<Option<String>, PhaseError> {
        let cmd = Cmd::new(script);
        match self.query_labelled(cmd.clone(), label)? {
            None => Ok(None),
            Some(o) if o.success() => Ok(Some(o.stdout_str())),
            Some(o) => Err(self.command_error(&cmd, &o)),
        }
    }

    /// Reads a file as root: `Ok(None)` offline, `Ok(Some(None))` when it does not exist.
    pub fn read_file(&mut self, path: &str) -> Result<Option<Option<Vec<u8>>>, PhaseError> {
        let p = quote_word(path);
        let cmd = Cmd::new(format!("if [ -e {p} ]; then cat {p}; else exit 3; fi"));
        match self.query_labelled(cmd.clone(), Some(&format!("read {path}")))? {
            None => Ok(None),
            Some(o) if o.success() => Ok(Some(Some(o.stdout))),
            Some(o) if o.status == 3 => Ok(Some(None)),
            Some(o) => Err(self.command_error(&cmd, &o)),
        }
    }

    /// Runs a command that changes the node (as root). In dry-run it is only recorded (`Ok(None)`).
    /// Errors: non-zero exit or transport failure, naming phase, node, command, status and output tail.
    pub fn run(&mut self, cmd: Cmd) -> Result<Option<Output>, PhaseError> {
        let cmd = self.with_secrets(cmd);
        let shown = cmd.redact(&cmd.script);
        self.change(Change::new(PlanKind::Run, &shown), |ctx| {
            ctx.perform_run(&cmd, &shown)
        })
    }

    /// Runs `cmd` (already given the secrets) on the node: the perform of [`NodeCtx::run`].
    fn perform_run(&mut self, cmd: &Cmd, shown: &str) -> Result<Output, PhaseError> {
        let t = self.connection(&format!("run `{shown}`"))?;
        let reporter = self.reporter.clone();
        let node = self.node.name.clone();
        let verbose = self.mode.verbose;
        let out = t
            .run_streaming(cmd, &mut |chunk| {
                if verbose {
                    reporter.output(&node, chunk)
                }
            })
            .map_err(|e| self.transport_err(shown, e))?;
        if !out.success() {
            return Err(self.command_error(cmd, &out));
        }
        // kubeadm only warns about a field of its configuration it cannot decode, and drops it: that is
        // a rendering the kubeadm on the node does not read as meant, so the phase fails naming it.
        if crate::kubeadm::runs_kubeadm(&cmd.script) {
            let mut both = String::from_utf8_lossy(&out.stderr).into_owned();
            both.push_str(&String::from_utf8_lossy(&out.stdout));
            let dropped = crate::kubeadm::dropped_fields(&both);
            if !dropped.is_empty() {
                return Err(self.check_error(
                    dropped
                        .into_iter()
                        .map(|f| {
                            format!(
                                "kubeadm ignored a field of the configuration clusterctl rendered (strict decoding): {f}; `{shown}` went on without it — the rendering does not fit this kubeadm (a clusterctl bug: please report it with the kubeadm version)"
                            )
                        })
                        .collect(),
                ));
            }
        }
        Ok(out)
    }

    /// Runs a mutating `script` (as root); see [`NodeCtx::run`].
    pub fn run_script(&mut self, script: &str) -> Result<Option<Output>, PhaseError> {
        self.run(Cmd::new(script))
    }

    /// The sha256 and octal mode of a file on the node: `Ok(None)` offline, `Ok(Some(None))` when absent.
    pub fn file_digest(&mut self, path: &str) -> Result<Option<Option<(String, u32)>>, PhaseError> {
        let p = quote_word(path);
        let script = format!(
            "if [ -f {p} ]; then echo \"$(sha256sum < {p} | cut -d' ' -f1) $(stat -c %a {p})\"; else echo absent; fi"
        );
        let label = format!("compare sha256 and mode of {path}");
        let Some(line) = self.read_labelled(&script, Some(&label))? else {
            return Ok(None);
        };
        let mut parts = line.split_whitespace();
        match (parts.next(), parts.next()) {
            (Some(sha), Some(mode)) if sha.len() == 64 => Ok(Some(Some((
                sha.to_string(),
                u32::from_str_radix(mode, 8).unwrap_or(0),
            )))),
            _ => Ok(Some(None)),
        }
    }

    /// Whether the node's file at `path` has sha256 `want` and `mode` already (false offline or when
    /// absent) — what [`NodeCtx::put_file`] and [`NodeCtx::put_local_file`] skip the write for.
    fn holds(&mut self, path: &str, want: &str, mode: u32) -> Result<bool, PhaseError> {
        Ok(matches!(self.file_digest(path)?, Some(Some((sha, m))) if sha == want && m == mode))
    }

    /// Places `data` at `path` with `mode` unless the node already has exactly that (sha256 and mode
    /// compared first). Returns whether it wrote (or, in dry-run, would write). The content is never
    /// shown; only path, size and mode.
    pub fn put_file(&mut self, path: &str, mode: u32, data: &[u8]) -> Result<bool, PhaseError> {
        let want = crate::util::sha256_hex(data);
        self.placed.push((path.to_string(), want.clone()));
        if self.holds(path, &want, mode)? {
            return Ok(false);
        }
        let what = format!("write {path} ({} bytes, mode {mode:04o})", data.len());
        let mut change = Change::new(PlanKind::Write, &what);
        if self.mode.dry_run && self.mode.diff && self.transport.is_some() {
            let current = self.read_file(path)?.flatten();
            let redact = |t: &str| self.secrets.redact(t);
            change.diff = Some(crate::diff::unified(
                path,
                current.as_deref(),
                data,
                &redact,
            ));
        }
        self.change(change, |ctx| {
            let t = ctx.connection(&what)?;
            let spec = FileSpec {
                path: PathBuf::from(path),
                mode,
                owner: None,
            };
            t.upload(data, &spec)
                .map_err(|e| ctx.transport_err(&what, e))
        })?;
        Ok(true)
    }

    /// Places a large local file (e.g. the clusterctl binary) at `path` with `mode`, streamed from the
    /// file with byte progress, unless the node's copy has the same sha256 and mode (the local sha256
    /// is computed once per run, [`crate::util::file_sha256`]). Returns whether it wrote.
    pub fn put_local_file(
        &mut self,
        local: &std::path::Path,
        path: &str,
        mode: u32,
    ) -> Result<bool, PhaseError> {
        let read_err = |ctx: &Self, e: std::io::Error| {
            ctx.local_error_in(format_args!("reading {}", local.display()), &e)
        };
        let want = crate::util::file_sha256(local).map_err(|e| read_err(self, e))?;
        if self.holds(path, &want, mode)? {
            return Ok(false);
        }
        let file = std::fs::File::open(local).map_err(|e| read_err(self, e))?;
        let total = file.metadata().map_err(|e| read_err(self, e))?.len();
        let what = format!(
            "write {path} ({total} bytes, mode {mode:04o}, from {})",
            local.display()
        );
        self.change(Change::new(PlanKind::Write, &what), |ctx| {
            let t = ctx.connection(&what)?;
            let spec = FileSpec {
                path: PathBuf::from(path),
                mode,
                owner: None,
            };
            let reporter = ctx.reporter.clone();
            let node = ctx.node.name.clone();
            let mut reader = std::io::BufReader::new(file);
            t.upload_stream(&mut reader, total, &spec, &mut |done| {
                reporter.upload_progress(&node, path, done, total)
            })
            .map_err(|e| ctx.transport_err(&what, e))
        })?;
        Ok(true)
    }

    /// A read-only Kubernetes API call made from this machine (shown with `-v` as `api: WHAT`).
    pub fn api_query(&self, what: &str) {
        self.reporter
            .query(&self.phase, &self.node.name, &format!("api: {what}"));
    }

    /// A change made through the Kubernetes API from this machine (`what`, e.g. `node w1: set labels
    /// disktype=ssd (merge patch)`): counted as a change, reported as `api: WHAT`, and in dry-run only
    /// recorded in the plan. `call` makes the change; its error (never holding a credential) becomes a
    /// [`PhaseError::Local`] naming the phase, the node and `what`, with the error as its source.
    pub fn api_change<E: Into<CallError>>(
        &mut self,
        what: &str,
        call: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), PhaseError> {
        self.api_change_as(Change::new(PlanKind::Api, what), call)
    }

    /// [`NodeCtx::api_change`] of a [`Change`] the caller built (e.g. [`Change::explained`]).
    pub fn api_change_as<E: Into<CallError>>(
        &mut self,
        change: Change,
        call: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), PhaseError> {
        let what = change.what.clone();
        self.change(change, |ctx| {
            call().map_err(|e| {
                let e: CallError = e.into();
                ctx.local_error_in(format_args!("Kubernetes API: {what}"), &*e)
            })
        })?;
        Ok(())
    }

    /// A change on this machine other than a file write (removing the local cache, a kubeconfig
    /// context, the Docker provider's node containers, saving an image archive): counted as a change,
    /// reported as `what`, and in dry-run only recorded in the plan. `call` makes the change; its error
    /// becomes a [`PhaseError::Local`] naming the phase and `what`, with the error as its source.
    pub fn local_change<E: Into<CallError>>(
        &mut self,
        what: &str,
        call: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), PhaseError> {
        self.change(Change::new(PlanKind::Local, what), |ctx| {
            call().map_err(|e| {
                let e: CallError = e.into();
                ctx.local_error_in(what, &*e)
            })
        })?;
        Ok(())
    }

    /// Writes a file on the local machine (mode `mode`, parents created) unless it already holds `data`.
    /// In dry-run only recorded. Returns whether it wrote.
    pub fn put_local(
        &mut self,
        path: &std::path::Path,
        mode: u32,
        data: &[u8],
    ) -> Result<bool, PhaseError> {
        if std::fs::read(path).ok().as_deref() == Some(data) {
            return Ok(false);
        }
        let what = format!(
            "write local {} ({} bytes, mode {mode:04o})",
            path.display(),
            data.len()
        );
        self.change(Change::new(PlanKind::Local, &what), |ctx| {
            crate::local::write_private(path, mode, data).map_err(|e| ctx.local_error_in(&what, &e))
        })?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Outcome;
    use clusterctl_spec::model::Role;

    /// Keeps every change line it is given.
    #[derive(Default)]
    struct Changes(Mutex<Vec<String>>);

    impl Reporter for Changes {
        fn phase_start(&self, _: &str, _: &str) {}
        fn phase_end(&self, _: &str, _: &str, _: &Outcome) {}
        fn change(&self, _: &str, _: &str, what: &str) {
            if let Ok(mut v) = self.0.lock() {
                v.push(what.to_string());
            }
        }
        fn query(&self, _: &str, _: &str, _: &str) {}
        fn output(&self, _: &str, _: &[u8]) {}
        fn upload_progress(&self, _: &str, _: &str, _: u64, _: u64) {}
        fn note(&self, _: &str) {}
    }

    fn ctx(dry_run: bool) -> (NodeCtx, Arc<Changes>) {
        let reporter = Arc::new(Changes::default());
        let secrets = Secrets::default();
        secrets.add("s3cr3t-token");
        let mode = Mode {
            dry_run,
            ..Mode::default()
        };
        let node = ValidNode::new("w1", Role::Worker, "192.0.2.3".parse().ok());
        let mut ctx = NodeCtx::new(node, None, mode, reporter.clone(), secrets);
        ctx.phase = "p".into();
        (ctx, reporter)
    }

    fn plan(ctx: &NodeCtx) -> Vec<(PlanKind, String)> {
        ctx.plan.iter().map(|e| (e.kind, e.text.clone())).collect()
    }

    #[test]
    fn a_dry_run_records_and_counts_the_change_and_performs_nothing() {
        let (mut ctx, reporter) = ctx(true);
        let change = Change::new(PlanKind::Run, "kubeadm join --token s3cr3t-token")
            .explained("join the cluster");
        let got = ctx.change(change, |_| -> Result<(), PhaseError> {
            panic!("a dry run performed a change")
        });
        assert_eq!(got.ok(), Some(None));
        assert_eq!(ctx.changes, 1);
        assert_eq!(
            plan(&ctx),
            vec![
                (PlanKind::Info, "join the cluster".to_string()),
                (PlanKind::Run, "kubeadm join --token <redacted>".to_string())
            ]
        );
        assert!(reporter.0.lock().map(|v| v.is_empty()).unwrap_or(false));
    }

    #[test]
    fn a_run_reports_the_change_redacted_then_performs_it() {
        let (mut ctx, reporter) = ctx(false);
        let got = ctx.change(
            Change::new(PlanKind::Api, "patch node w1 with s3cr3t-token"),
            |ctx| Ok(ctx.changes),
        );
        assert_eq!(got.ok(), Some(Some(1)), "counted before it is performed");
        assert!(ctx.plan.is_empty());
        let lines = reporter.0.lock().map(|v| v.clone()).unwrap_or_default();
        assert_eq!(
            lines,
            vec!["api: patch node w1 with <redacted>".to_string()]
        );
    }

    #[test]
    fn counting_and_reporting_follow_the_change() {
        let (mut dry, _) = ctx(true);
        let (mut real, reporter) = ctx(false);
        for ctx in [&mut dry, &mut real] {
            let push = Change::new(PlanKind::Local, "push 3 image(s)").reports_itself();
            ctx.change(push, |ctx| {
                ctx.changes += 2;
                Ok(())
            })
            .ok();
            let upload = Change::new(PlanKind::Info, "upload to /opt/b")
                .reported_as("upload")
                .uncounted();
            ctx.change(upload, |_| Ok(())).ok();
            let err = ctx.change(Change::new(PlanKind::Write, "write /etc/x"), |ctx| {
                ctx.connection("write /etc/x").map(|_| ())
            });
            assert_eq!(err.is_err(), !ctx.mode.dry_run, "no connection in a run");
        }
        assert_eq!(
            dry.changes, 2,
            "the push counts one when planned; the upload none"
        );
        assert_eq!(
            real.changes, 3,
            "the push counts what it pushed; the write one"
        );
        let lines = reporter.0.lock().map(|v| v.clone()).unwrap_or_default();
        assert_eq!(
            lines,
            vec!["upload".to_string(), "write /etc/x".to_string()]
        );
        assert!(real.unreachable() && !dry.unreachable());
    }
}
