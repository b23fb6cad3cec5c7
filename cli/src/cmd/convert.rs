//! `clusterctl convert -f kind-config.yaml|- [--name NAME] [--kubernetes-version V]`: a kind `Cluster`
//! config (`apiVersion: kind.x-k8s.io/v1alpha4`; `-f -` reads it from stdin) written out as the equivalent cluster file on stdout
//! (docker provider; kind's node names; kindnet unless `disableDefaultCNI`; pod and service subnets,
//! kube-proxy mode, node labels and port mappings kept). What has no equivalent (extra mounts, kubeadm
//! and containerd patches, feature gates, IPv6) is listed as a comment at the top and a warning on
//! stderr; what it chose where the config says nothing (the Kubernetes version when no node image
//! names one) is a `# note:` comment and a `note:` line on stderr. The result is validated: its
//! warnings (e.g. `spec::cgroup-v1`) are printed on stderr; exit 0 when it is valid, 2 when the input
//! is not a kind config or the result does not validate (its diagnostics printed). The conversion is
//! `clusterctl_spec::convert::convert`'s; this module reads the file, validates and prints.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `clusterctl convert`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The kind config (`kind create cluster --config FILE`); `-` reads it from stdin.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// The cluster name (default: the config's `name`, else `kind`, as kind does).
    #[arg(long)]
    pub name: Option<String>,
    /// The Kubernetes version (default: the node image's tag, else the newest supported patch).
    #[arg(long)]
    pub kubernetes_version: Option<String>,
}

/// Runs the command (exit codes in the module doc).
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    let stdin = args.file.as_os_str() == "-";
    let source = if stdin {
        "stdin".to_string()
    } else {
        args.file.display().to_string()
    };
    let read = if stdin {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(&args.file)
    };
    let text = match read {
        Ok(t) => t,
        Err(e) => {
            eprintln!("convert: cannot read {source}: {e}");
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    let out = match clusterctl_spec::convert::convert(
        &text,
        args.name.as_deref(),
        args.kubernetes_version.as_deref(),
    ) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("convert: {source}: {e}");
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    for w in &out.dropped {
        eprintln!("warning: not converted: {w}");
    }
    for n in &out.notes {
        eprintln!("note: {n}");
    }
    let loaded = clusterctl_spec::Loaded::from_text("converted cluster file", out.text.clone());
    match clusterctl_spec::validate(&loaded) {
        Ok(v) => {
            // The result validates; what validation warns about is said as `validate` would.
            for w in &v.warnings {
                eprintln!("warning: {}: {} (at {})", w.code, w.message, w.path);
                if let Some(help) = &w.help {
                    eprintln!("  help: {help}");
                }
            }
            print!("{}", out.text);
            Ok(ExitCode::SUCCESS)
        }
        Err(d) => {
            print!("{}", out.text);
            // Each diagnostic once, as `validate` prints them (a miette report of the whole list
            // printed its text and then every item again).
            super::diagnostics::print_graphical(&d.items);
            eprintln!("{}", d.summary());
            Ok(ExitCode::from(crate::EXIT_INVALID))
        }
    }
}
