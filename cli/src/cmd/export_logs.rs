//! `clusterctl export logs -f FILE|--profile NAME [DIR] [--max-bytes N] [-o json|yaml]`: one gzip'd
//! tarball in DIR (default `.`) of every node's kubelet and runtime logs, pod and static-pod logs,
//! `crictl ps -a`/`pods`, placed files and state record, plus `status` and the cluster's events, every
//! secret masked, through `clusterctl_phases::export_logs::run`. A node or API that cannot be reached
//! is said (a line per source, `result: degraded`), and the archive holds the rest. Exit codes: 0
//! written (ok or degraded), 1 no archive could be written, 2 invalid input.

use std::path::PathBuf;
use std::process::ExitCode;

use clusterctl_phases::export_logs::{self, Options, Report};

/// Arguments of `clusterctl export logs`.
#[derive(clap::Args, Debug)]
pub(crate) struct LogsArgs {
    /// The cluster file (or `--profile`).
    #[command(flatten)]
    pub target: super::flags::Target,
    /// The directory the archive is written into.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Most bytes of content the archive holds (entries past it are left out and listed).
    #[arg(long, default_value_t = export_logs::DEFAULT_MAX_BYTES)]
    pub max_bytes: u64,
    /// The kubeconfig for the API part (default: as `status` finds one).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Output format: `text`, or the report as one document (`json`, `yaml`: `result` `ok` or
    /// `degraded`, the archive, one entry per source).
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: super::flags::Format,
}

/// Runs the command (exit codes in the module doc).
pub(crate) fn run(args: LogsArgs) -> miette::Result<ExitCode> {
    let cluster = match args.target.load(args.output) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let opts = Options {
        dir: args.dir,
        kubeconfig: args.kubeconfig,
        known_hosts: args.known_hosts,
        max_bytes: args.max_bytes,
    };
    match export_logs::run(&cluster, &opts) {
        Ok(r) => {
            if !args.output.print(&r)? {
                print!("{}", text(&r));
            }
            for s in r.sources.iter().filter(|s| s.error.is_some()) {
                eprintln!(
                    "export logs: {}: partial: {}",
                    s.name,
                    s.error.as_deref().unwrap_or_default()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            super::flags::print_error(args.output, cluster.name(), &format!("export logs: {e}"));
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The report as text: one line per source, then the archive.
fn text(r: &Report) -> String {
    let mut o = String::new();
    for s in &r.sources {
        match &s.error {
            None => o += &format!("{}: {} file(s)\n", s.name, s.files),
            Some(e) => {
                o += &format!(
                    "{}: {} file(s), PARTIAL: {}\n",
                    s.name,
                    s.files,
                    super::escape::printable(e)
                )
            }
        }
    }
    if !r.truncated.is_empty() {
        o += &format!(
            "{} entr(ies) left out at the size bound (listed in TRUNCATED.txt)\n",
            r.truncated.len()
        );
    }
    o += &format!(
        "wrote {} ({} bytes){}\n",
        r.archive.display(),
        r.bytes,
        if r.result == clusterctl_phases::status::Health::Ok {
            ""
        } else {
            "; some sources are missing (see above)"
        }
    );
    o
}
