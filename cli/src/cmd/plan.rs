//! Printing a dry run's plan (`up --dry-run`, `upgrade --dry-run`): the [`PlanEntry`] list the
//! phase engine collected, grouped by where it happens — this machine first, then each node — one
//! line per check, command, file write, API change or note.

use clusterctl_phases::{NodeInfo, PlanEntry, PlanKind};

/// The plan groups for `nodes`, in their order, after this machine: `(node name, title)`, the title
/// being `node NAME (ROLE, ADDRESS)` (`local (this machine)` for the local group).
pub(crate) fn groups(nodes: &[NodeInfo]) -> Vec<(String, String)> {
    let mut groups: Vec<(String, String)> = vec![("local".into(), "local (this machine)".into())];
    for n in nodes {
        let addr = if n.address.is_empty() {
            "address assigned by the provider".to_string()
        } else {
            n.address.clone()
        };
        groups.push((
            n.name.clone(),
            format!(
                "node {} ({}, {addr})",
                n.name,
                if n.is_control_plane() {
                    "control-plane"
                } else {
                    "worker"
                }
            ),
        ));
    }
    groups
}

/// Prints `plan` to stdout under each of `groups` that has entries (`NAME:` then `  PHASE  KIND
/// TEXT`, the phase column `width` characters wide), then an empty line. Checks show their first
/// line only; writes drop the leading `write `.
pub(crate) fn print_entries(groups: &[(String, String)], plan: &[PlanEntry], width: usize) {
    for (name, title) in groups {
        let entries: Vec<&PlanEntry> = plan.iter().filter(|e| &e.node == name).collect();
        if entries.is_empty() {
            continue;
        }
        println!("\n{title}:");
        for e in entries {
            let kind = match e.kind {
                PlanKind::Check => "check",
                PlanKind::Run => "run",
                PlanKind::Write => "write",
                PlanKind::Local => "local",
                PlanKind::Info => "note",
                PlanKind::Api => "api",
            };
            let text = match e.kind {
                PlanKind::Write => e.text.trim_start_matches("write ").to_string(),
                PlanKind::Check => short(&e.text),
                _ => e.text.clone(),
            };
            println!("  {:width$}  {kind:5}  {text}", e.phase);
        }
    }
    println!();
}

/// Multi-line scripts (checks) shown by their first line.
fn short(text: &str) -> String {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let more = lines.count();
    if more == 0 {
        first.to_string()
    } else {
        format!("{first} … (+{more} lines)")
    }
}
