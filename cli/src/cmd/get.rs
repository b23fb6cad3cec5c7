//! `clusterctl get clusters|nodes|kubeconfig` and `clusterctl export kubeconfig`, as kind has them.
//! `get clusters` lists the clusters with node containers on the local Docker engine and those with a
//! local state cache (SSH clusters built from this machine); `get nodes` the nodes of one cluster (from
//! its file, with the container, state and address the engine reports for the docker provider);
//! `get kubeconfig` writes the cluster's admin kubeconfig (that context alone) to stdout — never to a
//! terminal, since it holds credentials; `export kubeconfig` merges it into `$KUBECONFIG` /
//! `~/.kube/config` (or `--kubeconfig PATH`, written 0600), keeping every other entry, and makes it the
//! current context. Cluster, user and context are all named `clusterctl-<name>` in both (kind names
//! its own `kind-<name>`), as in the kubeconfig `up` merges. Exit 0, 1 when the cluster cannot be
//! asked, 2 for invalid input.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clusterctl_spec::model::Provider;
use serde_yaml::Value;

use super::flags::{Format, Target};
use super::lifecycle;

/// Subcommands of `clusterctl get`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum GetCommand {
    /// The clusters on this machine (Docker node containers, local state caches).
    Clusters {
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: Format,
    },
    /// The nodes of a cluster.
    Nodes {
        /// The cluster file (or `--profile`).
        #[command(flatten)]
        target: Target,
        /// Output format: `text`, `wide` (with container and state), `name`, `json`, `yaml`.
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: NodesFormat,
    },
    /// The cluster's admin kubeconfig on stdout (redirect it to a file: it holds credentials).
    Kubeconfig(KubeconfigArgs),
}

/// Subcommands of `clusterctl export`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum ExportCommand {
    /// Merge the cluster's admin context into `$KUBECONFIG` / `~/.kube/config` (or `--kubeconfig`).
    Kubeconfig(KubeconfigArgs),
}

/// Arguments of `get kubeconfig` and `export kubeconfig`.
#[derive(clap::Args, Debug)]
pub(crate) struct KubeconfigArgs {
    /// The cluster file (or `--profile`).
    #[command(flatten)]
    pub target: Target,
    /// `export`: the kubeconfig to merge into; `get`: the kubeconfig to read the context from (default:
    /// `$KUBECONFIG` or `~/.kube/config`, else admin.conf from the first control plane).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
}

/// Output formats of `get nodes`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodesFormat {
    /// Name, role, address.
    Text,
    /// Also the container and its state (docker provider).
    Wide,
    /// Node names only.
    Name,
    /// One JSON document.
    Json,
    /// One YAML document.
    Yaml,
}

/// One cluster of `get clusters`.
#[derive(serde::Serialize)]
struct ClusterRow {
    name: String,
    /// `docker` (node containers found) or `cache` (only a local state cache).
    found: String,
    /// Node containers (docker).
    containers: usize,
}

/// One node of `get nodes`.
#[derive(serde::Serialize)]
struct NodeRow {
    name: String,
    role: String,
    /// The file's address (SSH nodes), else the node container's address on the cluster network;
    /// `None` (`<none>` in text, as kubectl prints an empty cell) for a docker node whose container
    /// does not exist or is not running (Docker releases a stopped container's address).
    address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<String>,
}

