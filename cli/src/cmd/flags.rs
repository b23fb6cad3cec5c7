//! Conventions every command shares (kubectl's): `-o/--output` is the output format, `-f/--file` the
//! cluster file and `--profile NAME` a built-in profile in its place; directories and files written
//! get their own long flags (`render --output-dir`, `airgap bundle --bundle-file`). `-o PATH` of those
//! two is kept one release as a deprecated alias: [`rewrite_deprecated`] turns it into the long flag
//! and warns.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clusterctl_spec::ValidCluster;

/// Output format of the commands that print a report.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Format {
    /// For people (the default).
    #[default]
    Text,
    /// One JSON document on stdout.
    Json,
    /// The same document as YAML.
    Yaml,
}

impl Format {
    /// Prints `value` as one JSON or YAML document on stdout (`Text` prints nothing and returns
    /// false: the caller prints its own text).
    pub(crate) fn print<T: serde::Serialize>(self, value: &T) -> miette::Result<bool> {
        match self {
            Format::Text => Ok(false),
            Format::Json => {
                let s = serde_json::to_string_pretty(value).map_err(|e| miette::miette!("{e}"))?;
                out(&format!("{s}\n"));
                Ok(true)
            }
            Format::Yaml => {
                let s = serde_yaml::to_string(value).map_err(|e| miette::miette!("{e}"))?;
                out(&s);
                Ok(true)
            }
        }
    }

    /// Whether this is a machine-readable format (errors then go out as a document too).
    pub(crate) fn is_structured(self) -> bool {
        self != Format::Text
    }
}

/// Writes `s` to stdout; a reader that went away (`| head`) is not an error worth a panic.
fn out(s: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes()).and_then(|()| o.flush());
}

/// How a command's `-o json|yaml` document says it went (its `result` field; docs/commands.md,
/// "Machine-readable output"). `status`'s `ok` and `degraded` are `clusterctl_phases::status::Health`.
#[derive(serde::Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DocResult {
    /// Done, and nothing wrong found.
    Ok,
    /// The command could not do its job (`error` says why; a dry run's `failures` lists each).
    Failed,
    /// The input is invalid (exit 2; `diagnostics` as `validate -o json` gives them).
    Invalid,
}

/// Prints an error as the document a script asked for (`{"cluster", "result": "failed", "error"}`) on
/// stdout, and as text on stderr for a person.
pub(crate) fn print_error(format: Format, cluster: &str, error: &str) {
    eprintln!("{error}");
    if format.is_structured() {
        let doc = serde_json::json!({
            "cluster": cluster,
            "result": DocResult::Failed,
            "error": error,
        });
        // A value of two strings always serialises.
        let _ = format.print(&doc);
    }
}

/// Takes the lock of `cluster` for `command` (one that changes the cluster) before it changes anything
/// (`clusterctl_phases::lock`); a dry run takes none. Returns the guard to hold until the command
/// ends, or the exit code after printing why not: [`crate::EXIT_BUSY`] when another clusterctl holds
/// it (named), 1 when the lock file cannot be used. Says so on stderr when the lock is taken over
/// from a process that died holding it.
pub(crate) fn lock_cluster(
    format: Format,
    cluster: &clusterctl_spec::ValidCluster,
    command: &str,
    dry_run: bool,
) -> Result<Option<clusterctl_phases::lock::ClusterLock>, ExitCode> {
    use clusterctl_phases::lock::{ClusterLock, LockError};
    if dry_run {
        return Ok(None);
    }
    match ClusterLock::take(cluster.name(), &format!("clusterctl {command}")) {
        Ok(lock) => {
            if let Some(h) = lock.taken_over() {
                eprintln!(
                    "{command}: took over the lock of cluster {} from {h}: that process ended without releasing it",
                    cluster.name()
                );
            }
            Ok(Some(lock))
        }
        Err(e) => {
            print_error(format, cluster.name(), &format!("{command}: {e}"));
            Err(match e {
                LockError::Held { .. } => ExitCode::from(crate::EXIT_BUSY),
                _ => ExitCode::FAILURE,
            })
        }
    }
}

/// [`print_error`] for a command that refuses its input (exit 2: a version, a node name, an archive
/// it cannot take): `{"cluster", "result": "invalid", "error", "diagnostics": []}` (no validation
/// finding: the file itself is valid).
pub(crate) fn print_refusal(format: Format, cluster: &str, error: &str) {
    eprintln!("{error}");
    print_invalid_document(format, Some(cluster), error, Vec::new());
}

