//! In-process IPAM: hands out pod addresses from the node's podCIDR, keyed by (containerID, ifname).
//!
//! The usable range is the podCIDR minus its network address (the node's VTEP address, as flannel
//! assigns it) and its broadcast address: `10.244.1.1 … 10.244.1.254` for `10.244.1.0/24`. State is
//! one JSON file `state.json` in the network's data directory (`<dataDir>/<network name>/`), read and
//! rewritten under an exclusive `flock(2)` on `lock` in the same directory, written to a temporary file
//! and renamed over the old one, so concurrent plugin processes never see a torn file and never give
//! one address to two attachments. Allocation is next-fit after the last address handed out (as the
//! reference `host-local` does), so a freed address is not immediately reused.
//!
//! **Reboots.** Each lease records the boot it was made in (the kernel's boot ID,
//! [`BOOT_ID_FILE`]) and the pod's network namespace path. A store opened with the current boot ID
//! ([`Ipam::with_boot_id`]) never counts a lease of another boot as taken — no pod survives a reboot,
//! and no runtime sends DEL for the pods a reboot took away — and drops such leases the next time it
//! writes. A lease without a boot ID (written before this was recorded) counts as taken until the
//! agent's reconciliation at start ([`Ipam::retain`]) either keeps it — stamped with the current
//! boot — or drops it.

use ipnet::Ipv4Net;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// The kernel's identity of the running boot: a random UUID chosen at every boot.
pub(crate) const BOOT_ID_FILE: &str = "/proc/sys/kernel/random/boot_id";

/// An IPAM failure.
#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    /// Every usable address of the podCIDR is allocated.
    #[error("no free address left in pod CIDR {0} ({1} usable addresses, all allocated)")]
    Exhausted(Ipv4Net, u32),
    /// The podCIDR has no usable address (prefix /31 or /32).
    #[error("pod CIDR {0} is too small to allocate from (needs a prefix of /30 or shorter)")]
    TooSmall(Ipv4Net),
    /// Reading, locking or writing the state failed.
    #[error("IPAM state in {path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The state file does not parse.
    #[error("IPAM state file {path} is corrupt: {msg}")]
    Corrupt {
        /// The state file.
        path: PathBuf,
        /// The parse error.
        msg: String,
    },
    /// The boot ID cannot be read (or is empty).
    #[error("cannot read the boot ID from {path}: {source}")]
    BootId {
        /// The boot ID file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Reads the boot ID from `path` (production: [`BOOT_ID_FILE`]), trimmed. Errors:
/// [`IpamError::BootId`] when unreadable or empty.
pub(crate) fn read_boot_id(path: &Path) -> Result<String, IpamError> {
    let err = |source| IpamError::BootId {
        path: path.to_path_buf(),
        source,
    };
    let id = fs::read_to_string(path).map_err(err)?.trim().to_string();
    if id.is_empty() {
        return Err(err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the file is empty",
        )));
    }
    Ok(id)
}

/// One attachment as the CNI runtime names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Attachment {
    /// `CNI_CONTAINERID`.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
}

/// One lease as stored: the attachment, and where and when it was made. The two optional keys were
/// added later; a store written before them still decodes (and older code ignores them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// `CNI_CONTAINERID`.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_NETNS` of the ADD (the pod's network namespace path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// The boot ID of the boot the ADD ran in; `None` in a store written before boot IDs.
    #[serde(rename = "bootID", default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

impl Lease {
    /// The attachment this lease belongs to.
    pub fn attachment(&self) -> Attachment {
        Attachment {
            container_id: self.container_id.clone(),
            ifname: self.ifname.clone(),
        }
    }

