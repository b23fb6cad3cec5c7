//! Running a phase list of `up` (or `node join`) for a cluster file: [`launch`] builds the shared
//! [`UpData`] (the renderer of [`super::from_file`], the first control plane's transport, the API
//! access, mode, reporter, secrets) and the engine (state cached under the cluster's local cache
//! directory), then runs the phases on the given nodes.

use std::collections::BTreeMap;
use std::sync::Arc;

use clusterctl_exec::Transport;
use clusterctl_spec::ValidCluster;

use super::api::ApiAccess;
use super::{from_file, UpData, UpSpec};
use crate::ctx::{Mode, Secrets};
use crate::engine::{Engine, Options, Phase, Summary};
use crate::error::RunError;
use crate::report::Reporter;
use clusterctl_spec::ValidNode;

/// How the engine runs: mode, parallelism, phase selection and the reporter.
#[derive(Clone)]
pub struct Launch {
    /// Dry-run, probe, fix and verbose.
    pub mode: Mode,
    /// Nodes worked on at once (at least 1).
    pub parallel: usize,
    /// Phase paths (or prefixes) not to run.
    pub skip: Vec<String>,
    /// When not empty: only these phase paths (or prefixes) run.
    pub only: Vec<String>,
    /// Where progress goes.
    pub reporter: Arc<dyn Reporter>,
}

/// Runs `phases` of `cluster` (`spec`, docker node addresses filled in by
/// [`crate::connect::connect`]) on `nodes` through `transports`, the first control plane's transport
/// taken from them; `api` reaches the cluster's API. Returns the engine's summary and result.
pub fn launch(
    cluster: &ValidCluster,
    spec: &UpSpec,
    phases: &[Phase<UpData>],
    nodes: Vec<ValidNode>,
    transports: BTreeMap<String, Arc<dyn Transport>>,
    api: ApiAccess,
    how: &Launch,
) -> (Summary, Result<(), RunError>) {
    let secrets = Secrets::default();
    let first_cp = spec
        .nodes
        .iter()
        .find(|n| n.is_control_plane())
        .and_then(|n| transports.get(&n.name).cloned());
    let data = UpData {
        renderer: Box::new(from_file::renderer(cluster.clone(), spec.nodes.clone())),
        facts: Default::default(),
        files: Default::default(),
        join: Default::default(),
        encryption: Default::default(),
        first_cp_transport: first_cp,
        mode: how.mode,
        reporter: how.reporter.clone(),
        secrets: secrets.clone(),
        api,
        spec: spec.clone(),
    };
    let opts = Options {
        cluster: spec.cluster.clone(),
        mode: how.mode,
        parallel: how.parallel,
        skip: how.skip.clone(),
        only: how.only.clone(),
        cache: crate::local::cache_dir(&spec.cluster).map(crate::state::LocalCache::new),
    };
    Engine::new(nodes, transports, opts, how.reporter.clone(), secrets).run(phases, &data)
}
