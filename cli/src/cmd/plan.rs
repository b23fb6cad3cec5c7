//! Printing a dry run's plan (`up`, `upgrade`, `node join`, `node remove`, `destroy` and `image load`
//! with `--dry-run`): the [`PlanEntry`] list the
//! phase engine collected, grouped by where it happens — this machine first, then each node — one
//! line per check, command, file write, API change or note.

use clusterctl_phases::steps::{RunReport, StepOutcome};
use clusterctl_phases::{PlanEntry, PlanKind};
use clusterctl_spec::ValidNode;

/// Prints `up`'s dry-run plan: the header (offline or probing), the cluster line, the phase order,
/// the provider's steps (`provider_plan`, docker only), then per node what would change (see
/// [`print_changes`]); with `verbose` every check, command and file write in full, multi-line
/// scripts included ([`print_entries`] with `full`).
pub(crate) fn print_up_plan(
    cluster: &clusterctl_spec::ValidCluster,
    spec: &clusterctl_phases::up::UpSpec,
    phases: &[clusterctl_phases::Phase<clusterctl_phases::up::UpData>],
    provider_plan: &[String],
    plan: &[PlanEntry],
    probe: bool,
    verbose: bool,
) {
    let cps = spec.nodes.iter().filter(|n| n.is_control_plane()).count();
    let how = if probe {
        "probing the nodes read-only"
    } else {
        "offline: no node is contacted"
    };
    println!(
        "clusterctl up --dry-run: {} ({how}): nothing is changed",
        spec.cluster
    );
    let provider = cluster.provider().as_str();
    println!(
        "cluster {}: Kubernetes v{}, provider {provider}, {} control plane(s) + {} worker(s), endpoint {}, runtime {}, CNI {}",
        spec.cluster,
        spec.kubernetes_version,
        cps,
        spec.nodes.len() - cps,
        spec.endpoint,
        spec.runtime.unit(),
        spec.cni.name()
    );
    let names: Vec<&str> = phases.iter().map(|p| p.name).collect();
    println!("phases: {}", names.join(" → "));
    if !provider_plan.is_empty() {
        println!("\nprovider {provider}:");
        for p in provider_plan {
            println!("  {p}");
        }
    }
    let width = phases.iter().map(|p| p.name.len()).max().unwrap_or(10);
    if verbose {
        print_entries(&groups(&spec.nodes), plan, width, true);
    } else {
        print_changes(&groups(&spec.nodes), plan, width);
    }
}

/// The longest step text the compact plan prints, in characters, before cutting it with `…`.
const SHORT_TEXT: usize = 100;

/// Prints `plan` as [`print_entries`] does, but only what would change: per group the writes,
/// commands, API changes, local steps, notes and failures, each on one line (a multi-line or long
/// command cut with `…`); a step identical to one already printed for the same node (same kind and
/// text, a no-op at run time) becomes `(already planned in PHASE)`; the checks are folded into one
/// closing `+ N checks (PHASES); -v/--verbose lists them` line.
pub(crate) fn print_changes(groups: &[(String, String)], plan: &[PlanEntry], width: usize) {
    let width = plan
        .iter()
        .filter(|e| e.kind != PlanKind::Check)
        .map(|e| e.phase.chars().count())
        .fold(width, usize::max);
    for (name, title) in groups {
        let entries: Vec<&PlanEntry> = plan.iter().filter(|e| &e.node == name).collect();
        if entries.is_empty() {
            continue;
        }
        println!("\n{title}:");
        print_group_changes(&entries, width);
    }
    println!();
}

