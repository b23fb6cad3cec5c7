//! The overlay agent (`clusterctl cni agent`): keeps this node's VXLAN device and its per-peer
//! routes, neighbours and fdb entries equal to the peer set (see [`reconcile`]), writes the node's
//! conflist and podCIDR file once the podCIDR is known, and installs the masquerade table. Peers come
//! from a [`PeerSource`]: the static file ([`StaticFile`]) or Kubernetes Nodes ([`kube`]).

pub mod conflist;
pub mod kube;
pub mod masq;
pub mod peers;
pub mod reconcile;

use ipnet::Ipv4Net;
use peers::Peer;
use reconcile::{Changes, DeviceConfig};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// An agent failure.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A netlink operation failed.
    #[error(transparent)]
    Netlink(#[from] crate::netlink::NetlinkError),
    /// Bad settings or environment (no underlay interface, bad file).
    #[error("{0}")]
    Config(String),
    /// The peer source failed.
    #[error("peers: {0}")]
    Peers(String),
    /// Writing the conflist, podCIDR file or masquerade table failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being written.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Everything the agent needs to know.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// This node's name (its entry in the peer set).
    pub node_name: String,
    /// The VXLAN device.
    pub device: DeviceConfig,
    /// The whole pod network; pod traffic to destinations outside it is masqueraded. `None`: no
    /// masquerade table.
    pub cluster_cidr: Option<Ipv4Net>,
    /// CNI configuration directory (`/etc/cni/net.d`).
    pub cni_conf_dir: PathBuf,
    /// cniVersion of the written conflist.
    pub cni_version: String,
    /// Network name in the conflist.
    pub network_name: String,
    /// IPAM data directory given to the plugin.
    pub data_dir: PathBuf,
    /// Where the podCIDR file is written.
    pub podcidr_file: PathBuf,
}

/// A source of the peer set.
pub trait PeerSource {
    /// The current full peer set (including this node). Errors: the source's, as text.
    fn peers(&mut self) -> Result<Vec<Peer>, String>;
    /// Blocks until the set may have changed, or `timeout` passed.
    fn wait(&mut self, timeout: Duration);
}

/// Peers from a static file, re-read when its modification time changes.
#[derive(Debug)]
pub struct StaticFile {
    path: PathBuf,
    seen: Option<SystemTime>,
}

impl StaticFile {
    /// A source reading `path` (format in [`peers`]).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            seen: None,
        }
    }
    fn mtime(&self) -> Option<SystemTime> {
        std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()
    }
}

impl PeerSource for StaticFile {
    fn peers(&mut self) -> Result<Vec<Peer>, String> {
        self.seen = self.mtime();
        peers::read(&self.path).map_err(|e| e.to_string())
    }
    fn wait(&mut self, timeout: Duration) {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if self.mtime() != self.seen {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// One full pass: reconcile the overlay, then write the podCIDR file, the conflist and the
/// masquerade table. Returns `Ok(None)` when this node is not in the peer set yet.
pub fn pass(cfg: &AgentConfig, peers: &[Peer]) -> Result<Option<Changes>, AgentError> {
    let Some(me) = peers.iter().find(|p| p.name == cfg.node_name) else {
        return Ok(None);
    };
    let ch = reconcile::reconcile(&cfg.device, me, peers)?;
    let io = |what: &str, source| AgentError::Io {
        what: what.to_string(),
        source,
    };
    conflist::write_atomic(&cfg.podcidr_file, &format!("{}\n", me.pod_cidr))
        .map_err(|e| io("write the podCIDR file", e))?;
    let text = conflist::render(
        &cfg.network_name,
        &cfg.cni_version,
        me.pod_cidr,
        ch.mtu,
        &cfg.data_dir,
    );
    conflist::write_atomic(&cfg.cni_conf_dir.join(conflist::CONFLIST_NAME), &text)
        .map_err(|e| io("write the conflist", e))?;
    if let Some(c) = cfg.cluster_cidr {
        masq::apply(c).map_err(|e| io("install the masquerade table", e))?;
    }
    Ok(Some(ch))
}

/// Runs the agent: a pass at start (so a restart after a crash converges), then one whenever the
/// source reports a change, and at least every `resync`. With `once`, one pass and return; it fails
/// when this node is not in the peer set. Failures of later passes are logged and retried.
pub fn run(
    cfg: &AgentConfig,
    source: &mut dyn PeerSource,
    once: bool,
    resync: Duration,
) -> Result<(), AgentError> {
    loop {
        let result = source
            .peers()
            .map_err(AgentError::Peers)
            .and_then(|p| pass(cfg, &p));
        match (&result, once) {
            (Ok(Some(ch)), _) => {
                eprintln!(
                    "clusterctl cni agent: reconciled (device created: {}, added {}, removed {}, mtu {})",
                    ch.device_created, ch.added, ch.removed, ch.mtu
                );
                for l in &ch.log {
                    eprintln!("clusterctl cni agent:   {l}");
                }
            }
            (Ok(None), true) => {
                return Err(AgentError::Config(format!(
                    "node {} is not in the peer set",
                    cfg.node_name
                )))
            }
            (Ok(None), false) => eprintln!(
                "clusterctl cni agent: waiting for node {} and its podCIDR",
                cfg.node_name
            ),
            (Err(e), false) => eprintln!("clusterctl cni agent: pass failed, retrying: {e}"),
            (Err(_), true) => {}
        }
        if once {
            return result.map(|_| ());
        }
        source.wait(resync);
    }
}

/// Removes everything the agent installed: the device (with its routes, neighbours, fdb), the
/// masquerade table, the conflist and the podCIDR file. Missing pieces are fine.
pub fn cleanup(cfg: &AgentConfig) -> Result<(), AgentError> {
    reconcile::remove_device(&cfg.device.name)?;
    if cfg.cluster_cidr.is_some() {
        masq::remove().map_err(|e| AgentError::Io {
            what: "remove the masquerade table".into(),
            source: e,
        })?;
    }
    for p in [
        cfg.cni_conf_dir.join(conflist::CONFLIST_NAME),
        cfg.podcidr_file.clone(),
    ] {
        remove_file(&p)?;
    }
    Ok(())
}

fn remove_file(p: &Path) -> Result<(), AgentError> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(AgentError::Io {
            what: format!("remove {}", p.display()),
            source: e,
        }),
        _ => Ok(()),
    }
}
