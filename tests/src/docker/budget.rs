//! A budget of node containers per test process. Each crate's integration tests are one test binary,
//! so whole-system tests of different areas run side by side (`--test-threads`); without a bound, four
//! multi-node clusters booting at once on a small machine miss their boot timeouts. A cluster takes
//! its nodes from the budget before it starts and gives them back when it is dropped; a cluster larger
//! than the whole budget waits until nothing else runs. The budget is `CLUSTERCTL_TESTBED_MAX_NODES`
//! (default 6, at least 1).

use std::sync::{Condvar, Mutex, MutexGuard};

/// Node containers held by running test clusters of this process.
static IN_USE: Mutex<usize> = Mutex::new(0);
/// Signalled whenever nodes are given back.
static FREED: Condvar = Condvar::new();

/// The budget: `CLUSTERCTL_TESTBED_MAX_NODES`, default 6, at least 1.
fn limit() -> usize {
    std::env::var("CLUSTERCTL_TESTBED_MAX_NODES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(6usize)
        .max(1)
}

fn in_use() -> MutexGuard<'static, usize> {
    IN_USE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Nodes taken from the budget by one test cluster; given back on drop.
#[derive(Debug)]
pub(crate) struct Nodes(usize);

impl Nodes {
    /// Waits until `n` nodes (at most the whole budget) are free, then takes them.
    pub(crate) fn take(n: usize) -> Nodes {
        let (limit, want) = (limit(), n.min(limit()));
        let mut used = in_use();
        while *used + want > limit {
            used = FREED.wait(used).unwrap_or_else(|e| e.into_inner());
        }
        *used += want;
        Nodes(want)
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        let mut used = in_use();
        *used = used.saturating_sub(self.0);
        FREED.notify_all();
    }
}
