//! `clusterctl render`: validate a cluster file (or a built-in profile) and write every file each node
//! needs into a directory — `DIR/<node>/<absolute path on the node>` and `DIR/cluster/<path>` for
//! cluster-wide manifests and values — with the modes the files get on the nodes, then list what was
//! written. Rendering is offline, with assumed node facts (containerd 1.x, the file's cgroup version).
//! It never writes outside DIR (`clusterctl_phases::local::write_tree`: every path checked first, no
//! link inside DIR followed) and never writes a secret: join tokens and certificate keys stay placeholders, registry credentials are not read.
//! Exit 0 on success, 2 when the file does not validate.

use std::path::PathBuf;
use std::process::ExitCode;

use miette::miette;

/// Arguments of `clusterctl render`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file.
    #[arg(short = 'f', long = "file", default_value = "cluster.yaml")]
    pub file: PathBuf,
    /// Render a built-in profile instead of a file.
    #[arg(long, conflicts_with = "file")]
    pub profile: Option<String>,
    /// Output directory (created if missing). Files already there are overwritten.
    #[arg(short = 'o', long = "output-dir")]
    pub output: PathBuf,
}

/// Runs the command. Exit 2 for a file that does not validate; errors for I/O failures or an unsafe path.
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    let loaded = match &args.profile {
        Some(name) => clusterctl_spec::from_profile(name),
        None => clusterctl_spec::load(&args.file),
    };
    let validated = match loaded.and_then(|l| clusterctl_spec::validate(&l)) {
        Ok(v) => v,
        Err(report) => {
            eprintln!("{:?}", miette::Report::new(report));
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    let cluster = validated.cluster;
    let facts = clusterctl_render::Facts::assumed(&cluster);
    let rendered =
        clusterctl_render::render(&cluster, &facts).map_err(|e| miette!("render failed: {e}"))?;
    // Every path checked before anything is written; no link inside DIR is ever followed.
    let files: Vec<(String, &clusterctl_render::RenderedFile)> = rendered
        .per_node
        .iter()
        .flat_map(|(node, fs)| fs.iter().map(move |f| (format!("{node}/{}", f.path), f)))
        .chain(
            rendered
                .cluster
                .iter()
                .map(|f| (format!("cluster/{}", f.path), f)),
        )
        .collect();
    let written = clusterctl_phases::local::write_tree(
        &args.output,
        files
            .iter()
            .map(|(p, f)| (p.as_str(), f.content.as_slice(), f.mode)),
    )
    .map_err(|e| miette!("{e}"))?;
    for (path, (_, f)) in written.iter().zip(&files) {
        println!("wrote {} ({:o}, {:?})", path.display(), f.mode, f.purpose);
    }
    println!(
        "{}: {} files for {} nodes in {}",
        cluster.name(),
        written.len(),
        rendered.per_node.len(),
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_default_profile_into_a_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        let args = Args {
            file: PathBuf::from("unused.yaml"),
            profile: Some(clusterctl_spec::DEFAULT_PROFILE.to_string()),
            output: out.clone(),
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
            file,
            profile: None,
            output: out.clone(),
        })
        .expect("runs");
        assert_eq!(
            format!("{code:?}"),
            format!("{:?}", ExitCode::from(crate::EXIT_INVALID))
        );
        assert!(!out.exists());
    }
}
