//! Kernel parameters through procfs (`/proc/sys/net/…`), read and written from Rust. Values under
//! `/proc/sys/net` belong to the network namespace of the thread that opens the file.

use std::fs;
use std::io;

/// Reads a sysctl by its dotted or slashed name (`net.ipv4.ip_forward`), trimmed.
/// Errors: the file's open/read error (`ENOENT` for an unknown key).
pub(crate) fn read(key: &str) -> io::Result<String> {
    Ok(fs::read_to_string(path(key))?.trim().to_string())
}

/// Writes `value` to a sysctl unless it already holds it. Errors: open/write errors (`EACCES`, `ENOENT`).
pub(crate) fn ensure(key: &str, value: &str) -> io::Result<()> {
    if read(key).is_ok_and(|v| v == value) {
        return Ok(());
    }
    fs::write(path(key), value)
}

/// Writes `value` to a sysctl unconditionally (one write, no read).
pub(crate) fn write(key: &str, value: &str) -> io::Result<()> {
    fs::write(path(key), value)
}

fn path(key: &str) -> String {
    // Interface names may contain dots, so only the first segments of a dotted key are converted
    // when the caller already used slashes.
    if key.contains('/') {
        format!("/proc/sys/{key}")
    } else {
        format!("/proc/sys/{}", key.replace('.', "/"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_map_to_procfs_paths() {
        assert_eq!(
            super::path("net.ipv4.ip_forward"),
            "/proc/sys/net/ipv4/ip_forward"
        );
        assert_eq!(
            super::path("net/ipv4/conf/cni.a1/proxy_arp"),
            "/proc/sys/net/ipv4/conf/cni.a1/proxy_arp"
        );
    }
}