/// Runs `get`.
pub(crate) fn run_get(c: GetCommand) -> miette::Result<ExitCode> {
    match c {
        GetCommand::Clusters { output } => clusters(output),
        GetCommand::Nodes { target, output } => nodes(&target, output),
        GetCommand::Kubeconfig(a) => {
            if std::io::stdout().is_terminal() {
                eprintln!("get kubeconfig: the kubeconfig holds the cluster's admin credentials and is not printed to a terminal; redirect it (`clusterctl get kubeconfig … > admin.kubeconfig`) or use `clusterctl export kubeconfig`");
                return Ok(ExitCode::from(crate::EXIT_INVALID));
            }
            let cluster = match a.target.load(Format::Text) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            match standalone(&cluster, &a).and_then(|admin| merged_into("", &admin, &cluster)) {
                Ok(text) => {
                    print!("{text}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("get kubeconfig: {e}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}

/// Runs `export`.
pub(crate) fn run_export(c: ExportCommand) -> miette::Result<ExitCode> {
    let ExportCommand::Kubeconfig(a) = c;
    let cluster = match a.target.load(Format::Text) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let Some(dest) = clusterctl_phases::up::kubeconfig::target(a.kubeconfig.as_ref()) else {
        eprintln!(
            "export kubeconfig: no kubeconfig path: set HOME or KUBECONFIG, or give --kubeconfig"
        );
        return Ok(ExitCode::from(crate::EXIT_INVALID));
    };
    // Read the context from the default kubeconfig (or the node), write into `dest`.
    let source = KubeconfigArgs {
        target: a.target.clone(),
        kubeconfig: None,
        known_hosts: a.known_hosts.clone(),
    };
    let merged = standalone(&cluster, &source).and_then(|admin| {
        let existing = std::fs::read_to_string(&dest).unwrap_or_default();
        merged_into(&existing, &admin, &cluster)
    });
    let merged = match merged {
        Ok(m) => m,
        Err(e) => {
            eprintln!("export kubeconfig: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    if let Err(e) = clusterctl_phases::local::write_private(&dest, 0o600, merged.as_bytes()) {
        eprintln!("export kubeconfig: writing {}: {e}", dest.display());
        return Ok(ExitCode::FAILURE);
    }
    let context = clusterctl_kubeapi::kubeconfig::entry_name(cluster.name());
    println!(
        "kubeconfig: context {context} written to {} and made the current context",
        dest.display(),
    );
    Ok(ExitCode::SUCCESS)
}

fn clusters(output: Format) -> miette::Result<ExitCode> {
    let mut rows: Vec<ClusterRow> = Vec::new();
    let mut failed = None;
    match clusterctl_exec::DockerClient::connect()
        .and_then(|c| clusterctl_exec::DockerProvider::clusters(&c))
    {
        Ok(list) => rows.extend(list.into_iter().map(|(name, n)| ClusterRow {
            name,
            found: "docker".into(),
            containers: n,
        })),
        Err(e) => failed = Some(e.to_string()),
    }
    // Clusters with a local cache (SSH clusters built from here, or docker ones whose containers are gone).
    if let Some(base) =
        clusterctl_phases::local::cache_dir("x").and_then(|d| d.parent().map(PathBuf::from))
    {
        if let Ok(entries) = std::fs::read_dir(base) {
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
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
    if let Some(e) = &failed {
        eprintln!("get clusters: the Docker engine could not be asked ({e}); clusters from the local cache only");
    }
    if !output.print(&rows)? {
        if rows.is_empty() {
            eprintln!("No clusters found.");
        }
        for r in &rows {
            println!("{}", r.name);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What `get nodes` prints for a value it does not know (kubectl's placeholder).
const NONE: &str = "<none>";

fn nodes(target: &Target, output: NodesFormat) -> miette::Result<ExitCode> {
    let cluster = match target.load(Format::Text) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let listed = if cluster.provider() == Provider::Docker {
        match lifecycle::docker_provider(&cluster).and_then(|p| p.list().map_err(|e| e.to_string()))
        {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("get nodes: the Docker engine could not be asked: {e}");
                None
            }
        }
    } else {
        None
    };
    let rows: Vec<NodeRow> = cluster
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
                container: d.map(|d| d.container.clone()).or_else(|| {
                    (cluster.provider() == Provider::Docker).then(|| "(none)".to_string())
                }),
                state: d.map(|d| d.state.clone()),
            }
        })
        .collect();
    match output {
        NodesFormat::Json => {
            Format::Json.print(&rows)?;
        }
        NodesFormat::Yaml => {
            Format::Yaml.print(&rows)?;
        }
        NodesFormat::Name => rows.iter().for_each(|r| println!("{}", r.name)),
        NodesFormat::Text | NodesFormat::Wide => {
            let wide = output == NodesFormat::Wide;
            let w = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
            if wide {
                println!(
                    "{:w$}  {:13}  {:15}  {:30}  STATE",
                    "NAME", "ROLE", "ADDRESS", "CONTAINER"
                );
            } else {
                println!("{:w$}  {:13}  ADDRESS", "NAME", "ROLE");
            }
            for r in &rows {
                let address = r.address.as_deref().unwrap_or(NONE);
                if wide {
                    println!(
                        "{:w$}  {:13}  {:15}  {:30}  {}",
                        r.name,
                        r.role,
                        address,
                        r.container.as_deref().unwrap_or("-"),
                        r.state.as_deref().unwrap_or("-")
                    );
                } else {
                    println!("{:w$}  {:13}  {address}", r.name, r.role);
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `admin` (a kubeconfig of one cluster and user) merged into `existing` (empty: alone) as cluster, user
/// and current context `clusterctl-<name>`. The server: for the docker provider the first control
/// plane's API port as Docker publishes it now on 127.0.0.1, with `tls-server-name` the endpoint host
/// (as `up` writes it; admin.conf itself names the endpoint, which this machine cannot reach); else
/// admin's server and `tls-server-name`. Errors: as text.
fn merged_into(
    existing: &str,
    admin: &str,
    cluster: &clusterctl_spec::ValidCluster,
) -> Result<String, String> {
    let v: Value = serde_yaml::from_str(admin).map_err(|e| e.to_string())?;
    let c = &v["clusters"][0]["cluster"];
    let local = clusterctl_phases::node_containers::local_api(cluster, false);
    let (server, tls) = match &local {
        Some(l) => (l.server.as_str(), Some(l.tls_server_name.as_str())),
        None => (
            c["server"]
                .as_str()
                .ok_or("the kubeconfig names no server")?,
            c["tls-server-name"].as_str(),
        ),
    };
    clusterctl_phases::up::kubeconfig::merge(
        existing,
        admin,
        cluster.name(),
        server,
        tls,
        clusterctl_phases::up::kubeconfig::Current::Always,
    )
    .map_err(|e| e.to_string())
}

/// The cluster's admin kubeconfig with only its own context (cluster, user, context, current-context):
/// the cluster's context in `--kubeconfig` / `$KUBECONFIG` / `~/.kube/config` (`--kubeconfig` without
/// it: its current context), else admin.conf of the first control plane. Never another context's
/// entries. Errors: as text.
fn standalone(
    cluster: &clusterctl_spec::ValidCluster,
    a: &KubeconfigArgs,
) -> Result<String, String> {
    let (path, context) =
        lifecycle::kubeconfig_for(cluster, a.kubeconfig.as_ref(), a.known_hosts.as_ref())?;
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let v: Value = serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let Some(ctx_name) = context.or_else(|| {
        v["current-context"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(str::to_string)
    }) else {
        return Err(format!(
            "{} has no context `{}` and no current context",
            path.display(),
            clusterctl_kubeapi::kubeconfig::entry_name(cluster.name())
        ));
    };
    let find = |list: &str, name: &str| -> Option<Value> {
        v[list]
            .as_sequence()?
            .iter()
            .find(|e| e["name"].as_str() == Some(name))
            .cloned()
    };
    let ctx = find("contexts", &ctx_name).ok_or("the context disappeared")?;
    let cl = ctx["context"]["cluster"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let us = ctx["context"]["user"]
        .as_str()
        .unwrap_or_default()
        .to_string();
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
    serde_yaml::to_string(&Value::Mapping(out)).map_err(|e| e.to_string())
}
