//! `image load`'s `archive` phase, on this machine: the named images saved from the local Docker
//! engine into one archive (`docker save`), unless an archive was given.

use std::path::{Path, PathBuf};

use super::Data;
use crate::ctx::{Change, NodeCtx, PlanKind};
use crate::error::PhaseError;

/// Why the archive could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArchiveError {
    /// The local Docker engine lacks images (their names, comma-separated).
    #[error(
        "the local Docker engine has no image {0} (build or pull it first, or pass --archive)"
    )]
    Missing(String),
    /// The staging directory could not be made.
    #[error("creating {}: {source}", path.display())]
    Staging {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `docker` could not be run.
    #[error("running docker save: {0}")]
    Run(#[source] std::io::Error),
    /// `docker save` failed.
    #[error("docker save {images} failed: {status}")]
    Failed {
        /// The images.
        images: String,
        /// Its exit status.
        status: std::process::ExitStatus,
    },
}

/// The `archive` phase. Errors: an image the local engine does not have (checked first, also in a dry
/// run), or `docker save` failed.
pub(super) fn run(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    if data.opts.archive.is_some() {
        ctx.info("the archive given is loaded as it is");
        return Ok(());
    }
    let images = &data.opts.images;
    let missing: Vec<&str> = images
        .iter()
        .filter(|i| !has_image(i))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(ctx.local_error(ArchiveError::Missing(missing.join(", "))));
    }
    let out = data.staging.join("images.tar");
    let what = format!("docker save -o {} {}", out.display(), images.join(" "));
    ctx.change(Change::new(PlanKind::Local, &what), |ctx| {
        docker_save(images, &data.staging, &out).map_err(|e| ctx.local_error_in(&what, &e))?;
        let size = std::fs::metadata(&out)
            .map_err(|e| ctx.local_error(format!("reading {}: {e}", out.display())))?
            .len();
        if let Ok(mut a) = data.archive.lock() {
            *a = Some((out, size));
        }
        Ok(())
    })?;
    Ok(())
}

/// True when the local Docker engine has `image`.
fn has_image(image: &str) -> bool {
    std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `docker save -o out IMAGES` into the private directory `dir` (0700).
fn docker_save(images: &[String], dir: &Path, out: &Path) -> Result<(), ArchiveError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| ArchiveError::Staging {
            path: dir.to_path_buf(),
            source,
        })?;
    let status = std::process::Command::new("docker")
        .arg("save")
        .arg("-o")
        .arg(out)
        .args(images)
        .status()
        .map_err(ArchiveError::Run)?;
    if !status.success() {
        return Err(ArchiveError::Failed {
            images: images.join(" "),
            status,
        });
    }
    Ok(())
}
