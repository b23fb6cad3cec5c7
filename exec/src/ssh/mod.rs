//! `SshTransport`: a node reached over SSH with libssh2 (the `ssh2` crate). One TCP connection and SSH
//! session per host, opened once and reused for every command and transfer (a `Mutex` serialises the
//! channels); reopened once if it broke. With a jump host ([`Bastion`]) that connection is a
//! `direct-tcpip` channel of a session to the bastion ([`jump`]); connection set-up is in
//! [`connect`]. Host keys are checked against a known_hosts file ([`known_hosts`]), on both hops;
//! authentication is by key file or by the ssh-agent. Commands run through the shell wrapper of
//! [`crate::shell`] (`sudo -n` when the user is not root, secrets never on a command line), with a
//! non-blocking loop that writes stdin, streams stdout/stderr and enforces the timeout.

mod connect;
mod jump;
pub(crate) mod known_hosts;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clusterctl_spec::model::HostKeyPolicy;
use ssh2::{BlockDirections, ErrorCode, Session};

pub use jump::Bastion;

use crate::raw::{Input, RawExec};
use crate::shell;
use crate::transport::{Cmd, ExecError, Output};

/// libssh2's `LIBSSH2_ERROR_EAGAIN`: a non-blocking call would block.
const EAGAIN: i32 = -37;

/// Where a node is: its name in the cluster file, address, SSH port and login user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// Node name (for messages).
    pub node: String,
    /// Host name or IP address.
    pub host: String,
    /// TCP port, normally 22.
    pub port: u16,
    /// Login user; commands with `sudo` use `sudo -n` unless this is `root`.
    pub user: String,
}

/// How to authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshAuth {
    /// A private key file (OpenSSH or PEM format; ed25519, ECDSA or RSA), optionally encrypted.
    KeyFile {
        /// Path of the private key.
        path: PathBuf,
        /// Passphrase of an encrypted key. Never logged.
        passphrase: Option<String>,
    },
    /// The identities of the running ssh-agent (`SSH_AUTH_SOCK`), tried in the agent's order.
    Agent,
    /// The identities of the ssh-agent listening on this unix socket.
    AgentSocket(PathBuf),
}

/// Connection options shared by every node of a cluster.
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// Authentication method.
    pub auth: SshAuth,
    /// The known_hosts file (OpenSSH format) to check host keys against and record into.
    pub known_hosts: PathBuf,
    /// What to do with unknown hosts. Changed keys are always refused.
    pub host_key_policy: HostKeyPolicy,
    /// Limit for the TCP connect, the SSH handshake and authentication, and any blocking step.
    pub connect_timeout: Duration,
    /// How often connection set-up (TCP connect, handshake, authentication) is tried before giving up,
    /// at least 1; see [`ConnectRetry`]. Never applies to a command's result or to a refused host key.
    pub connect_retry: ConnectRetry,
    /// The jump host every connection goes through (`spec.ssh.bastion`); `None`: connect directly.
    /// Its host key is checked against [`Self::known_hosts`] too, under its own policy.
    pub bastion: Option<Box<Bastion>>,
}

/// The bounded retry of SSH connection set-up, for nodes that are still booting (sshd not yet
/// listening, or not yet reading the key it will accept). Attempt `n` (from 1) waits
/// `first_delay × 2^(n-1)` before it (capped at 8 s); a refused host key is never retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectRetry {
    /// Attempts in all, at least 1 (1 = no retry). Default 4.
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each later one, up to 8 s. Default 1 s.
    pub first_delay: Duration,
}

impl Default for ConnectRetry {
    fn default() -> Self {
        ConnectRetry {
            attempts: 4,
            first_delay: Duration::from_secs(1),
        }
    }
}

impl SshOptions {
    /// Options with `auth`, `~/.ssh/known_hosts` (from `HOME`), the cluster file's default host-key
    /// policy (`HostKeyPolicy::default()`: `AcceptNew`, as `spec.ssh.hostKeyPolicy`) and a 15 s timeout.
    pub fn new(auth: SshAuth) -> Self {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/root"));
        SshOptions {
            auth,
            known_hosts: home.join(".ssh").join("known_hosts"),
            host_key_policy: HostKeyPolicy::default(),
            connect_timeout: Duration::from_secs(15),
            connect_retry: ConnectRetry::default(),
            bastion: None,
        }
    }
}

