//! `clusterctl render`: validate a cluster file (or a built-in profile) and write every file each node
//! needs into a directory — `DIR/<node>/<absolute path on the node>` and `DIR/cluster/<path>` for
//! cluster-wide manifests and values — with the modes the files get on the nodes, then list what was
//! written. Rendering is offline, with assumed node facts (containerd 1.x, the file's cgroup version).
//! It never writes outside DIR (every rendered path is checked component by component) and never writes
//! a secret: join tokens and certificate keys stay placeholders, registry credentials are not read.
//! Exit 0 on success, 2 when the file does not validate.

use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use miette::{miette, IntoDiagnostic, WrapErr};

/// Arguments of `clusterctl render`.
#[derive(clap::Args, Debug)]
pub struct Args {
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

/// Joins a rendered path under `base`, refusing anything that could leave it: `..`, root or prefix
/// components after the leading `/`, empty paths. Errors: the path is unsafe.
pub fn safe_join(base: &Path, rendered: &str) -> miette::Result<PathBuf> {
    let rel = Path::new(rendered.trim_start_matches('/'));
    let mut out = base.to_path_buf();
    let mut parts = 0;
    for c in rel.components() {
        match c {
            Component::Normal(p) => {
                out.push(p);
                parts += 1;
            }
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(miette!(
                    "refusing to write {rendered:?}: it would leave the output directory"
                ));
            }
        }
    }
    if parts == 0 {
        return Err(miette!("refusing to write an empty path"));
    }
    Ok(out)
}

fn write_file(path: &Path, content: &[u8], mode: u32) -> miette::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .into_diagnostic()
            .wrap_err_with(|| format!("creating {}", dir.display()))?;
    }
    // Never follow a symlink planted in the output directory.
    if std::fs::symlink_metadata(path)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)
    {
        return Err(miette!(
            "refusing to write through the symlink {}",
            path.display()
        ));
    }
    std::fs::write(path, content)
        .into_diagnostic()
        .wrap_err_with(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .into_diagnostic()
        .wrap_err_with(|| format!("setting the mode of {}", path.display()))
}

/// Runs the command. Exit 2 for a file that does not validate; errors for I/O failures or an unsafe path.
pub fn run(args: Args) -> miette::Result<ExitCode> {
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
    // Check every path before writing anything.
    let mut plan = Vec::new();
    for (node, files) in &rendered.per_node {
        let base = safe_join(&args.output, node)?;
        for f in files {
            plan.push((safe_join(&base, &f.path)?, f));
        }
    }
    let cluster_base = args.output.join("cluster");
    for f in &rendered.cluster {
        plan.push((safe_join(&cluster_base, &f.path)?, f));
    }
    for (path, f) in &plan {
        write_file(path, &f.content, f.mode)?;
        println!("wrote {} ({:o}, {:?})", path.display(), f.mode, f.purpose);
    }
    println!(
        "{}: {} files for {} nodes in {}",
        cluster.name(),
        plan.len(),
        rendered.per_node.len(),
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_join_refuses_escapes() {
        let b = Path::new("/out");
        assert_eq!(
            safe_join(b, "/etc/x.conf").ok(),
            Some(PathBuf::from("/out/etc/x.conf"))
        );
        assert_eq!(
            safe_join(b, "cni/a.yaml").ok(),
            Some(PathBuf::from("/out/cni/a.yaml"))
        );
        for bad in ["/etc/../../x", "../x", "", "/", "a/../../b"] {
            assert!(safe_join(b, bad).is_err(), "{bad}");
        }
    }

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
