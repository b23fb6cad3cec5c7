//! `clusterctl destroy -f FILE|--profile NAME [--yes] [--purge] [--dry-run [-o json|yaml]]`: tears the cluster down
//! through `clusterctl_phases::destroy` (what it removes on each node and here, in which order), best
//! effort per node, printing each step's line as it ends, then a summary. Asks for confirmation
//! unless `--yes`; `--dry-run` prints the plan (as text, or `-o json|yaml` one document) and changes
//! nothing (no node is contacted).
//! Exit codes: 0 everything removed (or planned), 1 some step failed (each named), 2 invalid input or
//! not confirmed.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clusterctl_phases::destroy::{self, Options};
use clusterctl_phases::steps::StepLine;
use clusterctl_spec::ValidCluster;

/// Arguments of `clusterctl destroy`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file (or `--profile`).
    #[command(flatten)]
    pub target: super::flags::Target,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// The kubeconfig to remove the cluster's context from (default: `$KUBECONFIG` or `~/.kube/config`).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Also purge the Kubernetes packages from every node (SSH provider).
    #[arg(long)]
    pub purge: bool,
    /// Change nothing: print every command, file write and local change destroy would make, per node
    /// (no node is contacted; the Docker engine is only listed).
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: the plan as text or one document.
    #[command(flatten)]
    pub output: super::flags::PlanOutput,
}

/// Prints a step's line as it ends.
fn print_line(line: &StepLine) {
    println!("{line}");
}

/// Runs the command (exit codes in the module doc).
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    let format = args.output.output;
    let cluster = match args.target.load(format) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let _lock = match super::flags::lock_cluster(format, &cluster, "destroy", args.dry_run) {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    let opts = Options {
        kubeconfig: args.kubeconfig,
        known_hosts: args.known_hosts,
        purge: args.purge,
        dry_run: args.dry_run,
    };
    if opts.dry_run {
        let report = destroy::run(&cluster, &opts, &|l: &StepLine| {
            if l.failed() && format.is_structured() {
                eprintln!("{l}");
            } else if l.failed() {
                print_line(l)
            }
        })
        .report;
        if format.is_structured() {
            return super::plan::print_report_document(format, cluster.name(), &report);
        }
        let header = format!(
            "clusterctl destroy --dry-run: cluster `{}`: nothing is changed (no node is contacted)",
            cluster.name()
        );
        super::plan::print_dry_run(&header, &report.nodes, &report.plan, report.changes);
        return Ok(if report.failures() == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    if !args.yes && !confirm(&cluster) {
        eprintln!("destroy: not confirmed; nothing was changed");
        return Ok(ExitCode::from(crate::EXIT_INVALID));
    }
    let destroyed = destroy::run(&cluster, &opts, &print_line);
    let (failures, name) = (destroyed.report.failures(), cluster.name());
    if failures == 0 && !destroyed.found {
        println!(
            "destroy: cluster {name} not found (no node container, network, kubeconfig context or local state): nothing was removed"
        );
        Ok(ExitCode::SUCCESS)
    } else if failures == 0 {
        println!("destroy: cluster {name} removed");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("destroy: cluster {name}: {failures} step(s) failed (see above); run destroy again after fixing them");
        Ok(ExitCode::FAILURE)
    }
}

fn confirm(cluster: &ValidCluster) -> bool {
    let stdin = std::io::stdin();
    eprint!(
        "Destroy cluster {} ({} node(s), provider {})? This resets every node. Type yes: ",
        cluster.name(),
        cluster.nodes().len(),
        cluster.provider()
    );
    let _ = std::io::stderr().flush();
    if !stdin.is_terminal() {
        eprintln!();
    }
    let mut line = String::new();
    if stdin.lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "yes" | "y")
}
