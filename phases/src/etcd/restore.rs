//! `clusterctl etcd snapshot restore`: kubeadm's documented restore of a stacked etcd, on every control
//! plane. Before any node is contacted the snapshot's integrity is checked here
//! ([`super::check_snapshot`]); a damaged file is refused. Then, phase by phase over every control
//! plane (each phase done on all of them before the next starts; the first failure stops the run):
//! 1. `members`: each member's name, peer URL, data directory and image from its etcd manifest
//!    (`--initial-cluster` is made of all of them);
//! 2. `stage`: the snapshot placed in `<data-dir>/clusterctl-restore/<id>/snapshot.db` (0600, `<id>`
//!    the first 12 hex digits of its sha256), checked again there with `etcdutl snapshot status`, and
//!    `etcdutl snapshot restore` into `…/<id>/new` with the member's name, peer URL, the full member
//!    list and `--bump-revision 1000000000 --mark-compacted` (so watchers never see revisions go back)
//!    — all while the cluster still runs: a failure here leaves it untouched;
//! 3. `stop`: every static pod manifest moved to [`MANIFESTS_ASIDE`]; waits until the control plane's
//!    containers are gone;
//! 4. `data-dir`: the member's `member/` directory moved to `…/<id>/old-member` (kept, never deleted)
//!    and the restored one moved in;
//! 5. `start-etcd`, `etcd-healthy`: etcd's manifest moved back; waits for every member's health;
//! 6. `start`, `healthy`: the other manifests moved back; waits for each node's API server
//!    (`kubectl get --raw=/readyz` with admin.conf) and a member list naming every control plane;
//! 7. `nodes-ready` (first control plane): every Node Ready; `done`: `…/<id>/done` written.
//!
//! Every step checks first, so running the same command again after an interruption resumes: a
//! staged or swapped node is not staged or swapped again, stopped control planes are started, and a
//! restore of this snapshot that finished (`done` on every control plane) changes nothing.
//! [`run`] is the entry point; the step bodies are in [`steps`].

mod steps;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clusterctl_spec::{ValidCluster, ValidNode};

use super::{check_snapshot, Corrupt, Member};
use crate::ctx::{Mode, PlanEntry, Secrets};
use crate::engine::{Engine, Options as EngineOptions, Phase, Targets};
use crate::error::RunError;
use crate::report::Reporter;

/// Where the static pod manifests wait while etcd is restored (outside the kubelet's manifest dir).
pub const MANIFESTS_ASIDE: &str = "/etc/kubernetes/clusterctl-restore-manifests";

/// How `etcd snapshot restore` runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The snapshot file (from `etcd snapshot save` or `etcdctl snapshot save`).
    pub snapshot: PathBuf,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// How long each wait (containers stopped, etcd healthy, API ready, Nodes Ready) may take.
    pub timeout: Duration,
    /// Report every check and the output of every command.
    pub verbose: bool,
    /// Change nothing: contact no node, plan the steps.
    pub dry_run: bool,
}

/// What the restore did, or planned.
#[derive(Debug)]
pub struct Report {
    /// The snapshot's sha256.
    pub sha256: String,
    /// The working directory's name on each node (`<data-dir>/clusterctl-restore/<id>`).
    pub id: String,
    /// The members restored (name, peer URL), in file order; assumed from the file in a dry run.
    pub members: Vec<(String, String)>,
    /// The control planes, in file order.
    pub nodes: Vec<ValidNode>,
    /// Every check, command and write, in order (the dry run's plan).
    pub plan: Vec<PlanEntry>,
    /// Changes made or planned.
    pub changes: usize,
    /// The failure that stopped the restore, with how to resume.
    pub stopped: Option<(RunError, String)>,
}

/// Why the restore did not start (nothing was changed).
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The snapshot cannot be read.
    #[error("cannot read the snapshot {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The snapshot fails its integrity check.
    #[error("refusing the snapshot {}: {source}; nothing was changed", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: Corrupt,
    },
    /// A control plane cannot be reached: the restore needs every one.
    #[error("every control plane takes part in a restore, and these cannot be reached: {}; nothing was changed", .0.iter().map(|(n, w)| format!("{n}: {w}")).collect::<Vec<_>>().join("; "))]
    Unreachable(BTreeMap<String, String>),
}

impl RestoreError {
    /// True when the input itself is refused (exit 2): a damaged or unreadable snapshot.
    pub fn refused(&self) -> bool {
        matches!(
            self,
            RestoreError::Corrupt { .. } | RestoreError::Read { .. }
        )
    }
}

