//! The `clusterctl` binary: multi-call dispatch (invoked as `clusterctl-cni` it is the CNI plugin),
//! the clap command tree, and the mapping of results to exit codes. Each command lives in `cmd/<name>.rs`
//! and owns its own clap `Args`.

mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Exit code for invalid input (a cluster file that does not validate, bad flags).
pub const EXIT_INVALID: u8 = 2;
/// Exit code of a command that changes a cluster refused because another clusterctl holds the
/// cluster's lock (docs/lifecycle.md, "One writer at a time").
pub const EXIT_BUSY: u8 = 3;

/// `clusterctl`: one declarative `cluster.yaml` to a working Kubernetes cluster.
#[derive(Parser, Debug)]
#[command(name = "clusterctl", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a cluster file and report every problem at once, each pointing at its line.
    Validate(cmd::validate::Args),
    /// Write every file each node needs (kubeadm, kind, static pods, runtime, CNI) into a directory.
    Render(cmd::render::Args),
    /// Build or converge the cluster; `--dry-run` prints the plan per node and changes nothing.
    Up(cmd::up::Args),
    /// Tear the cluster down, removing exactly what clusterctl installed.
    Destroy(cmd::destroy::Args),
    /// Add or remove nodes declared in the file.
    #[command(subcommand)]
    Node(cmd::node::Command),
    /// Upgrade Kubernetes by one minor (or a patch) at a time.
    Upgrade(cmd::upgrade::Args),
    /// etcd backup and restore: `etcd snapshot save|restore`.
    #[command(subcommand)]
    Etcd(cmd::etcd::Command),
    /// Nodes, conditions, stuck pods and the layer they are stuck at.
    Status(cmd::status::Args),
    /// Check the cluster's certificates' expiry on every node, or renew them with kubeadm.
    #[command(subcommand)]
    Certs(cmd::certs::Command),
    /// Put local images into every node's runtime.
    #[command(subcommand)]
    Image(cmd::image::Command),
    /// Air-gapped installs: list images, write a verified bundle, import it.
    #[command(subcommand)]
    Airgap(cmd::airgap::Command),
    /// The embedded CNI dataplane (the overlay agent); the plugin itself runs as `clusterctl-cni`.
    #[command(subcommand)]
    Cni(cmd::cni::Command),
    /// The built-in profiles: list them, or print one as a starting cluster file.
    #[command(subcommand)]
    Profile(cmd::profile::Command),
    /// This binary's version, the supported Kubernetes versions and the pinned component versions.
    Version(cmd::version::Args),
    /// Print the shell completion script (bash, zsh, fish, elvish, powershell).
    Completion(cmd::completion::Args),
    /// Write a kind `Cluster` config out as the equivalent cluster file.
    Convert(cmd::convert::Args),
    /// List clusters or a cluster's nodes, or write its kubeconfig (as kind's `get`).
    #[command(subcommand)]
    Get(cmd::get::GetCommand),
    /// Merge a cluster's admin context into the kubeconfig (as kind's `export kubeconfig`).
    #[command(subcommand)]
    Export(cmd::get::ExportCommand),
}

/// Ends the process with status 141 and no message when printing to stdout fails because the reader
/// closed the pipe (`println!` panics with "failed printing to stdout: Broken pipe"); every other panic
/// goes to the default hook.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    // Output piped into a reader that stops early (`clusterctl version | head -3`) ends quietly, as
    // other Unix tools do, with status 141 (128 + SIGPIPE) instead of a panic in `println!`. SIGPIPE
    // itself stays ignored (Rust's default): libssh2 writes to its sockets without `MSG_NOSIGNAL`, so
    // with the signal's default disposition a write on an SSH connection the peer had reset killed
    // the whole process silently (seen once in `node remove` of a real control plane: exit by signal,
    // nothing printed).
    quiet_on_closed_stdout();
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let name = std::path::Path::new(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == "clusterctl-cni" {
        return cmd::cni::plugin_main();
    }
    // `-o PATH` of `render` and `airgap bundle` is a deprecated alias of their path flags (it warns).
    let args = cmd::flags::rewrite_deprecated(std::env::args_os().collect());
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        // A command line clap refuses is invalid input: as a document too when it asks for one.
        Err(e) => return cmd::flags::parse_error(&e, &args),
    };
    // Errors keep their lines whole: entry names, references and URLs stay copyable.
    let _ = miette::set_hook(Box::new(|_| {
        Box::new(miette::MietteHandlerOpts::new().wrap_lines(false).build())
    }));
    let result = match cli.command {
        Command::Validate(a) => cmd::validate::run(a),
        Command::Render(a) => cmd::render::run(a),
        Command::Up(a) => cmd::up::run(a),
        Command::Destroy(a) => cmd::destroy::run(a),
        Command::Node(c) => cmd::node::run(c),
        Command::Upgrade(a) => cmd::upgrade::run(a),
        Command::Etcd(c) => cmd::etcd::run(c),
        Command::Status(a) => cmd::status::run(a),
        Command::Certs(c) => cmd::certs::run(c),
        Command::Image(c) => cmd::image::run(c),
        Command::Airgap(c) => cmd::airgap::run(c),
        Command::Cni(c) => cmd::cni::run(c),
        Command::Profile(c) => cmd::profile::run(c),
        Command::Version(a) => cmd::version::run(a),
        Command::Convert(a) => cmd::convert::run(a),
        Command::Get(c) => cmd::get::run_get(c),
        Command::Export(c) => cmd::get::run_export(c),
        Command::Completion(a) => cmd::completion::run(a, <Cli as clap::CommandFactory>::command()),
    };
    match result {
        Ok(code) => code,
        Err(report) => {
            eprintln!("{report:?}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    /// clap's own consistency checks over the whole command tree (unique argument names, valid
    /// defaults and conflicts), which otherwise fire only when the broken subcommand is run.
    #[test]
    fn the_command_tree_passes_clap_s_checks() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