/// The `{"cluster", "result": "invalid", "error", "diagnostics"}` document on stdout, when `format`
/// asks for one (`cluster` null when no file or profile was named).
fn print_invalid_document(
    format: Format,
    cluster: Option<&str>,
    error: &str,
    diagnostics: Vec<serde_json::Value>,
) {
    if format.is_structured() {
        let doc = serde_json::json!({
            "cluster": cluster,
            "result": DocResult::Invalid,
            "error": error,
            "diagnostics": diagnostics,
        });
        // Strings, null and JSON values always serialise.
        let _ = format.print(&doc);
    }
}

/// Prints why a cluster file (or profile) `name` is invalid: the diagnostics on stderr, and the
/// `{"cluster", "result": "invalid", "error", "diagnostics"}` document `format` asks for on stdout.
pub(crate) fn print_invalid(format: Format, name: &str, d: &clusterctl_spec::Diagnostics) {
    eprintln!("{d}");
    print_invalid_document(format, Some(name), &d.to_string(), diagnostics(&d.items));
}

/// How a command that addresses an existing cluster names it: `-f FILE` or `--profile NAME`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Target {
    /// The cluster file.
    #[arg(short = 'f', long = "file", default_value = "cluster.yaml")]
    pub file: PathBuf,
    /// A built-in profile instead of a file (`clusterctl profile list`), e.g. a cluster made with
    /// `clusterctl up --profile lab`.
    #[arg(long, conflicts_with = "file")]
    pub profile: Option<String>,
}

impl Target {
    /// The cluster file, `None` for a profile (paths the file names are then relative to the current
    /// directory).
    pub(crate) fn path(&self) -> Option<&std::path::Path> {
        self.profile.is_none().then_some(self.file.as_path())
    }

    /// The target as given: the profile's name or the file's path (what a document names before the
    /// file is read).
    pub(crate) fn name(&self) -> String {
        self.profile
            .clone()
            .unwrap_or_else(|| self.file.display().to_string())
    }

    /// The validated cluster; invalid input is printed (as the document `format` asks for) and
    /// answered with exit code 2.
    pub(crate) fn load(&self, format: Format) -> Result<ValidCluster, ExitCode> {
        let loaded = match &self.profile {
            Some(p) => clusterctl_spec::from_profile(p),
            None => clusterctl_spec::load(&self.file),
        };
        match loaded.and_then(|l| clusterctl_spec::validate(&l)) {
            Ok(v) => Ok(v.cluster),
            Err(d) => {
                print_invalid(format, &self.name(), &d);
                Err(ExitCode::from(crate::EXIT_INVALID))
            }
        }
    }
}

/// Why a count flag's value was refused ([`at_least_one`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CountError {
    /// It is 0.
    Zero,
    /// It is not a whole number (the value as given).
    NotANumber(String),
}

impl std::fmt::Display for CountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CountError::Zero => f.write_str("must be at least 1"),
            CountError::NotANumber(s) => write!(f, "{s:?} is not a whole number (give 1 or more)"),
        }
    }
}

impl std::error::Error for CountError {}

/// The diagnostics as `validate -o json` prints them (and every command's `invalid` document):
/// `[{severity, code, message, help, path, line, column}]`.
pub(crate) fn diagnostics(items: &[clusterctl_spec::Diagnostic]) -> Vec<serde_json::Value> {
    items
        .iter()
        .map(|d| {
            serde_json::json!({
                "severity": d.severity,
                "code": d.code,
                "message": d.message,
                "help": d.help,
                "path": d.path,
                "line": d.line,
                "column": d.column,
            })
        })
        .collect()
}

/// `profile list` and `validate --list-profiles`: one line per profile (name, description,
/// `(default)` for the default one), or with `-o json|yaml` one list `[{name, description, default}]`
/// (as `get clusters -o json` lists).
pub(crate) fn print_profiles(format: Format) -> miette::Result<()> {
    let rows: Vec<serde_json::Value> = clusterctl_spec::profiles()
        .iter()
        .map(|(name, description)| {
            serde_json::json!({
                "name": name,
                "description": description,
                "default": *name == clusterctl_spec::DEFAULT_PROFILE,
            })
        })
        .collect();
    if format.print(&rows)? {
        return Ok(());
    }
    for (name, description) in clusterctl_spec::profiles() {
        let default = if *name == clusterctl_spec::DEFAULT_PROFILE {
            " (default)"
        } else {
            ""
        };
        println!("{name:<16} {description}{default}");
    }
    Ok(())
}

