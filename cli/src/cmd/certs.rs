//! `clusterctl certs check-expiration|renew`: the cluster's kubeadm certificates, read on every node
//! and parsed by clusterctl (`clusterctl_phases::certs::check::run`), and their renewal by kubeadm one
//! control plane at a time (`clusterctl_phases::certs::renew::run`). This file parses the arguments
//! and prints the reports.
//!
//! `check-expiration` exit codes: 0 every certificate read and none expires within `--warn-within`
//! (default 30d); 4 at least one expires within it (or has expired), whatever else happened; 1 a
//! node or a file could not be read (and none expires within the threshold); 2 invalid input. It is
//! read-only and never takes the cluster's lock.
//!
//! `renew` takes the cluster's lock first (`flags::lock_cluster`, as `up`; not with `--dry-run`).
//! Exit codes: 0 renewed (or planned, with `--dry-run`), 1 a step failed (the control planes after it
//! were not touched; running it again renews again), 2 invalid input or an unknown name, 3 another
//! clusterctl is changing the cluster.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clusterctl_phases::certs::check::{CheckOptions, CheckReport};
use clusterctl_phases::certs::{self, RenewOptions};
use clusterctl_phases::{PlainReporter, QuietReporter, Reporter};

/// Exit code of `certs check-expiration` when a certificate expires within the threshold (3 is
/// [`crate::EXIT_BUSY`]).
pub(crate) const EXIT_EXPIRING: u8 = 4;

/// Subcommands of `clusterctl certs`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Command {
    /// Every kubeadm certificate and kubeconfig on every control plane, the kubelets' client and
    /// serving certificates on every node, and the CAs: dates, residual time, CA, externally
    /// managed; exit 4 when one expires within `--warn-within`.
    CheckExpiration(CheckArgs),
    /// `kubeadm certs renew` one control plane at a time, its static pods restarted, then the local
    /// kubeconfig refreshed.
    Renew(RenewArgs),
}

/// Arguments of `clusterctl certs check-expiration`.
#[derive(clap::Args, Debug)]
pub(crate) struct CheckArgs {
    /// The cluster file (or `--profile`).
    #[command(flatten)]
    pub target: super::flags::Target,
    /// Output format: a table (`text`), or the report as one document (`json`, `yaml`: `result`
    /// `ok`, `degraded` or `failed`).
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: super::flags::Format,
    /// Warn about (and exit 4 for) a certificate expiring within this time: seconds, or a whole
    /// number with a unit s, m, h or d (`30d`).
    #[arg(long, default_value = "30d", value_parser = super::flags::seconds)]
    pub warn_within: u64,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
}

/// Arguments of `clusterctl certs renew`.
#[derive(clap::Args, Debug)]
pub(crate) struct RenewArgs {
    /// The cluster file (or `--profile`).
    #[command(flatten)]
    pub target: super::flags::Target,
    /// Renew every certificate kubeadm renews (`kubeadm certs renew all`).
    #[arg(long, conflicts_with = "names", required_unless_present = "names")]
    pub all: bool,
    /// The certificates to renew, by kubeadm's names (`apiserver`, `admin.conf`, …).
    pub names: Vec<String>,
    /// The kubeconfig whose `clusterctl-<cluster>` entry is refreshed (default: as `up` writes it).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Print every check and the output of every command.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Change nothing: reach the control planes read-only and print, per control plane in order,
    /// every command and local write the renewal would make.
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: the plan as text or one document.
    #[command(flatten)]
    pub output: super::flags::PlanOutput,
}

/// Runs the command (exit codes in the module doc).
pub(crate) fn run(cmd: Command) -> miette::Result<ExitCode> {
    match cmd {
        Command::CheckExpiration(a) => check(a),
        Command::Renew(a) => renew(a),
    }
}

