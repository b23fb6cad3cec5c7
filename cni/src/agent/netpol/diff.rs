//! The difference between the table applied last and the one wanted, as one `nft -f -` script of
//! only what changed — applied as one transaction, so a packet sees the old table or the new one:
//!
//! 1. `flush chain` of every chain whose rules changed or that goes (a chain jumping to a chain
//!    that goes, or matching a set that goes, has changed rules, so it is flushed here too);
//! 2. `delete chain` of the chains that go, `delete set` of the sets that go;
//! 3. `add set` (with its elements) of new sets; `delete element` / `add element` of the elements
//!    that left / joined a kept set (a pod's address, a pod or namespace label change);
//! 4. `add chain` of new chains, then `add rule` of every rule of the new and changed chains.
//!
//! A change `nft` cannot make in place (a set changing its kind, the base chain changing) gives
//! `None`: the caller replaces the whole table.

use super::nft::TABLE;
use super::table::{join, Table};
use std::fmt::Write as _;

/// The script taking the kernel from `old` to `new`, and how many objects it writes (sets,
/// elements, chains, rules; empty string and 0 when nothing changed); `None` when only a whole
/// replace can make the change.
pub(crate) fn diff(old: &Table, new: &Table) -> Option<(String, usize)> {
    let mut s = String::new();
    let mut n = 0;
    let changed: Vec<&String> = new
        .chains
        .iter()
        .filter(|(name, c)| old.chains.get(*name).is_some_and(|o| o != *c))
        .map(|(name, _)| name)
        .collect();
    for name in &changed {
        if new.chains[*name].hook.is_some() || old.chains[*name].hook != new.chains[*name].hook {
            return None;
        }
    }
    let gone: Vec<&String> = old
        .chains
        .keys()
        .filter(|k| !new.chains.contains_key(*k))
        .collect();
    if gone.iter().any(|k| old.chains[*k].hook.is_some()) {
        return None;
    }
    for name in changed.iter().chain(&gone) {
        let _ = writeln!(s, "flush chain {TABLE} {name}");
        n += 1;
    }
    for name in &gone {
        let _ = writeln!(s, "delete chain {TABLE} {name}");
        n += 1;
    }
    n += sets(old, new, &mut s)?;
    let added: Vec<&String> = new
        .chains
        .keys()
        .filter(|k| !old.chains.contains_key(*k))
        .collect();
    if added.iter().any(|k| new.chains[*k].hook.is_some()) {
        return None;
    }
    for name in &added {
        let _ = writeln!(s, "add chain {TABLE} {name}");
        n += 1;
    }
    for name in changed.iter().chain(&added) {
        for r in &new.chains[*name].rules {
            let _ = writeln!(s, "add rule {TABLE} {name} {r}");
            n += 1;
        }
    }
    Some((s, n))
}

/// Appends the set commands (deleted, added, elements changed) to `s`; how many objects they write,
/// `None` when a set changes its kind.
fn sets(old: &Table, new: &Table, s: &mut String) -> Option<usize> {
    let mut n = 0;
    for name in old.sets.keys().filter(|k| !new.sets.contains_key(*k)) {
        let _ = writeln!(s, "delete set {TABLE} {name}");
        n += 1;
    }
    for (name, set) in &new.sets {
        let Some(was) = old.sets.get(name) else {
            let _ = writeln!(s, "add set {TABLE} {name} {}", set.body());
            n += 1 + set.elements.len();
            continue;
        };
        if was.interval != set.interval {
            return None;
        }
        // Deletions first: in an interval set a range may be replaced by one overlapping it.
        let left: Vec<&(u32, u32)> = was.elements.difference(&set.elements).collect();
        let joined: Vec<&(u32, u32)> = set.elements.difference(&was.elements).collect();
        if !left.is_empty() {
            let _ = writeln!(
                s,
                "delete element {TABLE} {name} {{ {} }}",
                join(left.iter().copied())
            );
        }
        if !joined.is_empty() {
            let _ = writeln!(
                s,
                "add element {TABLE} {name} {{ {} }}",
                join(joined.iter().copied())
            );
        }
        n += left.len() + joined.len();
    }
    Some(n)
}

#[cfg(test)]
mod tests;