/// What every phase shares.
pub(crate) struct Data {
    snapshot: Vec<u8>,
    id: String,
    timeout: Duration,
    /// Each control plane's member (from its manifest, or assumed offline) and whether the restore of
    /// this snapshot is done there.
    members: Mutex<BTreeMap<String, (Member, bool)>>,
    /// The control planes in file order.
    order: Vec<ValidNode>,
}

impl Data {
    fn member(&self, node: &str) -> Option<(Member, bool)> {
        self.members.lock().ok()?.get(node).cloned()
    }
    /// Every member in file order.
    fn all(&self) -> Vec<Member> {
        let m = self.members.lock().map(|m| m.clone()).unwrap_or_default();
        self.order
            .iter()
            .filter_map(|n| m.get(&n.name).map(|(m, _)| m.clone()))
            .collect()
    }
}

/// The phases in order (see the module doc).
pub(crate) fn phases() -> Vec<Phase<Data>> {
    use Targets::{ControlPlanes as All, FirstControlPlane as First};
    vec![
        Phase::step("etcd-restore/members", All, steps::members),
        Phase::step("etcd-restore/stage", All, steps::stage),
        Phase::step("etcd-restore/stop", All, steps::stop),
        Phase::step("etcd-restore/data-dir", All, steps::data_dir),
        Phase::step("etcd-restore/start-etcd", All, steps::start_etcd),
        Phase::step("etcd-restore/etcd-healthy", All, steps::etcd_healthy),
        Phase::step("etcd-restore/start", All, steps::start),
        Phase::step("etcd-restore/healthy", All, steps::healthy),
        Phase::step("etcd-restore/nodes-ready", First, steps::nodes_ready),
        Phase::step("etcd-restore/done", All, steps::done),
    ]
}

/// Restores `opts.snapshot` on every control plane of `cluster` (see the module doc), progress to
/// `reporter`. Errors ([`RestoreError`], nothing changed): the snapshot is unreadable or damaged, or
/// a control plane cannot be reached; a failed phase is [`Report::stopped`].
pub fn run(
    cluster: &ValidCluster,
    opts: &Options,
    reporter: Arc<dyn Reporter>,
) -> Result<Report, RestoreError> {
    let path = &opts.snapshot;
    let snapshot = std::fs::read(path).map_err(|source| RestoreError::Read {
        path: path.clone(),
        source,
    })?;
    check_snapshot(&snapshot).map_err(|source| RestoreError::Corrupt {
        path: path.clone(),
        source,
    })?;
    let sha256 = crate::util::sha256_hex(&snapshot);
    let order: Vec<ValidNode> = cluster
        .nodes()
        .iter()
        .filter(|n| n.is_control_plane())
        .cloned()
        .collect();
    let cps: Vec<&ValidNode> = order.iter().collect();
    let (transports, unreachable) = crate::steps::reach_unless_dry_run(
        cluster,
        &cps,
        opts.known_hosts.as_deref(),
        opts.dry_run,
    );
    if !unreachable.is_empty() {
        return Err(RestoreError::Unreachable(unreachable));
    }
    let data = Data {
        snapshot,
        id: sha256[..12].to_string(),
        timeout: opts.timeout,
        members: Mutex::new(BTreeMap::new()),
        order: order.clone(),
    };
    reporter.note(&format!(
        "etcd restore: {} (sha256 {sha256}) on {}: staged while the cluster runs, then every control plane stopped, restored and started",
        path.display(),
        order.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
    ));
    let engine = Engine::new(
        order.clone(),
        transports,
        EngineOptions {
            cluster: cluster.name().to_string(),
            mode: Mode {
                dry_run: opts.dry_run,
                verbose: opts.verbose,
                ..Mode::default()
            },
            parallel: 16,
            skip: Vec::new(),
            only: Vec::new(),
            cache: None,
        },
        reporter,
        Secrets::default(),
    );
    let (summary, result) = engine.run(&phases(), &data);
    let stopped = result.err().map(|e| (e, resume_hint(path)));
    Ok(Report {
        sha256,
        id: data.id.clone(),
        members: data
            .all()
            .into_iter()
            .map(|m| (m.name, m.peer_url))
            .collect(),
        nodes: order,
        changes: summary.total_changes(),
        plan: summary.plan,
        stopped,
    })
}

/// How to go on after a failed phase.
fn resume_hint(snapshot: &std::path::Path) -> String {
    format!(
        "Fix the cause and run `clusterctl etcd snapshot restore` with {} again: every step checks \
         what is done first, so it resumes (control planes still stopped have their manifests in \
         {MANIFESTS_ASIDE}; each member's previous data is kept in \
         <data-dir>/clusterctl-restore/<id>/old-member).",
        snapshot.display()
    )
}
