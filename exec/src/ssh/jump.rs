//! The jump host (`spec.ssh.bastion`, OpenSSH's `ProxyJump`): [`tunnel`] opens an SSH session to the
//! bastion (host key checked against known_hosts under the bastion's own policy, user
//! authenticated), asks it for a `direct-tcpip` channel to the node's address and port, and bridges
//! that channel to one end of a local socket pair with a pump thread. The node's own libssh2 session
//! then runs over the other end, so the node's host key and login are checked end to end exactly as
//! on a direct connection; the bastion sees only encrypted bytes.
//!
//! The pump owns the bastion session: it ends (closing the channel and disconnecting) when the
//! node's session drops its end of the pair, and closes its end when the bastion's side ends, which
//! the node's session sees as a broken connection (reconnected by the transport as usual).

use std::io::{ErrorKind, Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use clusterctl_spec::model::HostKeyPolicy;
use ssh2::{BlockDirections, Channel, Session};

use super::connect::{self, Hop, Login};
use super::SshAuth;
use crate::transport::ExecError;

/// A jump host every node connection goes through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bastion {
    /// Host name or address of the bastion.
    pub host: String,
    /// Its SSH port, normally 22.
    pub port: u16,
    /// Login user on the bastion (needs no shell: only port forwarding is asked for).
    pub user: String,
    /// How to authenticate to the bastion.
    pub auth: SshAuth,
    /// What to do when the bastion's host key is unknown (a changed key is always refused). The key
    /// is checked against the node connection's known_hosts file.
    pub host_key_policy: HostKeyPolicy,
}

/// A socket whose other end carries `node.host:node.port` through the bastion `b` (see the module
/// doc). `node` is the node hop's login: its node name, address and port, known_hosts file and
/// timeout are used; the bastion's own user, key and policy come from `b`. Errors:
/// [`ExecError::Connect`] (bastion unreachable, refused login, or the bastion could not open the
/// forwarded connection), [`ExecError::HostKey`] (the bastion's host key refused).
pub(crate) fn tunnel(b: &Bastion, node: &Login<'_>) -> Result<UnixStream, ExecError> {
    let login = Login {
        node: node.node,
        host: &b.host,
        port: b.port,
        user: &b.user,
        auth: &b.auth,
        known_hosts: node.known_hosts,
        policy: b.host_key_policy,
        timeout: node.timeout,
        hop: Hop::Bastion,
    };
    let tcp = connect::tcp(&login)?;
    let bastion_fd = tcp.as_raw_fd();
    let sess = connect::session_over(tcp, &login)?;
    let channel = sess
        .channel_direct_tcpip(node.host, node.port, None)
        .map_err(|e| {
            login.err(format!(
                "the bastion could not open a connection to {}:{}: {e} (is the node up, its address \
                 right, and TCP forwarding allowed on the bastion: sshd's AllowTcpForwarding?)",
                node.host, node.port
            ))
        })?;
    let (mine, theirs) = UnixStream::pair()
        .map_err(|e| login.err(format!("creating the local socket pair: {e}")))?;
    let name = format!("bastion-pump-{}", node.node);
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let mut pump = Pump {
                sess,
                channel,
                local: mine,
                bastion_fd,
            };
            pump.run();
        })
        .map_err(|e| login.err(format!("starting the tunnel thread: {e}")))?;
    Ok(theirs)
}

/// The bridge between the bastion's channel and the local socket.
struct Pump {
    sess: Session,
    channel: Channel,
    local: UnixStream,
    bastion_fd: std::os::unix::io::RawFd,
}

/// One direction's pending bytes.
#[derive(Default)]
struct Pending {
    buf: Vec<u8>,
    off: usize,
    eof: bool,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.off >= self.buf.len()
    }
}

impl Pump {
    /// Copies both ways until either side ends, then closes the channel and the bastion session.
    fn run(&mut self) {
        self.sess.set_blocking(false);
        if self.local.set_nonblocking(true).is_err() {
            return;
        }
        let mut up = Pending::default(); // local → bastion channel
        let mut down = Pending::default(); // bastion channel → local
        let mut buf = vec![0u8; 64 * 1024];
        // Both directions each round; either side ending (or breaking) ends the pump.
        while let (Some(up_moved), Some(down_moved)) = (
            self.upstream(&mut up, &mut buf),
            self.downstream(&mut down, &mut buf),
        ) {
            if (up.eof && up.is_empty()) || (down.eof && down.is_empty()) {
                break;
            }
            if !(up_moved || down_moved) {
                self.wait(!down.is_empty(), Duration::from_millis(200));
            }
        }
        self.sess.set_blocking(true);
        self.sess.set_timeout(1000);
        let _ = self.channel.send_eof();
        let _ = self.channel.close();
        let _ = self.sess.disconnect(None, "clusterctl done", None);
        let _ = self.local.shutdown(std::net::Shutdown::Both);
    }

    /// Local bytes to the channel. `None`: the channel broke.
    fn upstream(&mut self, p: &mut Pending, buf: &mut [u8]) -> Option<bool> {
        let mut moved = false;
        if p.is_empty() && !p.eof {
            match self.local.read(buf) {
                Ok(0) => p.eof = true,
                Ok(n) => {
                    p.buf.clear();
                    p.buf.extend_from_slice(&buf[..n]);
                    p.off = 0;
                    moved = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => p.eof = true,
            }
        }
        while !p.is_empty() {
            match self.channel.write(&p.buf[p.off..]) {
                Ok(0) => break,
                Ok(n) => {
                    p.off += n;
                    moved = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => return None,
            }
        }
        Some(moved)
    }

    /// Channel bytes to the local socket. `None`: the node's session closed its end.
    fn downstream(&mut self, p: &mut Pending, buf: &mut [u8]) -> Option<bool> {
        let mut moved = false;
        if p.is_empty() && !p.eof {
            match self.channel.read(buf) {
                Ok(0) => p.eof = self.channel.eof(),
                Ok(n) => {
                    p.buf.clear();
                    p.buf.extend_from_slice(&buf[..n]);
                    p.off = 0;
                    moved = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => p.eof = true,
            }
        }
        while !p.is_empty() {
            match self.local.write(&p.buf[p.off..]) {
                Ok(0) => return None,
                Ok(n) => {
                    p.off += n;
                    moved = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        Some(moved)
    }

    /// Waits until the bastion's socket (in the direction libssh2 is blocked on) or the local socket
    /// (readable; writable when `local_out` bytes wait) can make progress, or `wait` passes.
    fn wait(&self, local_out: bool, wait: Duration) {
        let mut bastion_events: libc::c_short = libc::POLLIN;
        if matches!(
            self.sess.block_directions(),
            BlockDirections::Outbound | BlockDirections::Both
        ) {
            bastion_events |= libc::POLLOUT;
        }
        let mut local_events: libc::c_short = libc::POLLIN;
        if local_out {
            local_events |= libc::POLLOUT;
        }
        let mut fds = [
            libc::pollfd {
                fd: self.bastion_fd,
                events: bastion_events,
                revents: 0,
            },
            libc::pollfd {
                fd: self.local.as_raw_fd(),
                events: local_events,
                revents: 0,
            },
        ];
        let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX).max(1);
        // SAFETY: two valid pollfds on the stack; both descriptors are owned by this pump.
        unsafe {
            libc::poll(fds.as_mut_ptr(), 2, ms);
        }
    }
}
