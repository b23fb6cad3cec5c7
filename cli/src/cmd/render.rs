//! `clusterctl render`: validate a cluster file (or a built-in profile) and write every file each node
//! needs into a directory — `DIR/<node>/<absolute path on the node>` and `DIR/cluster/<path>` for
//! cluster-wide manifests and values — with the modes the files get on the nodes, then list what was
//! written. Rendering is offline, with assumed node facts (containerd 1.x, the file's cgroup version).
//! It never writes outside DIR (`clusterctl_phases::local::write_tree`: every path checked first, no
//! link inside DIR followed) and never writes a secret: join tokens and certificate keys stay placeholders, registry credentials are not read.
//! With `--fetch`, the pinned upstream files of a third-party CNI are obtained (checked by sha256) into
//! `DIR/cluster/upstream/`.
//! Exit 0 on success, 2 when the file does not validate.

use std::path::PathBuf;
use std::process::ExitCode;

use miette::miette;

use super::flags::Format;

/// Arguments of `clusterctl render`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The cluster file.
    #[arg(short = 'f', long = "file", default_value = "cluster.yaml")]
    pub file: PathBuf,
    /// Render a built-in profile instead of a file.
    #[arg(long, conflicts_with = "file")]
    pub profile: Option<String>,
    /// Output directory (created if missing). Files of an earlier render there are replaced, and
    /// those this render no longer writes are removed (other files are left alone).
    #[arg(long = "output-dir", value_name = "DIR")]
    pub output_dir: PathBuf,
    /// How the written files are listed: `text` (path, mode, purpose), `json` or `yaml`
    /// (`{cluster, dir, files: [{path, mode, purpose}]}`).
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

/// The list of files written, kept in the output directory so that the next render can remove the
/// files it no longer writes.
const MANIFEST: &str = ".clusterctl-render";

