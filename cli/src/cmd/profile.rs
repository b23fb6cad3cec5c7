//! `clusterctl profile list|print NAME`: the built-in profiles (complete cluster files embedded in the
//! binary), listed, or one written out as a starting point (`clusterctl profile print lab >
//! cluster.yaml`), as `kubeadm config print init-defaults` and `k0sctl init` do.

use std::process::ExitCode;

/// Subcommands of `clusterctl profile`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Command {
    /// List the built-in profiles.
    List,
    /// Print a built-in profile's cluster file on stdout.
    Print {
        /// The profile (`clusterctl profile list`).
        name: String,
    },
}

/// Runs the command. Exit 2 for an unknown profile.
pub(crate) fn run(c: Command) -> miette::Result<ExitCode> {
    match c {
        Command::List => {
            list();
            Ok(ExitCode::SUCCESS)
        }
        Command::Print { name } => match clusterctl_spec::from_profile(&name) {
            Ok(l) => {
                print!("{}", l.source_text);
                let refs = clusterctl_spec::load::referenced_paths(&l.source_text);
                if !refs.is_empty() {
                    eprintln!(
                        "note: profile {name} references {} (sample files embedded in clusterctl): put your own files at those paths, relative to the cluster file",
                        refs.join(", ")
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(d) => {
                eprintln!("{:?}", miette::Report::new(d));
                Ok(ExitCode::from(crate::EXIT_INVALID))
            }
        },
    }
}

/// Prints one line per profile: name, description, `(default)` for the default one.
pub(crate) fn list() {
    for (name, description) in clusterctl_spec::profiles() {
        let default = if *name == clusterctl_spec::DEFAULT_PROFILE {
            " (default)"
        } else {
            ""
        };
        println!("{name:<16} {description}{default}");
    }
}