    fn is(&self, att: &Attachment) -> bool {
        self.container_id == att.container_id && self.ifname == att.ifname
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// Last address handed out (next-fit cursor).
    #[serde(default)]
    last: Option<Ipv4Addr>,
    /// Address → lease.
    #[serde(default)]
    allocations: BTreeMap<Ipv4Addr, Lease>,
}

/// The IPAM store of one network on one node.
#[derive(Debug, Clone)]
pub struct Ipam {
    dir: PathBuf,
    cidr: Ipv4Net,
    boot_id: Option<String>,
}

/// The state file, locked exclusively for as long as this lives.
struct Locked {
    _lock: Flock<File>,
    path: PathBuf,
    state: State,
    /// Leases of other boots were left out when reading (the file still holds them).
    pruned: bool,
}

impl Ipam {
    /// An IPAM store for `cidr` under `dir` (created on first use, mode 0700).
    /// Errors: [`IpamError::TooSmall`] for a podCIDR with no usable address.
    pub fn new(dir: impl Into<PathBuf>, cidr: Ipv4Net) -> Result<Self, IpamError> {
        let cidr = cidr.trunc();
        if cidr.prefix_len() > 30 {
            return Err(IpamError::TooSmall(cidr));
        }
        Ok(Self {
            dir: dir.into(),
            cidr,
            boot_id: None,
        })
    }

    /// A store for releasing, looking up and collecting existing allocations when the podCIDR is
    /// not at hand (DEL, CHECK, GC); allocating from it always reports exhaustion.
    pub fn existing(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            cidr: Ipv4Net::new(Ipv4Addr::UNSPECIFIED, 32).unwrap_or_default(),
            boot_id: None,
        }
    }

    /// This store as seen from the boot `boot_id`: leases of any other boot are neither taken nor
    /// found, and are dropped at the next write; new leases record `boot_id`. Without it (the
    /// default) every lease counts and new ones record no boot.
    pub fn with_boot_id(mut self, boot_id: impl Into<String>) -> Self {
        self.boot_id = Some(boot_id.into());
        self
    }

    /// The podCIDR this store allocates from.
    pub fn cidr(&self) -> Ipv4Net {
        self.cidr
    }

    /// Number of usable addresses (network address and broadcast excluded).
    pub fn capacity(&self) -> u32 {
        let size = 1u64 << (32 - u32::from(self.cidr.prefix_len()));
        u32::try_from(size.saturating_sub(2)).unwrap_or(u32::MAX)
    }

