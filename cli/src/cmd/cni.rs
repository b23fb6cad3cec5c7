//! `clusterctl cni …`: the overlay agent (`clusterctl cni agent`), its clean-up
//! (`clusterctl cni cleanup`), and the CNI plugin entry point used when the binary runs as
//! `clusterctl-cni`.

use clusterctl_cni::agent::{self, reconcile::DeviceConfig, AgentConfig, StaticFile};
use clusterctl_cni::Ipv4Net;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Subcommands of `clusterctl cni`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Run the VXLAN overlay agent on this node (a systemd unit runs it).
    Agent(AgentArgs),
    /// Remove what the agent installed: the VXLAN device, the masquerade table, the conflist.
    Cleanup(AgentArgs),
}

/// Settings of the agent.
#[derive(clap::Args, Debug)]
pub struct AgentArgs {
    /// This node's name, as in the peer set (Kubernetes Node name).
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
    /// Static peers file (`name address podCIDR` per line); without it, peers come from the
    /// Kubernetes Nodes through `--kubeconfig`.
    #[arg(long)]
    peers_file: Option<PathBuf>,
    /// Kubeconfig of the agent's ServiceAccount (used when no --peers-file is given).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// VXLAN network identifier.
    #[arg(long, default_value_t = 1)]
    vni: u32,
    /// VXLAN UDP port.
    #[arg(long, default_value_t = 8472)]
    port: u16,
    /// Overlay MTU in bytes (default: underlay MTU − 50).
    #[arg(long)]
    mtu: Option<u32>,
    /// VXLAN device name.
    #[arg(long, default_value = "cc-vxlan")]
    device: String,
    /// Underlay interface (default: the one holding this node's address).
    #[arg(long)]
    underlay: Option<String>,
    /// Whole pod network (podSubnet); pod traffic leaving it is masqueraded. Omit for no masquerade.
    #[arg(long, value_parser = parse_cidr)]
    cluster_cidr: Option<Ipv4Net>,
    /// CNI configuration directory the conflist is written into.
    #[arg(long, default_value = "/etc/cni/net.d")]
    cni_conf_dir: PathBuf,
    /// cniVersion of the written conflist.
    #[arg(long, default_value = "1.0.0")]
    cni_version: String,
    /// Network name in the conflist.
    #[arg(long, default_value = "clusterctl")]
    network_name: String,
    /// IPAM data directory for the plugin.
    #[arg(long, default_value = "/var/lib/cni/clusterctl")]
    data_dir: PathBuf,
    /// Where this node's podCIDR is written for the plugin.
    #[arg(long, default_value = "/run/clusterctl-cni/podcidr")]
    podcidr_file: PathBuf,
    /// Reconcile once and exit.
    #[arg(long)]
    once: bool,
    /// Seconds between full resyncs when nothing changed.
    #[arg(long, default_value_t = 30)]
    resync: u64,
}

fn parse_cidr(s: &str) -> Result<Ipv4Net, String> {
    s.parse().map_err(|_| format!("{s:?} is not an IPv4 CIDR"))
}

impl AgentArgs {
    fn config(&self) -> AgentConfig {
        AgentConfig {
            node_name: self.node_name.clone(),
            device: DeviceConfig {
                name: self.device.clone(),
                vni: self.vni,
                port: self.port,
                mtu: self.mtu,
                underlay: self.underlay.clone(),
            },
            cluster_cidr: self.cluster_cidr,
            cni_conf_dir: self.cni_conf_dir.clone(),
            cni_version: self.cni_version.clone(),
            network_name: self.network_name.clone(),
            data_dir: self.data_dir.clone(),
            podcidr_file: self.podcidr_file.clone(),
        }
    }
}

/// Runs the command. Errors: reconcile failures with `--once`, a bad peer source, clean-up failures.
pub fn run(cmd: Command) -> miette::Result<ExitCode> {
    match cmd {
        Command::Agent(a) => {
            let cfg = a.config();
            let resync = Duration::from_secs(a.resync.max(1));
            let mut source: Box<dyn agent::PeerSource> = match (&a.peers_file, &a.kubeconfig) {
                (Some(p), _) => Box::new(StaticFile::new(p)),
                (None, k) => Box::new(
                    agent::kube::KubeNodes::new(k.clone()).map_err(|e| miette::miette!("{e}"))?,
                ),
            };
            agent::run(&cfg, source.as_mut(), a.once, resync)
                .map_err(|e| miette::miette!("{e}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cleanup(a) => {
            agent::cleanup(&a.config()).map_err(|e| miette::miette!("{e}"))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Entry point when the binary is invoked as `clusterctl-cni` (the CNI plugin, CNI spec 1.1.0).
/// Never panics on input; errors are CNI error JSON on stdout with exit status 1; no async runtime.
pub fn plugin_main() -> ExitCode {
    match clusterctl_cni::plugin::main() {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
