//! A small synchronous rtnetlink client: one `NETLINK_ROUTE` socket bound in the network namespace
//! that was current when it was opened, request/ACK and dump exchanges, and the typed operations the
//! plugin and the agent need (links, addresses, routes, neighbours, fdb). Messages are encoded and
//! decoded by `netlink-packet-route`; no async runtime and no `ip` process are involved.

mod addr;
mod link;
mod neigh;
mod route;

pub use addr::AddrEntry;
pub use link::{LinkEntry, VethSpec, VxlanSpec};
pub use neigh::{FdbEntry, NeighEntry};
pub use route::RouteEntry;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;

/// A netlink failure: the operation that failed (`op`, e.g. "add route 10.0.0.0/24") and the kernel's
/// errno as an `io::Error` (`ENOENT`, `EEXIST`, `EPERM`, …), or a decode failure of the reply.
#[derive(Debug, thiserror::Error)]
#[error("netlink {op}: {source}")]
pub struct NetlinkError {
    /// What was being done, for the message.
    pub op: String,
    /// The kernel errno (or socket error).
    #[source]
    pub source: io::Error,
}

impl NetlinkError {
    fn new(op: impl Into<String>, source: io::Error) -> Self {
        Self {
            op: op.into(),
            source,
        }
    }
    /// The raw errno, when the kernel gave one.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
    /// True when the kernel said the object does not exist (`ENODEV`, `ENOENT`, `ESRCH`, `EADDRNOTAVAIL`).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self.errno(),
            Some(libc::ENODEV) | Some(libc::ENOENT) | Some(libc::ESRCH) | Some(libc::EADDRNOTAVAIL)
        )
    }
    /// True when the kernel said the object already exists (`EEXIST`).
    pub fn is_exists(&self) -> bool {
        self.errno() == Some(libc::EEXIST)
    }
}

/// Result alias for netlink operations.
pub type NlResult<T> = Result<T, NetlinkError>;

/// A synchronous rtnetlink socket. It stays bound to the network namespace that was current on the
/// calling thread when [`Netlink::open`] ran, whatever namespace the thread enters later.
pub struct Netlink {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Netlink {
    /// Opens a `NETLINK_ROUTE` socket in the calling thread's current network namespace.
    /// Errors: socket creation or bind failure (e.g. `EPERM` without `CAP_NET_ADMIN` later on writes).
    pub fn open() -> NlResult<Self> {
        let mut sock =
            Socket::new(NETLINK_ROUTE).map_err(|e| NetlinkError::new("open socket", e))?;
        sock.bind_auto()
            .map_err(|e| NetlinkError::new("bind socket", e))?;
        // Extended ACKs give better messages; failure to enable them is harmless.
        let _ = sock.set_ext_ack(true);
        Ok(Self {
            sock,
            seq: 0,
            buf: vec![0; 64 * 1024],
        })
    }

    fn send(&mut self, msg: RouteNetlinkMessage, flags: u16, op: &str) -> NlResult<u32> {
        self.seq = self.seq.wrapping_add(1);
        let mut hdr = NetlinkHeader::default();
        hdr.flags = flags;
        hdr.sequence_number = self.seq;
        let mut req = NetlinkMessage::new(hdr, NetlinkPayload::from(msg));
        req.finalize();
        let mut out = vec![0u8; req.buffer_len()];
        req.serialize(&mut out[..]);
        self.sock
            .send_to(&out, &SocketAddr::new(0, 0), 0)
            .map_err(|e| NetlinkError::new(op, e))?;
        Ok(self.seq)
    }

