//! The upstream Kubernetes programs built from their Go modules by `scripts/k8s/build.sh` (kubeadm,
//! kube-apiserver, etcd, kubectl, …; see docs/testbed-kubernetes.md): [`ensure`] builds what is missing
//! (the script's fast path finds built binaries without running `go`, ~0.5 s) and returns their paths as
//! `scripts/k8s/paths.sh` prints them; [`require_programs`] is the gate tests use — with `CI` set a
//! failure to build fails the test, outside CI it skips the test through [`crate::require`].
//!
//! Builds can take minutes per program cold; the script's output (stderr) goes straight to the test's
//! stderr so a long build shows progress. Results are memoised per process, and the script serialises
//! concurrent builds of one Go module with a `flock`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// The Kubernetes version whose control-plane programs the test bed uses by default (the API-test
/// control plane, [`crate::envtest`]).
pub const DEFAULT_VERSION: &str = "v1.34.4";

/// Why a program could not be provided.
#[derive(Debug, thiserror::Error)]
pub enum K8sBinError {
    /// A script could not be started (e.g. missing `bash`).
    #[error("cannot run {script}: {source}")]
    Spawn {
        /// The script's path.
        script: String,
        /// The error from the operating system.
        source: std::io::Error,
    },
    /// `build.sh` exited non-zero (no Go toolchain, no module proxy, a compile error, …).
    #[error("scripts/k8s/build.sh {version} {programs} failed ({status}); its log is above")]
    Build {
        /// The Kubernetes version asked for.
        version: String,
        /// The programs asked for, space-separated.
        programs: String,
        /// The exit status.
        status: String,
    },
    /// `paths.sh` knows no binary for a program after the build (e.g. kube-vip recorded as unbuildable).
    #[error("{program} for {version} is not built (scripts/k8s/paths.sh {version} {program} found none)")]
    Missing {
        /// The program.
        program: String,
        /// The Kubernetes version.
        version: String,
    },
}

/// Paths of built programs for one Kubernetes version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct K8sBins {
    version: String,
    paths: BTreeMap<String, PathBuf>,
}

impl K8sBins {
    /// The Kubernetes version (`v1.34.4`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The path of `program` (one of the programs asked for).
    ///
    /// # Panics
    /// When `program` was not among the programs given to [`ensure`] (a test bug).
    pub fn path(&self, program: &str) -> &Path {
        self.paths
            .get(program)
            .unwrap_or_else(|| panic!("{program} was not asked for ({})", self.version))
    }
}

/// The directory holding `build.sh` and `paths.sh` (`<workspace>/scripts/k8s`).
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/k8s")
}

static KNOWN: Mutex<BTreeMap<(String, String), PathBuf>> = Mutex::new(BTreeMap::new());

/// Builds (when missing) `programs` for Kubernetes `version` with `scripts/k8s/build.sh VERSION
/// PROGRAM...` and returns their paths from `scripts/k8s/paths.sh VERSION PROGRAM`. Calls in one
/// process are serialised and memoised.
pub fn ensure(version: &str, programs: &[&str]) -> Result<K8sBins, K8sBinError> {
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    let missing: Vec<&str> = programs
        .iter()
        .copied()
        .filter(|p| !known.contains_key(&(version.to_string(), p.to_string())))
        .collect();
    if !missing.is_empty() {
        let script = scripts_dir().join("build.sh");
        let status = Command::new("bash")
            .arg(&script)
            .arg(version)
            .args(&missing)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .map_err(|source| K8sBinError::Spawn {
                script: script.display().to_string(),
                source,
            })?;
        if !status.success() {
            return Err(K8sBinError::Build {
                version: version.to_string(),
                programs: missing.join(" "),
                status: status.to_string(),
            });
        }
        for p in &missing {
            let path = path_of(version, p)?;
            known.insert((version.to_string(), p.to_string()), path);
        }
    }
    let paths = programs
        .iter()
        .map(|p| {
            let path = known[&(version.to_string(), p.to_string())].clone();
            (p.to_string(), path)
        })
        .collect();
    Ok(K8sBins {
        version: version.to_string(),
        paths,
    })
}

fn path_of(version: &str, program: &str) -> Result<PathBuf, K8sBinError> {
    let script = scripts_dir().join("paths.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(version)
        .arg(program)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|source| K8sBinError::Spawn {
            script: script.display().to_string(),
            source,
        })?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || path.is_empty() {
        return Err(K8sBinError::Missing {
            program: program.to_string(),
            version: version.to_string(),
        });
    }
    Ok(PathBuf::from(path))
}

/// [`ensure`] as a test gate: the programs' paths, or `None` after a `SKIP:` line when they cannot be
/// built outside CI. With `CI` set, a failure panics (fails the test) with the reason.
pub fn require_programs(version: &str, programs: &[&str]) -> Option<K8sBins> {
    match ensure(version, programs) {
        Ok(b) => Some(b),
        Err(e) => {
            crate::require(
                &format!(
                    "upstream {} {version} built from Go modules: {e}",
                    programs.join(" ")
                ),
                false,
            );
            None
        }
    }
}