/// One group's part of [`print_changes`]: its changes, one per line, then its checks folded into one
/// line.
fn print_group_changes(entries: &[&PlanEntry], width: usize) {
    let mut seen: Vec<&PlanEntry> = Vec::new();
    let mut checks = 0usize;
    let mut check_phases: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let e = entries[i];
        i += 1;
        if let Some((cmd, arg)) = guarded(e) {
            // Guarded runs in a row (`[ TEST ] || CMD ARG …`) with the same CMD: one line.
            let mut args = vec![arg];
            while let Some((_, a)) = entries
                .get(i)
                .and_then(|n| guarded(n).filter(|(c, _)| n.phase == e.phase && *c == cmd))
            {
                args.push(a);
                i += 1;
            }
            if args.len() > 1 {
                println!(
                    "  {:width$}  {:5}  {cmd} {} (each only where needed)",
                    e.phase,
                    kind_word(e.kind),
                    args.join(" ")
                );
                continue;
            }
        }
        if e.kind == PlanKind::Check {
            checks += 1;
            let top = e.phase.split('/').next().unwrap_or(&e.phase);
            if !check_phases.contains(&top) {
                check_phases.push(top);
            }
            continue;
        }
        let text = match seen.iter().find(|s| s.kind == e.kind && s.text == e.text) {
            Some(first) => format!("(already planned in {})", first.phase),
            None => match e.kind {
                PlanKind::Write => one_line(e.text.trim_start_matches("write ")),
                PlanKind::Failed => failure(&e.text, &e.phase, &e.node),
                _ => one_line(&e.text),
            },
        };
        seen.push(e);
        println!("  {:width$}  {:5}  {text}", e.phase, kind_word(e.kind));
        print_diff(e);
    }
    if checks > 0 {
        println!(
            "  + {checks} check(s) ({}); -v/--verbose lists them",
            check_phases.join(", ")
        );
    }
}

/// A guarded command `[ TEST ] || CMD … ARG [|| …]` (a run entry that changes nothing when TEST
/// holds) split into `(CMD …, ARG)`, else `None`.
fn guarded(e: &PlanEntry) -> Option<(&str, &str)> {
    if e.kind != PlanKind::Run || !e.text.starts_with("[ ") {
        return None;
    }
    let (_, action) = e.text.split_once("] || ")?;
    let action = action.split(" || ").next()?.trim();
    let (cmd, arg) = action.rsplit_once(' ')?;
    (!arg.is_empty() && !action.contains(['\n', ';', '&', '|'])).then_some((cmd, arg))
}

/// `text` on one line of at most [`SHORT_TEXT`] characters: the first line, cut with `…` when
/// longer or when more lines follow.
fn one_line(text: &str) -> String {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let more = lines.next().is_some();
    if first.chars().count() > SHORT_TEXT {
        let cut: String = first.chars().take(SHORT_TEXT - 1).collect();
        format!("{}…", cut.trim_end())
    } else if more {
        format!("{first} …")
    } else {
        first.to_string()
    }
}

/// For a docker-provider dry run: the node containers `node join` creates, those of `joining` that
/// have no container yet (`reached` says whether a node's container runs), taken from
/// `clusterctl_phases::connect::connect`'s provider `plan` (`create container <cluster>-<node> (…)`).
/// Empty for the SSH provider.
pub(crate) fn join_provider_plan(
    cluster: &clusterctl_spec::ValidCluster,
    name: &str,
    joining: &[String],
    reached: &dyn Fn(&str) -> bool,
    plan: &[String],
) -> Vec<String> {
    if cluster.provider() != clusterctl_spec::model::Provider::Docker {
        return Vec::new();
    }
    joining
        .iter()
        .filter(|n| !reached(n))
        .filter_map(|n| {
            let prefix = format!("create container {name}-{n} ");
            plan.iter().find(|l| l.starts_with(&prefix)).cloned()
        })
        .collect()
}

/// Prints the provider's steps of a docker-provider dry run (`provider docker:` and one line each),
/// nothing when there are none.
pub(crate) fn print_provider_plan(lines: &[String]) {
    if !lines.is_empty() {
        println!("\nprovider docker:");
        for l in lines {
            println!("  {l}");
        }
    }
}

