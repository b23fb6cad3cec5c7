//! `clusterctl up`: build or converge the cluster described by a cluster file (or a built-in profile).
//! Loads and validates the file, takes the cluster's lock and calls `up`'s one entry point
//! (`clusterctl_phases::up::run`: the phase selection, `--recreate`'s teardown, the nodes reached —
//! SSH hosts, or Docker node containers created first — and the phases of `up`), then prints its
//! plan or how it ended. `--dry-run` prints the plan per node and changes nothing; it is
//! offline unless `--probe` is given, so `clusterctl up --dry-run` with no file shows the embedded `lab`
//! profile on any machine. Exit codes: 0 done, 1 a phase failed, 2 invalid input.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clusterctl_phases::progress::TtyReporter;
use clusterctl_phases::up;
use clusterctl_phases::up::run::{UpError, UpOptions, UpReport};
use clusterctl_phases::{Mode, PlainReporter, QuietReporter, Reporter};
use clusterctl_spec::ValidCluster;

/// Arguments of `clusterctl up`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file. Default: `cluster.yaml` when it exists; with `--dry-run` and no file, the
    /// built-in `lab` profile.
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
    /// Use a built-in profile instead of a file (`clusterctl validate --list-profiles` lists them).
    #[arg(long, conflicts_with = "file")]
    pub profile: Option<String>,
    /// Print, per node, every command and file write `up` would make, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: also query the nodes (read-only) to show what is already done.
    #[arg(long, requires = "dry_run")]
    pub probe: bool,
    /// With `--dry-run`: under every file that would change, a unified diff of the node's current
    /// content against the new one, secrets masked (reaches the nodes read-only, as `--probe`).
    #[arg(long, requires = "dry_run")]
    pub diff: bool,
    /// With `--dry-run`: the plan as text, or as one document (`json`, `yaml`: `{cluster, result,
    /// changes, error, failures, steps: [{node, phase, kind, result, text, diff}]}`).
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        default_value = "text",
        requires = "dry_run"
    )]
    pub output: super::flags::Format,
    /// Phases not to run (paths or prefixes, e.g. `preflight,join/worker`).
    #[arg(long, value_delimiter = ',')]
    pub skip_phases: Vec<String>,
    /// Run only these phases (paths or prefixes); facts and render always run.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// How nodes are reached and checked (shared with `node join`).
    #[command(flatten)]
    pub nodes: super::flags::NodeRunArgs,
    /// The kubeconfig to merge the cluster's admin context into (default: `$KUBECONFIG` or
    /// `~/.kube/config`).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Destroy the cluster first (as `clusterctl destroy --yes`), then build it again from the file.
    #[arg(long)]
    pub recreate: bool,
}

/// Runs the command. Returns exit code 0 when every phase succeeded (or the dry run was printed),
/// 1 when a phase failed (every failure printed, naming phase, node, command, status and output),
/// 2 for an invalid cluster file or phase name.
pub(crate) fn run(mut args: Args) -> miette::Result<ExitCode> {
    // `--diff` reads the nodes' files: it probes.
    args.probe |= args.diff;
    let named = match (&args.profile, &args.file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => f.display().to_string(),
        (None, None) => "cluster.yaml".to_string(),
    };
    if let Some(code) = args.nodes.refuse_unknown_checks(args.output, &named) {
        return Ok(code);
    }
    let (cluster, defaulted) = match load(&args) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    if defaulted {
        eprintln!("{DEFAULTED}");
    }
    if let Some(code) = args
        .nodes
        .refuse_unknown_checks(args.output, cluster.name())
    {
        return Ok(code);
    }
    let _lock = match super::flags::lock_cluster(args.output, &cluster, "up", args.dry_run) {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    let (tty_reporter, reporter) = reporters(&args, &cluster);
    let structured = args.output.is_structured();
    // With `-o json|yaml` the teardown lines of `--recreate` go to stderr: stdout holds the document.
    let say = |l: &str| {
        if structured {
            eprintln!("{l}");
        } else {
            println!("{l}");
        }
    };
    let options = options(&args, reporter.clone());
    let ran = up::run::run(&cluster, &options, &say, &super::flags::connect_progress);
    if let Some(t) = &tty_reporter {
        t.finish();
    }
    let report = match ran {
        Ok(r) => r,
        Err(e) => return Ok(refused(&args, &cluster, &e)),
    };
    if args.dry_run {
        if let Some(code) = print_plan(&args, &cluster, &report) {
            return code;
        }
    }
    Ok(outcome(&args, &report, reporter.as_ref()))
}

/// `up`'s options from the command line, progress to `reporter`.
fn options(args: &Args, reporter: Arc<dyn Reporter>) -> UpOptions<'_> {
    UpOptions {
        file: args.file.clone(),
        kubeconfig: args.kubeconfig.clone(),
        known_hosts: args.nodes.known_hosts.as_deref(),
        ready_timeout: Duration::from_secs(args.nodes.ready_timeout),
        ignore_preflight: args.nodes.ignore_preflight.clone(),
        mode: Mode {
            dry_run: args.dry_run,
            probe: args.probe,
            fix: args.nodes.fix,
            verbose: args.nodes.verbose,
            diff: args.diff,
        },
        parallel: args.nodes.parallel,
        skip: args.skip_phases.clone(),
        only: args.only.clone(),
        recreate: args.recreate,
        reporter,
    }
}

