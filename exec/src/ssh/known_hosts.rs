//! Host-key checking for the SSH transport against an OpenSSH `known_hosts` file (format of sshd(8),
//! section SSH_KNOWN_HOSTS FILE FORMAT; hashed entries are understood through libssh2). Keys are
//! compared by the algorithm the server offers: the offered key against the entries of its own
//! algorithm only. A key that differs from the recorded one of its algorithm is always refused; a
//! host recorded only with keys of other algorithms is refused too, naming both (the keys cannot be
//! compared, and recording the new one would let anyone offering another algorithm past the pin);
//! an unknown host is refused under [`HostKeyPolicy::Strict`] and recorded (appended, file mode 0600)
//! under [`HostKeyPolicy::AcceptNew`] (OpenSSH's `StrictHostKeyChecking=accept-new`). The policy is
//! the cluster file's own type (`spec.ssh.hostKeyPolicy`); its `Insecure`, which validation refuses,
//! is refused here too, like `Strict`: there is no policy without a check.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Mutex;

use base64::Engine;
use ssh2::{CheckResult, HostKeyType, KnownHostFileKind, Session};

use clusterctl_spec::model::HostKeyPolicy;

use crate::transport::ExecError;

/// The OpenSSH name of a host key type (`ssh-ed25519`, `ecdsa-sha2-nistp256`, …), as in known_hosts.
pub(crate) fn key_type_name(t: HostKeyType) -> Option<&'static str> {
    match t {
        HostKeyType::Rsa => Some("ssh-rsa"),
        HostKeyType::Dss => Some("ssh-dss"),
        HostKeyType::Ecdsa256 => Some("ecdsa-sha2-nistp256"),
        HostKeyType::Ecdsa384 => Some("ecdsa-sha2-nistp384"),
        HostKeyType::Ecdsa521 => Some("ecdsa-sha2-nistp521"),
        HostKeyType::Ed25519 => Some("ssh-ed25519"),
        HostKeyType::Unknown => None,
    }
}

/// The host field of a known_hosts line: `host` for port 22, `[host]:port` otherwise.
pub(crate) fn host_pattern(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

/// Serialises appends to known_hosts files within this process.
static APPEND: Mutex<()> = Mutex::new(());

/// Largest known_hosts file read (a line is about 100 bytes).
const MAX_KNOWN_HOSTS_BYTES: u64 = 16 * 1024 * 1024;

/// How the offered key compares with a known_hosts file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// An entry of the offered algorithm for this host holds this key.
    Match,
    /// Entries of the offered algorithm for this host hold other keys.
    Mismatch,
    /// The host is recorded only with keys of these other algorithms (sorted).
    OtherAlgorithms(Vec<String>),
    /// The host is not recorded.
    NotFound,
}

/// The key type field of a known_hosts line (`ssh-ed25519`, …), skipping a `@marker`; `None` for
/// blank and comment lines.
fn line_key_type(line: &str) -> Option<&str> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return None;
    }
    let mut fields = t.split_whitespace();
    let mut first = fields.next()?;
    if first.starts_with('@') {
        first = fields.next()?;
    }
    let _hosts = first;
    fields.next()
}

