//! The node's CNI network configuration list, written by the agent once it knows the node's
//! podCIDR: our plugin, then the reference `portmap` plugin (CNI spec 1.1.0, section 1
//! "Configuration format"), plus the podCIDR file the plugin falls back to.

use ipnet::Ipv4Net;
use serde_json::json;
use std::io;
use std::path::Path;

/// File name of the conflist in the CNI config directory (sorted first by runtimes).
pub const CONFLIST_NAME: &str = "10-clusterctl.conflist";

/// Builds the conflist text: network `name`, `cni_version` (1.0.0 by default: what containerd 1.x
/// and Debian's reference plugins accept), our plugin with `podCIDR`, `mtu` and `dataDir`, then
/// `portmap` with the `portMappings` capability.
pub fn render(
    name: &str,
    cni_version: &str,
    pod_cidr: Ipv4Net,
    mtu: u32,
    data_dir: &Path,
) -> String {
    let v = json!({
        "cniVersion": cni_version,
        "name": name,
        "plugins": [
            {
                "type": "clusterctl-cni",
                "podCIDR": pod_cidr.to_string(),
                "mtu": mtu,
                "dataDir": data_dir.display().to_string(),
            },
            {
                "type": "portmap",
                "capabilities": {"portMappings": true},
                "snat": true,
            }
        ]
    });
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// Writes `text` to `path` atomically (temporary file in the same directory, then rename), creating
/// the directory. Returns whether the content changed. Errors: I/O.
pub fn write_atomic(path: &Path, text: &str) -> io::Result<bool> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_then_portmap() {
        let t = render(
            "clusterctl",
            "1.0.0",
            "10.244.1.0/24".parse().unwrap(),
            1450,
            Path::new("/d"),
        );
        let v: serde_json::Value = serde_json::from_str(&t).unwrap();
        assert_eq!(v["cniVersion"], "1.0.0");
        assert_eq!(v["plugins"][0]["type"], "clusterctl-cni");
        assert_eq!(v["plugins"][0]["podCIDR"], "10.244.1.0/24");
        assert_eq!(v["plugins"][1]["type"], "portmap");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x/10.conflist");
        assert!(write_atomic(&p, &t).unwrap());
        assert!(!write_atomic(&p, &t).unwrap());
    }
}
