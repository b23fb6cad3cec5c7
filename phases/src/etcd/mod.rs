//! `clusterctl etcd snapshot save|restore`: etcd backup and restore of a kubeadm cluster's stacked etcd,
//! as workflows run by the engine through `NodeCtx` (so `--dry-run` changes nothing). Each operation
//! has one entry point: [`save::run`] and [`restore::run`].
//!
//! Only what a control plane already has is used: `crictl`, the running etcd static pod's container
//! (its image carries `etcdctl` and `etcdutl`, as upstream's `registry.k8s.io/etcd` does) and kubeadm's
//! etcd client certificates under `/etc/kubernetes/pki/etcd/`; when etcd is not running on a node
//! (restore of a member that crashed), `etcdutl` runs from the etcd image through `ctr` (containerd
//! nodes). The data directory is a hostPath mounted at the same path in the pod, so files placed
//! there are seen by both. Health is checked with `kubectl` and `admin.conf` on the node (no `curl`).
//!
//! This module holds what both share: the snapshot's integrity check ([`check_snapshot`]: the sha256
//! `etcdctl snapshot save` appends, as `etcdutl snapshot restore` checks it), the status `etcdutl
//! snapshot status -w json` reports ([`SnapshotStatus`]) and the scripts that run etcd's tools.

pub mod restore;
pub mod save;

use sha2::{Digest, Sha256};

/// kubeadm's etcd client flags: the local member with the healthcheck client certificate.
const ETCDCTL_FLAGS: &str = "--endpoints=https://127.0.0.1:2379 \
     --cacert=/etc/kubernetes/pki/etcd/ca.crt \
     --cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt \
     --key=/etc/kubernetes/pki/etcd/healthcheck-client.key";

/// The etcd static pod's manifest kubeadm writes.
pub const ETCD_MANIFEST: &str = "/etc/kubernetes/manifests/etcd.yaml";

/// Shell functions every etcd script starts with: `etcd_id` (the running etcd container, or empty),
/// `etcdctl_in ARGS` (`etcdctl` with kubeadm's client certificates inside it), and `etcdutl_in IMAGE
/// DATA_DIR ARGS` (`etcdutl` inside it, else from `IMAGE` through `ctr` with `DATA_DIR` mounted).
fn tools() -> String {
    format!(
        "etcd_id() {{ crictl ps -q --name '^etcd$' --state running 2>/dev/null | head -n1; }}\n\
         etcdctl_in() {{\n\
         \x20 id=$(etcd_id)\n\
         \x20 [ -n \"$id\" ] || {{ echo 'no running etcd container on this node' >&2; return 1; }}\n\
         \x20 crictl exec \"$id\" etcdctl {ETCDCTL_FLAGS} \"$@\"\n\
         }}\n\
         etcdutl_in() {{\n\
         \x20 image=$1; data=$2; shift 2\n\
         \x20 id=$(etcd_id)\n\
         \x20 if [ -n \"$id\" ]; then crictl exec \"$id\" etcdutl \"$@\"; return; fi\n\
         \x20 command -v ctr >/dev/null 2>&1 || {{ echo \"etcd is not running on this node and there is no ctr to run etcdutl of $image\" >&2; return 1; }}\n\
         \x20 ctr -n k8s.io run --rm --net-host --mount \"type=bind,src=$data,dst=$data,options=rbind:rw\" \"$image\" \"clusterctl-etcdutl-$$\" etcdutl \"$@\"\n\
         }}\n"
    )
}

/// Why a snapshot file is refused before anything is changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Corrupt {
    /// Too short to be an etcd database.
    #[error("{size} bytes: too short for an etcd snapshot")]
    TooShort {
        /// Its size.
        size: usize,
    },
    /// The first page is not a bbolt meta page.
    #[error("not an etcd snapshot (no bbolt database magic at the start)")]
    NotBolt,
    /// No sha256 at the end (a database file copied from a data directory, not `etcdctl snapshot save`).
    #[error("{size} bytes: no integrity hash at the end (a copy of a member's db file, not a snapshot from `etcdctl snapshot save`/`clusterctl etcd snapshot save`)")]
    NoHash {
        /// Its size.
        size: usize,
    },
    /// The hash at the end does not match the content.
    #[error("integrity check failed: the sha256 at its end is {stored}, its content hashes to {actual} (the file is damaged)")]
    HashMismatch {
        /// The sha256 stored at the end.
        stored: String,
        /// The sha256 of the content.
        actual: String,
    },
}

/// Checks a snapshot as `etcdutl snapshot restore` does before restoring: a bbolt database followed
/// by the sha256 of its content (its size is then 32 more than a multiple of 512). Errors: [`Corrupt`].
pub fn check_snapshot(data: &[u8]) -> Result<(), Corrupt> {
    let size = data.len();
    if size < 4096 + 32 {
        return Err(Corrupt::TooShort { size });
    }
    // bbolt's first page is a meta page: 16-byte page header, then the magic 0xED0CDAED (LE).
    if data[16..20] != [0xED, 0xDA, 0x0C, 0xED] {
        return Err(Corrupt::NotBolt);
    }
    if size % 512 != 32 {
        return Err(Corrupt::NoHash { size });
    }
    let (db, stored) = data.split_at(size - 32);
    let actual = Sha256::digest(db);
    if actual.as_slice() != stored {
        return Err(Corrupt::HashMismatch {
            stored: hex::encode(stored),
            actual: hex::encode(actual),
        });
    }
    Ok(())
}

