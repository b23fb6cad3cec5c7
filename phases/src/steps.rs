//! The report of the best-effort commands (`destroy`, `node remove`, `image load`): one line per step
//! and node (`NODE: STEP: what was done` or `NODE: STEP: FAILED: why`), collected while their phases
//! run and handed to the caller's sink as each step ends, so that the command prints it live. A failed
//! step does not stop the others: the phases record it here and go on. [`StepRun`] is their shared
//! run loop (the engine with no reporter, no resume state, nodes reached only outside a dry run) and
//! [`RunReport`] what each of them returns.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use clusterctl_exec::Transport;
use clusterctl_spec::{ValidCluster, ValidNode};

use crate::ctx::{Mode, PlanEntry, Secrets};
use crate::engine::{Engine, Phase};
use crate::error::{PhaseError, RunError};
use crate::report::QuietReporter;

/// How one step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    /// Done: what was done (or `planned (dry run)`).
    Done(String),
    /// Failed: why.
    Failed(String),
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepLine {
    /// The node, or what else the step concerns (`docker`, `kubeconfig`, `cache`).
    pub subject: String,
    /// The step (`kubeadm reset`, `files`…); `None` for a line about the subject as a whole.
    pub step: Option<String>,
    /// How it ended.
    pub outcome: StepOutcome,
}

impl StepLine {
    /// A line about `subject` (no step).
    pub fn new(subject: &str, outcome: StepOutcome) -> Self {
        StepLine {
            subject: subject.to_string(),
            step: None,
            outcome,
        }
    }
    /// The line of step `step` of `subject` that ended with `r` (an error shown by [`reason`]).
    pub fn of(subject: &str, step: &str, r: Result<String, PhaseError>) -> Self {
        StepLine {
            subject: subject.to_string(),
            step: Some(step.to_string()),
            outcome: match r {
                Ok(done) => StepOutcome::Done(done),
                Err(e) => StepOutcome::Failed(reason(&e)),
            },
        }
    }
    /// True when the step failed.
    pub fn failed(&self) -> bool {
        matches!(self.outcome, StepOutcome::Failed(_))
    }
}

impl std::fmt::Display for StepLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: ", self.subject)?;
        if let Some(s) = &self.step {
            write!(f, "{s}: ")?;
        }
        match &self.outcome {
            StepOutcome::Done(t) => write!(f, "{t}"),
            StepOutcome::Failed(t) => write!(f, "FAILED: {t}"),
        }
    }
}

/// A failed step's reason, short: a command's exit status and output tail (not the whole script,
/// which the dry-run plan shows), a transport's or a local step's message, a check's problems.
pub fn reason(e: &PhaseError) -> String {
    match e {
        PhaseError::Command {
            status,
            output_tail,
            ..
        } => format!("exit {status}: {}", output_tail.trim()),
        PhaseError::Transport { reason, .. } | PhaseError::Local { reason, .. } => reason.clone(),
        PhaseError::Check { problems, .. } => problems.join("; "),
    }
}

/// What a step's command printed, or `planned (dry run)` when it was only recorded.
pub fn printed(out: Option<clusterctl_exec::Output>) -> String {
    out.map_or_else(|| "planned (dry run)".to_string(), |o| o.stdout_str())
}

/// Where report lines go as they are made.
pub type Sink<'a> = &'a (dyn Fn(&StepLine) + Sync);

/// The lines of one run, shared by its phases.
pub struct Steps<'a> {
    lines: Mutex<Vec<StepLine>>,
    sink: Sink<'a>,
}