struct Conn {
    sess: Session,
    fd: RawFd,
}

/// A node reached over SSH. Create with [`SshTransport::connect`] (connects at once) or
/// [`SshTransport::lazy`] (connects at the first call).
pub struct SshTransport {
    target: SshTarget,
    options: SshOptions,
    conn: Mutex<Option<Conn>>,
    connects: AtomicUsize,
}

impl std::fmt::Debug for SshTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshTransport")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl SshTransport {
    /// Connects, checks the host key and authenticates. Errors: [`ExecError::Connect`] (unreachable,
    /// handshake or authentication failed), [`ExecError::HostKey`] (refused host key).
    pub fn connect(target: SshTarget, options: SshOptions) -> Result<Self, ExecError> {
        let t = Self::lazy(target, options);
        {
            let mut guard = t
                .conn
                .lock()
                .map_err(|_| t.err("connection lock poisoned"))?;
            *guard = Some(t.open_with_retry()?);
        }
        Ok(t)
    }

    /// A transport that connects at its first call.
    pub fn lazy(target: SshTarget, options: SshOptions) -> Self {
        SshTransport {
            target,
            options,
            conn: Mutex::new(None),
            connects: AtomicUsize::new(0),
        }
    }

    /// Where this transport connects to.
    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// How many SSH connections this transport has opened so far (1 when every call reused one).
    pub fn connections(&self) -> usize {
        self.connects.load(Ordering::SeqCst)
    }

    fn err(&self, reason: impl Into<String>) -> ExecError {
        ExecError::Connect {
            node: self.target.node.clone(),
            reason: reason.into(),
        }
    }

    /// [`Self::open`], retried as [`SshOptions::connect_retry`] says while the error is a connection
    /// set-up failure ([`ExecError::Connect`]); a refused host key ends at once. The last error names
    /// how many attempts were made.
    fn open_with_retry(&self) -> Result<Conn, ExecError> {
        use backon::{BlockingRetryable, ExponentialBuilder};
        let policy = self.options.connect_retry;
        let retries = policy.attempts.max(1) - 1;
        let backoff = ExponentialBuilder::default()
            .with_min_delay(policy.first_delay)
            .with_max_delay(Duration::from_secs(8))
            .with_max_times(retries as usize);
        let mut tried = 0u32;
        let result = (|| {
            tried += 1;
            self.open()
        })
        .retry(backoff)
        .when(|e| matches!(e, ExecError::Connect { .. }))
        .call();
        match result {
            Err(ExecError::Connect { node, reason }) if tried > 1 => Err(ExecError::Connect {
                node,
                reason: format!("{reason} (after {tried} attempts)"),
            }),
            other => other,
        }
    }

    /// One connection to the node: direct, or through the bastion ([`SshOptions::bastion`]), with
    /// the host key checked and the user authenticated on each hop.
    fn open(&self) -> Result<Conn, ExecError> {
        let t = &self.target;
        let o = &self.options;
        let login = connect::Login {
            node: &t.node,
            host: &t.host,
            port: t.port,
            user: &t.user,
            auth: &o.auth,
            known_hosts: &o.known_hosts,
            policy: o.host_key_policy,
            timeout: o.connect_timeout,
            hop: connect::Hop::Node,
        };
        let (sess, fd) = match &o.bastion {
            None => {
                let tcp = connect::tcp(&login)?;
                let fd = tcp.as_raw_fd();
                (connect::session_over(tcp, &login)?, fd)
            }
            Some(b) => {
                let local = jump::tunnel(b, &login)?;
                let fd = local.as_raw_fd();
                (connect::session_over(local, &login)?, fd)
            }
        };
        self.connects.fetch_add(1, Ordering::SeqCst);
        Ok(Conn { sess, fd })
    }

    fn is_root(&self) -> bool {
        self.target.user == "root"
    }

    /// Runs one command on an open connection (see the module doc).
    // One call carries one command's whole I/O: splitting the parameters would only hide that.
    #[allow(clippy::too_many_arguments)]
    fn exec_on(
        &self,
        conn: &Conn,
        started: Instant,
        mut ch: ssh2::Channel,
        cmd: &Cmd,
        wrapped: &shell::Wrapped,
        mut input: Option<Input<'_>>,
        progress: &mut dyn FnMut(u64),
        on_output: &mut dyn FnMut(&[u8]),
    ) -> Result<Output, ExecError> {
        let sess = &conn.sess;
        let node = &self.target.node;
        let broken = |what: &str, e: ssh2::Error| ExecError::Connect {
            node: node.clone(),
            reason: format!("{what}: {e}"),
        };
        sess.set_blocking(false);
        // Measured from before the channel's exec request: the node's `timeout` starts counting
        // there, and a loaded machine may take a while to get here.
        let start = started;
        // Backstop: the node's `timeout` kills the command; this closes the channel if even that hangs.
        let deadline = cmd.timeout.map(|t| start + t + Duration::from_secs(5));
        let pre = &wrapped.preamble;
        let mut pre_off = 0usize;
        let mut chunk = vec![0u8; 64 * 1024];
        let (mut chunk_len, mut chunk_off) = (0usize, 0usize);
        let mut input_done = input.is_none();
        let mut sent = 0u64;
        let mut eof_sent = false;
        let (mut out_eof, mut err_eof) = (false, false);
        let mut out = Output::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let mut moved = false;
            // 1. Standard input: preamble, then the caller's input, then EOF.
            if !eof_sent {
                if pre_off < pre.len() {
                    match ch.write(&pre[pre_off..]) {
                        Ok(n) => {
                            pre_off += n;
                            moved |= n > 0;
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(_) => eof_sent = true, // the command stopped reading: its status tells.
                    }
                } else if !input_done {
                    if chunk_off == chunk_len {
                        if let Some(inp) = input.as_mut() {
                            match inp.reader.read(&mut chunk) {
                                Ok(0) => input_done = true,
                                Ok(n) => {
                                    chunk_len = n;
                                    chunk_off = 0;
                                    moved = true;
                                }
                                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                                Err(e) => {
                                    let _ = ch.close();
                                    sess.set_blocking(true);
                                    return Err(ExecError::Other(format!(
                                        "reading upload input: {e}"
                                    )));
                                }
                            }
                        } else {
                            input_done = true;
                        }
                    }
                    if chunk_off < chunk_len {
                        match ch.write(&chunk[chunk_off..chunk_len]) {
                            Ok(n) => {
                                chunk_off += n;
                                sent += n as u64;
                                if n > 0 {
                                    moved = true;
                                    progress(sent);
                                }
                            }
                            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                            Err(_) => {
                                input_done = true;
                                eof_sent = true;
                            }
                        }
                    }
                } else {
                    match ch.send_eof() {
                        Ok(()) => {
                            eof_sent = true;
                            moved = true;
                        }
                        Err(e) if e.code() == ErrorCode::Session(EAGAIN) => {}
                        Err(_) => eof_sent = true,
                    }
                }
            }
            // 2. Standard output and error.
            for is_err in [false, true] {
                if (is_err && err_eof) || (!is_err && out_eof) {
                    continue;
                }
                loop {
                    let r = if is_err {
                        ch.stderr().read(&mut buf)
                    } else {
                        ch.read(&mut buf)
                    };
                    match r {
                        Ok(0) => {
                            if is_err {
                                err_eof = true;
                            } else {
                                out_eof = true;
                            }
                            break;
                        }
                        Ok(n) => {
                            moved = true;
                            on_output(cmd.redact(&String::from_utf8_lossy(&buf[..n])).as_bytes());
                            if is_err {
                                out.stderr.extend_from_slice(&buf[..n]);
                            } else {
                                out.stdout.extend_from_slice(&buf[..n]);
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => {
                            sess.set_blocking(true);
                            return Err(ExecError::Connect {
                                node: node.clone(),
                                reason: format!("reading command output: {e}"),
                            });
                        }
                    }
                }
            }
            if out_eof && err_eof {
                break;
            }
            if let Some(d) = deadline {
                if Instant::now() >= d {
                    let _ = ch.close();
                    sess.set_blocking(true);
                    return Err(ExecError::Timeout {
                        node: node.clone(),
                        after: cmd.timeout.unwrap_or_default(),
                    });
                }
            }
            if !moved {
                let mut wait = Duration::from_millis(100);
                if let Some(d) = deadline {
                    wait = wait.min(d.saturating_duration_since(Instant::now()));
                }
                wait_socket(conn, wait);
            }
        }
        sess.set_blocking(true);
        let _ = ch.wait_close();
        let status = match ch.exit_status() {
            Ok(s) => s,
            Err(e) => return Err(broken("reading the exit status", e)),
        };
        // A command killed by a signal (no exit-status message) reports 0 from libssh2: use the signal.
        let status = match ch.exit_signal() {
            Ok(sig) if sig.exit_signal.is_some() => -1,
            _ => status,
        };
        out.status = status;
        if let Some(limit) = cmd.timeout {
            if (status == shell::TIMEOUT_STATUS || status == 128 + 9) && start.elapsed() >= limit {
                return Err(ExecError::Timeout {
                    node: node.clone(),
                    after: limit,
                });
            }
        }
        Ok(out)
    }
}

/// Opens a session channel and starts `command_line` on it (blocking mode).
fn start_channel(conn: &Conn, command_line: &str) -> Result<ssh2::Channel, ssh2::Error> {
    conn.sess.set_blocking(true);
    let mut ch = conn.sess.channel_session()?;
    ch.exec(command_line)?;
    Ok(ch)
}

/// Waits until the session's socket can make progress in the direction libssh2 is blocked on, or
/// `wait` passes.
fn wait_socket(conn: &Conn, wait: Duration) {
    let dirs = conn.sess.block_directions();
    let mut events: libc::c_short = libc::POLLIN;
    if matches!(dirs, BlockDirections::Outbound | BlockDirections::Both) {
        events |= libc::POLLOUT;
    }
    let mut pfd = libc::pollfd {
        fd: conn.fd,
        events,
        revents: 0,
    };
    let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX).max(1);
    // SAFETY: one valid pollfd on the stack; the fd belongs to the live session.
    unsafe {
        libc::poll(&mut pfd, 1, ms);
    }
}

