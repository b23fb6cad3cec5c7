//! In-process IPAM: hands out pod addresses from the node's podCIDR, keyed by (containerID, ifname).
//!
//! The usable range is the podCIDR minus its network address (the node's VTEP address, as flannel
//! assigns it) and its broadcast address: `10.244.1.1 … 10.244.1.254` for `10.244.1.0/24`. State is
//! one JSON file `state.json` in the network's data directory (`<dataDir>/<network name>/`), read and
//! rewritten under an exclusive `flock(2)` on `lock` in the same directory, written to a temporary file
//! and renamed over the old one, so concurrent plugin processes never see a torn file and never give
//! one address to two attachments. Allocation is next-fit after the last address handed out (as the
//! reference `host-local` does), so a freed address is not immediately reused.

use ipnet::Ipv4Net;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

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

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// Last address handed out (next-fit cursor).
    #[serde(default)]
    last: Option<Ipv4Addr>,
    /// Address → attachment.
    #[serde(default)]
    allocations: BTreeMap<Ipv4Addr, Attachment>,
}

/// The IPAM store of one network on one node.
#[derive(Debug, Clone)]
pub struct Ipam {
    dir: PathBuf,
    cidr: Ipv4Net,
}

/// The state file, locked exclusively for as long as this lives.
struct Locked {
    _lock: Flock<File>,
    path: PathBuf,
    state: State,
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
        })
    }

    /// A store for releasing, looking up and collecting existing allocations when the podCIDR is
    /// not at hand (DEL, CHECK, GC); allocating from it always reports exhaustion.
    pub fn existing(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            cidr: Ipv4Net::new(Ipv4Addr::UNSPECIFIED, 32).unwrap_or_default(),
        }
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
        let state = match fs::read(&path) {
            Ok(bytes) if bytes.is_empty() => State::default(),
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| IpamError::Corrupt {
                path: path.clone(),
                msg: e.to_string(),
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(io_err(&path, e)),
        };
        Ok(Locked {
            _lock: lock,
            path,
            state,
        })
    }

    /// Allocates an address for `att`, or returns the one it already holds (idempotent per
    /// (containerID, ifname)). Errors: [`IpamError::Exhausted`], I/O.
    pub fn allocate(&self, att: &Attachment) -> Result<Ipv4Addr, IpamError> {
        let mut l = self.lock()?;
        if let Some(ip) = l
            .state
            .allocations
            .iter()
            .find(|(_, a)| *a == att)
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
                slot.insert(att.clone());
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
            .find(|(_, a)| *a == att)
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
            .find(|(_, a)| *a == att)
            .map(|(ip, _)| *ip))
    }

    /// Frees every allocation whose attachment is not in `valid` (CNI GC with
    /// `cni.dev/valid-attachments`); returns the freed (address, attachment) pairs.
    pub fn gc(
        &self,
        valid: &HashSet<Attachment>,
    ) -> Result<Vec<(Ipv4Addr, Attachment)>, IpamError> {
        let mut l = self.lock()?;
        let stale: Vec<(Ipv4Addr, Attachment)> = l
            .state
            .allocations
            .iter()
            .filter(|(_, a)| !valid.contains(*a))
            .map(|(ip, a)| (*ip, a.clone()))
            .collect();
        if !stale.is_empty() {
            for (ip, _) in &stale {
                l.state.allocations.remove(ip);
            }
            l.save()?;
        }
        Ok(stale)
    }

    /// Every allocation, in address order.
    pub fn allocations(&self) -> Result<Vec<(Ipv4Addr, Attachment)>, IpamError> {
        let l = self.lock()?;
        Ok(l.state
            .allocations
            .iter()
            .map(|(ip, a)| (*ip, a.clone()))
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
        let a = ipam.allocate(&att("a", "eth0")).unwrap();
        let b = ipam.allocate(&att("b", "eth0")).unwrap();
        assert_eq!(a, Ipv4Addr::new(10, 244, 1, 1));
        assert_eq!(b, Ipv4Addr::new(10, 244, 1, 2));
        assert_eq!(ipam.allocate(&att("a", "eth0")).unwrap(), a);
        assert!(matches!(
            ipam.allocate(&att("c", "eth0")),
            Err(IpamError::Exhausted(_, 2))
        ));
        assert_eq!(ipam.release(&att("a", "eth0")).unwrap(), Some(a));
        assert_eq!(ipam.release(&att("a", "eth0")).unwrap(), None);
        assert_eq!(ipam.allocate(&att("c", "eth0")).unwrap(), a);
        assert_eq!(ipam.free().unwrap(), 0);
    }

    #[test]
    fn next_fit_and_gc() {
        let dir = tempfile::tempdir().unwrap();
        let ipam = Ipam::new(dir.path(), "10.244.2.0/24".parse().unwrap()).unwrap();
        let a = ipam.allocate(&att("a", "eth0")).unwrap();
        ipam.release(&att("a", "eth0")).unwrap();
        let b = ipam.allocate(&att("b", "eth0")).unwrap();
        assert_ne!(a, b, "a freed address is not reused at once");
        ipam.allocate(&att("c", "net1")).unwrap();
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
                std::thread::spawn(move || ipam.allocate(&att(&format!("c{i}"), "eth0")).unwrap())
            })
            .collect();
        let ips: HashSet<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(ips.len(), 32);
        assert_eq!(ipam.allocations().unwrap().len(), 32);
    }
}
