//! The node's CNI network configuration list. Render writes a template
//! (`/etc/clusterctl/cni/10-clusterctl.conflist`, see `clusterctl_render::cni::builtin`) holding the
//! placeholder [`POD_CIDR`]; once the agent knows the node's podCIDR it completes the template and
//! installs the result (`/etc/cni/net.d/10-clusterctl.conflist`, CNI spec 1.1.0 section 1
//! "Configuration format"), and writes the podCIDR file the plugin falls back to.

pub use clusterctl_render::placeholders::POD_CIDR;
use ipnet::Ipv4Net;
use serde_json::Value;
use std::io;
use std::path::Path;

/// The `type` of our plugin's entry in the list.
pub const PLUGIN_TYPE: &str = "clusterctl-cni";

/// Completes the conflist `template`: every occurrence of [`POD_CIDR`] becomes `pod_cidr`
/// (plain text substitution), and each `clusterctl-cni` entry without an `mtu` gets `mtu` (bytes,
/// the VXLAN device's). Returns pretty JSON with a final newline. Errors: the template is not a
/// JSON object with a `plugins` array (the text says which).
pub fn complete(template: &str, pod_cidr: Ipv4Net, mtu: u32) -> Result<String, String> {
    let text = template.replace(POD_CIDR, &pod_cidr.to_string());
    let mut v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("the conflist template is not JSON: {e}"))?;
    let plugins = v
        .get_mut("plugins")
        .and_then(Value::as_array_mut)
        .ok_or("the conflist template has no \"plugins\" array")?;
    for p in plugins.iter_mut().filter_map(Value::as_object_mut) {
        if p.get("type").and_then(Value::as_str) == Some(PLUGIN_TYPE) && !p.contains_key("mtu") {
            p.insert("mtu".to_string(), Value::from(mtu));
        }
    }
    serde_json::to_string_pretty(&v)
        .map(|s| s + "\n")
        .map_err(|e| format!("serialize the conflist: {e}"))
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
    fn placeholder_filled_and_mtu_added_once() {
        let t = format!(
            r#"{{"cniVersion":"1.0.0","name":"n","plugins":[{{"type":"clusterctl-cni","podCIDR":"{POD_CIDR}"}},{{"type":"portmap"}}]}}"#
        );
        let out = complete(&t, "10.244.1.0/24".parse().unwrap(), 1400).unwrap();
        assert!(!out.contains(POD_CIDR));
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["plugins"][0]["podCIDR"], "10.244.1.0/24");
        assert_eq!(v["plugins"][0]["mtu"], 1400);
        assert!(v["plugins"][1].get("mtu").is_none(), "portmap gets no mtu");
        let set = t.replace(
            "\"type\":\"clusterctl-cni\"",
            "\"type\":\"clusterctl-cni\",\"mtu\":9000",
        );
        let v: Value =
            serde_json::from_str(&complete(&set, "10.244.1.0/24".parse().unwrap(), 1400).unwrap())
                .unwrap();
        assert_eq!(v["plugins"][0]["mtu"], 9000, "a rendered mtu is kept");
        assert!(complete("{}", "10.244.1.0/24".parse().unwrap(), 1).is_err());
        assert!(complete("nope", "10.244.1.0/24".parse().unwrap(), 1).is_err());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x/10.conflist");
        assert!(write_atomic(&p, &out).unwrap());
        assert!(!write_atomic(&p, &out).unwrap());
    }
}