impl<'a> Steps<'a> {
    /// An empty report passing each line to `sink`.
    pub fn new(sink: Sink<'a>) -> Self {
        Steps {
            lines: Mutex::new(Vec::new()),
            sink,
        }
    }
    /// Adds `line` (and passes it to the sink).
    pub fn push(&self, line: StepLine) {
        (self.sink)(&line);
        if let Ok(mut l) = self.lines.lock() {
            l.push(line);
        }
    }
    /// Every line so far.
    pub fn lines(&self) -> Vec<StepLine> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// What a best-effort run (`destroy`, `node remove`, `image load`) did, or in a dry run would do.
#[derive(Debug, Default)]
pub struct RunReport {
    /// Every step's line, in the order they ended (each also passed to the sink as it ended).
    pub lines: Vec<StepLine>,
    /// Why the run stopped before its steps could do their work (e.g. a drain failed, an archive
    /// could not be made), with what to do; `None` when it ran through.
    pub stopped: Option<String>,
    /// The nodes the run is about, in file order (for grouping the plan).
    pub nodes: Vec<ValidNode>,
    /// The dry-run plan (every check, command, API and local change, per node and `local`).
    pub plan: Vec<PlanEntry>,
    /// Changes made or planned.
    pub changes: usize,
}

impl RunReport {
    /// The number of failed steps.
    pub fn failures(&self) -> usize {
        self.lines.iter().filter(|l| l.failed()).count()
    }
}

/// The transports to `on` and, as text, why the others could not be reached
/// ([`crate::reach::reach`]); nothing is contacted in a dry run.
pub fn reach_unless_dry_run(
    cluster: &ValidCluster,
    on: &[&ValidNode],
    known_hosts: Option<&Path>,
    dry_run: bool,
) -> (
    BTreeMap<String, Arc<dyn Transport>>,
    BTreeMap<String, String>,
) {
    // Not a change: a dry run of these commands plans offline (no node, no API is contacted).
    if dry_run {
        return Default::default();
    }
    let reached = crate::reach::reach(cluster, on, known_hosts);
    let unreachable = reached
        .errors
        .into_iter()
        .map(|(n, e)| (n, e.to_string()))
        .collect();
    (reached.transports, unreachable)
}

/// One run of a best-effort command's phases.
pub struct StepRun {
    /// The cluster's name.
    pub cluster: String,
    /// The nodes the phases target, in file order.
    pub nodes: Vec<ValidNode>,
    /// Transports to the reachable nodes (none in a dry run).
    pub transports: BTreeMap<String, Arc<dyn Transport>>,
    /// Record every change instead of making it.
    pub dry_run: bool,
    /// Nodes worked on at once.
    pub parallel: usize,
}

impl StepRun {
    /// Runs `phases` with `data` through the engine: no progress reporter, no resume state, no
    /// secrets. Returns the report with its plan and changes (the caller adds the lines its
    /// [`Steps`] collected, and `stopped`) and the engine's result.
    pub fn run<C: Sync>(self, phases: &[Phase<C>], data: &C) -> (RunReport, Result<(), RunError>) {
        let opts = crate::engine::Options {
            cluster: self.cluster,
            mode: Mode {
                dry_run: self.dry_run,
                ..Mode::default()
            },
            parallel: self.parallel.max(1),
            skip: Vec::new(),
            only: Vec::new(),
            cache: None,
        };
        let engine = Engine::new(
            self.nodes.clone(),
            self.transports,
            opts,
            Arc::new(QuietReporter),
            Secrets::default(),
        );
        let (summary, result) = engine.run(phases, data);
        let report = RunReport {
            lines: Vec::new(),
            stopped: None,
            nodes: self.nodes,
            changes: summary.total_changes(),
            plan: summary.plan,
        };
        (report, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_the_commands_print_them() {
        let done = StepLine::of("w1", "files", Ok("3 path(s) removed".into()));
        assert_eq!(done.to_string(), "w1: files: 3 path(s) removed");
        let failed = StepLine::of(
            "w1",
            "units",
            Err(PhaseError::Command {
                phase: "reset".into(),
                node: "w1".into(),
                command: "long script".into(),
                status: 2,
                output_tail: "no such unit\n".into(),
            }),
        );
        assert_eq!(
            failed.to_string(),
            "w1: units: FAILED: exit 2: no such unit"
        );
        assert!(failed.failed() && !done.failed());
        let whole = StepLine::new("docker", StepOutcome::Done("network n removed".into()));
        assert_eq!(whole.to_string(), "docker: network n removed");
    }
}
