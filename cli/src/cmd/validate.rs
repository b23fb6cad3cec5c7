//! `clusterctl validate`: check a cluster file (or a built-in profile) and report every problem at once.
//! Each diagnostic is printed with miette's graphical handler (file:line:column, the offending value
//! underlined, a help line) on stderr, followed by a one-line summary on stdout; `-o json` (or `yaml`)
//! prints one document on stdout instead. Exit 0 when valid (warnings allowed), 2 when not.

use std::process::ExitCode;

use clusterctl_spec::{Diagnostic, Severity};

use super::flags::{DocResult, Format};

/// Arguments of `clusterctl validate`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file.
    #[arg(short = 'f', long = "file", default_value = "cluster.yaml")]
    pub file: std::path::PathBuf,
    /// Validate a built-in profile instead of a file (see --list-profiles).
    #[arg(long, conflicts_with = "file")]
    pub profile: Option<String>,
    /// List the built-in profiles and exit (with `-o json|yaml`: `[{name, description, default}]`).
    #[arg(long)]
    pub list_profiles: bool,
    /// Output format: graphical diagnostics and a summary line (`text`), or one document
    /// `{file, result, valid, errors, warnings, diagnostics: [{severity, code, message, help, path,
    /// line, column}]}` (`json`, `yaml`; `result` is `ok` or `invalid`).
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: Format,
}

/// Runs the command. Returns exit code 0 (valid) or 2 (invalid or unreadable input); never errors
/// otherwise.
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    if args.list_profiles {
        super::flags::print_profiles(args.output)?;
        return Ok(ExitCode::SUCCESS);
    }
    let loaded = match &args.profile {
        Some(name) => clusterctl_spec::from_profile(name),
        None => clusterctl_spec::load(&args.file),
    };
    let (name, result) = match loaded {
        Ok(l) => (
            l.source_name.clone(),
            clusterctl_spec::validate(&l).map(|v| v.warnings),
        ),
        Err(d) => (d.source.name.clone(), Err(d)),
    };
    let (items, valid): (Vec<Diagnostic>, bool) = match result {
        Ok(warnings) => (warnings, true),
        Err(report) => (report.items, false),
    };
    if !args.output.print(&document(&name, valid, &items))? {
        super::diagnostics::print_graphical(&items);
        println!("{}", summary(&name, valid, &items));
    }
    Ok(if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::EXIT_INVALID)
    })
}

fn summary(name: &str, valid: bool, items: &[Diagnostic]) -> String {
    let e = items
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let w = items.len() - e;
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    if valid {
        format!("{name}: valid ({w} warning{})", plural(w))
    } else {
        format!(
            "{name}: invalid ({e} error{}, {w} warning{})",
            plural(e),
            plural(w)
        )
    }
}

fn document(name: &str, valid: bool, items: &[Diagnostic]) -> serde_json::Value {
    let errors = items
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    serde_json::json!({
        "file": name,
        "result": if valid { DocResult::Ok } else { DocResult::Invalid },
        "valid": valid,
        "errors": errors,
        "warnings": items.len() - errors,
        "diagnostics": super::flags::diagnostics(items),
    })
}
