//! Compiling and applying the node's rules, failing closed, and what to report about it
//! ([`report::Notice`]):
//!
//! * the compiled rules are applied: the first time (and after a failure) as the whole table, then
//!   only what changed since the table applied last ([`super::diff`]), each in one transaction;
//!   nothing changed, no `nft` call;
//! * when `nft` refuses them, the **fail-closed table** is applied instead: the same isolation sets
//!   (every pod some policy selects, for its policy types) and no allow rule — the selected pods are
//!   denied, never silently allowed — and the node reports [`report::FAILED_CLOSED`];
//! * when that fails too, or `nft` is not installed, NetworkPolicy is not enforced on the node at all:
//!   the agent reports [`report::NOT_ENFORCED`] (log and Event on the Node; `status` shows it);
//! * a policy the compiler fails closed is reported once on that NetworkPolicy (again when the set of
//!   such policies changes);
//! * after either failure, the first successful apply reports [`report::ENFORCED`].

use super::cache::Cache;
use super::compile::{compile_refs, Ruleset};
use super::diff::diff;
use super::nft::{self, Nft};
use super::report::{self, Notice};
use super::table::{Names, Table};
use std::time::Instant;

/// How the node's rules stand, as last reported.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Nothing applied yet.
    Unknown,
    /// The compiled rules are applied.
    Enforced,
    /// The fail-closed table is applied.
    FailedClosed,
    /// No table could be applied.
    NotEnforced,
}

/// The table applied last and the policy names it was written with.
#[derive(Debug)]
struct Applied {
    table: Table,
    names: Names,
}

/// Compiles and applies, remembering the table applied last (`None` at the start and after a
/// failure: the next apply replaces the whole table), the state reported last and the failed
/// policies reported last.
#[derive(Debug)]
pub(crate) struct Applier<'a> {
    node: &'a str,
    nft: &'a Nft,
    applied: Option<Applied>,
    failed: Vec<String>,
    state: State,
}

impl<'a> Applier<'a> {
    /// An applier for node `node` running `nft`.
    pub(crate) fn new(node: &'a str, nft: &'a Nft) -> Self {
        Self {
            node,
            nft,
            applied: None,
            failed: Vec::new(),
            state: State::Unknown,
        }
    }

    /// [`Applier::apply`], then the notices logged and recorded as Events through `client`.
    pub(crate) async fn sync(&mut self, client: &kube::Client, cache: &Cache) {
        let notices = self.apply(cache);
        report::post(client, self.node, &notices).await;
    }

    /// Compiles `cache` and applies the result (or the fail-closed table); what to report.
    pub(crate) fn apply(&mut self, cache: &Cache) -> Vec<Notice> {
        let t = Instant::now();
        let rs = compile_refs(
            self.node,
            cache.policies.values(),
            cache.pods.values(),
            cache.namespaces.values(),
        );
        let mut out = self.failed_policies(&rs, cache);
        let names = self
            .applied
            .as_ref()
            .map_or_else(|| Names::fresh(&rs), |a| a.names.next(&rs));
        let table = Table::build(&rs, &names);
        let compiled = t.elapsed();
        let Some(how) = self.write(&table) else {
            return out;
        };
        match how {
            Ok(how) => {
                eprintln!(
                    "clusterctl cni agent: network policy: {} of {} policies select pods here; \
                     isolated: {} for ingress, {} for egress; {how}; compiled in {} ms, \
                     applied in {} ms",
                    rs.policies.len() + rs.failed.len(),
                    cache.policies.len(),
                    rs.ingress_isolated.len(),
                    rs.egress_isolated.len(),
                    compiled.as_millis(),
                    t.elapsed().as_millis()
                );
                self.applied = Some(Applied { table, names });
                if !matches!(self.state, State::Enforced | State::Unknown) {
                    out.push(Notice::Enforced);
                }
                self.state = State::Enforced;
            }
            Err(e) => {
                self.applied = None;
                let (state, notice) = self.fail_closed(&rs, &e);
                if state != self.state {
                    out.push(notice);
                }
                self.state = state;
            }
        }
        out
    }

