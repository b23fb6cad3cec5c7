//! The phase engine: runs an ordered list of phases over the nodes they target, with bounded per-node
//! parallelism (one thread per node in flight; transports are blocking), serial phases (control-plane
//! joins) one node at a time, `--skip-phases`/`--only` selection by path prefix, the state record that
//! lets a second run skip what is done and a killed run resume, and a barrier between phases: a phase
//! starts only when the previous one succeeded on every node it targets. A dry run is the exception: it
//! plans every phase, marking where a probe found a failure ([`crate::PlanKind::Failed`]), and reports
//! every failure at the end.

use crate::ctx::{Mode, NodeCtx, PlanEntry, Secrets};
use crate::error::{PhaseError, RunError};
use crate::report::{Outcome, Reporter};
use crate::state::{LocalCache, NodeState, PhaseRecord, STATE_PATH};
use clusterctl_exec::{FileSpec, Transport};
use clusterctl_spec::model::Role;
use clusterctl_spec::ValidNode;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Which nodes a phase runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Targets {
    /// Every node.
    All,
    /// Every control-plane node.
    ControlPlanes,
    /// The first control-plane node in the file (where `kubeadm init` runs).
    FirstControlPlane,
    /// Control-plane nodes other than the first.
    OtherControlPlanes,
    /// Worker nodes.
    Workers,
    /// Once, on the machine running clusterctl (node name `local`, no transport).
    Local,
}

impl Targets {
    /// The nodes of `nodes` this selects, in file order.
    pub fn select(self, nodes: &[ValidNode]) -> Vec<&ValidNode> {
        let first_cp = nodes.iter().position(|n| n.role == Role::ControlPlane);
        nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| match self {
                Targets::All => true,
                Targets::ControlPlanes => n.is_control_plane(),
                Targets::FirstControlPlane => Some(*i) == first_cp,
                Targets::OtherControlPlanes => n.is_control_plane() && Some(*i) != first_cp,
                Targets::Workers => n.role == Role::Worker,
                Targets::Local => false,
            })
            .map(|(_, n)| n)
            .collect()
    }
}

/// A phase's body: acts on one node through its context, reading the run's shared data `C`.
pub type PhaseFn<C> = fn(&mut NodeCtx, &C) -> Result<(), PhaseError>;
/// A phase's input digest material for one node: when it differs from the recorded one, the phase reruns.
pub type InputsFn<C> = fn(&C, &ValidNode) -> String;

/// One phase.
pub struct Phase<C> {
    /// Path-like name, e.g. `runtime/containerd` (what `--skip-phases` and `--only` match).
    pub name: &'static str,
    /// The nodes it runs on.
    pub targets: Targets,
    /// Run on one node at a time (control-plane joins), else in parallel up to the limit.
    pub serial: bool,
    /// Record completion in the state record (and skip when recorded with the same inputs). Phases
    /// that only read or always re-check (facts, preflight, wait) are not recorded.
    pub record: bool,
    /// Cannot be excluded by `--skip-phases`/`--only` (facts and rendering, which later phases need).
    pub required: bool,
    /// Input digest material.
    pub inputs: InputsFn<C>,
    /// The body.
    pub run: PhaseFn<C>,
}

// Copied without `C: Clone`: a phase is a name, flags and two function pointers (declared tables
// such as `up`'s hand out copies).
impl<C> Clone for Phase<C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for Phase<C> {}

impl<C> Phase<C> {
    /// A step run on every pass (not recorded, no inputs, excludable), on its targets in parallel:
    /// the phases of `image load` and `etcd snapshot restore`.
    pub(crate) fn step(name: &'static str, targets: Targets, run: PhaseFn<C>) -> Self {
        Phase {
            name,
            targets,
            serial: false,
            record: false,
            required: false,
            inputs: |_, _| String::new(),
            run,
        }
    }

    /// A [`Phase::step`] run on one node at a time: the phases of `destroy` and `node remove`.
    pub(crate) fn serial_step(name: &'static str, targets: Targets, run: PhaseFn<C>) -> Self {
        Phase {
            serial: true,
            ..Phase::step(name, targets, run)
        }
    }
}

