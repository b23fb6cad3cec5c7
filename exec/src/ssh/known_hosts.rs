//! Host-key checking for the SSH transport against an OpenSSH `known_hosts` file (format of sshd(8),
//! section SSH_KNOWN_HOSTS FILE FORMAT; hashed entries are understood through libssh2). A key that
//! differs from the recorded one is always refused; an unknown host is refused under
//! [`HostKeyPolicy::Strict`] and recorded (appended, file mode 0600) under
//! [`HostKeyPolicy::TrustOnFirstUse`].

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Mutex;

use base64::Engine;
use ssh2::{CheckResult, HostKeyType, KnownHostFileKind, Session};

use crate::transport::ExecError;

/// What to do with a host whose key is not in the known_hosts file. A changed key is refused under
/// every policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostKeyPolicy {
    /// Refuse hosts not in the file (the default, as OpenSSH's `StrictHostKeyChecking=yes`).
    #[default]
    Strict,
    /// Record the key of a host not in the file, then pin it (as `StrictHostKeyChecking=accept-new`).
    TrustOnFirstUse,
}

/// The OpenSSH name of a host key type (`ssh-ed25519`, `ecdsa-sha2-nistp256`, …), as in known_hosts.
pub fn key_type_name(t: HostKeyType) -> Option<&'static str> {
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
pub fn host_pattern(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

/// Serialises appends to known_hosts files within this process.
static APPEND: Mutex<()> = Mutex::new(());

/// Checks the host key `sess` negotiated with `host:port` against `file` under `policy`.
/// Errors: [`ExecError::HostKey`] for a changed key, or an unknown one under `Strict`.
pub fn verify(
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
    let mut kh = sess
        .known_hosts()
        .map_err(|e| refuse(format!("known_hosts: {e}")))?;
    if file.exists() {
        kh.read_file(file, KnownHostFileKind::OpenSSH)
            .map_err(|e| refuse(format!("reading {}: {e}", file.display())))?;
    }
    match kh.check_port(host, port, key) {
        CheckResult::Match => Ok(()),
        CheckResult::Mismatch => Err(refuse(format!(
            "the {tname} key presented by {} differs from the one recorded in {} \
             (possible man-in-the-middle; remove the old entry only if the host was really re-installed)",
            host_pattern(host, port),
            file.display()
        ))),
        CheckResult::Failure => Err(refuse(format!("checking against {} failed", file.display()))),
        CheckResult::NotFound => match policy {
            HostKeyPolicy::Strict => Err(refuse(format!(
                "{} is not in {} (add its key, or use the trust-on-first-use policy)",
                host_pattern(host, port),
                file.display()
            ))),
            HostKeyPolicy::TrustOnFirstUse => {
                let line = format!(
                    "{} {tname} {}\n",
                    host_pattern(host, port),
                    base64::engine::general_purpose::STANDARD.encode(key)
                );
                append(file, &line).map_err(|e| refuse(format!("recording key in {}: {e}", file.display())))
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
}
