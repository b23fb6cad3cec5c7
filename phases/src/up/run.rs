//! `up`'s one entry point, [`run`]: the phase selection checked (`--skip-phases`, `--only`) before
//! anything is contacted, `--recreate`'s teardown (`destroy::run`), the nodes reached
//! (`connect::connect`: SSH hosts, or the docker provider's node containers created first), the
//! docker lab's local API forward, then [`super::phases`] launched over every node. The command
//! prints what it returns ([`UpReport`]): the plan of a dry run, or how the run ended.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clusterctl_spec::ValidCluster;

use super::api::ApiAccess;
use super::from_file::{self, SpecOptions};
use super::launch::{launch, Launch};
use super::{UpData, UpSpec};
use crate::connect::{self, ConnectError, ConnectOptions, Progress};
use crate::ctx::Mode;
use crate::engine::{check_selection, Phase, Summary, UnknownPhase};
use crate::error::RunError;
use crate::report::Reporter;

/// How `up` runs: the command line's settings.
#[derive(Clone)]
pub struct UpOptions<'a> {
    /// The cluster file (`None`: a built-in profile; the bundle path is then relative to the working
    /// directory).
    pub file: Option<PathBuf>,
    /// The kubeconfig to merge the admin context into (`None`: `$KUBECONFIG` or `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (`None`: `~/.ssh/known_hosts`).
    pub known_hosts: Option<&'a Path>,
    /// How long `wait-ready` waits for every node.
    pub ready_timeout: Duration,
    /// Preflight check ids reported as warnings.
    pub ignore_preflight: Vec<String>,
    /// Dry-run, probe, fix, verbose and diff.
    pub mode: Mode,
    /// Nodes connected and worked on at once (at least 1).
    pub parallel: usize,
    /// Phase paths (or prefixes) not to run.
    pub skip: Vec<String>,
    /// When not empty: only these phase paths (or prefixes) run.
    pub only: Vec<String>,
    /// Destroy the cluster first (as `destroy --yes`); a dry run only says it would.
    pub recreate: bool,
    /// Where the phases' progress goes.
    pub reporter: Arc<dyn Reporter>,
}

/// What an `up` run did (or planned).
pub struct UpReport {
    /// What the phases read of the file (docker node addresses filled in by `connect`).
    pub spec: UpSpec,
    /// The phases of `up`, in order.
    pub phases: Vec<Phase<UpData>>,
    /// The docker provider's steps (`create network …`, `create container …`); empty for SSH.
    pub provider_plan: Vec<String>,
    /// The engine's plan, outcomes and changes.
    pub summary: Summary,
    /// How the phases ended.
    pub result: Result<(), RunError>,
}

/// Why `up` stopped before its phases ran.
#[derive(Debug, thiserror::Error)]
pub enum UpError {
    /// A `--skip-phases`/`--only` pattern names no phase: exit 2, nothing contacted.
    #[error(transparent)]
    UnknownPhase(#[from] UnknownPhase),
    /// `--recreate`'s teardown failed in `failures` steps (each reported to `say`): nothing built.
    #[error("up --recreate: destroying cluster {cluster} failed in {failures} step(s) (see above); not building it again")]
    Recreate {
        /// The cluster's name.
        cluster: String,
        /// How many teardown steps failed.
        failures: usize,
    },
    /// The nodes could not be reached (SSH or Docker).
    #[error("up: {0}")]
    Connect(#[from] ConnectError),
}

impl UpError {
    /// Whether the request itself is refused (invalid input, exit 2) rather than failed (exit 1).
    pub fn is_refusal(&self) -> bool {
        matches!(self, UpError::UnknownPhase(_))
    }
}

/// Builds or converges `cluster` with `options`: `--recreate`'s teardown lines go to `say`, SSH
/// connection progress to `progress`, the phases' progress to `options.reporter`. Errors (before any
/// phase ran): [`UpError`]; a phase's failure is in [`UpReport::result`].
pub fn run(
    cluster: &ValidCluster,
    options: &UpOptions<'_>,
    say: &(dyn Fn(&str) + Sync),
    progress: &(dyn Fn(Progress<'_>) + Sync),
) -> Result<UpReport, UpError> {
    let spec_options = SpecOptions {
        file: options.file.clone(),
        kubeconfig: options.kubeconfig.clone(),
        ready_timeout: options.ready_timeout,
        ignore_preflight: options.ignore_preflight.clone(),
    };
    let mut spec = from_file::spec(cluster, &spec_options);
    let phases = super::phases(&spec);
    for patterns in [&options.skip, &options.only] {
        check_selection(&phases, patterns)?;
    }
    if options.recreate {
        recreate(cluster, options, say)?;
    }
    let mode = options.mode;
    let reach = ConnectOptions {
        dry_run: mode.dry_run,
        probe: mode.probe,
        known_hosts: options.known_hosts,
        only: None,
        parallel: options.parallel,
    };
    let connected = connect::connect(cluster, &mut spec, reach, progress)?;
    let api = crate::node_containers::local_api(cluster, mode.dry_run && !mode.probe);
    let how = Launch {
        mode,
        parallel: options.parallel,
        skip: options.skip.clone(),
        only: options.only.clone(),
        reporter: options.reporter.clone(),
    };
    let nodes = spec.nodes.clone();
    let (summary, result) = launch(
        cluster,
        &spec,
        &phases,
        nodes,
        connected.transports,
        ApiAccess::kube_via(api),
        &how,
    );
    Ok(UpReport {
        spec,
        phases,
        provider_plan: connected.provider_plan,
        summary,
        result,
    })
}

/// `--recreate`: destroys `cluster` as `destroy --yes` does (`crate::destroy::run`: every node reset,
/// the kubeconfig context and the local state cache removed), each step's line to `say`, so that `up`
/// builds it again with no recorded phase skipped. A dry run only says so. Errors:
/// [`UpError::Recreate`] when a teardown step failed.
fn recreate(
    cluster: &ValidCluster,
    options: &UpOptions<'_>,
    say: &(dyn Fn(&str) + Sync),
) -> Result<(), UpError> {
    let name = cluster.name();
    if options.mode.dry_run {
        say(&format!(
            "--recreate: cluster {name} would be destroyed first (as `clusterctl destroy --yes`)"
        ));
        return Ok(());
    }
    let opts = crate::destroy::Options {
        kubeconfig: options.kubeconfig.clone(),
        known_hosts: options.known_hosts.map(Path::to_path_buf),
        ..Default::default()
    };
    let destroyed = crate::destroy::run(cluster, &opts, &|l| say(&l.to_string()));
    let failures = destroyed.report.failures();
    if failures > 0 {
        return Err(UpError::Recreate {
            cluster: name.to_string(),
            failures,
        });
    }
    say(&format!(
        "recreate: cluster {name} destroyed; building it again"
    ));
    Ok(())
}
