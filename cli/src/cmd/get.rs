//! `clusterctl get clusters|nodes|kubeconfig` and `clusterctl export kubeconfig`, as kind has them.
//! `get clusters` lists the clusters with node containers on the local Docker engine and those with a
//! local state cache (SSH clusters built from this machine); `get nodes` the nodes of one cluster (from
//! its file, with the container, state and address the engine reports for the docker provider);
//! `get kubeconfig` writes the cluster's admin kubeconfig (that context alone) to stdout — never to a
//! terminal, since it holds credentials; `export kubeconfig` merges it into `$KUBECONFIG` /
//! `~/.kube/config` (or `--kubeconfig PATH`, written 0600), keeping every other entry, and makes it the
//! current context. Cluster, user and context are all named `clusterctl-<name>` in both (kind names
//! its own `kind-<name>`), as in the kubeconfig `up` merges. Exit 0, 1 when the cluster cannot be
//! asked, 2 for invalid input. What they report is `clusterctl_phases::get`'s; this module prints it.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{Format, Target};

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
    /// One tarball of every node's logs, pod logs, placed files (secrets masked), status and events.
    Logs(super::export_logs::LogsArgs),
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
            match clusterctl_phases::get::admin_kubeconfig(
                &cluster,
                a.kubeconfig.as_deref(),
                a.known_hosts.as_deref(),
            ) {
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
    let a = match c {
        ExportCommand::Kubeconfig(a) => a,
        ExportCommand::Logs(a) => return super::export_logs::run(a),
    };
    let cluster = match a.target.load(Format::Text) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let Some(dest) = clusterctl_phases::access::kubeconfig::target(a.kubeconfig.as_ref()) else {
        eprintln!(
            "export kubeconfig: no kubeconfig path: set HOME or KUBECONFIG, or give --kubeconfig"
        );
        return Ok(ExitCode::from(crate::EXIT_INVALID));
    };
    // The context is read from the default kubeconfig (or the node) and written into `dest`.
    if let Err(e) =
        clusterctl_phases::get::export_kubeconfig(&cluster, &dest, a.known_hosts.as_deref())
    {
        eprintln!("export kubeconfig: {e}");
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
    let (rows, failed) = clusterctl_phases::get::clusters();
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
    // An invalid file is printed as the `invalid` document `-o json|yaml` asks for.
    let format = match output {
        NodesFormat::Json => Format::Json,
        NodesFormat::Yaml => Format::Yaml,
        NodesFormat::Text | NodesFormat::Wide | NodesFormat::Name => Format::Text,
    };
    let cluster = match target.load(format) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let (rows, failed) = clusterctl_phases::get::nodes(&cluster);
    let docker = cluster.provider() == clusterctl_spec::model::Provider::Docker;
    if let Some(e) = failed {
        eprintln!("get nodes: the Docker engine could not be asked: {e}");
    }
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
                        r.container
                            .as_deref()
                            .unwrap_or(if docker { NONE } else { "-" }),
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
