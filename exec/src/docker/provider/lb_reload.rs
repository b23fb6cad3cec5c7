//! Reloading the load balancer's HAProxy, confirmed. HAProxy in master-worker mode (`haproxy -W`, kind's
//! node contract) re-executes its master on `SIGHUP` and forks new workers with the new file. The
//! master is the container's PID 1, and the kernel drops a signal sent to a namespace's init process
//! for which it has no handler yet: a `SIGHUP` that arrives while HAProxy is still starting is lost
//! without a trace (seen under load: a `node remove` right after `up`, and the old backends stayed).
//!
//! So a reload here is confirmed by what the engine's process list (`docker top`) shows: first the
//! master has a worker (its loop, which handles `SIGHUP`, runs), then the signal, then a worker that
//! was not there before; the signal is sent again when none appears in [`CONFIRM`], up to
//! [`ATTEMPTS`] times. A master that never forks a new worker (a configuration HAProxy refuses) is an
//! error naming the container.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bollard::query_parameters::{KillContainerOptionsBuilder, TopOptionsBuilder};

use super::DockerProvider;
use crate::transport::ExecError;

/// How long HAProxy may take to start its first worker.
const STARTED: Duration = Duration::from_secs(30);
/// How long a new worker may take to appear after one `SIGHUP`.
const CONFIRM: Duration = Duration::from_secs(5);
/// How many `SIGHUP`s are sent before the reload is an error.
const ATTEMPTS: usize = 3;
/// Pause between two reads of the process list.
const POLL: Duration = Duration::from_millis(200);

/// One process of the container as `docker top` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Proc {
    pub(super) pid: u32,
    pub(super) ppid: u32,
}

/// The workers among `procs`: children of the master, the one process whose parent is outside the
/// container (the engine's shim). Empty when there is no single master.
pub(super) fn workers(procs: &[Proc]) -> BTreeSet<u32> {
    let pids: BTreeSet<u32> = procs.iter().map(|p| p.pid).collect();
    let masters: Vec<u32> = procs
        .iter()
        .filter(|p| !pids.contains(&p.ppid))
        .map(|p| p.pid)
        .collect();
    let [master] = masters[..] else {
        return BTreeSet::new();
    };
    procs
        .iter()
        .filter(|p| p.ppid == master)
        .map(|p| p.pid)
        .collect()
}

/// The processes of a `docker top` answer: its `PID` and `PPID` columns (by title). Rows whose values
/// do not parse are left out.
pub(super) fn parse_top(titles: &[String], rows: &[Vec<String>]) -> Vec<Proc> {
    let col = |name: &str| titles.iter().position(|t| t == name);
    let (Some(pid), Some(ppid)) = (col("PID"), col("PPID")) else {
        return Vec::new();
    };
    rows.iter()
        .filter_map(|r| {
            Some(Proc {
                pid: r.get(pid)?.parse().ok()?,
                ppid: r.get(ppid)?.parse().ok()?,
            })
        })
        .collect()
}

impl DockerProvider {
    /// Reloads HAProxy in the running container `name` and waits until it runs a new worker (see the
    /// module). Errors: the engine's, or HAProxy never starting a worker / never reloading.
    pub(super) fn reload_haproxy(&self, name: &str) -> Result<(), ExecError> {
        let before = self.wait_for_workers(name, STARTED, |w| !w.is_empty())?;
        for _ in 0..ATTEMPTS {
            self.send_hup(name)?;
            let fresh = |w: &BTreeSet<u32>| w.iter().any(|p| !before.contains(p));
            if self.wait_for_workers(name, CONFIRM, fresh).is_ok() {
                return Ok(());
            }
        }
        Err(self.err(format!(
            "reloading load balancer {name}: HAProxy started no new worker after {ATTEMPTS} SIGHUPs \
             (see `docker logs {name}`: a configuration it refuses keeps the old one)"
        )))
    }

    /// Polls the container's workers until `done` holds them; returns them. Errors: the engine's, or
    /// `within` passing.
    fn wait_for_workers(
        &self,
        name: &str,
        within: Duration,
        done: impl Fn(&BTreeSet<u32>) -> bool,
    ) -> Result<BTreeSet<u32>, ExecError> {
        let end = Instant::now() + within;
        loop {
            let w = workers(&self.top(name)?);
            if done(&w) {
                return Ok(w);
            }
            if Instant::now() >= end {
                return Err(self.err(format!(
                    "load balancer {name}: HAProxy's workers {w:?} after {within:?}"
                )));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The container's processes (`docker top`, `ps -ef` on the engine's host).
    fn top(&self, name: &str) -> Result<Vec<Proc>, ExecError> {
        let top = self.client.block_on(async {
            self.client
                .docker()
                .top_processes(
                    name,
                    Some(TopOptionsBuilder::default().ps_args("-ef").build()),
                )
                .await
                .map_err(|e| self.err(format!("listing the processes of {name}: {e}")))
        })?;
        Ok(parse_top(
            &top.titles.unwrap_or_default(),
            &top.processes.unwrap_or_default(),
        ))
    }

    /// Sends `SIGHUP` to the container's init process.
    fn send_hup(&self, name: &str) -> Result<(), ExecError> {
        self.client.block_on(async {
            self.client
                .docker()
                .kill_container(
                    name,
                    Some(KillContainerOptionsBuilder::default().signal("HUP").build()),
                )
                .await
                .map_err(|e| self.err(format!("reloading load balancer {name}: {e}")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, ppid: u32) -> Proc {
        Proc { pid, ppid }
    }

    #[test]
    fn the_workers_are_the_masters_children() {
        // Master 4100 (parent: the shim, 4080), workers 4120 and an old one still draining, 4110.
        let procs = [p(4100, 4080), p(4110, 4100), p(4120, 4100)];
        assert_eq!(workers(&procs), BTreeSet::from([4110, 4120]));
        // Still starting: the master alone.
        assert!(workers(&[p(4100, 4080)]).is_empty());
        // No single master (nothing listed, or two processes from outside): no workers.
        assert!(workers(&[]).is_empty());
        assert!(workers(&[p(1, 0), p(2, 0), p(3, 1)]).is_empty());
    }

    #[test]
    fn the_top_columns_are_found_by_title() {
        let titles: Vec<String> = ["UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"]
            .map(String::from)
            .to_vec();
        let row = |pid: &str, ppid: &str| -> Vec<String> {
            [
                "root",
                pid,
                ppid,
                "0",
                "21:00",
                "?",
                "00:00:00",
                "haproxy -W -db -f x",
            ]
            .map(String::from)
            .to_vec()
        };
        let procs = parse_top(
            &titles,
            &[row("4100", "4080"), row("4110", "4100"), row("x", "1")],
        );
        assert_eq!(procs, vec![p(4100, 4080), p(4110, 4100)]);
        assert!(parse_top(&["CMD".to_string()], &[row("1", "0")]).is_empty());
    }
}