    /// Brings the kernel's table to `table`: only the difference from the table applied last,
    /// when there is one and it is smaller than the table, else the whole table; either in one
    /// transaction. `None` when nothing changed (no `nft` call); else what was done, or `nft`'s
    /// error. A refused difference (the kernel's table no longer the one applied last, e.g.
    /// someone flushed the ruleset) is followed by the whole table.
    fn write(&self, table: &Table) -> Option<std::io::Result<String>> {
        let part = self.applied.as_ref().and_then(|a| diff(&a.table, table));
        if let Some((script, n)) = part.filter(|(_, n)| *n <= table.size()) {
            if script.is_empty() {
                return None;
            }
            match self.nft.run(&["-f", "-"], &script) {
                Ok(_) => return Some(Ok(format!("in place, {n} objects"))),
                Err(e) => eprintln!(
                    "clusterctl cni agent: network policy: the change in place was refused ({e}); \
                     replacing the whole table"
                ),
            }
        }
        let whole = nft::whole(table);
        Some(
            self.nft
                .run(&["-f", "-"], &whole)
                .map(|_| format!("whole table, {} objects", table.size())),
        )
    }

    /// After `nft` refused `rs` with `e`: the fail-closed table applied, or nothing could be.
    fn fail_closed(&self, rs: &Ruleset, e: &std::io::Error) -> (State, Notice) {
        if e.kind() == std::io::ErrorKind::NotFound {
            return (
                State::NotEnforced,
                Notice::NotEnforced(
                    "nft is not installed (Debian/Ubuntu package nftables); install it on the node"
                        .into(),
                ),
            );
        }
        let closed = Ruleset {
            ingress_isolated: rs.ingress_isolated.clone(),
            egress_isolated: rs.egress_isolated.clone(),
            policies: Vec::new(),
            failed: Vec::new(),
        };
        match self.nft.apply(&closed) {
            Ok(()) => (
                State::FailedClosed,
                Notice::NodeFailedClosed(format!("nft refused the compiled rules ({e})")),
            ),
            Err(e2) => (
                State::NotEnforced,
                Notice::NotEnforced(format!(
                    "nft refused the compiled rules ({e}) and the fail-closed table ({e2})"
                )),
            ),
        }
    }

    /// Notices for the policies that fail closed now and did not (with this error) before.
    fn failed_policies(&mut self, rs: &Ruleset, cache: &Cache) -> Vec<Notice> {
        let now: Vec<String> = rs
            .failed
            .iter()
            .map(|f| format!("{}: {}", f.id, f.error))
            .collect();
        if now == self.failed {
            return Vec::new();
        }
        let uid = |id: &str| cache.policies.get(id).and_then(|p| p.metadata.uid.clone());
        let split = |id: &str| {
            let (ns, name) = id.split_once('/').unwrap_or(("", id));
            (ns.to_string(), name.to_string())
        };
        let mut out: Vec<Notice> = rs
            .failed
            .iter()
            .zip(&now)
            .filter(|(_, line)| !self.failed.contains(line))
            .map(|(f, _)| {
                let (namespace, name) = split(&f.id);
                Notice::PolicyFailedClosed {
                    namespace,
                    name,
                    uid: uid(&f.id),
                    why: f.error.to_string(),
                }
            })
            .collect();
        // Those that failed before and are programmed now (not merely deleted).
        for old in &self.failed {
            let id = old.split_once(": ").map_or(old.as_str(), |(id, _)| id);
            if cache.policies.contains_key(id) && !rs.failed.iter().any(|f| f.id == id) {
                let (namespace, name) = split(id);
                out.push(Notice::PolicyEnforced {
                    namespace,
                    name,
                    uid: uid(id),
                });
            }
        }
        self.failed = now;
        out
    }
}

#[cfg(test)]
mod tests;