/// Options of one engine run.
#[derive(Clone)]
pub struct Options {
    /// Cluster name (`metadata.name`): keys the state record and the cache.
    pub cluster: String,
    /// Dry-run, probe, fix and verbose.
    pub mode: Mode,
    /// At most this many nodes worked on at once (at least 1).
    pub parallel: usize,
    /// Phase paths (or prefixes such as `join`) not to run.
    pub skip: Vec<String>,
    /// When not empty: only these phase paths (or prefixes) run.
    pub only: Vec<String>,
    /// The local cache of state records; `None`: no cache.
    pub cache: Option<LocalCache>,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Summary {
    /// The dry-run plan (every step recorded, in order per node).
    pub plan: Vec<PlanEntry>,
    /// (phase, node, outcome) in the order they ended.
    pub outcomes: Vec<(String, String, Outcome)>,
    /// Total changes made (or planned) per node.
    pub changes: BTreeMap<String, usize>,
}

impl Summary {
    /// Total changes over all nodes.
    pub fn total_changes(&self) -> usize {
        self.changes.values().sum()
    }
}

fn matches(phase: &str, pattern: &str) -> bool {
    let p = pattern.trim_matches('/');
    phase == p || phase.starts_with(&format!("{p}/"))
}

/// A `--skip-phases`/`--only` pattern that names no phase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown phase `{pattern}`; phases are: {}", phases.join(", "))]
pub struct UnknownPhase {
    /// The pattern as given.
    pub pattern: String,
    /// The valid phase names, in order.
    pub phases: Vec<&'static str>,
}

/// Checks `--skip-phases`/`--only` patterns against the phase names. Errors: the first pattern that
/// names no phase (with the list of valid names).
pub fn check_selection<C>(phases: &[Phase<C>], patterns: &[String]) -> Result<(), UnknownPhase> {
    match patterns
        .iter()
        .find(|p| !phases.iter().any(|ph| matches(ph.name, p)))
    {
        Some(p) => Err(UnknownPhase {
            pattern: p.clone(),
            phases: phases.iter().map(|p| p.name).collect(),
        }),
        None => Ok(()),
    }
}

/// True when `phase` runs under the `--skip-phases`/`--only` selection of `opts`.
pub fn selected<C>(phase: &Phase<C>, opts: &Options) -> bool {
    if phase.required {
        return true;
    }
    if opts.skip.iter().any(|p| matches(phase.name, p)) {
        return false;
    }
    opts.only.is_empty() || opts.only.iter().any(|p| matches(phase.name, p))
}

/// The engine: nodes, their transports and contexts.
pub struct Engine {
    nodes: Vec<ValidNode>,
    ctxs: Vec<Mutex<NodeCtx>>,
    states: Vec<Mutex<NodeState>>,
    local: Mutex<NodeCtx>,
    reporter: Arc<dyn Reporter>,
    opts: Options,
}

impl Engine {
    /// An engine over `nodes`; `transports` maps node names to their transport (missing entries mean
    /// offline: only a dry-run can proceed). The shared `secrets` list redacts everything shown or stored.
    pub fn new(
        nodes: Vec<ValidNode>,
        mut transports: BTreeMap<String, Arc<dyn Transport>>,
        opts: Options,
        reporter: Arc<dyn Reporter>,
        secrets: Secrets,
    ) -> Self {
        let ctxs = nodes
            .iter()
            .map(|n| {
                let t = transports.remove(&n.name);
                Mutex::new(NodeCtx::new(
                    n.clone(),
                    t,
                    opts.mode,
                    reporter.clone(),
                    secrets.clone(),
                ))
            })
            .collect();
        let states = nodes
            .iter()
            .map(|n| Mutex::new(NodeState::new(&opts.cluster, &n.name)))
            .collect();
        let local_node = ValidNode::new("local", Role::Worker, None);
        let local = Mutex::new(NodeCtx::new(
            local_node,
            None,
            opts.mode,
            reporter.clone(),
            secrets,
        ));
        Engine {
            nodes,
            ctxs,
            states,
            local,
            reporter,
            opts: Options {
                parallel: opts.parallel.max(1),
                ..opts
            },
        }
    }

    /// The nodes, in file order.
    pub fn nodes(&self) -> &[ValidNode] {
        &self.nodes
    }

    /// The state record of `node` as currently known.
    pub fn state(&self, node: &str) -> Option<NodeState> {
        let i = self.nodes.iter().position(|n| n.name == node)?;
        self.states[i].lock().ok().map(|s| s.clone())
    }

    /// Loads every node's state record — `parallel` nodes at a time, one read each —: from the node
    /// when it can be queried, else from the local cache. Returns the nodes' read errors, in node
    /// order.
    fn load_states(&self) -> Vec<PhaseError> {
        let all: Vec<usize> = (0..self.nodes.len()).collect();
        crate::util::in_parallel(&all, self.opts.parallel, |&i| self.load_state(i))
            .into_iter()
            .flatten()
            .collect()
    }