impl RawExec for SshTransport {
    fn raw_node(&self) -> &str {
        &self.target.node
    }

    fn raw_exec(
        &self,
        cmd: &Cmd,
        input: Option<Input<'_>>,
        progress: &mut dyn FnMut(u64),
        on_output: &mut dyn FnMut(&[u8]),
    ) -> Result<Output, ExecError> {
        let wrapped = shell::wrap(cmd, self.is_root())?;
        let mut guard = self
            .conn
            .lock()
            .map_err(|_| self.err("connection lock poisoned"))?;
        if guard.is_none() {
            *guard = Some(self.open_with_retry()?);
        }
        let mut started = Instant::now();
        // A channel that cannot be opened or started means the session broke: reconnect once and
        // retry (nothing ran yet). Any later failure is returned as is.
        let ch = match guard
            .as_ref()
            .map(|c| start_channel(c, &wrapped.command_line))
        {
            Some(Ok(ch)) => ch,
            _ => {
                *guard = None;
                let c = self.open_with_retry()?;
                started = Instant::now();
                let ch = start_channel(&c, &wrapped.command_line)
                    .map_err(|e| self.err(format!("starting the command: {e}")))?;
                *guard = Some(c);
                ch
            }
        };
        let conn = guard.as_ref().ok_or_else(|| self.err("no connection"))?;
        let result = self.exec_on(conn, started, ch, cmd, &wrapped, input, progress, on_output);
        if matches!(result, Err(ExecError::Connect { .. })) {
            *guard = None;
        }
        result
    }
}

impl Drop for SshTransport {
    fn drop(&mut self) {
        if let Ok(mut g) = self.conn.lock() {
            if let Some(c) = g.take() {
                c.sess.set_blocking(true);
                c.sess.set_timeout(1000);
                let _ = c.sess.disconnect(None, "clusterctl done", None);
            }
        }
    }
}