/// A clap value parser for counts that must be at least 1 (`--parallel`, `--jobs`), saying so in
/// words instead of clap's `0 is not in 1..18446744073709551615`.
pub(crate) fn at_least_one(s: &str) -> Result<usize, CountError> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err(CountError::Zero),
        Ok(n) => Ok(n),
        Err(_) => Err(CountError::NotANumber(s.to_string())),
    }
}

/// Why a duration flag's value was refused ([`seconds`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct DurationError(String);

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} is not a duration: give whole seconds (`600`) or a whole number with a unit s, m, h or d (`600s`, `10m`, `1h`, `30d`)",
            self.0
        )
    }
}

impl std::error::Error for DurationError {}

/// A clap value parser for durations (`--ready-timeout`, `--drain-timeout`, `--warn-within`): whole
/// seconds, or a whole number with the unit `s`, `m`, `h` or `d`; the value in seconds.
pub(crate) fn seconds(s: &str) -> Result<u64, DurationError> {
    let t = s.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, ""),
    };
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(DurationError(s.to_string())),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| DurationError(s.to_string()))
}

/// Why an `--ignore-preflight` entry was refused ([`check_id`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct EmptyCheckId;

impl std::fmt::Display for EmptyCheckId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "empty check id: give check ids separated by commas, without empty entries (`swap,time-sync`)",
        )
    }
}

impl std::error::Error for EmptyCheckId {}

/// A clap value parser for one `--ignore-preflight` entry: refuses an empty one (`,`, `swap,,x`);
/// whether it names a check is decided later ([`NodeRunArgs::refuse_unknown_checks`]).
pub(crate) fn check_id(s: &str) -> Result<String, EmptyCheckId> {
    let t = s.trim();
    if t.is_empty() {
        return Err(EmptyCheckId);
    }
    Ok(t.to_string())
}

/// The subcommands whose `-o` used to name a path, with the long flag that names it now.
const PATH_FLAGS: &[(&[&str], &str)] = &[
    (&["render"], "--output-dir"),
    (&["airgap", "bundle"], "--bundle-file"),
];

/// The format names `-o` takes; another value given to a path command's `-o` is a path.
const FORMATS: &[&str] = &["text", "json", "yaml", "name", "wide"];

/// Rewrites the deprecated `-o PATH` of `render` and `airgap bundle` into `--output-dir PATH` /
/// `--bundle-file PATH`, printing a warning for each. `-o` followed by a format name is left alone.
pub(crate) fn rewrite_deprecated(args: Vec<OsString>) -> Vec<OsString> {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let Some((_, long)) = PATH_FLAGS.iter().find(|(cmd, _)| {
        words.len() > cmd.len()
            && words[1..=cmd.len()]
                .iter()
                .zip(cmd.iter())
                .all(|(w, c)| w == c)
    }) else {
        return args;
    };
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let w = &words[i];
        let value = if w == "-o" || w == "--output" {
            words.get(i + 1).cloned().map(|v| (v, 2))
        } else if let Some(v) = w.strip_prefix("--output=") {
            Some((v.to_string(), 1))
        } else {
            w.strip_prefix("-o")
                .filter(|v| !v.is_empty() && !w.starts_with("--"))
                .map(|v| (v.trim_start_matches('=').to_string(), 1))
        };
        match value {
            Some((v, n)) if !FORMATS.contains(&v.as_str()) => {
                eprintln!(
                    "warning: `-o {v}` naming a path is deprecated and will be removed in the next release: use `{long} {v}` (-o/--output is an output format wherever a command takes it)"
                );
                out.push(OsString::from(*long));
                out.push(OsString::from(v));
                i += n;
            }
            _ => {
                out.push(args[i].clone());
                i += 1;
            }
        }
    }
    out
}

/// The value of the last `-o/--output` (`-o V`, `-oV`, `-o=V`, `--output V`, `--output=V`) of a raw
/// command line, before `--`; `None` without one.
fn raw_flag<'a>(words: &'a [String], short: &str, long: &str) -> Option<&'a str> {
    let mut found = None;
    let mut i = 1;
    while i < words.len() {
        let w = words[i].as_str();
        if w == "--" {
            break;
        }
        if w == short || w == long {
            found = words.get(i + 1).map(String::as_str);
            i += 2;
            continue;
        }
        if let Some(v) = w.strip_prefix(&format!("{long}=")) {
            found = Some(v);
        } else if let Some(v) = w.strip_prefix(short).filter(|_| !w.starts_with("--")) {
            if !v.is_empty() {
                found = Some(v.strip_prefix('=').unwrap_or(v));
            }
        }
        i += 1;
    }
    found
}

