//! Entering a network namespace for a piece of work and coming back: `setns(2)` on the calling
//! thread (via `nix`), restored by a guard also on early return. Sockets opened while inside stay
//! bound to that namespace after the thread returns.

use nix::sched::{setns, CloneFlags};
use std::fs::File;
use std::io;
use std::path::Path;

/// The calling thread inside another network namespace until dropped; drop returns it to the
/// namespace it was in when [`NetnsGuard::enter`] ran.
pub struct NetnsGuard {
    origin: File,
}

impl NetnsGuard {
    /// Enters the namespace at `target` (an open namespace file). Errors: `EPERM` without
    /// `CAP_SYS_ADMIN`, `EINVAL` when `target` is not a network namespace.
    pub fn enter(target: &File) -> io::Result<Self> {
        let origin = File::open("/proc/thread-self/ns/net")?;
        setns(target, CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
        Ok(Self { origin })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Err(e) = setns(&self.origin, CloneFlags::CLONE_NEWNET) {
            eprintln!("clusterctl-cni: cannot return to the original network namespace: {e}");
        }
    }
}

/// Opens a network namespace reference (`/run/netns/NAME`, `/proc/PID/ns/net`). Errors: the path's
/// open error (`ENOENT` when the namespace is gone).
pub fn open(path: &Path) -> io::Result<File> {
    File::open(path)
}
