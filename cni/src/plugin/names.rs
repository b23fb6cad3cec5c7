//! Deterministic names and MAC addresses of what the plugin creates.

use sha2::{Digest, Sha256};
use std::net::Ipv4Addr;

/// MAC of every host end (as Calico uses): pods reach `169.254.1.1` at this address through a
/// permanent neighbour entry, so no ARP round trip happens on a pod's first packet.
pub(crate) const HOST_MAC: [u8; 6] = [0xee, 0xee, 0xee, 0xee, 0xee, 0xee];

/// Prefix of every host end name; `ip link show | grep ^.*: cc` lists them.
pub(crate) const HOST_PREFIX: &str = "cc";

/// The host end name for (containerID, ifname): `cc` + the first 13 hex digits of
/// SHA-256(`containerID` `/` `ifname`): 15 bytes, the Linux maximum.
pub(crate) fn host_veth_name(container_id: &str, ifname: &str) -> String {
    let mut h = Sha256::new();
    h.update(container_id.as_bytes());
    h.update(b"/");
    h.update(ifname.as_bytes());
    let digest = hex::encode(h.finalize());
    format!("{HOST_PREFIX}{}", &digest[..13])
}

/// The pod interface MAC for a pod address: `0a:58:` + the four address bytes (locally
/// administered, unicast), as kubenet and OVN-Kubernetes derive it.
pub(crate) fn pod_mac(ip: Ipv4Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x0a, 0x58, o[0], o[1], o[2], o[3]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_deterministic_and_fit() {
        let a = host_veth_name("abc123", "eth0");
        assert_eq!(a, host_veth_name("abc123", "eth0"));
        assert_ne!(a, host_veth_name("abc123", "eth1"));
        assert_eq!(a.len(), 15);
        assert_eq!(
            pod_mac(Ipv4Addr::new(10, 244, 1, 5)),
            [0x0a, 0x58, 10, 244, 1, 5]
        );
    }
}
