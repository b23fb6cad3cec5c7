//! The state record: which phases are done on a node, with a digest of the inputs they were done with,
//! and the sha256 of every rendered file placed. Kept on the node at [`STATE_PATH`] (root-only, 0600)
//! and mirrored in the local cache (`~/.cache/clusterctl/<cluster>/<node>.json`), so a second `up`
//! skips what is done and a killed `up` resumes, from this machine or another one holding the file.
//! It never holds secrets: only phase names, timestamps and digests of rendered (secret-free) files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the record lives on each node.
pub const STATE_PATH: &str = "/var/lib/clusterctl/state.json";

/// One phase done on a node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PhaseRecord {
    /// sha256 (hex) over the phase's inputs when it completed; a different digest reruns the phase.
    pub inputs: String,
    /// When it completed, seconds since the Unix epoch (the controlling machine's clock).
    pub at: u64,
}

/// The record of one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeState {
    /// Format version (1).
    pub version: u32,
    /// Cluster name (`metadata.name`).
    pub cluster: String,
    /// Node name.
    pub node: String,
    /// Phase path → record.
    pub phases: BTreeMap<String, PhaseRecord>,
    /// Absolute path → sha256 of rendered files placed by clusterctl.
    pub files: BTreeMap<String, String>,
}

impl NodeState {
    /// An empty record for `node` of `cluster`.
    pub fn new(cluster: &str, node: &str) -> Self {
        NodeState {
            version: 1,
            cluster: cluster.into(),
            node: node.into(),
            ..Default::default()
        }
    }
    /// Parses a record; `None` when it is not one for this cluster and node (or not JSON).
    pub fn parse(bytes: &[u8], cluster: &str, node: &str) -> Option<Self> {
        let s: NodeState = serde_json::from_slice(bytes).ok()?;
        (s.cluster == cluster && s.node == node).then_some(s)
    }
    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }
    /// True when `phase` is recorded done with exactly `inputs`.
    pub fn is_done(&self, phase: &str, inputs: &str) -> bool {
        self.phases.get(phase).is_some_and(|r| r.inputs == inputs)
    }
}

/// The local cache of node records for one cluster (a directory, files 0600).
#[derive(Debug, Clone)]
pub struct LocalCache {
    dir: PathBuf,
}

impl LocalCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        LocalCache { dir: dir.into() }
    }
    fn path(&self, node: &str) -> PathBuf {
        let safe: String = node
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(format!("{safe}.json"))
    }
    /// The cached record of `node`, if any and valid.
    pub fn load(&self, cluster: &str, node: &str) -> Option<NodeState> {
        let bytes = std::fs::read(self.path(node)).ok()?;
        NodeState::parse(&bytes, cluster, node)
    }
    /// Stores the record of its node (0600). Errors: I/O.
    pub fn store(&self, state: &NodeState) -> std::io::Result<()> {
        crate::local::write_private(&self.path(&state.node), 0o600, &state.to_json())
    }
    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_and_checks_owner() {
        let mut s = NodeState::new("lab", "c1");
        s.phases.insert(
            "init".into(),
            PhaseRecord {
                inputs: "abc".into(),
                at: 1,
            },
        );
        let bytes = s.to_json();
        assert_eq!(NodeState::parse(&bytes, "lab", "c1"), Some(s.clone()));
        assert_eq!(NodeState::parse(&bytes, "lab", "c2"), None);
        assert!(s.is_done("init", "abc"));
        assert!(!s.is_done("init", "abd"));
    }

    #[test]
    fn cache_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = LocalCache::new(dir.path().join("lab"));
        let s = NodeState::new("lab", "w/1");
        cache.store(&s).expect("store");
        assert_eq!(cache.load("lab", "w/1"), Some(s));
        let meta = std::fs::metadata(dir.path().join("lab/w_1.json")).expect("meta");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }
}
