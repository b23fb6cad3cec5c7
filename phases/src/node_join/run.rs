//! `node join` end to end, for the command: [`prepare`] reads the file (`UpSpec`), refuses names it
//! does not declare and reaches the nodes (a dry run reaches them read-only: the join needs the
//! running cluster's state); [`Prepared::run`] lists the registered Nodes through the API (the first
//! control plane's `admin.conf`, kept in memory, whose client then serves the phases), refuses nodes
//! already joined and runs [`super::phases`] over the first control plane and the new nodes. The
//! command prints what the two steps return.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clusterctl_exec::Transport;
use clusterctl_spec::ValidCluster;

use super::{engine_nodes, registered, JoinRefused, ListError};
use crate::connect::{self, ConnectError, ConnectOptions, Progress};
use crate::ctx::Mode;
use crate::engine::Summary;
use crate::error::RunError;
use crate::report::Reporter;
use crate::up::api::ApiAccess;
use crate::up::from_file::{self, SpecOptions};
use crate::up::launch::{launch, Launch};
use crate::up::UpSpec;
use clusterctl_spec::ValidNode;

/// How `node join` runs: the command line's settings.
#[derive(Clone)]
pub struct JoinOptions<'a> {
    /// The cluster file (`None`: a built-in profile).
    pub file: Option<PathBuf>,
    /// The nodes to join (names from the file).
    pub nodes: Vec<String>,
    /// Dry-run (then also probe), fix and verbose.
    pub mode: Mode,
    /// Nodes worked on at once (at least 1).
    pub parallel: usize,
    /// How long `wait-ready` waits for the joined nodes.
    pub ready_timeout: Duration,
    /// Preflight check ids reported as warnings.
    pub ignore_preflight: Vec<String>,
    /// The known_hosts file for SSH nodes (`None`: `~/.ssh/known_hosts`).
    pub known_hosts: Option<&'a Path>,
    /// Where progress goes.
    pub reporter: Arc<dyn Reporter>,
}

/// Why `node join` stopped before its phases ran.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The request is refused (names not in the file, nodes already joined, none named): exit 2.
    #[error(transparent)]
    Refused(#[from] JoinRefused),
    /// The nodes could not be reached (SSH or Docker).
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The first control plane, whose `admin.conf` the join needs, was not reached.
    #[error("the first control plane {0} cannot be reached")]
    FirstControlPlaneUnreachable(String),
    /// The registered Nodes could not be listed.
    #[error("cannot list the cluster's Nodes: {0}")]
    List(#[source] ListError),
}

impl JoinError {
    /// Whether the request itself is refused (invalid input, exit 2) rather than failed (exit 1).
    pub fn is_refusal(&self) -> bool {
        matches!(self, JoinError::Refused(_))
    }
}

/// The nodes reached and the `UpSpec` the join runs on; [`Prepared::run`] continues.
pub struct Prepared<'a> {
    cluster: &'a ValidCluster,
    options: JoinOptions<'a>,
    spec: UpSpec,
    transports: BTreeMap<String, Arc<dyn Transport>>,
    /// The docker provider's steps (`create container …` of the new nodes); empty for SSH.
    pub provider_plan: Vec<String>,
}

/// What a `node join` run did (or planned).
pub struct Joined {
    /// The cluster's name.
    pub cluster: String,
    /// The nodes the engine ran over: the first control plane, then the joining ones.
    pub nodes: Vec<ValidNode>,
    /// The engine's plan, outcomes and changes.
    pub summary: Summary,
    /// How the phases ended.
    pub result: Result<(), RunError>,
}

/// Reads `cluster` (its `UpSpec`) with `options`, refuses node names the file does not declare and the
/// first control plane (always in the cluster) before contacting anything, and reaches the nodes,
/// reporting SSH progress to `progress`. Errors: [`JoinError::Refused`], [`JoinError::Connect`].
pub fn prepare<'a>(
    cluster: &'a ValidCluster,
    options: JoinOptions<'a>,
    progress: &(dyn Fn(Progress<'_>) + Sync),
) -> Result<Prepared<'a>, JoinError> {
    let spec_options = SpecOptions {
        file: options.file.clone(),
        ready_timeout: options.ready_timeout,
        ignore_preflight: options.ignore_preflight.clone(),
        ..SpecOptions::default()
    };
    let mut spec = from_file::spec(cluster, &spec_options);
    // Naming the first control plane is refused here, before anything is contacted.
    // Only the first control plane and the joining nodes are reached: another node being down does
    // not stop a join.
    let reached: Vec<String> = engine_nodes(&spec.nodes, &options.nodes, &[])?
        .into_iter()
        .map(|n| n.name)
        .collect();
    let reach = ConnectOptions {
        dry_run: options.mode.dry_run,
        probe: options.mode.probe,
        known_hosts: options.known_hosts,
        only: Some(&reached),
        parallel: options.parallel,
    };
    let connected = connect::connect(cluster, &mut spec, reach, progress)?;
    Ok(Prepared {
        cluster,
        options,
        spec,
        transports: connected.transports,
        provider_plan: connected.provider_plan,
    })
}

impl Prepared<'_> {
    /// The cluster's name.
    pub fn cluster_name(&self) -> &str {
        &self.spec.cluster
    }

    /// Whether node `name` was reached.
    pub fn reached(&self, name: &str) -> bool {
        self.transports.contains_key(name)
    }

    /// Lists the registered Nodes, refuses nodes already joined and runs the join's phases. Errors
    /// (before any phase): the first control plane not reached, no control plane, the Nodes not
    /// listed, a refused node; a phase's failure is in [`Joined::result`].
    pub fn run(self) -> Result<Joined, JoinError> {
        let first_cp = self.cluster.first_control_plane().name.clone();
        let cp = self
            .transports
            .get(&first_cp)
            .cloned()
            .ok_or_else(|| JoinError::FirstControlPlaneUnreachable(first_cp.clone()))?;
        let mode = self.options.mode;
        let reporter = self.options.reporter.clone();
        let api = ApiAccess::kube_via(crate::node_containers::local_api(self.cluster, false));
        let info = self
            .spec
            .nodes
            .iter()
            .find(|n| n.name == first_cp)
            .cloned()
            // The model holds every node of the file (the first control plane with the address
            // `connect` found for it); the file's own entry is the same node.
            .unwrap_or_else(|| self.cluster.first_control_plane().clone());
        let names = registered(&api, info, cp, mode, reporter.clone()).map_err(JoinError::List)?;
        let nodes = engine_nodes(&self.spec.nodes, &self.options.nodes, &names)?;
        let how = Launch {
            mode,
            parallel: self.options.parallel,
            skip: Vec::new(),
            only: Vec::new(),
            reporter,
        };
        let phases = super::phases(&self.spec);
        let (summary, result) = launch(
            self.cluster,
            &self.spec,
            &phases,
            nodes.clone(),
            self.transports,
            api,
            &how,
        );
        Ok(Joined {
            cluster: self.spec.cluster.clone(),
            nodes,
            summary,
            result,
        })
    }
}
