//! What `clusterctl get clusters|nodes|kubeconfig` and `clusterctl export kubeconfig` report, as kind
//! has them: the clusters on this machine ([`clusters`]: node containers on the local Docker engine,
//! local state caches), the nodes of one cluster ([`nodes`]: the file's nodes with the container,
//! state and address the engine reports for the docker provider), the cluster's admin kubeconfig
//! with only its own context ([`admin_kubeconfig`]) and its merge into the user's kubeconfig
//! ([`export_kubeconfig`]). Cluster, user and context are all named `clusterctl-<name>`, as in the
//! kubeconfig `up` merges. Read-only, except the kubeconfig [`export_kubeconfig`] writes (0600).

use std::path::{Path, PathBuf};

use clusterctl_exec::{DockerClient, DockerProvider, ExecError};
use clusterctl_spec::model::Provider;
use clusterctl_spec::ValidCluster;
use serde_yaml::Value;

use crate::access::kubeconfig::AdminKubeconfigError;
use crate::reach::{self, ReachError};
use crate::up::kubeconfig::{self, Current};

/// One cluster of `get clusters`.
#[derive(Debug, serde::Serialize)]
pub struct ClusterRow {
    /// The cluster's name.
    pub name: String,
    /// `docker` (node containers found) or `cache` (only a local state cache).
    pub found: String,
    /// Node containers (docker).
    pub containers: usize,
}

/// The clusters on this machine: those with node containers on the local Docker engine, then those
/// with only a local state cache (SSH clusters built from here, or docker ones whose containers are
/// gone; not the cache's own `.`-directories), sorted by name. The error says why the engine could not be asked (the cache's clusters are
/// listed all the same).
pub fn clusters() -> (Vec<ClusterRow>, Option<ExecError>) {
    let mut rows: Vec<ClusterRow> = Vec::new();
    let mut failed = None;
    match DockerClient::connect().and_then(|c| DockerProvider::clusters(&c)) {
        Ok(list) => rows.extend(list.into_iter().map(|(name, n)| ClusterRow {
            name,
            found: "docker".into(),
            containers: n,
        })),
        Err(e) => failed = Some(e),
    }
    if let Some(base) = crate::local::cache_dir("x").and_then(|d| d.parent().map(PathBuf::from)) {
        if let Ok(entries) = std::fs::read_dir(base) {
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .filter(|e| e.path().is_dir())
                // A directory holding only the cluster lock (`destroy` keeps it) is no cluster.
                .filter(|e| !only_the_lock(&e.path()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                // Only what can be a cluster name (a DNS-1123 label): not `.upstream`, the download
                // cache of upstream files (`up::cni_install`), nor any directory someone else made.
                .filter(|n| clusterctl_spec::is_cluster_name(n))
                .filter(|n| !rows.iter().any(|r| &r.name == n))
                .collect();
            names.sort();
            rows.extend(names.into_iter().map(|name| ClusterRow {
                name,
                found: "cache".into(),
                containers: 0,
            }));
        }
    }
    (rows, failed)
}

/// True when `dir` holds the cluster lock and nothing else (what `destroy` leaves).
fn only_the_lock(dir: &std::path::Path) -> bool {
    let names: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|f| f.file_name()).collect())
        .unwrap_or_default();
    names.len() == 1 && names[0] == crate::lock::LOCK_FILE
}

/// One node of `get nodes`.
#[derive(Debug, serde::Serialize)]
pub struct NodeRow {
    /// The node's name.
    pub name: String,
    /// `control-plane` or `worker`.
    pub role: String,
    /// The file's address (SSH nodes), else the node container's address on the cluster network;
    /// `None` (`<none>` in text, as kubectl prints an empty cell) for a docker node whose container
    /// does not exist or is not running (Docker releases a stopped container's address).
    pub address: Option<String>,
    /// The node container (docker provider); `None` (`<none>` in text, null in JSON) when it has
    /// none, and for an SSH node.
    pub container: Option<String>,
    /// The node container's state (`running`, `exited`); `None` (null in JSON) without one.
    pub state: Option<String>,
}