    /// Loads node `i`'s state record (see [`Self::load_states`]); its read error, if any.
    fn load_state(&self, i: usize) -> Option<PhaseError> {
        let n = &self.nodes[i];
        let Ok(mut ctx) = self.ctxs[i].lock() else {
            return None;
        };
        ctx.phase = "state".into();
        let remote = match ctx.read_file(STATE_PATH) {
            Ok(r) => r,
            Err(e) => return Some(e),
        };
        ctx.plan.clear();
        let from_node = remote
            .flatten()
            .and_then(|b| NodeState::parse(&b, &self.opts.cluster, &n.name));
        let loaded = from_node.or_else(|| {
            self.opts
                .cache
                .as_ref()
                .and_then(|c| c.load(&self.opts.cluster, &n.name))
        });
        if let (Some(s), Ok(mut slot)) = (loaded, self.states[i].lock()) {
            *slot = s;
        }
        None
    }

    /// Writes the node's state record (the engine's bookkeeping, not a phase's change; only a run
    /// that changes things records: `run_on_inner`).
    fn save_state(&self, ctx: &NodeCtx, state: &NodeState) -> Result<(), PhaseError> {
        if let Some(t) = ctx.transport() {
            let spec = FileSpec {
                path: STATE_PATH.into(),
                mode: 0o600,
                owner: None,
            };
            t.upload(&state.to_json(), &spec)
                .map_err(|e| ctx.local_error_in("saving the state record", &e))?;
        }
        if let Some(c) = &self.opts.cache {
            if let Err(e) = c.store(state) {
                self.reporter.note(&format!(
                    "warning: cannot write the local cache {}: {e}",
                    c.dir().display()
                ));
            }
        }
        Ok(())
    }

    /// Runs one phase on one node (index `i`) and reports how it ended as soon as it did.
    fn run_on<C>(&self, phase: &Phase<C>, i: usize, data: &C) -> Result<Outcome, PhaseError> {
        let r = self.run_on_inner(phase, i, data);
        if let (Err(e), true) = (&r, self.opts.mode.dry_run) {
            // The plan marks where a probe found a failure, in place, and goes on.
            if let Ok(mut ctx) = self.ctxs[i].lock() {
                ctx.plan.push(PlanEntry {
                    node: self.nodes[i].name.clone(),
                    phase: phase.name.to_string(),
                    kind: crate::ctx::PlanKind::Failed,
                    text: e.to_string(),
                    diff: None,
                });
            }
        }
        let shown = match &r {
            Ok(o) => o.clone(),
            Err(_) => Outcome::Failed,
        };
        self.reporter
            .phase_end(phase.name, &self.nodes[i].name, &shown);
        r
    }

    fn run_on_inner<C>(&self, phase: &Phase<C>, i: usize, data: &C) -> Result<Outcome, PhaseError> {
        let node = &self.nodes[i];
        let inputs = crate::util::sha256_hex((phase.inputs)(data, node).as_bytes());
        let Ok(mut ctx) = self.ctxs[i].lock() else {
            return Err(PhaseError::Local {
                phase: phase.name.into(),
                node: node.name.clone(),
                reason: "internal lock poisoned".into(),
                source: None,
            });
        };
        ctx.phase = phase.name.to_string();
        ctx.changes = 0;
        ctx.placed.clear();
        let (recorded, ran_before) = self.states[i]
            .lock()
            .map(|s| {
                (
                    phase.record && s.is_done(phase.name, &inputs),
                    s.phases.contains_key(phase.name),
                )
            })
            .unwrap_or((false, false));
        ctx.ran_before = ran_before;
        if recorded {
            ctx.info("already done (state record)");
            return Ok(Outcome::Skipped("done, recorded".into()));
        }
        self.reporter.phase_start(phase.name, &node.name);
        (phase.run)(&mut ctx, data)?;
        let changes = ctx.changes;
        if changes == 0 && ctx.can_query() {
            ctx.info("already done, nothing to change");
        }
        // Not a change: the state record is bookkeeping, and a dry run did nothing to record.
        if phase.record && !self.opts.mode.dry_run {
            let snapshot = {
                let Ok(mut st) = self.states[i].lock() else {
                    return Ok(Outcome::Done { changes });
                };
                st.phases.insert(
                    phase.name.into(),
                    PhaseRecord {
                        inputs,
                        at: crate::util::now_secs(),
                    },
                );
                st.files.extend(ctx.placed.drain(..));
                st.clone()
            };
            self.save_state(&ctx, &snapshot)?;
        }
        Ok(Outcome::Done { changes })
    }