/// What `etcdutl snapshot status -w json` reports about a snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotStatus {
    /// The database's hash (etcd's CRC of its keys and values).
    pub hash: u64,
    /// The revision it was taken at.
    pub revision: i64,
    /// Its number of keys.
    #[serde(rename = "totalKey")]
    pub total_keys: u64,
    /// Its size in bytes.
    #[serde(rename = "totalSize")]
    pub total_size: u64,
    /// The etcd storage version, when recorded.
    #[serde(default)]
    pub version: String,
}

impl SnapshotStatus {
    /// The status in `etcdutl`'s output (its last line that parses as the JSON status). `None` when no
    /// line does.
    pub fn parse(out: &str) -> Option<SnapshotStatus> {
        out.lines()
            .rev()
            .find_map(|l| serde_json::from_str(l.trim()).ok())
    }
}

impl std::fmt::Display for SnapshotStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "hash {:08x}, revision {}, {} keys, {} bytes",
            self.hash, self.revision, self.total_keys, self.total_size
        )?;
        if !self.version.is_empty() {
            write!(f, ", storage version {}", self.version)?;
        }
        Ok(())
    }
}

/// What a control plane's etcd static pod manifest says about its member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// `--name` (kubeadm: the node's name).
    pub name: String,
    /// `--initial-advertise-peer-urls`.
    pub peer_url: String,
    /// `--data-dir`.
    pub data_dir: String,
    /// The pod's image (where `etcdutl` comes from when etcd is not running).
    pub image: String,
}

impl Member {
    /// The member of the manifest `yaml` (`- --flag=value` lines, one `image:`). `None` when a flag is
    /// missing.
    pub fn from_manifest(yaml: &str) -> Option<Member> {
        let flag = |name: &str| {
            let prefix = format!("--{name}=");
            yaml.lines().find_map(|l| {
                let l = l.trim();
                let l = l.strip_prefix('-').unwrap_or(l).trim_start();
                l.strip_prefix(prefix.as_str())
                    .map(|v| v.trim().trim_matches('"').to_string())
            })
        };
        let image = yaml.lines().find_map(|l| {
            l.trim()
                .strip_prefix("image:")
                .map(|v| v.trim().trim_matches('"').to_string())
        })?;
        Some(Member {
            name: flag("name")?,
            peer_url: flag("initial-advertise-peer-urls")?,
            data_dir: flag("data-dir").unwrap_or_else(|| "/var/lib/etcd".into()),
            image,
        })
    }
}

/// `--initial-cluster` of `members`: `name=peer-url` joined by commas, in the order given.
pub fn initial_cluster(members: &[Member]) -> String {
    members
        .iter()
        .map(|m| format!("{}={}", m.name, m.peer_url))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file shaped like a snapshot: a bbolt magic in the first page, the sha256 appended.
    fn snapshot() -> Vec<u8> {
        let mut db = vec![0u8; 8192];
        db[16..20].copy_from_slice(&[0xED, 0xDA, 0x0C, 0xED]);
        db[5000] = 7;
        let sum = Sha256::digest(&db);
        db.extend_from_slice(&sum);
        db
    }

    #[test]
    fn a_snapshot_passes_and_a_flipped_byte_or_missing_hash_is_refused() {
        let good = snapshot();
        assert_eq!(check_snapshot(&good), Ok(()));
        let mut bad = good.clone();
        bad[6000] ^= 0xff;
        assert!(matches!(
            check_snapshot(&bad),
            Err(Corrupt::HashMismatch { .. })
        ));
        assert_eq!(
            check_snapshot(&good[..8192]),
            Err(Corrupt::NoHash { size: 8192 })
        );
        assert_eq!(
            check_snapshot(&[0; 100]),
            Err(Corrupt::TooShort { size: 100 })
        );
        assert_eq!(check_snapshot(&vec![0; 8224]), Err(Corrupt::NotBolt));
    }

    #[test]
    fn reads_etcdutls_status_and_the_manifests_member() {
        let out = "some log line\n{\"hash\":3700231467,\"revision\":1203,\"totalKey\":1100,\"totalSize\":3219456,\"version\":\"3.6.0\"}\n";
        let s = SnapshotStatus::parse(out).expect("status");
        assert_eq!(
            (s.revision, s.total_keys, s.total_size),
            (1203, 1100, 3219456)
        );
        assert_eq!(
            s.to_string(),
            "hash dc8d0d2b, revision 1203, 1100 keys, 3219456 bytes, storage version 3.6.0"
        );
        let yaml = "spec:\n  containers:\n  - command:\n    - etcd\n    - --advertise-client-urls=https://10.0.0.1:2379\n    - --data-dir=/var/lib/etcd\n    - --initial-advertise-peer-urls=https://10.0.0.1:2380\n    - --initial-cluster=c1=https://10.0.0.1:2380\n    - --name=c1\n    image: registry.k8s.io/etcd:3.6.5-0\n";
        let m = Member::from_manifest(yaml).expect("member");
        assert_eq!(
            m,
            Member {
                name: "c1".into(),
                peer_url: "https://10.0.0.1:2380".into(),
                data_dir: "/var/lib/etcd".into(),
                image: "registry.k8s.io/etcd:3.6.5-0".into(),
            }
        );
        let m2 = Member {
            name: "c2".into(),
            peer_url: "https://10.0.0.2:2380".into(),
            ..m.clone()
        };
        assert_eq!(
            initial_cluster(&[m, m2]),
            "c1=https://10.0.0.1:2380,c2=https://10.0.0.2:2380"
        );
        assert_eq!(Member::from_manifest("image: x\n"), None);
    }
}