/// Why the Docker engine could not say which node containers a cluster has.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// The engine could not be used.
    #[error(transparent)]
    Provider(#[from] ReachError),
    /// The engine did not list the containers.
    #[error(transparent)]
    List(#[from] ExecError),
}

/// The nodes of `cluster`, in the file's order; for the docker provider with the container, state
/// and address the engine reports. The error says why the engine could not be asked (the rows then
/// have no container details).
pub fn nodes(cluster: &ValidCluster) -> (Vec<NodeRow>, Option<ListError>) {
    let docker = cluster.provider() == Provider::Docker;
    let (listed, failed) = if docker {
        match reach::docker_provider(cluster)
            .map_err(ListError::from)
            .and_then(|p| p.list().map_err(ListError::from))
        {
            Ok(l) => (Some(l), None),
            Err(e) => (None, Some(e)),
        }
    } else {
        (None, None)
    };
    let rows = cluster
        .nodes()
        .iter()
        .map(|n| {
            let d = listed
                .as_ref()
                .and_then(|l| l.iter().find(|d| d.name == n.name));
            NodeRow {
                name: n.name.clone(),
                role: if n.is_control_plane() {
                    "control-plane"
                } else {
                    "worker"
                }
                .into(),
                address: n
                    .address
                    .map(|a| a.to_string())
                    .or_else(|| d.and_then(|d| d.address.clone())),
                container: d.map(|d| d.container.clone()),
                state: d.map(|d| d.state.clone()),
            }
        })
        .collect();
    (rows, failed)
}

/// Why the cluster's admin kubeconfig could not be given or written.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// No kubeconfig context of the cluster and the first control plane could not be asked.
    #[error(transparent)]
    Reach(#[from] ReachError),
    /// The kubeconfig could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The kubeconfig.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig is not YAML (the parser's error names a position, no content).
    #[error("{}: {source}", path.display())]
    NotYaml {
        /// The kubeconfig.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_yaml::Error,
    },
    /// The kubeconfig has neither the cluster's context nor a current context.
    #[error("{} has no context `{context}` and no current context", path.display())]
    NoContext {
        /// The kubeconfig.
        path: PathBuf,
        /// The context looked for, `clusterctl-<name>`.
        context: String,
    },
    /// The current context names no entry of `contexts`.
    #[error("the context disappeared")]
    ContextDisappeared,
    /// The extracted kubeconfig could not be written as YAML.
    #[error("{0}")]
    Yaml(#[source] serde_yaml::Error),
    /// The admin kubeconfig's cluster has no `server`.
    #[error("the kubeconfig names no server")]
    NoServer,
    /// The admin kubeconfig could not be merged.
    #[error(transparent)]
    Merge(#[from] AdminKubeconfigError),
    /// The merged kubeconfig could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The kubeconfig written.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// `get kubeconfig`: the cluster's admin kubeconfig alone (cluster, user and current context
/// `clusterctl-<name>`), read from `kubeconfig` or the default one (see [`standalone`]), its server
/// as [`merged_into`] sets it. Holds credentials: the caller never prints it to a terminal.
pub fn admin_kubeconfig(
    cluster: &ValidCluster,
    kubeconfig: Option<&Path>,
    known_hosts: Option<&Path>,
) -> Result<String, KubeconfigError> {
    let admin = standalone(cluster, kubeconfig, known_hosts)?;
    merged_into("", &admin, cluster)
}

/// `export kubeconfig`: the cluster's admin context (read from the default kubeconfig, else
/// `admin.conf` of the first control plane) merged into `dest` (every other entry kept; made the
/// current context) and written 0600.
pub fn export_kubeconfig(
    cluster: &ValidCluster,
    dest: &Path,
    known_hosts: Option<&Path>,
) -> Result<(), KubeconfigError> {
    let admin = standalone(cluster, None, known_hosts)?;
    // Through a link to the file it names; a file that cannot be read is refused, never replaced.
    let dest = crate::local::follow_links(dest);
    let existing = crate::local::read_if_exists(&dest).map_err(|source| KubeconfigError::Read {
        path: dest.clone(),
        source,
    })?;
    let merged = merged_into(&existing, &admin, cluster)?;
    crate::local::write_private(&dest, 0o600, merged.as_bytes()).map_err(|source| {
        KubeconfigError::Write {
            path: dest.clone(),
            source,
        }
    })
}

/// `admin` (a kubeconfig of one cluster and user) merged into `existing` (empty: alone) as cluster, user
/// and current context `clusterctl-<name>`. The server: for the docker provider the first control
/// plane's API port as Docker publishes it now on 127.0.0.1, with `tls-server-name` the endpoint host
/// (as `up` writes it; admin.conf itself names the endpoint, which this machine cannot reach); else
/// admin's server and `tls-server-name`.
fn merged_into(
    existing: &str,
    admin: &str,
    cluster: &ValidCluster,
) -> Result<String, KubeconfigError> {
    let v: Value = serde_yaml::from_str(admin).map_err(KubeconfigError::Yaml)?;
    let c = &v["clusters"][0]["cluster"];
    let local = crate::node_containers::local_api(cluster, false);
    let (server, tls) = match &local {
        Some(l) => (l.server.as_str(), Some(l.tls_server_name.as_str())),
        None => (
            c["server"].as_str().ok_or(KubeconfigError::NoServer)?,
            c["tls-server-name"].as_str(),
        ),
    };
    Ok(kubeconfig::merge(
        existing,
        admin,
        cluster.name(),
        server,
        tls,
        Current::Always,
    )?)
}

/// The cluster's admin kubeconfig with only its own context (cluster, user, context, current-context):
/// the cluster's context in `kubeconfig` / `$KUBECONFIG` / `~/.kube/config` (`kubeconfig` without
/// it: its current context), else admin.conf of the first control plane ([`crate::access::api::kubeconfig_for`]).
/// Never another context's entries.
fn standalone(
    cluster: &ValidCluster,
    kubeconfig: Option<&Path>,
    known_hosts: Option<&Path>,
) -> Result<String, KubeconfigError> {
    let (path, context) = crate::access::api::kubeconfig_for(cluster, kubeconfig, known_hosts)?;
    let text = std::fs::read_to_string(&path).map_err(|source| KubeconfigError::Read {
        path: path.clone(),
        source,
    })?;
    let v: Value = serde_yaml::from_str(&text).map_err(|source| KubeconfigError::NotYaml {
        path: path.clone(),
        source,
    })?;
    let Some(ctx_name) = context.or_else(|| {
        v["current-context"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(str::to_string)
    }) else {
        return Err(KubeconfigError::NoContext {
            path,
            context: clusterctl_kubeapi::kubeconfig::entry_name(cluster.name()),
        });
    };
    let find = |list: &str, name: &str| -> Option<Value> {
        v[list]
            .as_sequence()?
            .iter()
            .find(|e| e["name"].as_str() == Some(name))
            .cloned()
    };
    let ctx = find("contexts", &ctx_name).ok_or(KubeconfigError::ContextDisappeared)?;
    let entry = |key: &str| ctx["context"][key].as_str().unwrap_or_default().to_string();
    let (cl, us) = (entry("cluster"), entry("user"));
    let mut out = serde_yaml::Mapping::new();
    out.insert("apiVersion".into(), "v1".into());
    out.insert("kind".into(), "Config".into());
    out.insert(
        "clusters".into(),
        Value::Sequence(find("clusters", &cl).into_iter().collect()),
    );
    out.insert(
        "users".into(),
        Value::Sequence(find("users", &us).into_iter().collect()),
    );
    out.insert("contexts".into(), Value::Sequence(vec![ctx]));
    out.insert("current-context".into(), ctx_name.into());
    serde_yaml::to_string(&Value::Mapping(out)).map_err(KubeconfigError::Yaml)
}
