//! `clusterctl cni …`: the overlay agent (`clusterctl cni agent`), its clean-up
//! (`clusterctl cni cleanup`), and the CNI plugin entry point used when the binary runs as
//! `clusterctl-cni`.

use clusterctl_cni::agent::{self, StaticFile};
use clusterctl_render::cni::builtin::AGENT_CONFIG_PATH;
use std::path::PathBuf;
use std::process::ExitCode;

/// Subcommands of `clusterctl cni`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Command {
    /// Run the VXLAN overlay agent on this node (the rendered systemd unit runs it).
    Agent(AgentArgs),
    /// Remove what the agent installed: the VXLAN device, the masquerade table, the conflist and the
    /// podCIDR file.
    Cleanup(ConfigArg),
}

/// The agent's settings file.
#[derive(clap::Args, Debug)]
pub(crate) struct ConfigArg {
    /// The agent's settings, as rendered (`clusterctl_render::cni::builtin::AgentConfig`, JSON).
    #[arg(long, default_value = AGENT_CONFIG_PATH)]
    config: PathBuf,
}

/// Arguments of `clusterctl cni agent`: everything else is in the settings file.
#[derive(clap::Args, Debug)]
pub(crate) struct AgentArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Static peers file (`name address podCIDR` per line), overriding the settings' `peersFile`
    /// and the Kubernetes Nodes (labs, tests).
    #[arg(long)]
    peers_file: Option<PathBuf>,
    /// Reconcile once and exit.
    #[arg(long)]
    once: bool,
}

fn load(c: &ConfigArg) -> miette::Result<agent::AgentConfig> {
    agent::load_config(&c.config).map_err(|e| miette::miette!("{e}"))
}

/// Runs the command. Errors: an unreadable or invalid settings file, reconcile failures with
/// `--once`, a bad peer source, clean-up failures.
pub(crate) fn run(cmd: Command) -> miette::Result<ExitCode> {
    match cmd {
        Command::Agent(a) => {
            let cfg = load(&a.config)?;
            let peers_file = a
                .peers_file
                .clone()
                .or_else(|| cfg.peers_file.as_ref().map(PathBuf::from));
            let mut source: Box<dyn agent::PeerSource> = match peers_file {
                Some(p) => Box::new(StaticFile::new(p)),
                None => {
                    // NetworkPolicy needs the API: enforced when peers come from it.
                    if !a.once {
                        agent::netpol::spawn(&cfg)
                            .map_err(|e| miette::miette!("start the network policy thread: {e}"))?;
                    }
                    Box::new(
                        agent::kube::KubeNodes::new(cfg.kubeconfig.as_ref().map(PathBuf::from))
                            .map_err(|e| miette::miette!("{e}"))?,
                    )
                }
            };
            agent::run(&cfg, source.as_mut(), a.once).map_err(|e| miette::miette!("{e}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cleanup(c) => {
            agent::cleanup(&load(&c)?).map_err(|e| miette::miette!("{e}"))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Entry point when the binary is invoked as `clusterctl-cni` (the CNI plugin, CNI spec 1.1.0).
/// Never panics on input; errors are CNI error JSON on stdout with exit status 1; no async runtime.
pub(crate) fn plugin_main() -> ExitCode {
    match clusterctl_cni::plugin::main() {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