/// Prints why `up` stopped before its phases ran and gives the exit code: 2 for an unknown phase
/// name, 1 otherwise.
fn refused(args: &Args, cluster: &ValidCluster, e: &UpError) -> ExitCode {
    match e {
        UpError::UnknownPhase(_) => {
            super::flags::print_refusal(args.output, cluster.name(), &e.to_string());
            return ExitCode::from(crate::EXIT_INVALID);
        }
        UpError::Recreate { .. } => eprintln!("{e}"),
        UpError::Connect(_) => {
            super::flags::print_error(args.output, cluster.name(), &e.to_string())
        }
    }
    ExitCode::FAILURE
}

/// A dry run's plan: as one document with `-o json|yaml` (then returns the exit code: the run is
/// over), else as text per node (then `None`: the outcome line follows).
fn print_plan(
    args: &Args,
    cluster: &ValidCluster,
    report: &UpReport,
) -> Option<miette::Result<ExitCode>> {
    if args.output.is_structured() {
        let error = report.result.as_ref().err().map(|e| e.to_string());
        return Some(super::plan::print_document(
            args.output,
            &report.spec.cluster,
            &report.provider_plan,
            &report.summary.plan,
            report.summary.total_changes(),
            error,
        ));
    }
    super::plan::print_up_plan(
        cluster,
        &report.spec,
        &report.phases,
        &report.provider_plan,
        &report.summary.plan,
        args.probe,
        args.nodes.verbose,
    );
    None
}

/// The reporter of the run: a progress line per node on a terminal (also returned, to be finished),
/// else plain lines on stderr — none for a dry run's plan unless `--verbose`.
fn reporters(args: &Args, cluster: &ValidCluster) -> (Option<Arc<TtyReporter>>, Arc<dyn Reporter>) {
    let names: Vec<String> = cluster.nodes().iter().map(|n| n.name.clone()).collect();
    let tty = std::io::stderr().is_terminal() && !args.dry_run;
    let tty_reporter = tty.then(|| Arc::new(TtyReporter::new(&names, args.nodes.verbose)));
    let reporter: Arc<dyn Reporter> = match &tty_reporter {
        Some(t) => t.clone(),
        // A dry run's output is the plan on stdout; per-phase progress would only repeat it.
        None if args.dry_run && !args.nodes.verbose => Arc::new(QuietReporter),
        None => Arc::new(PlainReporter::stderr(args.nodes.verbose)),
    };
    (tty_reporter, reporter)
}

/// Says how the run ended (changes planned, up to date, converged, or why it failed and how to run
/// it again) and gives the exit code.
fn outcome(args: &Args, report: &UpReport, reporter: &dyn Reporter) -> ExitCode {
    let (spec, summary) = (&report.spec, &report.summary);
    match &report.result {
        Ok(()) if args.dry_run => println!(
            "{} change(s) planned; nothing was changed (dry run).",
            summary.total_changes()
        ),
        Ok(()) if summary.total_changes() == 0 => reporter.note(&format!(
            "up: cluster `{}` is up to date; nothing changed",
            spec.cluster
        )),
        Ok(()) => reporter.note(&format!(
            "up: cluster `{}` converged: {} change(s) on {} node(s); kubectl context `{}`",
            spec.cluster,
            summary.total_changes(),
            summary.changes.values().filter(|c| **c > 0).count(),
            clusterctl_kubeapi::kubeconfig::entry_name(&spec.cluster)
        )),
        Err(e) => {
            eprintln!("up failed:\n{e}");
            let again = match &args.file {
                Some(f) => format!("clusterctl up -f {}", f.display()),
                None => "clusterctl up".to_string(),
            };
            if args.dry_run {
                eprintln!("Fix the cause and run `{again} --dry-run` again (nothing was changed).");
            } else {
                eprintln!(
                    "Fix the cause and run `{again}` again: finished phases are recorded and skipped."
                );
            }
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// What a dry run with no `-f`, no `--profile` and no `cluster.yaml` says (on stderr, before its plan
/// or document) of the file it plans.
const DEFAULTED: &str = "up --dry-run: no cluster.yaml here and no -f FILE or --profile NAME: planning the built-in `lab` profile";

/// The validated cluster of `-f`/`--profile` (default `cluster.yaml`, or with `--dry-run` and no file
/// the `lab` profile, then with `true`: the caller says so); on failure the diagnostics are printed
/// and `Err` holds exit code 2.
fn load(args: &Args) -> Result<(ValidCluster, bool), ExitCode> {
    let defaulted = args.profile.is_none()
        && args.file.is_none()
        && args.dry_run
        && !Path::new("cluster.yaml").exists();
    let loaded = match (&args.profile, &args.file) {
        (Some(p), _) => clusterctl_spec::from_profile(p),
        (None, Some(f)) => clusterctl_spec::load(f),
        (None, None) if Path::new("cluster.yaml").exists() => {
            clusterctl_spec::load(Path::new("cluster.yaml"))
        }
        (None, None) if args.dry_run => {
            clusterctl_spec::from_profile(clusterctl_spec::DEFAULT_PROFILE)
        }
        (None, None) => {
            eprintln!("no cluster file: pass -f FILE or --profile NAME (or --dry-run to see the `lab` profile's plan)");
            return Err(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    match loaded.and_then(|l| clusterctl_spec::validate(&l)) {
        Ok(v) => Ok((v.cluster, defaulted)),
        Err(d) => {
            let name = d.source.name.clone();
            super::flags::print_invalid(args.output, &name, &d);
            Err(ExitCode::from(crate::EXIT_INVALID))
        }
    }
}