/// One written file, as listed.
#[derive(serde::Serialize)]
struct Listed {
    /// Where it was written.
    path: String,
    /// Its mode, `0644`.
    mode: String,
    /// What it is for, `kubeadm-init`.
    purpose: String,
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
    // Downloaded and checked before anything is written.
    let upstream = if args.fetch {
        fetch_upstream(&cluster)?
    } else {
        Vec::new()
    };
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
    let dir = &args.output_dir;
    let earlier = std::fs::read_to_string(dir.join(MANIFEST)).unwrap_or_default();
    let manifest: String = files
        .iter()
        .map(|(p, _)| p.as_str())
        .chain(upstream.iter().map(|(p, _)| p.as_str()))
        .map(|p| format!("{p}\n"))
        .collect();
    let written = clusterctl_phases::local::write_tree(
        dir,
        files
            .iter()
            .map(|(p, f)| (p.as_str(), f.content.as_slice(), f.mode))
            .chain(
                upstream
                    .iter()
                    .map(|(p, b)| (p.as_str(), b.as_slice(), 0o644)),
            )
            .chain(std::iter::once((MANIFEST, manifest.as_bytes(), 0o644))),
    )
    .map_err(|e| miette!("{e}"))?;
    let kept: std::collections::BTreeSet<&str> = files
        .iter()
        .map(|(p, _)| p.as_str())
        .chain(upstream.iter().map(|(p, _)| p.as_str()))
        .collect();
    let removed = remove_stale(dir, earlier.lines().filter(|l| !kept.contains(l)));
    let mut listed: Vec<Listed> = written
        .iter()
        .zip(&files)
        .map(|(path, (_, f))| Listed {
            path: path.display().to_string(),
            mode: format!("{:04o}", f.mode),
            purpose: kebab(&format!("{:?}", f.purpose)),
        })
        .collect();
    listed.extend(
        written
            .iter()
            .skip(files.len())
            .take(upstream.len())
            .map(|path| Listed {
                path: path.display().to_string(),
                mode: "0644".into(),
                purpose: "upstream".into(),
            }),
    );
    let doc = serde_json::json!({
        "cluster": cluster.name(),
        "dir": dir.display().to_string(),
        "files": listed,
        "removed": removed,
    });
    if args.output.print(&doc)? {
        return Ok(ExitCode::SUCCESS);
    }
    let width = listed.iter().map(|l| l.path.len()).max().unwrap_or(0);
    for l in &listed {
        println!("wrote {:width$}  {}  {}", l.path, l.mode, l.purpose);
    }
    for r in &removed {
        println!("removed {r} (written by an earlier render, not by this one)");
    }
    println!(
        "{}: {} files for {} nodes in {}",
        cluster.name(),
        listed.len(),
        rendered.per_node.len(),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `render --fetch`: the pinned upstream files of `cluster`'s CNI as (`cluster/upstream/<name>`,
/// bytes), each from the cache `up` uses or downloaded and checked against its sha256
/// (`clusterctl_airgap::upstream`). Errors: no cache directory, a download that fails, a digest that
/// differs, an unpinned file the cluster file does not accept.
fn fetch_upstream(
    cluster: &clusterctl_spec::ValidCluster,
) -> miette::Result<Vec<(String, Vec<u8>)>> {
    use clusterctl_airgap::upstream::Trust;
    let fail = |e: clusterctl_airgap::AirgapError| miette!("render --fetch: {e}");
    let platforms = clusterctl_airgap::plan::platforms(cluster).map_err(fail)?;
    let files = clusterctl_airgap::run::upstream_files(cluster, &platforms).map_err(fail)?;
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let root = clusterctl_phases::up::cni_install::default_cache().ok_or_else(|| {
        miette!("render --fetch: no cache directory for upstream files ($XDG_CACHE_HOME and $HOME are unset)")
    })?;
    let cache = clusterctl_airgap::upstream::UpstreamCache::open(&root).map_err(fail)?;
    let client = clusterctl_airgap::registry::RegistryClient::new(
        clusterctl_airgap::run::client_options(cluster),
    )
    .map_err(fail)?;
    let accept = cluster.spec().networking.cni.accept_unverified;
    let mut out = Vec::new();
    for w in &files {
        let got = cache.fetch(&client, w, accept).map_err(fail)?;
        let bytes = std::fs::read(&got.path)
            .map_err(|e| miette!("render --fetch: reading {}: {e}", got.path.display()))?;
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
        out.push((format!("cluster/upstream/{}", w.name), bytes));
    }
    Ok(out)
}

/// `KubeadmInit` → `kubeadm-init`, `RegistryCa` → `registry-ca`.
fn kebab(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Removes the files an earlier render wrote (`stale`, paths relative to `dir` as its manifest lists
/// them) that this render did not write: only regular files reached through real directories (no
/// symbolic link followed, no `..`), then the directories left empty. Returns the paths removed.
fn remove_stale<'a>(dir: &std::path::Path, stale: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut removed = Vec::new();
    for rel in stale {
        // Paths are `node//etc/…` (the node's absolute path under its directory).
        let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
        if comps.is_empty() || comps.iter().any(|c| *c == "." || *c == "..") {
            continue;
        }
        let mut p = dir.to_path_buf();
        let mut ok = true;
        for (i, c) in comps.iter().enumerate() {
            p.push(c);
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                ok = false;
                break;
            };
            let last = i + 1 == comps.len();
            if (last && !m.file_type().is_file()) || (!last && !m.file_type().is_dir()) {
                ok = false;
                break;
            }
        }
        if ok && std::fs::remove_file(&p).is_ok() {
            removed.push(p.display().to_string());
            // Directories the file leaves empty, up to (not including) DIR.
            let mut d = p.parent().map(std::path::Path::to_path_buf);
            while let Some(cur) = d {
                if cur == dir || std::fs::remove_dir(&cur).is_err() {
                    break;
                }
                d = cur.parent().map(std::path::Path::to_path_buf);
            }
        }
    }
    removed
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
            file,
            profile: None,
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