/// The format a raw command line asks for with `-o/--output` (`text` when none, or not a format).
pub(crate) fn raw_format(args: &[OsString]) -> Format {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match raw_flag(&words, "-o", "--output") {
        Some("json") => Format::Json,
        Some("yaml") => Format::Yaml,
        _ => Format::Text,
    }
}

/// Answers a command line clap refuses (an unknown flag, `-o` without `--dry-run`, a missing
/// argument): help and version requests as clap does; an error as clap's text on stderr and, when the
/// raw arguments ask for `-o json|yaml`, the `{cluster, result: invalid, error, diagnostics: []}`
/// document on stdout (docs/commands.md, "Machine-readable output"; `cluster` the `--profile` or
/// `-f/--file` given, else null). Exit code clap's: 2 for a refused command line.
pub(crate) fn parse_error(e: &clap::Error, args: &[OsString]) -> ExitCode {
    if !e.use_stderr() {
        // --help, --version: printed on stdout, exit 0.
        e.exit()
    }
    let _ = e.print();
    let format = raw_format(args);
    if format.is_structured() {
        let words: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let cluster =
            raw_flag(&words, "--profile", "--profile").or_else(|| raw_flag(&words, "-f", "--file"));
        // clap's text without its `error: ` opening, up to the usage line (the rest is for a person).
        let rendered = e.render().to_string();
        let error = rendered
            .split("\n\n")
            .next()
            .unwrap_or_default()
            .trim()
            .trim_start_matches("error: ");
        print_invalid_document(format, cluster, error, Vec::new());
    }
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(crate::EXIT_INVALID))
}

/// `-o/--output` of the dry runs of `destroy`, `node join|remove`, `upgrade` and `image load`: the
/// plan as text, or as one document (docs/commands.md, "Machine-readable output"). Only with
/// `--dry-run` (the command's own flag).
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct PlanOutput {
    /// With `--dry-run`: the plan as text, or as one document (`json`, `yaml`: `{cluster, result,
    /// changes, error, failures, steps: [{node, phase, kind, result, text}]}`).
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        default_value = "text",
        requires = "dry_run"
    )]
    pub output: Format,
}

/// The options `up` and `node join` share: preflight fixes and ignores, output, parallelism, SSH host
/// keys and the Ready timeout.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct NodeRunArgs {
    /// Apply the fixes of the fixable preflight failures (swap, modules, sysctls, firewalld, SELinux).
    #[arg(long)]
    pub fix: bool,
    /// Preflight checks reported as warnings instead of failures (ids such as `time-sync`, `swap`,
    /// `module/br_netfilter`; an unknown id is refused, listing them all).
    #[arg(long, value_delimiter = ',', value_parser = check_id)]
    pub ignore_preflight: Vec<String>,
    /// Show every check and the output of every command.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Nodes worked on at once, and SSH nodes connected at once (at least 1).
    #[arg(long, default_value_t = 16, value_parser = at_least_one)]
    pub parallel: usize,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// How long to wait for every node to be Ready: whole seconds (`600`) or with a unit (`600s`,
    /// `10m`, `1h`).
    #[arg(long, default_value = "600", value_parser = seconds)]
    pub ready_timeout: u64,
}

impl NodeRunArgs {
    /// Refuses `--ignore-preflight` entries that name no preflight check (exit 2, the valid ids
    /// listed; printed as text and as the `invalid` document `format` asks for): a typo would
    /// otherwise ignore nothing, silently. `None` when every entry is a check.
    pub(crate) fn refuse_unknown_checks(&self, format: Format, cluster: &str) -> Option<ExitCode> {
        let unknown = clusterctl_phases::up::preflight::unknown_ids(&self.ignore_preflight);
        if unknown.is_empty() {
            return None;
        }
        let text = format!(
            "--ignore-preflight: unknown check(s) {}; the preflight checks are: {}",
            unknown
                .iter()
                .map(|u| format!("`{u}`"))
                .collect::<Vec<_>>()
                .join(", "),
            clusterctl_phases::up::preflight::CHECK_IDS.join(", ")
        );
        print_refusal(format, cluster, &text);
        Some(ExitCode::from(crate::EXIT_INVALID))
    }
}