    fn lock(&self) -> Result<Locked, IpamError> {
        let io_err = |path: &Path, source| IpamError::Io {
            path: path.to_path_buf(),
            source,
        };
        if !self.dir.exists() {
            use std::os::unix::fs::DirBuilderExt;
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)
                .map_err(|e| io_err(&self.dir, e))?;
        }
        let lock_path = self.dir.join("lock");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| io_err(&lock_path, e))?;
        let lock = Flock::lock(f, FlockArg::LockExclusive)
            .map_err(|(_, e)| io_err(&lock_path, io::Error::from(e)))?;
        let path = self.dir.join("state.json");
        let mut state: State = match fs::read(&path) {
            Ok(bytes) if bytes.is_empty() => State::default(),
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| IpamError::Corrupt {
                path: path.clone(),
                msg: e.to_string(),
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(io_err(&path, e)),
        };
        let read = state.allocations.len();
        if let Some(boot) = &self.boot_id {
            // Leases of an earlier boot: their pods are gone with it.
            state
                .allocations
                .retain(|_, l| l.boot_id.as_ref().is_none_or(|b| b == boot));
        }
        Ok(Locked {
            _lock: lock,
            path,
            pruned: state.allocations.len() != read,
            state,
        })
    }

    /// Allocates an address for `att` made in network namespace `netns`, or returns the one it
    /// already holds (idempotent per (containerID, ifname)). Errors: [`IpamError::Exhausted`], I/O.
    pub fn allocate(&self, att: &Attachment, netns: Option<&str>) -> Result<Ipv4Addr, IpamError> {
        let mut l = self.lock()?;
        if let Some(ip) = l
            .state
            .allocations
            .iter()
            .find(|(_, a)| a.is(att))
            .map(|(ip, _)| *ip)
        {
            return Ok(ip);
        }
        if self.cidr.prefix_len() > 30 {
            return Err(IpamError::Exhausted(self.cidr, 0));
        }
        let first = u32::from(self.cidr.network()) + 1;
        let last = u32::from(self.cidr.broadcast()) - 1;
        let span = last - first + 1;
        let start = match l.state.last.map(u32::from) {
            Some(p) if p >= first && p < last => p + 1,
            _ => first,
        };
        for i in 0..span {
            let cand = Ipv4Addr::from(first + (start - first + i) % span);
            if let std::collections::btree_map::Entry::Vacant(slot) =
                l.state.allocations.entry(cand)
            {
                slot.insert(Lease {
                    container_id: att.container_id.clone(),
                    ifname: att.ifname.clone(),
                    netns: netns.map(str::to_string),
                    boot_id: self.boot_id.clone(),
                });
                l.state.last = Some(cand);
                l.save()?;
                return Ok(cand);
            }
        }
        Err(IpamError::Exhausted(self.cidr, self.capacity()))
    }

    /// Releases whatever `att` holds; returns the freed address (`None` when it held none).
    pub fn release(&self, att: &Attachment) -> Result<Option<Ipv4Addr>, IpamError> {
        let mut l = self.lock()?;
        let found = l
            .state
            .allocations
            .iter()
            .find(|(_, a)| a.is(att))
            .map(|(ip, _)| *ip);
        if let Some(ip) = found {
            l.state.allocations.remove(&ip);
            l.save()?;
        }
        Ok(found)
    }

    /// The address `att` holds, if any.
    pub fn lookup(&self, att: &Attachment) -> Result<Option<Ipv4Addr>, IpamError> {
        let l = self.lock()?;
        Ok(l.state
            .allocations
            .iter()
            .find(|(_, a)| a.is(att))
            .map(|(ip, _)| *ip))
    }

    /// Frees every allocation whose attachment is not in `valid` (CNI GC with
    /// `cni.dev/valid-attachments`); returns the freed (address, attachment) pairs.
    pub fn gc(
        &self,
        valid: &HashSet<Attachment>,
    ) -> Result<Vec<(Ipv4Addr, Attachment)>, IpamError> {
        let freed = self.retain(|_, l| valid.contains(&l.attachment()))?;
        Ok(freed
            .into_iter()
            .map(|(ip, l)| (ip, l.attachment()))
            .collect())
    }

    /// Keeps the leases for which `keep` returns true (it may also change them, e.g. record a boot
    /// ID) and drops the others, under the lock; returns the dropped ones. Writes only when
    /// something changed (with a boot ID set, leases of other boots are dropped without being
    /// offered to `keep` or returned).
    pub fn retain(
        &self,
        mut keep: impl FnMut(Ipv4Addr, &mut Lease) -> bool,
    ) -> Result<Vec<(Ipv4Addr, Lease)>, IpamError> {
        let mut l = self.lock()?;
        let mut changed = l.pruned;
        let mut dropped = Vec::new();
        let mut kept = BTreeMap::new();
        for (ip, lease) in std::mem::take(&mut l.state.allocations) {
            let mut edited = lease.clone();
            if keep(ip, &mut edited) {
                changed |= edited != lease;
                kept.insert(ip, edited);
            } else {
                dropped.push((ip, lease));
            }
        }
        l.state.allocations = kept;
        if changed || !dropped.is_empty() {
            l.save()?;
        }
        Ok(dropped)
    }

    /// Every allocation counted as taken, in address order.
    pub fn leases(&self) -> Result<Vec<(Ipv4Addr, Lease)>, IpamError> {
        let l = self.lock()?;
        Ok(l.state
            .allocations
            .iter()
            .map(|(ip, a)| (*ip, a.clone()))
            .collect())
    }

    /// Every allocation counted as taken, in address order.
    pub fn allocations(&self) -> Result<Vec<(Ipv4Addr, Attachment)>, IpamError> {
        Ok(self
            .leases()?
            .into_iter()
            .map(|(ip, l)| (ip, l.attachment()))
            .collect())
    }

    /// Addresses still free in the podCIDR.
    pub fn free(&self) -> Result<u32, IpamError> {
        let l = self.lock()?;
        let used = l
            .state
            .allocations
            .keys()
            .filter(|ip| self.cidr.contains(*ip))
            .count() as u32;
        Ok(self.capacity().saturating_sub(used))
    }
}

