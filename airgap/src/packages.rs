//! Packages and binaries for the bundle (`airgap.packages`): a local file (relative to the cluster
//! file) is hashed (and checked when a sha256 is pinned); a URL is downloaded into the blob store
//! (so a re-run does not download it again) and must match its pinned sha256. An archive's `extractTo`
//! directory and a package's `kubernetesVersion` are carried into its manifest entry.

use crate::bundle::PreparedFile;
use crate::digest::Digest;
use crate::error::{AirgapError, Result};
use crate::registry::RegistryClient;
use crate::store::BlobStore;
use std::path::Path;

/// One package as the cluster file names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageSource {
    /// Name, e.g. `kubeadm`.
    pub name: String,
    /// OS family (`debian`, `rhel`, `any`).
    pub os_family: String,
    /// Architecture (`amd64`, …).
    pub arch: String,
    /// Local path (already resolved against the cluster file's directory).
    pub path: Option<std::path::PathBuf>,
    /// Download URL.
    pub url: Option<String>,
    /// Pinned sha256 (hex), required with `url`.
    pub sha256: Option<String>,
    /// For an archive: the absolute directory on the node to unpack it into (`extractTo`, checked
    /// by the cluster file's validation); recorded in the bundle manifest entry.
    pub extract_to: Option<String>,
    /// The Kubernetes version the package belongs to (`kubernetesVersion`, `vX.Y.Z`); recorded in the
    /// bundle manifest entry. `None` for packages of every version.
    pub kubernetes_version: Option<String>,
}

fn file_name(src: &PackageSource) -> String {
    let from = src
        .path
        .as_ref()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
        .or_else(|| {
            src.url.as_ref().and_then(|u| {
                u.split(['?', '#'])
                    .next()
                    .and_then(|u| u.rsplit('/').next())
                    .map(str::to_string)
            })
        })
        .filter(|f| crate::bundle::verify::safe_path(f))
        .unwrap_or_else(|| src.name.clone());
    from.replace('/', "_")
}

/// Prepares every package: bundle path `packages/<os>-<arch>/<file name>`. Errors:
/// `AirgapError::Package` for a missing or mismatching sha256, `PackageSource` for an unreadable file
/// or a failed download.
pub fn prepare_packages(
    client: &RegistryClient,
    store: &BlobStore,
    sources: &[PackageSource],
) -> Result<Vec<PreparedFile>> {
    let mut out = Vec::new();
    for src in sources {
        let perr = |reason: String| AirgapError::Package {
            name: src.name.clone(),
            reason,
        };
        let failed = |e| AirgapError::PackageSource {
            name: src.name.clone(),
            source: Box::new(e),
        };
        let pinned = match &src.sha256 {
            Some(h) => Some(
                Digest::from_hex(&h.to_ascii_lowercase())
                    .ok_or_else(|| perr(format!("sha256 {h:?} is not 64 hex digits")))?,
            ),
            None => None,
        };
        let bundle_path = format!("packages/{}-{}/{}", src.os_family, src.arch, file_name(src));
        let local = match (&src.path, &src.url) {
            (Some(p), _) => p.clone(),
            (None, Some(url)) => {
                let d = pinned
                    .clone()
                    .ok_or_else(|| perr("a url needs a pinned sha256".into()))?;
                if !store.has(&d, None) || !store.check(&d) {
                    client
                        .download_to(url, &d, &store.path(&d))
                        .map_err(failed)?;
                }
                store.path(&d)
            }
            (None, None) => return Err(perr("neither path nor url".into())),
        };
        let mut prepared = PreparedFile::from_path(
            &src.name,
            &bundle_path,
            &local,
            0o644,
            Some(src.os_family.clone()),
            Some(src.arch.clone()),
        )
        .map_err(failed)?;
        prepared.entry.extract_to = src.extract_to.clone();
        prepared.entry.kubernetes_version = src.kubernetes_version.clone();
        if let Some(d) = &pinned {
            if &prepared.entry.sha256 != d {
                return Err(perr(format!(
                    "{} has sha256 {}, pinned {}",
                    local.display(),
                    prepared.entry.sha256,
                    d
                )));
            }
        }
        out.push(prepared);
    }
    Ok(out)
}

/// The name prefix of the CNI agents for other architectures (`clusterctl-agent-arm64`).
pub const AGENT_PREFIX: &str = "clusterctl-agent-";

/// A clusterctl binary built for `arch` (OCI name: `arm64`, `amd64`) as bundle entry
/// `bin/clusterctl-linux-<arch>` (name `clusterctl-agent-<arch>`, mode 0755): `up` places it as the
/// builtin CNI's agent and plugin on the nodes of that architecture. Errors: I/O.
pub fn agent_binary(arch: &str, path: &Path) -> Result<PreparedFile> {
    PreparedFile::from_path(
        &format!("{AGENT_PREFIX}{arch}"),
        &format!("bin/clusterctl-linux-{arch}"),
        path,
        0o755,
        None,
        Some(arch.to_string()),
    )
}

/// The running clusterctl binary as bundle entry `bin/clusterctl` (mode 0755). Errors: I/O.
pub fn self_binary(path: &Path) -> Result<PreparedFile> {
    PreparedFile::from_path("clusterctl", "bin/clusterctl", path, 0o755, None, None)
}