/// What goes wrong reading a known_hosts file or matching a key against it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KnownHostsError {
    /// libssh2 could not make a known-hosts collection.
    #[error("known_hosts: {0}")]
    Init(#[source] ssh2::Error),
    /// A line libssh2 cannot read.
    #[error("line {line}: {source}")]
    Line {
        /// Its number, from 1.
        line: usize,
        /// libssh2's error.
        #[source]
        source: ssh2::Error,
    },
    /// libssh2 could not check the key.
    #[error("libssh2 could not check the key")]
    Check,
    /// The file could not be opened or read.
    #[error("reading {}: {source}", .path.display())]
    Read {
        /// The known_hosts file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The path is a FIFO, device or directory.
    #[error("{} is not a regular file (a FIFO, device or directory is never read)", .0.display())]
    NotRegular(std::path::PathBuf),
    /// The file is over 16 MiB.
    #[error("{} is larger than {MAX_KNOWN_HOSTS_BYTES} bytes", .0.display())]
    TooLarge(std::path::PathBuf),
}

/// Compares `key` (of algorithm `tname`), offered by `host:port`, with the known_hosts `text`: only
/// with the entries of that algorithm, then, when none is for this host, finds which other
/// algorithms are recorded for it. `sess` provides libssh2's parser and matcher (hashed names
/// included). Errors: a line libssh2 cannot read (with its number).
pub(crate) fn compare(
    sess: &Session,
    text: &str,
    host: &str,
    port: u16,
    key: &[u8],
    tname: &str,
) -> Result<Verdict, KnownHostsError> {
    let mut by_type: std::collections::BTreeMap<&str, ssh2::KnownHosts> =
        std::collections::BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let Some(kt) = line_key_type(line) else {
            continue;
        };
        let kh = match by_type.entry(kt) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(sess.known_hosts().map_err(KnownHostsError::Init)?)
            }
        };
        kh.read_str(line, KnownHostFileKind::OpenSSH)
            .map_err(|source| KnownHostsError::Line {
                line: i + 1,
                source,
            })?;
    }
    if let Some(kh) = by_type.get(tname) {
        match kh.check_port(host, port, key) {
            CheckResult::Match => return Ok(Verdict::Match),
            CheckResult::Mismatch => return Ok(Verdict::Mismatch),
            CheckResult::Failure => return Err(KnownHostsError::Check),
            CheckResult::NotFound => {}
        }
    }
    let others: Vec<String> = by_type
        .iter()
        .filter(|(t, _)| **t != tname)
        .filter(|(_, kh)| matches!(kh.check_port(host, port, key), CheckResult::Mismatch))
        .map(|(t, _)| t.to_string())
        .collect();
    Ok(if others.is_empty() {
        Verdict::NotFound
    } else {
        Verdict::OtherAlgorithms(others)
    })
}

/// The text of the known_hosts file at `path`, `None` when it does not exist. The file is opened
/// without blocking and must be a regular file (a FIFO or device is refused, never waited on).
fn read_known_hosts(path: &Path) -> Result<Option<String>, KnownHostsError> {
    let read = |source| KnownHostsError::Read {
        path: path.to_path_buf(),
        source,
    };
    use std::io::Read;
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read(e)),
    };
    let meta = f.metadata().map_err(read)?;
    if !meta.is_file() {
        return Err(KnownHostsError::NotRegular(path.to_path_buf()));
    }
    let mut text = String::new();
    f.take(MAX_KNOWN_HOSTS_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read)?;
    if text.len() as u64 > MAX_KNOWN_HOSTS_BYTES {
        return Err(KnownHostsError::TooLarge(path.to_path_buf()));
    }
    Ok(Some(text))
}

/// Checks the host key `sess` negotiated with `host:port` against `file` under `policy`.
/// Errors: [`ExecError::HostKey`] for a changed key, a host recorded only with other algorithms'
/// keys (naming the offered and the recorded ones), or an unknown one under `Strict`.
pub(crate) fn verify(
    sess: &Session,
    node: &str,
    host: &str,
    port: u16,
    file: &Path,
    policy: HostKeyPolicy,
) -> Result<(), ExecError> {
    let refuse = |reason: String| ExecError::HostKey {
        node: node.to_string(),
        reason,
    };
    let (key, ktype) = sess
        .host_key()
        .ok_or_else(|| refuse("the server sent no host key".into()))?;
    let tname = key_type_name(ktype).ok_or_else(|| refuse("unknown host key type".into()))?;
    let _guard = APPEND.lock().unwrap_or_else(|p| p.into_inner());
    let text = read_known_hosts(file)
        .map_err(|e| refuse(e.to_string()))?
        .unwrap_or_default();
    let verdict = compare(sess, &text, host, port, key, tname)
        .map_err(|e| refuse(format!("reading {}: {e}", file.display())))?;
    let who = host_pattern(host, port);
    match verdict {
        Verdict::Match => Ok(()),
        Verdict::Mismatch => Err(refuse(format!(
            "the {tname} key presented by {who} differs from the {tname} key recorded in {} \
             (possible man-in-the-middle; remove the old entry only if the host was really re-installed)",
            file.display()
        ))),
        Verdict::OtherAlgorithms(recorded) => Err(refuse(format!(
            "{who} offers a {tname} host key, but {} records only {} for it, so the keys cannot be \
             compared (not recorded either: that would let any server offering another algorithm past \
             the recorded key); check the host's {tname} key out of band (`ssh-keyscan -t {tname} {host}` \
             and its fingerprint on the host) and add its line to {}",
            file.display(),
            recorded.join(", "),
            file.display()
        ))),
        Verdict::NotFound => match policy {
            // `Insecure` is refused by validation; should one reach here it checks as `Strict`.
            HostKeyPolicy::Strict | HostKeyPolicy::Insecure => Err(refuse(format!(
                "{who} is not in {} (add its key, or use the trust-on-first-use policy)",
                file.display()
            ))),
            HostKeyPolicy::AcceptNew => {
                let line = format!(
                    "{who} {tname} {}\n",
                    base64::engine::general_purpose::STANDARD.encode(key)
                );
                append(file, &line)
                    .map_err(|e| refuse(format!("recording key in {}: {e}", file.display())))
            }
        },
    }
}

