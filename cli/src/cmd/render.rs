//! `clusterctl render`: validate a cluster file (or a built-in profile) and write every file each node
//! needs into a directory — `DIR/<node>/<absolute path on the node>` and `DIR/cluster/<path>` for
//! cluster-wide manifests and values — with the modes the files get on the nodes, then list what was
//! written. Rendering is offline, with assumed node facts (containerd 1.x, the file's cgroup version).
//! It never writes outside DIR (`write_tree` in `phases/src/local.rs`: every path checked first, no
//! link inside DIR followed) and never writes a secret: join tokens and certificate keys stay placeholders, registry credentials are not read.
//! With `--fetch`, the pinned upstream files of a third-party CNI are obtained (checked by sha256) into
//! `DIR/cluster/upstream/`.
//! Exit 0 on success, 2 when the file does not validate. The rendering and writing are
//! `clusterctl_phases::render_dir::write`'s; this module validates and lists what was written.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::Format;

/// Arguments of `clusterctl render`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file (`-f`) or a built-in profile (`--profile`).
    #[command(flatten)]
    pub target: super::flags::Target,
    /// Output directory (created if missing). Files of an earlier render there are replaced, and
    /// those this render no longer writes are removed (other files are left alone).
    #[arg(long = "output-dir", value_name = "DIR")]
    pub output_dir: PathBuf,
    /// How the written files are listed: `text` (path, mode, purpose), `json` or `yaml`
    /// (`{cluster, result: ok, dir, files: [{path, mode, purpose}], removed}`; an invalid file is
    /// `{cluster, result: invalid, error, diagnostics}`, a failed render or write `{cluster, result:
    /// failed, error}`).
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: Format,
    /// Also obtain the pinned upstream files of the file's third-party CNI (calico's CRDs and
    /// operator manifest, flannel's manifest, the Cilium chart and the Helm archive of each
    /// `airgap.platforms` architecture) into `DIR/cluster/upstream/<name>`: from the cache `up` uses,
    /// else downloaded from the pinned address (or the file's `cni.sources`), each checked against
    /// its sha256 before anything is written.
    #[arg(long)]
    pub fetch: bool,
}

/// Runs the command. Exit 2 for a file that does not validate, 1 when rendering, a fetch or a write
/// failed (each printed, and as the document `-o json|yaml` asks for).
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    let cluster = match args.target.load(args.output) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let written = match clusterctl_phases::render_dir::write(
        &cluster,
        &args.output_dir,
        args.fetch,
        &mut print_fetched,
    ) {
        Ok(w) => w,
        Err(e) => {
            super::flags::print_error(args.output, cluster.name(), &format!("render: {e}"));
            return Ok(ExitCode::FAILURE);
        }
    };
    let doc = Document {
        result: super::flags::DocResult::Ok,
        written: &written,
    };
    if args.output.print(&doc)? {
        return Ok(ExitCode::SUCCESS);
    }
    if args.output.print(&written)? {
        return Ok(ExitCode::SUCCESS);
    }
    let width = written
        .files
        .iter()
        .map(|l| l.path.len())
        .max()
        .unwrap_or(0);
    for l in &written.files {
        println!("wrote {:width$}  {}  {}", l.path, l.mode, l.purpose);
    }
    for r in &written.removed {
        println!("removed {r} (written by an earlier render, not by this one)");
    }
    println!(
        "{}: {} files for {} nodes in {}",
        cluster.name(),
        written.files.len(),
        written.nodes,
        args.output_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `render -o json|yaml`'s document: `result` (`ok`) beside what was written.
#[derive(serde::Serialize)]
struct Document<'a> {
    result: super::flags::DocResult,
    #[serde(flatten)]
    written: &'a clusterctl_phases::render_dir::Written,
}

/// `render --fetch`: one line on stderr per upstream file obtained (downloaded or cached, its
/// address, size and how its sha256 was established).
fn print_fetched(
    w: &clusterctl_airgap::upstream::WantedFile,
    got: &clusterctl_airgap::upstream::Fetched,
) {
    use clusterctl_airgap::upstream::Trust;
    let how = match got.trust {
        Trust::Pinned => format!("sha256 {} as pinned ({})", got.sha256, w.digest_source),
        Trust::Accepted { .. } => format!("UNVERIFIED, accepted: sha256 {}", got.sha256),
    };
    eprintln!(
        "{} {} from {}: {} bytes, {how}",
        if got.downloaded {
            "downloaded"
        } else {
            "cached"
        },
        w.name,
        w.url,
        got.size
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_default_profile_into_a_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        let args = Args {
            target: super::super::flags::Target {
                file: PathBuf::from("unused.yaml"),
                profile: Some(clusterctl_spec::DEFAULT_PROFILE.to_string()),
            },
            output_dir: out.clone(),
            output: Format::Text,
            fetch: false,
        };
        let code = run(args).expect("renders");
        assert_eq!(format!("{code:?}"), format!("{:?}", ExitCode::SUCCESS));
        let loaded =
            clusterctl_spec::from_profile(clusterctl_spec::DEFAULT_PROFILE).expect("profile");
        let cluster = clusterctl_spec::validate(&loaded).expect("valid").cluster;
        let first = cluster.first_control_plane().name.clone();
        let init = out.join(&first).join("etc/kubernetes/kubeadm/init.yaml");
        let text = std::fs::read_to_string(&init).expect("init.yaml written");
        assert!(text.contains("kind: InitConfiguration"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&init).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        for n in cluster.nodes() {
            assert!(
                out.join(&n.name)
                    .join("etc/sysctl.d/99-kubernetes.conf")
                    .is_file(),
                "{}",
                n.name
            );
        }
    }

    #[test]
    fn invalid_input_exits_2_and_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("bad.yaml");
        std::fs::write(&file, "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\n")
            .expect("write");
        let out = dir.path().join("out");
        let code = run(Args {
            target: super::super::flags::Target {
                file,
                profile: None,
            },
            output_dir: out.clone(),
            output: Format::Text,
            fetch: false,
        })
        .expect("runs");
        assert_eq!(
            format!("{code:?}"),
            format!("{:?}", ExitCode::from(crate::EXIT_INVALID))
        );
        assert!(!out.exists());
    }
}