/// Prints what `clusterctl_phases::connect::connect` reports while it connects to SSH nodes (it may
/// take minutes: retries with backoff), one line each on stderr.
pub(crate) fn connect_progress(p: clusterctl_phases::connect::Progress<'_>) {
    use clusterctl_phases::connect::Progress;
    match p {
        Progress::Connecting {
            node,
            user,
            address,
            port,
            attempts,
        } => eprintln!(
            "connecting to node {node} ({user}@{address}:{port}, up to {attempts} attempt(s))…"
        ),
        Progress::Connected { node, seconds } => {
            eprintln!("  node {node}: connected ({seconds:.1} s)")
        }
        Progress::NotReached { node, seconds } => {
            eprintln!("  node {node}: not reached after {seconds:.1} s")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn timeouts_take_seconds_or_a_unit() {
        assert_eq!(seconds("600"), Ok(600));
        assert_eq!(seconds("600s"), Ok(600));
        assert_eq!(seconds("0s"), Ok(0));
        assert_eq!(seconds("10m"), Ok(600));
        assert_eq!(seconds("1h"), Ok(3600));
        assert_eq!(seconds("30d"), Ok(30 * 86_400));
        for bad in [
            "",
            "s",
            "10x",
            "1.5m",
            "-1",
            "10 m",
            "99999999999999999999h",
        ] {
            let e = seconds(bad).expect_err(bad).to_string();
            assert!(
                e.contains("whole seconds") && e.contains("10m"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn empty_check_ids_are_refused() {
        assert_eq!(check_id("swap"), Ok("swap".to_string()));
        assert_eq!(check_id(" swap "), Ok("swap".to_string()));
        assert_eq!(check_id(""), Err(EmptyCheckId));
        assert!(EmptyCheckId.to_string().starts_with("empty check id"));
    }

    #[test]
    fn path_aliases_are_rewritten_and_formats_kept() {
        assert_eq!(
            rewrite_deprecated(os(&["clusterctl", "render", "-o", "out", "-f", "c.yaml"])),
            os(&[
                "clusterctl",
                "render",
                "--output-dir",
                "out",
                "-f",
                "c.yaml"
            ])
        );
        assert_eq!(
            rewrite_deprecated(os(&["clusterctl", "airgap", "bundle", "-ob.tar"])),
            os(&["clusterctl", "airgap", "bundle", "--bundle-file", "b.tar"])
        );
        assert_eq!(
            rewrite_deprecated(os(&[
                "clusterctl",
                "render",
                "-o",
                "json",
                "--output-dir",
                "d"
            ])),
            os(&["clusterctl", "render", "-o", "json", "--output-dir", "d"])
        );
        assert_eq!(
            rewrite_deprecated(os(&["clusterctl", "validate", "-o", "x"])),
            os(&["clusterctl", "validate", "-o", "x"])
        );
    }

    #[test]
    fn the_format_a_raw_command_line_asks_for() {
        for (args, want) in [
            (&["clusterctl", "up", "-o", "json"][..], Format::Json),
            (&["clusterctl", "up", "-ojson"][..], Format::Json),
            (&["clusterctl", "up", "-o=yaml"][..], Format::Yaml),
            (&["clusterctl", "up", "--output", "yaml"][..], Format::Yaml),
            (
                &["clusterctl", "up", "--output=json", "-o", "text"][..],
                Format::Text,
            ),
            (&["clusterctl", "up", "-o", "xml"][..], Format::Text),
            (&["clusterctl", "up", "--", "-o", "json"][..], Format::Text),
            (&["clusterctl", "up", "--dry-run"][..], Format::Text),
        ] {
            assert_eq!(raw_format(&os(args)), want, "{args:?}");
        }
        let words: Vec<String> = ["clusterctl", "up", "-f", "a.yaml", "--file=b.yaml"]
            .iter()
            .map(|w| w.to_string())
            .collect();
        assert_eq!(raw_flag(&words, "-f", "--file"), Some("b.yaml"));
        assert_eq!(raw_flag(&words, "--profile", "--profile"), None);
    }

    #[test]
    fn zero_is_refused_in_words() {
        assert_eq!(
            at_least_one("0").map_err(|e| e.to_string()),
            Err("must be at least 1".to_string())
        );
        assert_eq!(at_least_one("3"), Ok(3));
        assert!(at_least_one("x").is_err());
    }
}