impl Locked {
    fn save(&mut self) -> Result<(), IpamError> {
        let tmp = self.path.with_extension("json.tmp");
        let bytes = serde_json::to_vec(&self.state).map_err(|e| IpamError::Corrupt {
            path: self.path.clone(),
            msg: e.to_string(),
        })?;
        let io_err = |path: &Path, source| IpamError::Io {
            path: path.to_path_buf(),
            source,
        };
        fs::write(&tmp, bytes).map_err(|e| io_err(&tmp, e))?;
        fs::rename(&tmp, &self.path).map_err(|e| io_err(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn att(c: &str, i: &str) -> Attachment {
        Attachment {
            container_id: c.into(),
            ifname: i.into(),
        }
    }

    #[test]
    fn skips_network_vtep_and_broadcast_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let ipam = Ipam::new(dir.path(), "10.244.1.0/30".parse().unwrap()).unwrap();
        assert_eq!(ipam.capacity(), 2);
        let a = ipam.allocate(&att("a", "eth0"), None).unwrap();
        let b = ipam.allocate(&att("b", "eth0"), None).unwrap();
        assert_eq!(a, Ipv4Addr::new(10, 244, 1, 1));
        assert_eq!(b, Ipv4Addr::new(10, 244, 1, 2));
        assert_eq!(ipam.allocate(&att("a", "eth0"), None).unwrap(), a);
        assert!(matches!(
            ipam.allocate(&att("c", "eth0"), None),
            Err(IpamError::Exhausted(_, 2))
        ));
        assert_eq!(ipam.release(&att("a", "eth0")).unwrap(), Some(a));
        assert_eq!(ipam.release(&att("a", "eth0")).unwrap(), None);
        assert_eq!(ipam.allocate(&att("c", "eth0"), None).unwrap(), a);
        assert_eq!(ipam.free().unwrap(), 0);
    }

    #[test]
    fn next_fit_and_gc() {
        let dir = tempfile::tempdir().unwrap();
        let ipam = Ipam::new(dir.path(), "10.244.2.0/24".parse().unwrap()).unwrap();
        let a = ipam.allocate(&att("a", "eth0"), None).unwrap();
        ipam.release(&att("a", "eth0")).unwrap();
        let b = ipam.allocate(&att("b", "eth0"), None).unwrap();
        assert_ne!(a, b, "a freed address is not reused at once");
        ipam.allocate(&att("c", "net1"), None).unwrap();
        let valid: HashSet<_> = [att("c", "net1")].into_iter().collect();
        let freed = ipam.gc(&valid).unwrap();
        assert_eq!(freed, vec![(b, att("b", "eth0"))]);
        assert_eq!(ipam.allocations().unwrap().len(), 1);
        assert!(Ipam::new(dir.path(), "10.0.0.0/31".parse().unwrap()).is_err());
    }

    #[test]
    fn concurrent_threads_never_share_an_address() {
        let dir = tempfile::tempdir().unwrap();
        let ipam = Ipam::new(dir.path(), "10.244.3.0/24".parse().unwrap()).unwrap();
        let handles: Vec<_> = (0..32)
            .map(|i| {
                let ipam = ipam.clone();
                std::thread::spawn(move || {
                    ipam.allocate(&att(&format!("c{i}"), "eth0"), None).unwrap()
                })
            })
            .collect();
        let ips: HashSet<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(ips.len(), 32);
        assert_eq!(ipam.allocations().unwrap().len(), 32);
    }

    fn legacy_state(dir: &Path, leases: &[(&str, &str)]) {
        // The format before boot IDs and netns paths: address → {containerID, ifname}.
        let allocations: serde_json::Map<String, serde_json::Value> = leases
            .iter()
            .map(|(ip, c)| {
                (
                    ip.to_string(),
                    serde_json::json!({"containerID": c, "ifname": "eth0"}),
                )
            })
            .collect();
        let v = serde_json::json!({"last": leases.last().map(|l| l.0), "allocations": allocations});
        fs::write(dir.join("state.json"), v.to_string()).unwrap();
    }

    #[test]
    fn leases_of_another_boot_are_free_and_dropped_at_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let cidr: Ipv4Net = "10.244.4.0/30".parse().unwrap();
        let before = Ipam::new(dir.path(), cidr).unwrap().with_boot_id("boot-1");
        before
            .allocate(&att("a", "eth0"), Some("/run/netns/a"))
            .unwrap();
        before
            .allocate(&att("b", "eth0"), Some("/run/netns/b"))
            .unwrap();
        assert!(matches!(
            before.allocate(&att("c", "eth0"), None),
            Err(IpamError::Exhausted(..))
        ));
        let leases = before.leases().unwrap();
        assert_eq!(leases[0].1.boot_id.as_deref(), Some("boot-1"));
        assert_eq!(leases[0].1.netns.as_deref(), Some("/run/netns/a"));

        let after = Ipam::new(dir.path(), cidr).unwrap().with_boot_id("boot-2");
        assert_eq!(after.free().unwrap(), 2, "nothing of boot-1 is taken");
        assert_eq!(after.lookup(&att("a", "eth0")).unwrap(), None);
        after.allocate(&att("c", "eth0"), None).unwrap();
        after.allocate(&att("d", "eth0"), None).unwrap();
        let text = fs::read_to_string(dir.path().join("state.json")).unwrap();
        assert!(!text.contains("boot-1"), "dropped on write: {text}");
        // Without a boot ID (DEL, CHECK), every recorded lease is visible.
        assert_eq!(Ipam::existing(dir.path()).allocations().unwrap().len(), 2);
    }

    #[test]
    fn a_store_written_before_boot_ids_keeps_working() {
        let dir = tempfile::tempdir().unwrap();
        legacy_state(
            dir.path(),
            &[("10.244.5.1", "old1"), ("10.244.5.2", "old2")],
        );
        let ipam = Ipam::new(dir.path(), "10.244.5.0/29".parse().unwrap())
            .unwrap()
            .with_boot_id("boot-9");
        // Leases of unknown boot count as taken (they may be this boot's pods).
        assert_eq!(ipam.free().unwrap(), 4);
        assert_eq!(
            ipam.lookup(&att("old1", "eth0")).unwrap(),
            Some(Ipv4Addr::new(10, 244, 5, 1))
        );
        let ip = ipam
            .allocate(&att("new", "eth0"), Some("/run/netns/n"))
            .unwrap();
        assert_eq!(
            ip,
            Ipv4Addr::new(10, 244, 5, 3),
            "next-fit after the old cursor"
        );
        // The agent's reconciliation decides: keep old1 (stamped), drop old2.
        let dropped = ipam
            .retain(|_, l| {
                if l.container_id == "old2" {
                    return false;
                }
                if l.boot_id.is_none() {
                    l.boot_id = Some("boot-9".into());
                }
                true
            })
            .unwrap();
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].1.container_id, "old2");
        let leases = ipam.leases().unwrap();
        assert!(leases
            .iter()
            .all(|(_, l)| l.boot_id.as_deref() == Some("boot-9")));
        assert_eq!(ipam.free().unwrap(), 4);
        // Nothing to change: no write.
        let m1 = fs::metadata(dir.path().join("state.json"))
            .unwrap()
            .modified()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(ipam.retain(|_, _| true).unwrap().is_empty());
        let m2 = fs::metadata(dir.path().join("state.json"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(m1, m2);
    }

    #[test]
    fn boot_id_is_read_trimmed_and_must_not_be_empty() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("boot_id");
        fs::write(&f, "0f6c\n").unwrap();
        assert_eq!(read_boot_id(&f).unwrap(), "0f6c");
        fs::write(&f, "\n").unwrap();
        assert!(matches!(read_boot_id(&f), Err(IpamError::BootId { .. })));
        assert!(read_boot_id(&dir.path().join("none")).is_err());
        assert!(!read_boot_id(Path::new(BOOT_ID_FILE)).unwrap().is_empty());
    }
}