/// The plan groups for `nodes`, in their order, after this machine: `(node name, title)`, the title
/// being `node NAME (ROLE, ADDRESS)` (`local (this machine)` for the local group).
pub(crate) fn groups(nodes: &[ValidNode]) -> Vec<(String, String)> {
    let mut groups: Vec<(String, String)> = vec![("local".into(), "local (this machine)".into())];
    for n in nodes {
        let addr = match n.address {
            None => "address assigned by the provider".to_string(),
            Some(a) => a.to_string(),
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
/// TEXT`, the phase column at least `width` characters wide and as wide as the longest phase path in
/// `plan`, sub-phases such as `join/worker/credentials` included), then an empty line. Failures
/// (`FAIL`, a probe's) are on one line; a multi-line check is shortened to its first line and `(+N
/// lines)` unless `full` (`-v/--verbose`); writes drop the leading `write `; the further lines of a
/// multi-line script are indented to the text column.
pub(crate) fn print_entries(
    groups: &[(String, String)],
    plan: &[PlanEntry],
    width: usize,
    full: bool,
) {
    let width = plan
        .iter()
        .map(|e| e.phase.chars().count())
        .fold(width, usize::max);
    for (name, title) in groups {
        let entries: Vec<&PlanEntry> = plan.iter().filter(|e| &e.node == name).collect();
        if entries.is_empty() {
            continue;
        }
        println!("\n{title}:");
        for e in entries {
            let kind = kind_word(e.kind);
            let text = match e.kind {
                PlanKind::Write => e.text.trim_start_matches("write ").to_string(),
                PlanKind::Check if !full => short(&e.text),
                PlanKind::Failed => failure(&e.text, &e.phase, &e.node),
                _ => e.text.clone(),
            };
            // A multi-line script stays in its column: each further line indented to the text.
            let text = text.replace('\n', &format!("\n{:1$}", "", width + 11));
            println!("  {:width$}  {kind:5}  {text}", e.phase);
            print_diff(e);
        }
    }
    println!();
}

/// Prints a file write's diff (`up --dry-run --diff`) under its line, indented by six spaces.
fn print_diff(e: &PlanEntry) {
    if let Some(diff) = &e.diff {
        for l in diff.lines() {
            println!("      {l}");
        }
    }
}

/// Prints a dry run of `destroy`, `node remove` or `image load`: `header`, the plan grouped by
/// this machine and each of `nodes`, and the number of changes planned.
pub(crate) fn print_dry_run(header: &str, nodes: &[ValidNode], plan: &[PlanEntry], changes: usize) {
    println!("{header}");
    let width = plan.iter().map(|e| e.phase.len()).max().unwrap_or(10);
    print_entries(&groups(nodes), plan, width, false);
    println!("{changes} change(s) planned; nothing was changed (dry run).");
}

/// The word a plan entry's kind is printed as.
fn kind_word(k: PlanKind) -> &'static str {
    match k {
        PlanKind::Check => "check",
        PlanKind::Run => "run",
        PlanKind::Write => "write",
        PlanKind::Local => "local",
        PlanKind::Info => "note",
        PlanKind::Api => "api",
        PlanKind::Failed => "FAIL",
    }
}

/// The `kind` of a plan entry in the machine-readable plan: as in the text plan, but a probe's
/// failure is `phase` (the phase on that node; its `result` says `failed`) instead of `FAIL`.
fn document_kind(k: PlanKind) -> &'static str {
    match k {
        PlanKind::Failed => "phase",
        k => kind_word(k),
    }
}

/// Prints a dry run's plan as one machine-readable document (`up`, `node join` and `upgrade` with
/// `--dry-run [--probe] -o json|yaml`; docs/commands.md, "Machine-readable output"): `{cluster,
/// result, changes, error, failures: [{node, phase, message}], steps: [{node, phase, kind, result,
/// text}]}`. `result` is `ok` or `failed`; the steps open with the provider's (`provider`: the
/// docker provider's network and node containers, `node: local`, `phase: provider`, `kind: local`,
/// not counted in `changes`, as in the text plan);
/// a step's `kind` is `check`, `run`, `write`, `local`, `api`, `note`, or `phase` for a phase a probe
/// found failing on that node, its `result` `planned` or `failed`, a write's `diff` (`up --dry-run
/// --diff` only) the unified diff of the node's file against the new content, secrets masked; every command and file write is in
/// full (redacted as in the text plan); `error` is the run's failure (every failing phase), else null;
/// `failures` has one entry per failing phase and node, its message on one line. Exit 0, or 1 when a
/// phase failed.
pub(crate) fn print_document(
    format: super::flags::Format,
    cluster: &str,
    provider: &[String],
    plan: &[PlanEntry],
    changes: usize,
    error: Option<String>,
) -> miette::Result<std::process::ExitCode> {
    print_with(format, cluster, provider, plan, changes, error, Vec::new())
}

/// Prints the dry run of `destroy`, `node remove` or `image load` (their [`RunReport`]) as the
/// document [`print_document`] prints: a failed step is a `failures` entry `{node: the step's subject,
/// phase: the step, message}`, and `error` says why the run stopped, else how many steps failed.
pub(crate) fn print_report_document(
    format: super::flags::Format,
    cluster: &str,
    report: &RunReport,
) -> miette::Result<std::process::ExitCode> {
    let failed: Vec<serde_json::Value> = report
        .lines
        .iter()
        .filter_map(|l| match &l.outcome {
            StepOutcome::Failed(why) => Some(serde_json::json!({
                "node": l.subject,
                "phase": l.step,
                "message": why,
            })),
            StepOutcome::Done(_) => None,
        })
        .collect();
    let error = report
        .stopped
        .clone()
        .or_else(|| (!failed.is_empty()).then(|| format!("{} step(s) failed", failed.len())));
    print_with(
        format,
        cluster,
        &[],
        &report.plan,
        report.changes,
        error,
        failed,
    )
}

/// [`print_document`] with `failed` (entries of `failures` found outside the plan) added.
fn print_with(
    format: super::flags::Format,
    cluster: &str,
    provider: &[String],
    plan: &[PlanEntry],
    changes: usize,
    error: Option<String>,
    mut failures: Vec<serde_json::Value>,
) -> miette::Result<std::process::ExitCode> {
    use super::flags::DocResult;
    let provider_steps = provider.iter().map(|text| {
        serde_json::json!({
            "node": "local",
            "phase": "provider",
            "kind": kind_word(PlanKind::Local),
            "result": "planned",
            "text": text,
        })
    });
    let steps: Vec<serde_json::Value> = provider_steps
        .chain(plan.iter().map(|e| {
            let mut step = serde_json::json!({
                "node": e.node,
                "phase": e.phase,
                "kind": document_kind(e.kind),
                "result": if e.kind == PlanKind::Failed { "failed" } else { "planned" },
                "text": e.text,
            });
            if let Some(diff) = &e.diff {
                step["diff"] = diff.as_str().into();
            }
            step
        }))
        .collect();
    failures.extend(plan.iter().filter(|e| e.kind == PlanKind::Failed).map(|e| {
        serde_json::json!({
            "node": e.node,
            "phase": e.phase,
            "message": failure(&e.text, &e.phase, &e.node),
        })
    }));
    let failed = error.is_some() || !failures.is_empty();
    let doc = serde_json::json!({
        "cluster": cluster,
        "result": if failed { DocResult::Failed } else { DocResult::Ok },
        "changes": changes,
        "error": error,
        "failures": failures,
        "steps": steps,
    });
    format.print(&doc)?;
    Ok(if failed {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    })
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

/// A probe's failure on one plan line: the phase error's text without its `phase `P` failed on
/// node `N`` opening (the line already names both), its lines joined with `; `.
fn failure(text: &str, phase: &str, node: &str) -> String {
    let mut rest = text;
    for opening in [
        format!("phase `{phase}` failed on node `{node}`"),
        format!("phase `{phase}` failed on `{node}`"),
    ] {
        if let Some(r) = rest.strip_prefix(&opening) {
            rest = r;
            break;
        }
    }
    rest.trim_start_matches(':')
        .lines()
        .map(|l| l.trim().trim_start_matches("- "))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}
