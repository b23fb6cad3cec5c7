//! `clusterctl profile list|print NAME [--output-dir DIR]`: the built-in profiles (complete cluster
//! files embedded in the binary), listed, or one written out as a starting point (`clusterctl profile
//! print lab > cluster.yaml`), as `kubeadm config print init-defaults` and `k0sctl init` do. With
//! `--output-dir DIR` the profile is written as `DIR/cluster.yaml` beside the sample files it references
//! (fake CAs, an audit policy), so that `validate -f DIR/cluster.yaml` passes as `--profile NAME` does;
//! nothing is overwritten.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Subcommands of `clusterctl profile`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Command {
    /// List the built-in profiles.
    List,
    /// Print a built-in profile's cluster file on stdout (or write it with its sample files into a
    /// directory).
    Print {
        /// The profile (`clusterctl profile list`).
        name: String,
        /// Write `cluster.yaml` and the sample files it references into this directory (created if
        /// missing; existing files are not overwritten) instead of printing.
        #[arg(long)]
        output_dir: Option<PathBuf>,
    },
}

/// Runs the command. Exit 2 for an unknown profile.
pub(crate) fn run(c: Command) -> miette::Result<ExitCode> {
    match c {
        Command::List => {
            super::flags::print_profiles(super::flags::Format::Text)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Print { name, output_dir } => match clusterctl_spec::from_profile(&name) {
            Ok(l) => {
                let refs = clusterctl_spec::load::referenced_paths(&l.source_text);
                if let Some(dir) = output_dir {
                    return Ok(write_out(&dir, &l.source_text, &refs));
                }
                print!("{}", l.source_text);
                if !refs.is_empty() {
                    eprintln!(
                        "note: profile {name} references {} (sample files embedded in clusterctl): put your own files at those paths, relative to the cluster file, or write the profile with them: `clusterctl profile print {name} --output-dir DIR`",
                        refs.join(", ")
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(d) => {
                super::diagnostics::print_graphical(&d.items);
                Ok(ExitCode::from(crate::EXIT_INVALID))
            }
        },
    }
}

/// Writes `text` as `dir/cluster.yaml` and each of `refs` (the sample files shipped with the profiles)
/// beside it, saying what it wrote, through `clusterctl_phases::render_dir::write_files` (as `render`: no
/// link inside `dir` is followed). Exit 2, nothing written, when one of them exists already, when a
/// link or something other than a file is in the way, or when `dir` is not a directory; 1 when a
/// write fails.
fn write_out(dir: &Path, text: &str, refs: &[String]) -> ExitCode {
    use clusterctl_phases::render_dir::OutputError;
    let mut files: Vec<(&str, &str)> = vec![("cluster.yaml", text)];
    for r in refs {
        match clusterctl_spec::profiles::profile_file(r) {
            Some(t) => files.push((r.as_str(), t)),
            None => eprintln!("note: {r} is not shipped with clusterctl: put your own file there"),
        }
    }
    // A link is not "a file that exists": write_tree refuses it below, saying so.
    let existing: Vec<String> = files
        .iter()
        .map(|(r, _)| dir.join(r))
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink()))
        .map(|p| p.display().to_string())
        .collect();
    if !existing.is_empty() {
        eprintln!(
            "profile print: {} exist(s) already; nothing was written (choose another --output-dir or remove them)",
            existing.join(", ")
        );
        return ExitCode::from(crate::EXIT_INVALID);
    }
    let tree = files.iter().map(|(r, t)| (*r, t.as_bytes(), 0o644));
    match clusterctl_phases::render_dir::write_files(dir, tree) {
        Ok(written) => {
            for path in written {
                println!("wrote {}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(e @ OutputError::Io { .. }) => {
            eprintln!("profile print: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("profile print: {e}; nothing was written");
            ExitCode::from(crate::EXIT_INVALID)
        }
    }
}
