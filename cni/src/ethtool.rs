//! Turning transmit checksum offload off on a device: the legacy `SIOCETHTOOL` ioctl with
//! `ETHTOOL_STXCSUM` (linux/ethtool.h), the same request `ethtool -K DEV tx off` sends. VXLAN devices
//! need it off on kernels where offloaded checksums of encapsulated UDP are computed wrongly (the
//! issue flannel and Calico work around the same way). rtnetlink has no attribute for it.

use std::io;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GTXCSUM: u32 = 0x0000_0016;
const ETHTOOL_STXCSUM: u32 = 0x0000_0017;

/// `struct ethtool_value` from linux/ethtool.h.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ifreq` with the `ifr_data` member of the union (40 bytes on 64-bit Linux).
#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut EthtoolValue,
    _pad: [u8; 16],
}

fn call(ifname: &str, cmd: u32, data: u32) -> io::Result<u32> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad interface name",
        ));
    }
    let mut value = EthtoolValue { cmd, data };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: &mut value,
        _pad: [0; 16],
    };
    for (d, s) in req.name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: a plain datagram socket, closed below on every path.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `req` and `value` outlive the call; the kernel reads/writes `struct ethtool_value`
    // through `ifr_data` exactly as declared above.
    let rc = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req as *mut IfReq) };
    let err = io::Error::last_os_error();
    // SAFETY: `fd` is the socket opened above.
    unsafe { libc::close(fd) };
    if rc < 0 {
        return Err(err);
    }
    Ok(value.data)
}

/// Turns tx checksum offload off on `ifname` in the calling thread's network namespace.
/// Errors: `ENODEV` for a missing device, `EOPNOTSUPP`, `EPERM`.
pub(crate) fn tx_checksum_off(ifname: &str) -> io::Result<()> {
    call(ifname, ETHTOOL_STXCSUM, 0).map(|_| ())
}

/// Reads whether tx checksum offload is on for `ifname`. Errors as [`tx_checksum_off`].
pub(crate) fn tx_checksum(ifname: &str) -> io::Result<bool> {
    call(ifname, ETHTOOL_GTXCSUM, 0).map(|v| v != 0)
}
