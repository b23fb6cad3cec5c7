//! Phase timings of one plugin invocation, for the benchmark's breakdown: when the environment
//! variable `CLUSTERCTL_CNI_TIMING` is set, [`report`] writes one line to stderr,
//! `clusterctl-cni-timing {"config":12,"ipam":80,…}` (microseconds spent in each phase since the
//! previous mark; `start` is the time since process start as the kernel records it). Off by default.

use std::cell::RefCell;
use std::time::Instant;

thread_local! {
    static MARKS: RefCell<Vec<(&'static str, Instant)>> = const { RefCell::new(Vec::new()) };
}

fn enabled() -> bool {
    std::env::var_os("CLUSTERCTL_CNI_TIMING").is_some()
}

/// Records the end of phase `name`.
pub(crate) fn mark(name: &'static str) {
    if enabled() {
        MARKS.with(|m| m.borrow_mut().push((name, Instant::now())));
    }
}

/// Writes the timing line to stderr (when enabled).
pub(crate) fn report() {
    if !enabled() {
        return;
    }
    MARKS.with(|m| {
        let m = m.borrow();
        let mut parts = Vec::new();
        for w in m.windows(2) {
            let us = w[1].1.duration_since(w[0].1).as_micros();
            parts.push(format!("\"{}\":{}", w[1].0, us));
        }
        eprintln!("clusterctl-cni-timing {{{}}}", parts.join(","));
    });
}
