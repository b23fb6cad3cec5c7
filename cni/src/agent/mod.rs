//! The overlay agent (`clusterctl cni agent`): keeps this node's VXLAN device and its per-peer
//! routes, neighbours and fdb entries equal to the peer set (see [`reconcile`]), writes the node's
//! conflist and podCIDR file once the podCIDR is known, and installs the masquerade table. Peers come
//! from a [`PeerSource`]: the static file ([`StaticFile`]) or Kubernetes Nodes ([`kube`]).

pub(crate) mod conflist;
pub mod kube;
pub mod leases;
pub mod masq;
pub mod netpol;
pub mod peers;
pub(crate) mod reconcile;

use ipnet::{IpNet, Ipv4Net};
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
    Peers(#[source] PeerSourceError),
    /// Reading or rewriting the IPAM leases failed.
    #[error("IPAM leases: {0}")]
    Ipam(#[from] crate::ipam::IpamError),
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

/// The agent's settings: render's type, decoded from `/etc/clusterctl/cni/agent.json` by
/// [`load_config`] (the one description of them; see `clusterctl_render::cni::builtin::AgentConfig`).
pub use clusterctl_render::cni::builtin::AgentConfig;

/// Reads and checks the agent's settings file `path` (JSON, unknown keys refused). Errors:
/// [`AgentError::Io`] when unreadable, [`AgentError::Config`] when not decodable or when a value is
/// invalid (see [`check_config`]).
pub fn load_config(path: &Path) -> Result<AgentConfig, AgentError> {
    let text = std::fs::read_to_string(path).map_err(|e| AgentError::Io {
        what: format!("read {}", path.display()),
        source: e,
    })?;
    let cfg: AgentConfig = serde_json::from_str(&text)
        .map_err(|e| AgentError::Config(format!("{}: {e}", path.display())))?;
    check_config(&cfg)?;
    Ok(cfg)
}

/// Checks what decoding cannot: `podSubnet` is an IPv4 CIDR, the VNI fits 24 bits, the port is not
/// 0, the node name, device name and paths are not empty. Errors: [`AgentError::Config`] naming the key.
pub fn check_config(cfg: &AgentConfig) -> Result<(), AgentError> {
    let bad = |k: &str, why: &str| Err(AgentError::Config(format!("agent settings: {k} {why}")));
    if matches!(cfg.pod_subnet, Some(IpNet::V6(_))) {
        return bad("podSubnet", "is not an IPv4 CIDR");
    }
    if cfg.vni == 0 || cfg.vni > 0x00ff_ffff {
        return bad("vni", "must be 1..16777215");
    }
    if cfg.vxlan_port == 0 {
        return bad("vxlanPort", "must not be 0");
    }
    for (k, v) in [
        ("nodeName", &cfg.node_name),
        ("vxlanDevice", &cfg.vxlan_device),
        ("conflistTemplate", &cfg.conflist_template),
        ("conflistPath", &cfg.conflist_path),
        ("podCIDRFile", &cfg.pod_cidr_file),
    ] {
        if v.is_empty() {
            return bad(k, "is empty");
        }
    }
    if cfg.vxlan_device.len() > 15 {
        return bad("vxlanDevice", "is longer than 15 bytes");
    }
    Ok(())
}

/// The VXLAN device settings of `cfg`.
pub fn device(cfg: &AgentConfig) -> DeviceConfig {
    DeviceConfig {
        name: cfg.vxlan_device.clone(),
        vni: cfg.vni,
        port: cfg.vxlan_port,
        mtu: cfg.mtu,
        underlay: cfg.underlay_interface.clone(),
    }
}

/// The podSubnet to masquerade for, as decoded with the settings (no parsing here). Errors:
/// [`AgentError::Config`] for an IPv6 podSubnet (the overlay is IPv4).
fn pod_subnet(cfg: &AgentConfig) -> Result<Option<Ipv4Net>, AgentError> {
    match cfg.pod_subnet {
        None => Ok(None),
        Some(IpNet::V4(n)) => Ok(Some(n)),
        Some(n @ IpNet::V6(_)) => Err(AgentError::Config(format!(
            "agent settings: podSubnet \"{n}\" is not an IPv4 CIDR"
        ))),
    }
}

/// Why a [`PeerSource`] could not give the peer set.
#[derive(Debug, thiserror::Error)]
pub enum PeerSourceError {
    /// The static peers file is unreadable or malformed.
    #[error(transparent)]
    File(#[from] peers::PeersError),
    /// The Kubernetes API failed.
    #[error(transparent)]
    Kube(#[from] kube::KubeError),
}

/// A source of the peer set.
pub trait PeerSource {
    /// The current full peer set (including this node). Errors: the source's.
    fn peers(&mut self) -> Result<Vec<Peer>, PeerSourceError>;
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
    fn peers(&mut self) -> Result<Vec<Peer>, PeerSourceError> {
        self.seen = self.mtime();
        Ok(peers::read(&self.path)?)
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

/// One full pass: reconcile the overlay, then write the podCIDR file, the completed conflist (its
/// `cniVersion` settled with the installed plugins, [`conflist::settle_version`]) and the masquerade
/// table. Returns `Ok(None)` when this node is not in the peer set yet.
pub fn pass(cfg: &AgentConfig, peers: &[Peer]) -> Result<Option<Changes>, AgentError> {
    let Some(me) = peers.iter().find(|p| p.name == cfg.node_name) else {
        return Ok(None);
    };
    let masq = pod_subnet(cfg)?;
    let mut ch = reconcile::reconcile(&device(cfg), me, peers)?;
    let io = |what: &str, source| AgentError::Io {
        what: what.to_string(),
        source,
    };
    let template = std::fs::read_to_string(&cfg.conflist_template)
        .map_err(|e| io(&format!("read {}", cfg.conflist_template), e))?;
    let text = conflist::complete(&template, me.pod_cidr, ch.mtu)
        .map_err(|e| AgentError::Config(format!("{}: {e}", cfg.conflist_template)))?;
    let text = settle_version(cfg, &text, &mut ch.log)?;
    conflist::write_atomic(Path::new(&cfg.pod_cidr_file), &format!("{}\n", me.pod_cidr))
        .map_err(|e| io("write the podCIDR file", e))?;
    conflist::write_atomic(Path::new(&cfg.conflist_path), &text)
        .map_err(|e| io("write the conflist", e))?;
    if let Some(c) = masq {
        masq::apply(c).map_err(|e| io("install the masquerade table", e))?;
    }
    Ok(Some(ch))
}

/// The completed conflist `text` with its `cniVersion` lowered, where needed, to what every plugin
/// installed in the settings' `cniBinDir` supports; a note for the log is pushed to `log`.
fn settle_version(
    cfg: &AgentConfig,
    text: &str,
    log: &mut Vec<String>,
) -> Result<String, AgentError> {
    let mut list: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| AgentError::Config(format!("the completed conflist: {e}")))?;
    let declared = list
        .get("cniVersion")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string();
    let bin_dir = Path::new(&cfg.cni_bin_dir);
    let ask = |kind: &str| conflist::plugin_versions(bin_dir, kind, &declared);
    match conflist::settle_version(&mut list, &ask) {
        None => Ok(text.to_string()),
        Some(note) => {
            log.push(format!("conflist: {note}"));
            serde_json::to_string_pretty(&list)
                .map(|s| s + "\n")
                .map_err(|e| AgentError::Config(format!("serialize the conflist: {e}")))
        }
    }
}

/// Reconciles this node's IPAM leases ([`leases::reconcile`]) in the store our conflist template
/// names (`dataDir`/`name` of the `clusterctl-cni` entry) against the running boot (`bootIDFile`,
/// default the kernel's). `Ok(None)` when the store does not exist yet. Errors: the template
/// unreadable or without our entry, the boot ID unreadable, IPAM or netlink failures.
pub fn reconcile_leases(cfg: &AgentConfig) -> Result<Option<leases::Outcome>, AgentError> {
    let template = std::fs::read_to_string(&cfg.conflist_template).map_err(|e| AgentError::Io {
        what: format!("read {}", cfg.conflist_template),
        source: e,
    })?;
    let (dir, boot_file) = conflist::ipam_settings(&template)
        .map_err(|e| AgentError::Config(format!("{}: {e}", cfg.conflist_template)))?;
    if !dir.join("state.json").exists() {
        return Ok(None);
    }
    let boot = crate::ipam::read_boot_id(&boot_file)?;
    leases::reconcile(&dir, &boot).map(Some)
}

fn log_leases(result: &Result<Option<leases::Outcome>, AgentError>) {
    match result {
        Ok(None) => {}
        Ok(Some(o)) => {
            eprintln!(
                "clusterctl cni agent: IPAM leases: kept {} ({} stamped with this boot), dropped {}",
                o.kept,
                o.stamped,
                o.dropped.len()
            );
            for (ip, l, why) in &o.dropped {
                eprintln!(
                    "clusterctl cni agent:   freed {ip} of {}/{}: {why}",
                    l.container_id, l.ifname
                );
            }
            for e in &o.errors {
                eprintln!("clusterctl cni agent:   host end left: {e}");
            }
        }
        Err(e) => eprintln!("clusterctl cni agent: IPAM lease reconciliation failed: {e}"),
    }
}

/// Runs the agent: first the IPAM leases are reconciled ([`reconcile_leases`]; a failure is logged,
/// not fatal), then a pass at start (so a restart after a crash converges), then one whenever the
/// source reports a change, and at least every `resyncSeconds` (minimum 1). With `once`, one pass
/// and return; it fails when this node is not in the peer set. Failures of later passes are logged
/// and retried.
pub fn run(cfg: &AgentConfig, source: &mut dyn PeerSource, once: bool) -> Result<(), AgentError> {
    log_leases(&reconcile_leases(cfg));
    let resync = Duration::from_secs(cfg.resync_seconds.max(1));
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
/// masquerade table, the network policy table, the conflist and the podCIDR file. Missing pieces
/// (and a node without `nft`) are fine.
pub fn cleanup(cfg: &AgentConfig) -> Result<(), AgentError> {
    reconcile::remove_device(&cfg.vxlan_device)?;
    match netpol::Nft::default().remove() {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(AgentError::Io {
                what: "remove the network policy table".into(),
                source: e,
            })
        }
        _ => {}
    }
    if pod_subnet(cfg)?.is_some() {
        masq::remove().map_err(|e| AgentError::Io {
            what: "remove the masquerade table".into(),
            source: e,
        })?;
    }
    for p in [&cfg.conflist_path, &cfg.pod_cidr_file] {
        remove_file(Path::new(p))?;
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
