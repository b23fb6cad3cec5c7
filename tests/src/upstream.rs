//! Published upstream files the tests read from `../shared/upstream/` (relative to the repository root;
//! its README names each file, its release and its sha256). They are test data kept outside the clone:
//! never copied into the tree, read where they are. Today: Calico's CRD file and `tigera-operator.yaml`
//! for each pinned release.

use std::path::PathBuf;

/// `../shared/upstream` next to the repository (the folder holding this crate's `tests/`).
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/upstream")
}

/// One Calico release's real files, as `up` names them (`operator-crds.yaml`, `tigera-operator.yaml`).
#[derive(Debug, Clone)]
pub struct CalicoFiles {
    /// Where the CRD file is (its upstream name differs by release: `operator-crds.yaml`, or
    /// `v1_crd_projectcalico_org.yaml` in v3.32).
    pub crds_path: PathBuf,
    /// The CRD file's bytes.
    pub crds: Vec<u8>,
    /// Where `tigera-operator.yaml` is.
    pub operator_path: PathBuf,
    /// `tigera-operator.yaml`'s bytes.
    pub operator: Vec<u8>,
}

/// The real files of Calico `version` whose CRD file upstream calls `crds_file`, or `None` after
/// [`crate::require`] said they are missing (which fails the test in CI).
pub fn calico(version: &str, crds_file: &str) -> Option<CalicoFiles> {
    let base = dir().join("calico").join(version);
    let crds_path = base.join(crds_file);
    let operator_path = base.join("tigera-operator.yaml");
    match (std::fs::read(&crds_path), std::fs::read(&operator_path)) {
        (Ok(crds), Ok(operator)) => Some(CalicoFiles {
            crds_path,
            crds,
            operator_path,
            operator,
        }),
        (a, b) => {
            let why = a.err().or(b.err()).map(|e| e.to_string());
            crate::require(
                &format!(
                    "Calico {version}'s upstream files in {} ({})",
                    base.display(),
                    why.unwrap_or_default()
                ),
                false,
            );
            None
        }
    }
}
