//! `clusterctl image load -f FILE [--archive FILE.tar] [--nodes A,B] IMAGE…`: puts local images into
//! every node's runtime, like `kind load docker-image`. The images come from the local Docker engine
//! (`docker save`, one archive for all of them) or from an archive given with `--archive` (a `docker
//! save` tarball or an OCI archive). The archive is streamed to each node over its transport
//! (`upload_stream`, never held in memory whole), imported into containerd's `k8s.io` namespace with
//! `ctr -n k8s.io images import` (CRI-O nodes: `podman load`), removed, and each named image is then
//! looked up in the node's runtime. Nodes are worked on in parallel; every node gets a result line.
//! Exit codes: 0 loaded everywhere, 1 some node failed, 2 invalid input.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clusterctl_exec::{Cmd, FileSpec, Transport};
use clusterctl_kubeapi::image_matches;
use clusterctl_spec::model::RuntimeKind;

use super::lifecycle::{self, reach, sh_quote};

/// Subcommands of `clusterctl image`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Command {
    /// Load local images (from Docker or an archive) into every node's runtime.
    Load(LoadArgs),
}

/// Arguments of `clusterctl image load`.
#[derive(clap::Args, Debug)]
pub(crate) struct LoadArgs {
    /// The cluster file.
    #[arg(short = 'f', long = "file", default_value = "cluster.yaml")]
    pub file: PathBuf,
    /// Load this archive (`docker save` tarball or OCI archive) instead of asking the local Docker engine.
    #[arg(long)]
    pub archive: Option<PathBuf>,
    /// Only these nodes (names from the cluster file), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// The known_hosts file for SSH nodes (default `~/.ssh/known_hosts`).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Images, exactly as the pod specs name them (e.g. `cka-api:v4`). With `--archive`, the images
    /// to check for after the import (optional).
    pub images: Vec<String>,
}

/// Where the archive is staged on a node while it is imported (removed afterwards).
pub(crate) const STAGING_DIR: &str = "/var/lib/clusterctl/images";

/// Runs the command (exit codes in the module doc).
pub(crate) fn run(cmd: Command) -> miette::Result<ExitCode> {
    match cmd {
        Command::Load(a) => load(a),
    }
}

fn load(args: LoadArgs) -> miette::Result<ExitCode> {
    if args.archive.is_none() && args.images.is_empty() {
        eprintln!("image load: name at least one image, or give --archive FILE.tar");
        return Ok(ExitCode::from(crate::EXIT_INVALID));
    }
    let cluster = match lifecycle::load_cluster(&args.file) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let unknown: Vec<&String> = args
        .nodes
        .iter()
        .filter(|n| cluster.node(n).is_none())
        .collect();
    if !unknown.is_empty() {
        eprintln!(
            "image load: not nodes of cluster {}: {}",
            cluster.name(),
            unknown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(ExitCode::from(crate::EXIT_INVALID));
    }
    let selected: Vec<_> = cluster
        .nodes()
        .iter()
        .filter(|n| args.nodes.is_empty() || args.nodes.contains(&n.name))
        .collect();
    // The archive: given, or saved from the local Docker engine into a private temp directory.
    let staging = std::env::temp_dir().join(format!("clusterctl-image-{}", std::process::id()));
    let _cleanup = RemoveOnDrop(staging.clone());
    let archive = match &args.archive {
        Some(a) => a.clone(),
        None => match docker_save(&args.images, &staging) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("image load: {e}");
                return Ok(ExitCode::FAILURE);
            }
        },
    };
    let size = match std::fs::metadata(&archive) {
        Ok(m) => m.len(),
        Err(e) => {
            eprintln!("image load: cannot read {}: {e}", archive.display());
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    let runtime = cluster.spec().runtime.kind;
    let reached = reach(&cluster, &selected, args.known_hosts.as_ref());
    let results = lifecycle::on_each(&reached.transports, |_, t| {
        load_on_node(t, &archive, size, runtime, &args.images)
    });
    let mut failed = 0;
    for n in &selected {
        match (results.get(&n.name), reached.errors.get(&n.name)) {
            (Some(Ok(())), _) => println!("{}: loaded {} ({} bytes)", n.name, what(&args), size),
            (Some(Err(e)), _) => {
                failed += 1;
                println!("{}: FAILED: {e}", n.name);
            }
            (None, Some(e)) => {
                failed += 1;
                println!("{}: FAILED: cannot reach: {e}", n.name);
            }
            (None, None) => {
                failed += 1;
                println!("{}: FAILED: no result", n.name);
            }
        }
    }
    if failed > 0 {
        eprintln!("image load: {failed} of {} node(s) failed", selected.len());
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn what(args: &LoadArgs) -> String {
    if args.images.is_empty() {
        args.archive
            .as_ref()
            .map(|a| a.display().to_string())
            .unwrap_or_default()
    } else {
        args.images.join(", ")
    }
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `docker save` of `images` into `dir/images.tar`. Errors name the images Docker does not have.
fn docker_save(images: &[String], dir: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let missing: Vec<&String> = images
        .iter()
        .filter(|i| {
            !std::process::Command::new("docker")
                .args(["image", "inspect", "--format", "{{.Id}}", i.as_str()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the local Docker engine has no image {} (build or pull it first, or pass --archive)",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let out = dir.join("images.tar");
    let status = std::process::Command::new("docker")
        .arg("save")
        .arg("-o")
        .arg(&out)
        .args(images)
        .status()
        .map_err(|e| format!("running docker save: {e}"))?;
    if !status.success() {
        return Err(format!("docker save {} failed: {status}", images.join(" ")));
    }
    Ok(out)
}

/// Streams `archive` to the node, imports it into the runtime, removes it, and checks every image in
/// `images` is then listed by the runtime.
pub(crate) fn load_on_node(
    t: &dyn Transport,
    archive: &Path,
    size: u64,
    runtime: RuntimeKind,
    images: &[String],
) -> Result<(), String> {
    let remote = format!("{STAGING_DIR}/load-{}.tar", std::process::id());
    let mut f =
        std::fs::File::open(archive).map_err(|e| format!("opening {}: {e}", archive.display()))?;
    t.upload_stream(
        &mut f,
        size,
        &FileSpec {
            path: PathBuf::from(&remote),
            mode: 0o600,
            owner: None,
        },
        &mut |_| {},
    )
    .map_err(|e| e.to_string())?;
    let q = sh_quote(&remote);
    let import = match runtime {
        RuntimeKind::Containerd => format!("ctr -n k8s.io images import {q}"),
        RuntimeKind::Crio => format!("podman load -i {q}"),
    };
    let out = t
        .run(&Cmd::new(format!("{import}; rc=$?; rm -f {q}; exit $rc")).sudo())
        .map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(format!(
            "`{import}` exited {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if images.is_empty() {
        return Ok(());
    }
    let listed = t
        .run(&Cmd::new(super::status::LIST_IMAGES).sudo())
        .map_err(|e| e.to_string())?;
    let listed: Vec<String> = listed.stdout_str().lines().map(str::to_string).collect();
    let absent: Vec<&String> = images
        .iter()
        .filter(|i| !listed.iter().any(|l| image_matches(i, l)))
        .collect();
    if !absent.is_empty() {
        return Err(format!(
            "imported, but the runtime does not list {}",
            absent
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(())
}