fn append(file: &Path, line: &str) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(file)?;
    f.write_all(line.as_bytes())?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns_follow_openssh() {
        assert_eq!(host_pattern("10.0.0.1", 22), "10.0.0.1");
        assert_eq!(host_pattern("10.0.0.1", 2222), "[10.0.0.1]:2222");
        assert_eq!(key_type_name(HostKeyType::Ed25519), Some("ssh-ed25519"));
    }

    /// An SSH wire-format public key blob of type `t` (its payload need not be a real key).
    fn blob(t: &str, payload: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        for part in [t.as_bytes(), payload] {
            b.extend_from_slice(&(part.len() as u32).to_be_bytes());
            b.extend_from_slice(part);
        }
        b
    }

    fn line(host: &str, t: &str, key: &[u8]) -> String {
        format!(
            "{host} {t} {}\n",
            base64::engine::general_purpose::STANDARD.encode(key)
        )
    }

    #[test]
    fn keys_are_compared_by_the_offered_algorithm() {
        let sess = Session::new().expect("session");
        let ed = blob("ssh-ed25519", &[7; 32]);
        let ed_other = blob("ssh-ed25519", &[9; 32]);
        let rsa = blob("ssh-rsa", &[1; 64]);
        let ecdsa = blob("ecdsa-sha2-nistp256", &[4; 65]);
        let check = |text: &str, host: &str, port: u16| {
            compare(&sess, text, host, port, &ed, "ssh-ed25519").expect("compares")
        };
        // Issue 17, finding 13: only the host's RSA key recorded, ed25519 offered. Not a mismatch:
        // the algorithms are named.
        let only_rsa = line("10.0.0.1", "ssh-rsa", &rsa);
        assert_eq!(
            check(&only_rsa, "10.0.0.1", 22),
            Verdict::OtherAlgorithms(vec!["ssh-rsa".into()])
        );
        let both_others = format!(
            "# comment\n\n{only_rsa}{}",
            line("10.0.0.1", "ecdsa-sha2-nistp256", &ecdsa)
        );
        assert_eq!(
            check(&both_others, "10.0.0.1", 22),
            Verdict::OtherAlgorithms(vec!["ecdsa-sha2-nistp256".into(), "ssh-rsa".into()])
        );
        // The same algorithm, another key: a mismatch whatever else is recorded.
        let changed = format!("{only_rsa}{}", line("10.0.0.1", "ssh-ed25519", &ed_other));
        assert_eq!(check(&changed, "10.0.0.1", 22), Verdict::Mismatch);
        let same = format!("{only_rsa}{}", line("10.0.0.1", "ssh-ed25519", &ed));
        assert_eq!(check(&same, "10.0.0.1", 22), Verdict::Match);
        // Another host, another port.
        assert_eq!(check(&same, "10.0.0.2", 22), Verdict::NotFound);
        let ported = line("[10.0.0.1]:2222", "ssh-ed25519", &ed);
        assert_eq!(check(&ported, "10.0.0.1", 2222), Verdict::Match);
        assert_eq!(check("", "10.0.0.1", 22), Verdict::NotFound);
        // A line libssh2 cannot read is an error naming it.
        let e = compare(
            &sess,
            "10.0.0.1 ssh-ed25519 !!!\n",
            "10.0.0.1",
            22,
            &ed,
            "ssh-ed25519",
        )
        .expect_err("bad line");
        assert!(e.to_string().contains("line 1"), "{e}");
    }

    #[test]
    fn a_known_hosts_file_that_is_not_regular_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("known_hosts");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(st.success());
        let e = read_known_hosts(&fifo).expect_err("a FIFO");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(matches!(
            read_known_hosts(&dir.path().join("none")),
            Ok(None)
        ));
    }
}
