//! A budget of node containers for the whole machine. The test binaries run side by side (the CLI's
//! tests in two processes — the longest real cluster started first in its own — beside every other
//! crate's; each binary with `--test-threads`); without a bound, several multi-node clusters booting at
//! once on a small machine miss their boot timeouts, and on two cores more clusters at once only share
//! the same CPU more thinly. A cluster takes its nodes from the budget before it starts and gives them
//! back when it is dropped (or when its process ends, however it ends); a cluster larger than the whole
//! budget waits until nothing else runs. The budget is `CLUSTERCTL_TESTBED_MAX_NODES` (default 7, at
//! least 1; every process of one run must see the same value).
//!
//! Each node is one slot: the file `clusterctl-testbed-node-<i>.lock` (`i` below the budget) in
//! `/run/lock` (else `/tmp`), held with `flock(2)`, which the kernel releases when the holder's file is
//! closed — also when a test process is killed, so a dead process never keeps nodes. Takers queue
//! on the file `clusterctl-testbed-node-door.lock`: the one holding it waits until enough slots are free
//! and takes them all at once, so a large cluster is not starved by small ones arriving after it, and
//! no taker holds part of what it needs while waiting (no deadlock between takers).

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The budget: `CLUSTERCTL_TESTBED_MAX_NODES`, default 7, at least 1: the HA test's 6 nodes and one
/// more (with 10, the run at load 70 lost a request through the HA cluster's VIP; docs/testing.md run 27).
fn limit() -> usize {
    std::env::var("CLUSTERCTL_TESTBED_MAX_NODES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(7usize)
        .max(1)
}

/// Where the lock files are: `/run/lock`, else `/tmp`.
fn lock_dir() -> PathBuf {
    PathBuf::from(if std::path::Path::new("/run/lock").is_dir() {
        "/run/lock"
    } else {
        "/tmp"
    })
}

/// The lock file `clusterctl-testbed-node-<name>.lock` in `dir`, opened.
fn lock_file(dir: &Path, name: &str) -> std::io::Result<File> {
    let path = dir.join(format!("clusterctl-testbed-node-{name}.lock"));
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

/// `flock(file, LOCK_EX)`, without waiting when `wait` is false: whether it was taken.
fn lock(file: &File, wait: bool) -> bool {
    let op = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    // SAFETY: flock on a file descriptor `file` owns for the duration of the call.
    unsafe { libc::flock(file.as_raw_fd(), op) == 0 }
}

/// Nodes taken from the machine's budget by one test cluster: the held slot files (closing them gives
/// the nodes back). When the lock files cannot be opened, an empty hold (no bound).
#[derive(Debug)]
pub(crate) struct Nodes {
    _slots: Vec<File>,
}

impl Nodes {
    /// Waits until `n` nodes (at most the whole budget) are free, then takes them (see the module doc).
    pub(crate) fn take(n: usize) -> Nodes {
        Self::take_in(&lock_dir(), limit(), n)
    }

    /// [`Nodes::take`] with the lock files in `dir` and a budget of `limit` nodes.
    fn take_in(dir: &Path, limit: usize, n: usize) -> Nodes {
        let want = n.min(limit);
        let opened: std::io::Result<Vec<File>> =
            (0..limit).map(|i| lock_file(dir, &i.to_string())).collect();
        let (Ok(door), Ok(slots)) = (lock_file(dir, "door"), opened) else {
            return Nodes { _slots: Vec::new() };
        };
        lock(&door, true);
        loop {
            let free: Vec<&File> = slots.iter().filter(|s| lock(s, false)).take(want).collect();
            if free.len() == want {
                let taken: Vec<i32> = free.iter().map(|f| f.as_raw_fd()).collect();
                let slots = slots
                    .into_iter()
                    .filter(|s| taken.contains(&s.as_raw_fd()))
                    .collect();
                return Nodes { _slots: slots };
            }
            for s in free {
                // SAFETY: unlocks a slot this loop locked, through its own descriptor.
                unsafe { libc::flock(s.as_raw_fd(), libc::LOCK_UN) };
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_taker_waits_for_enough_free_slots_and_a_large_one_gets_the_whole_budget() {
        let dir = tempfile::tempdir().expect("dir");
        let a = Nodes::take_in(dir.path(), 3, 2);
        assert_eq!(a._slots.len(), 2);
        let b = Nodes::take_in(dir.path(), 3, 1);
        let taken = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (dir, taken) = (dir.path().to_path_buf(), taken.clone());
            std::thread::spawn(move || {
                let c = Nodes::take_in(&dir, 3, 5);
                taken.store(true, Ordering::SeqCst);
                c._slots.len()
            })
        };
        std::thread::sleep(Duration::from_millis(800));
        assert!(!taken.load(Ordering::SeqCst), "took nodes held by others");
        drop(a);
        std::thread::sleep(Duration::from_millis(800));
        assert!(
            !taken.load(Ordering::SeqCst),
            "took the budget while one node is held"
        );
        drop(b);
        assert_eq!(
            waiter.join().expect("thread"),
            3,
            "clamped to the whole budget"
        );
    }
}