fn check(args: CheckArgs) -> miette::Result<ExitCode> {
    let cluster = match args.target.load(args.output) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let opts = CheckOptions {
        known_hosts: args.known_hosts.clone(),
        warn_within: args.warn_within,
    };
    let report = match certs::check::run(&cluster, &opts) {
        Ok(r) => r,
        Err(e) => {
            let error = format!("certs check-expiration: {e}");
            super::flags::print_error(args.output, cluster.name(), &error);
            return Ok(ExitCode::FAILURE);
        }
    };
    if !args.output.print(&report)? {
        print!("{}", text(&report));
    }
    for f in &report.failures {
        eprintln!(
            "certs check-expiration: {}{}: {}",
            f.node,
            f.path
                .as_deref()
                .map(|p| format!(" {p}"))
                .unwrap_or_default(),
            f.error
        );
    }
    Ok(if report.expiring > 0 {
        ExitCode::from(EXIT_EXPIRING)
    } else if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The report as a table, then what is missing and the warning.
fn text(r: &CheckReport) -> String {
    use std::fmt::Write;
    let esc = super::escape::printable;
    let mut o = table(r);
    for m in &r.missing {
        let _ = writeln!(o, "{}: {} not present ({})", esc(&m.node), m.name, m.path);
    }
    let within = duration_words(r.warn_within_seconds);
    if r.expiring > 0 {
        let _ = writeln!(
            o,
            "WARNING: {} certificate(s) expire within {within}: {}",
            r.expiring,
            r.certificates
                .iter()
                .filter(|c| c.expiring)
                .map(|c| format!("{}/{} ({})", esc(&c.node), c.name, c.residual))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            o,
            "renew the kubeadm ones with `clusterctl certs renew -f FILE --all`"
        );
    } else {
        let _ = writeln!(
            o,
            "{} certificate(s) checked; none expires within {within}",
            r.certificates.len()
        );
    }
    o
}

/// The table of certificates: a header, then one row each, columns padded to their widest cell.
fn table(r: &CheckReport) -> String {
    use std::fmt::Write;
    let header = [
        "NODE",
        "CERTIFICATE",
        "EXPIRES",
        "RESIDUAL",
        "CA",
        "EXTERNALLY MANAGED",
    ];
    let rows: Vec<[String; 6]> = r
        .certificates
        .iter()
        .map(|c| {
            [
                super::escape::printable(&c.node).into_owned(),
                c.name.clone(),
                c.not_after.clone(),
                c.residual.clone(),
                c.ca.clone(),
                if c.externally_managed { "yes" } else { "no" }.to_string(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            rows.iter()
                .map(|row| row[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            let _ = write!(l, "{c:w$}  ", w = widths[i]);
        }
        format!("{}\n", l.trim_end())
    };
    let mut o = line(&header);
    for row in &rows {
        o.push_str(&line(&row.each_ref().map(String::as_str)));
    }
    o
}

/// `secs` in the largest unit that divides it: `30d`, `12h`, `90m`, `45s`.
fn duration_words(secs: u64) -> String {
    match secs {
        0 => "0s".to_string(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

fn renew(args: RenewArgs) -> miette::Result<ExitCode> {
    let out = args.output.output;
    let cluster = match args.target.load(out) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let reporter: Arc<dyn Reporter> = if args.dry_run && !args.verbose {
        Arc::new(QuietReporter)
    } else {
        Arc::new(PlainReporter::stderr(args.verbose))
    };
    let opts = RenewOptions {
        names: if args.all {
            Vec::new()
        } else {
            args.names.clone()
        },
        kubeconfig: args.kubeconfig.clone(),
        known_hosts: args.known_hosts.clone(),
        verbose: args.verbose,
        dry_run: args.dry_run,
    };
    let _lock = match super::flags::lock_cluster(out, &cluster, "certs renew", args.dry_run) {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    let name = cluster.name();
    let report = match certs::renew::run(&cluster, &opts, reporter.clone()) {
        Ok(r) => r,
        Err(e) if e.refused() => {
            super::flags::print_refusal(out, name, &format!("certs renew: {e}"));
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
        Err(e) => {
            super::flags::print_error(out, name, &format!("certs renew: {e}"));
            return Ok(ExitCode::FAILURE);
        }
    };
    print_renewal(&args, name, &report, reporter.as_ref())
}

/// Prints how `renew` went (or its dry run's plan): text, or the plan document with `-o`.
fn print_renewal(
    args: &RenewArgs,
    name: &str,
    report: &certs::RenewReport,
    reporter: &dyn Reporter,
) -> miette::Result<ExitCode> {
    let out = args.output.output;
    let (plan, changes) = (&report.plan, report.changes);
    if let Some((error, node)) = &report.stopped {
        let error = format!("certs renew failed: {error}");
        if out.is_structured() {
            return super::plan::print_document(out, name, &[], plan, changes, Some(error));
        }
        super::flags::print_error(out, name, &error);
        eprintln!(
            "{} Fix the cause and run the same command again: it renews again.",
            node.as_deref()
                .map(|n| format!("Stopped on {n}; the control planes after it were not touched."))
                .unwrap_or_default()
        );
        return Ok(ExitCode::FAILURE);
    }
    if out.is_structured() {
        return super::plan::print_document(out, name, &[], plan, changes, None);
    }
    if args.dry_run {
        let header = format!(
            "clusterctl certs renew --dry-run: cluster `{name}`: {}: nothing is changed (control planes read only)",
            report.renewed.join(", ")
        );
        super::plan::print_dry_run(&header, &report.order, plan, changes);
    } else {
        reporter.note(&format!(
            "certs renew: cluster `{name}`: {} renewed on {} control plane(s); static pods restarted: {}; kubeconfig refreshed",
            report.renewed.join(", "),
            report.order.len(),
            if report.restarted.is_empty() { "none".to_string() } else { report.restarted.join(", ") }
        ));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clusterctl_phases::certs::check::{Certificate, CheckResult};
    use clusterctl_phases::certs::{Kind, RenewedBy};

    #[test]
    fn the_table_names_each_certificate_and_warns_under_the_threshold() {
        let cert = |name: &str, residual: &str, expiring| Certificate {
            node: "cp1".into(),
            name: name.into(),
            path: "/p".into(),
            kind: Kind::Certificate,
            subject: "s".into(),
            ca: "ca".into(),
            not_before: "2026-01-01T00:00:00Z".into(),
            not_after: "2027-01-01T00:00:00Z".into(),
            residual_seconds: 0,
            residual: residual.into(),
            externally_managed: false,
            renewed_by: RenewedBy::Kubeadm,
            expiring,
        };
        let mut r = CheckReport {
            cluster: "c".into(),
            result: CheckResult::Degraded,
            checked_at: "2026-12-07T00:00:00Z".into(),
            warn_within_seconds: 400 * 86_400,
            expiring: 1,
            certificates: vec![
                cert("apiserver", "364d", true),
                cert("kubelet-serving", "999d", false),
            ],
            missing: vec![],
            failures: vec![],
        };
        let t = text(&r);
        assert!(t.starts_with("NODE  CERTIFICATE      EXPIRES               RESIDUAL  CA  EXTERNALLY MANAGED\ncp1   apiserver        2027-01-01T00:00:00Z  364d      ca  no\n"), "{t}");
        assert!(
            t.contains("WARNING: 1 certificate(s) expire within 400d: cp1/apiserver (364d)"),
            "{t}"
        );
        r.expiring = 0;
        r.certificates[0].expiring = false;
        r.warn_within_seconds = 30 * 86_400;
        assert!(text(&r).contains("2 certificate(s) checked; none expires within 30d"));
    }
}