    /// The one request/reply loop behind [`Netlink::request`], [`Netlink::dump`] and
    /// [`Netlink::get`]: sends `msg` with `flags`, then reads replies and hands the payload of every
    /// message carrying our sequence number to `handle` until it returns `Some(result)`. Messages of
    /// other sequence numbers (late replies of earlier requests) are skipped. Errors: socket I/O, a
    /// reply that does not decode, or what `handle` returns.
    fn exchange<T>(
        &mut self,
        msg: RouteNetlinkMessage,
        flags: u16,
        op: &str,
        mut handle: impl FnMut(NetlinkPayload<RouteNetlinkMessage>) -> Option<NlResult<T>>,
    ) -> NlResult<T> {
        let seq = self.send(msg, flags, op)?;
        loop {
            let n = self.recv(op)?;
            let mut off = 0;
            while off < n {
                let m: NetlinkMessage<RouteNetlinkMessage> =
                    NetlinkMessage::deserialize(&self.buf[off..n])
                        .map_err(|e| NetlinkError::new(op, io::Error::other(e.to_string())))?;
                let len = m.header.length as usize;
                if m.header.sequence_number == seq {
                    if let Some(result) = handle(m.payload) {
                        return result;
                    }
                }
                if len == 0 {
                    break;
                }
                off += align4(len);
            }
        }
    }

    /// Sends one request with `NLM_F_REQUEST | NLM_F_ACK | extra` and waits for its ACK.
    /// Errors: the kernel's NACK as errno, with `op` as context.
    pub fn request(&mut self, msg: RouteNetlinkMessage, extra: u16, op: &str) -> NlResult<()> {
        self.exchange(msg, NLM_F_REQUEST | NLM_F_ACK | extra, op, |p| match p {
            NetlinkPayload::Error(err) => Some(match err.code {
                None => Ok(()),
                Some(code) => Err(nack(op, -code.get())),
            }),
            _ => None,
        })
    }

    /// Sends a dump request (`NLM_F_REQUEST | NLM_F_DUMP`) and collects every reply message until
    /// `NLMSG_DONE`. Errors: the kernel's NACK or a decode failure.
    pub fn dump(
        &mut self,
        msg: RouteNetlinkMessage,
        op: &str,
    ) -> NlResult<Vec<RouteNetlinkMessage>> {
        let mut out = Vec::new();
        self.exchange(msg, NLM_F_REQUEST | NLM_F_DUMP, op, |p| match p {
            NetlinkPayload::Done(_) => Some(Ok(())),
            NetlinkPayload::Error(err) => err.code.map(|code| Err(nack(op, -code.get()))),
            NetlinkPayload::InnerMessage(inner) => {
                out.push(inner);
                None
            }
            _ => None,
        })?;
        Ok(out)
    }

    /// Sends a single get request (`NLM_F_REQUEST`) and returns the one reply message.
    /// Errors: the kernel's NACK (e.g. `ENODEV` for a missing link).
    pub fn get(&mut self, msg: RouteNetlinkMessage, op: &str) -> NlResult<RouteNetlinkMessage> {
        self.exchange(msg, NLM_F_REQUEST, op, |p| match p {
            NetlinkPayload::InnerMessage(inner) => Some(Ok(inner)),
            NetlinkPayload::Error(err) => Some(Err(nack(
                op,
                err.code.map(|c| -c.get()).unwrap_or(libc::EPROTO),
            ))),
            _ => None,
        })
    }

    fn recv(&mut self, op: &str) -> NlResult<usize> {
        let mut slice = &mut self.buf[..];
        let n = self
            .sock
            .recv(&mut slice, 0)
            .map_err(|e| NetlinkError::new(op, e))?;
        Ok(n.min(self.buf.len()))
    }
}

/// The kernel's refusal of `op` with positive errno `errno`.
fn nack(op: &str, errno: i32) -> NetlinkError {
    NetlinkError::new(op, io::Error::from_raw_os_error(errno))
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Formats a MAC address as `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: &[u8]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Parses `aa:bb:cc:dd:ee:ff` into 6 bytes. Errors: `None` on any other shape.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in out.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_round_trip() {
        let mac = [0xee, 0x0a, 0x00, 0x01, 0xfe, 0x10];
        let s = format_mac(&mac);
        assert_eq!(s, "ee:0a:00:01:fe:10");
        assert_eq!(parse_mac(&s), Some(mac));
        assert_eq!(parse_mac("ee:0a:00:01:fe"), None);
        assert_eq!(parse_mac("ee:0a:00:01:fe:10:11"), None);
        assert_eq!(parse_mac("zz:0a:00:01:fe:10"), None);
    }
}
