//! SSH connection set-up for one hop (a node, or the bastion in front of it): the TCP connection
//! ([`tcp`]), then over any socket ([`session_over`]: TCP, or the local end of a tunnel through the
//! bastion) the handshake, the host-key check against known_hosts and authentication by key file or
//! ssh-agent. Every failure names the hop and the cluster-file fields to check.

use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ssh2::{MethodType, Session};

use clusterctl_spec::model::HostKeyPolicy;

use super::known_hosts;
use super::SshAuth;
use crate::transport::ExecError;

/// Host-key algorithms in order of preference (those libssh2 does not know are ignored by it).
const HOSTKEY_PREF: &str = "ssh-ed25519,ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521,rsa-sha2-512,rsa-sha2-256,ssh-rsa";

/// Ciphers in order of preference: AES-GCM first (hardware AES, no separate MAC), then AES-CTR and
/// ChaCha20-Poly1305 (unknown names are ignored by libssh2).
const CIPHER_PREF: &str = "aes128-gcm@openssh.com,aes256-gcm@openssh.com,aes128-ctr,aes256-ctr,chacha20-poly1305@openssh.com,aes192-ctr";

/// Which hop a login is for (the words and the cluster-file fields its errors name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hop {
    /// The node itself (`nodes[].address`, `ssh.*`).
    Node,
    /// The jump host in front of it (`spec.ssh.bastion.*`).
    Bastion,
}

impl Hop {
    /// The cluster-file prefix of this hop's SSH settings.
    fn fields(self) -> &'static str {
        match self {
            Hop::Node => "ssh",
            Hop::Bastion => "ssh.bastion",
        }
    }

    /// How this hop is named in messages, e.g. `bastion 10.0.0.1:22` or `10.0.0.5:22`.
    fn who(self, host: &str, port: u16) -> String {
        match self {
            Hop::Node => format!("{host}:{port}"),
            Hop::Bastion => format!("bastion {host}:{port}"),
        }
    }
}

/// Everything one hop's login needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Login<'a> {
    /// The node this connection is for (errors name it, whichever hop failed).
    pub(crate) node: &'a str,
    /// This hop's host name or address.
    pub(crate) host: &'a str,
    /// This hop's port.
    pub(crate) port: u16,
    /// Login user.
    pub(crate) user: &'a str,
    /// Authentication.
    pub(crate) auth: &'a SshAuth,
    /// known_hosts file.
    pub(crate) known_hosts: &'a Path,
    /// Unknown-host policy.
    pub(crate) policy: HostKeyPolicy,
    /// Limit of each blocking step.
    pub(crate) timeout: Duration,
    /// Which hop this is.
    pub(crate) hop: Hop,
}

impl Login<'_> {
    /// A connection error of this login (retried by the caller's policy).
    pub(crate) fn err(&self, reason: impl Into<String>) -> ExecError {
        let reason = reason.into();
        ExecError::Connect {
            node: self.node.to_string(),
            reason: match self.hop {
                Hop::Node => reason,
                Hop::Bastion => format!("via bastion {}:{}: {reason}", self.host, self.port),
            },
        }
    }
}

/// A TCP connection to the hop. Errors: [`ExecError::Connect`] (resolution or every address refused
/// or timed out).
pub(crate) fn tcp(l: &Login<'_>) -> Result<TcpStream, ExecError> {
    let addrs: Vec<_> = (l.host, l.port)
        .to_socket_addrs()
        .map_err(|e| l.err(format!("resolving {}: {e}", l.host)))?
        .collect();
    let mut last = String::from("no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, l.timeout) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    let what = match l.hop {
        Hop::Node => "is the node up and its address right in the cluster file?",
        Hop::Bastion => "is the bastion up and spec.ssh.bastion.address right?",
    };
    Err(l.err(format!(
        "connecting to {}:{}: {last} ({what})",
        l.host, l.port
    )))
}

/// An SSH session over `stream` (TCP, or a tunnel's local end): handshake, host key checked under
/// the login's policy, user authenticated. Errors: [`ExecError::Connect`], [`ExecError::HostKey`]
/// (its reason names the bastion when that hop's key was refused).
pub(crate) fn session_over<S: AsRawFd + 'static>(
    stream: S,
    l: &Login<'_>,
) -> Result<Session, ExecError> {
    let mut sess = Session::new().map_err(|e| l.err(format!("libssh2: {e}")))?;
    sess.set_tcp_stream(stream);
    sess.set_timeout(u32::try_from(l.timeout.as_millis()).unwrap_or(u32::MAX));
    let _ = sess.method_pref(MethodType::HostKey, HOSTKEY_PREF);
    let _ = sess.method_pref(MethodType::CryptCs, CIPHER_PREF);
    let _ = sess.method_pref(MethodType::CryptSc, CIPHER_PREF);
    let who = l.hop.who(l.host, l.port);
    sess.handshake().map_err(|e| {
        l.err(format!(
            "SSH handshake with {who}: {e} (the connection opened but no SSH server answered in \
             time: check the address and {}.port in the cluster file)",
            l.hop.fields()
        ))
    })?;
    known_hosts::verify(&sess, l.node, l.host, l.port, l.known_hosts, l.policy).map_err(
        |e| match (e, l.hop) {
            (ExecError::HostKey { node, reason }, Hop::Bastion) => ExecError::HostKey {
                node,
                reason: format!("{who}: {reason}"),
            },
            (e, _) => e,
        },
    )?;
    match l.auth {
        SshAuth::KeyFile { path, passphrase } => sess
            .userauth_pubkey_file(l.user, None, path, passphrase.as_deref())
            .map_err(|e| {
                l.err(format!(
                    "key authentication as {} with {} at {who}: {e} (is the key's public half in \
                     that user's ~/.ssh/authorized_keys? check {f}.user and {f}.keyFile)",
                    l.user,
                    path.display(),
                    f = l.hop.fields()
                ))
            })?,
        SshAuth::Agent => agent_auth(&sess, l, None)?,
        SshAuth::AgentSocket(p) => agent_auth(&sess, l, Some(p))?,
    }
    if !sess.authenticated() {
        return Err(l.err(format!("not authenticated as {}", l.user)));
    }
    Ok(sess)
}

/// Authenticates with the first agent identity the server accepts.
fn agent_auth(sess: &Session, l: &Login<'_>, socket: Option<&PathBuf>) -> Result<(), ExecError> {
    let user = l.user;
    let fail =
        |what: &str, e: ssh2::Error| l.err(format!("agent authentication as {user}: {what}: {e}"));
    let mut agent = sess.agent().map_err(|e| fail("agent", e))?;
    if let Some(p) = socket {
        agent
            .set_identity_path(p)
            .map_err(|e| fail("agent socket", e))?;
    }
    agent
        .connect()
        .map_err(|e| fail("connecting to the agent", e))?;
    agent
        .list_identities()
        .map_err(|e| fail("listing identities", e))?;
    let ids = agent
        .identities()
        .map_err(|e| fail("listing identities", e))?;
    // Each refusal is kept: a timeout or a signing failure reads differently from "key not accepted".
    let mut refusals: Vec<String> = Vec::new();
    let ok = ids.iter().any(|id| match agent.userauth(user, id) {
        Ok(()) => true,
        Err(e) => {
            refusals.push(format!("{}: {e}", id.comment()));
            false
        }
    });
    let _ = agent.disconnect();
    if ok {
        Ok(())
    } else {
        Err(l.err(format!(
            "agent authentication as {user}: none of the agent's {} keys was accepted ({})",
            ids.len(),
            refusals.join("; ")
        )))
    }
}