    /// Runs `phases` in order over the nodes. Returns the summary and, when a phase failed on some
    /// nodes, every node's error for that phase (later phases do not start). In a dry run every phase
    /// is planned: failures are marked in the plan and all of them returned.
    pub fn run<C: Sync>(&self, phases: &[Phase<C>], data: &C) -> (Summary, Result<(), RunError>) {
        let mut summary = Summary::default();
        let errors = self.load_states();
        if !errors.is_empty() {
            return (self.finish(summary), Err(RunError(errors)));
        }
        let mut dry_failures = Vec::new();
        for phase in phases {
            if !selected(phase, &self.opts) {
                self.reporter.note(&format!(
                    "phase {} not selected (--skip-phases/--only)",
                    phase.name
                ));
                continue;
            }
            let results = if phase.targets == Targets::Local {
                vec![self.run_local(phase, data)]
            } else {
                let idx: Vec<usize> = phase
                    .targets
                    .select(&self.nodes)
                    .iter()
                    .filter_map(|n| self.nodes.iter().position(|m| m.name == n.name))
                    .collect();
                self.run_many(phase, &idx, data)
            };
            let mut failed = Vec::new();
            for (node, r) in results {
                let outcome = match r {
                    Ok(o) => o,
                    Err(e) => {
                        failed.push(e);
                        Outcome::Failed
                    }
                };
                if let Outcome::Done { changes } = outcome {
                    *summary.changes.entry(node.clone()).or_default() += changes;
                }
                summary
                    .outcomes
                    .push((phase.name.to_string(), node, outcome));
            }
            if !failed.is_empty() {
                if !self.opts.mode.dry_run {
                    return (self.finish(summary), Err(RunError(failed)));
                }
                // A dry run shows every phase: the failures are marked in the plan and all
                // reported at the end.
                dry_failures.append(&mut failed);
            }
        }
        let summary = self.finish(summary);
        if dry_failures.is_empty() {
            (summary, Ok(()))
        } else {
            (summary, Err(RunError(dry_failures)))
        }
    }

    fn run_local<C>(&self, phase: &Phase<C>, data: &C) -> (String, Result<Outcome, PhaseError>) {
        let Ok(mut ctx) = self.local.lock() else {
            return (
                "local".into(),
                Err(PhaseError::Local {
                    phase: phase.name.into(),
                    node: "local".into(),
                    reason: "internal lock poisoned".into(),
                    source: None,
                }),
            );
        };
        ctx.phase = phase.name.to_string();
        ctx.changes = 0;
        self.reporter.phase_start(phase.name, "local");
        let r = (phase.run)(&mut ctx, data).map(|_| Outcome::Done {
            changes: ctx.changes,
        });
        let shown = match &r {
            Ok(o) => o.clone(),
            Err(_) => Outcome::Failed,
        };
        self.reporter.phase_end(phase.name, "local", &shown);
        ("local".into(), r)
    }

    fn run_many<C: Sync>(
        &self,
        phase: &Phase<C>,
        idx: &[usize],
        data: &C,
    ) -> Vec<(String, Result<Outcome, PhaseError>)> {
        if phase.serial || idx.len() <= 1 || self.opts.parallel == 1 {
            let mut out = Vec::new();
            for &i in idx {
                let r = self.run_on(phase, i, data);
                // Not a change: a dry run plans every node, past a failure too.
                let stop = r.is_err() && phase.serial && !self.opts.mode.dry_run;
                out.push((self.nodes[i].name.clone(), r));
                if stop {
                    break;
                }
            }
            return out;
        }
        crate::util::in_parallel(idx, self.opts.parallel, |&i| {
            (self.nodes[i].name.clone(), self.run_on(phase, i, data))
        })
    }

    fn finish(&self, mut summary: Summary) -> Summary {
        let mut plan = Vec::new();
        if let Ok(mut l) = self.local.lock() {
            plan.append(&mut l.plan);
        }
        for c in &self.ctxs {
            if let Ok(mut c) = c.lock() {
                plan.append(&mut c.plan);
            }
        }
        summary.plan = plan;
        summary
    }
}
