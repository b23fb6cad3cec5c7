//! The node's CNI network configuration list. Render writes a template
//! (`/etc/clusterctl/cni/10-clusterctl.conflist`, see `clusterctl_render::cni::builtin`) holding the
//! placeholder [`POD_CIDR`]; once the agent knows the node's podCIDR it completes the template and
//! installs the result (`/etc/cni/net.d/10-clusterctl.conflist`, CNI spec 1.1.0 section 1
//! "Configuration format"), and writes the podCIDR file the plugin falls back to.
//!
//! The template declares the newest CNI version the node's runtime speaks (render decides it from
//! the runtime's version, see `clusterctl_render::cni::builtin::conflist_cni_version`); the agent
//! lowers it to the newest version every other plugin of the list also supports ([`settle_version`],
//! asking each binary `VERSION` as libcni does), so a runtime that calls STATUS on every plugin of a
//! 1.1.0 list never meets a plugin that refuses it.

pub(crate) use clusterctl_render::placeholders::POD_CIDR;
use ipnet::Ipv4Net;
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The `type` of our plugin's entry in the list.
pub(crate) const PLUGIN_TYPE: &str = "clusterctl-cni";

/// A conflist template the agent cannot use.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConflistError {
    /// The template (after substitution) is not JSON.
    #[error("the conflist template is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// No `plugins` array.
    #[error("the conflist template has no \"plugins\" array")]
    NoPlugins,
    /// No non-empty `name` without `/`.
    #[error("the conflist template has no usable \"name\"")]
    NoName,
    /// No entry of type [`PLUGIN_TYPE`].
    #[error("the conflist template has no clusterctl-cni entry")]
    NoEntry,
    /// The completed list could not be serialised.
    #[error("serialize the conflist: {0}")]
    Serialize(#[source] serde_json::Error),
}

/// Completes the conflist `template`: every occurrence of [`POD_CIDR`] becomes `pod_cidr`
/// (plain text substitution), and each `clusterctl-cni` entry without an `mtu` gets `mtu` (bytes,
/// the VXLAN device's). Returns pretty JSON with a final newline. Errors: the template is not a
/// JSON object with a `plugins` array (the text says which).
pub(crate) fn complete(
    template: &str,
    pod_cidr: Ipv4Net,
    mtu: u32,
) -> Result<String, ConflistError> {
    let text = template.replace(POD_CIDR, &pod_cidr.to_string());
    let mut v: Value = serde_json::from_str(&text).map_err(ConflistError::NotJson)?;
    let plugins = v
        .get_mut("plugins")
        .and_then(Value::as_array_mut)
        .ok_or(ConflistError::NoPlugins)?;
    for p in plugins.iter_mut().filter_map(Value::as_object_mut) {
        if p.get("type").and_then(Value::as_str) == Some(PLUGIN_TYPE) && !p.contains_key("mtu") {
            p.insert("mtu".to_string(), Value::from(mtu));
        }
    }
    serde_json::to_string_pretty(&v)
        .map(|s| s + "\n")
        .map_err(ConflistError::Serialize)
}

/// Where our plugin entry of the conflist `template` keeps its IPAM state (`<dataDir>/<name>`,
/// defaults as the plugin's) and reads the boot ID from (`bootIDFile`). Errors: not a conflist with
/// a `name` and a `clusterctl-cni` entry.
pub(crate) fn ipam_settings(template: &str) -> Result<(PathBuf, PathBuf), ConflistError> {
    use crate::plugin::config::DEFAULT_DATA_DIR;
    let v: Value = serde_json::from_str(template).map_err(ConflistError::NotJson)?;
    let name = v
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty() && !n.contains('/'))
        .ok_or(ConflistError::NoName)?;
    let entry = v
        .get("plugins")
        .and_then(Value::as_array)
        .and_then(|ps| {
            ps.iter()
                .find(|p| p.get("type").and_then(Value::as_str) == Some(PLUGIN_TYPE))
        })
        .ok_or(ConflistError::NoEntry)?;
    let text = |k: &str, default: &str| {
        PathBuf::from(entry.get(k).and_then(Value::as_str).unwrap_or(default))
    };
    Ok((
        text("dataDir", DEFAULT_DATA_DIR).join(name),
        text("bootIDFile", crate::ipam::BOOT_ID_FILE),
    ))
}

/// CNI versions in order, oldest first, as this plugin knows them.
fn version_rank(v: &str) -> Option<usize> {
    crate::plugin::config::SUPPORTED_VERSIONS
        .iter()
        .position(|s| *s == v)
}

/// Lowers the `cniVersion` of the completed conflist `list` to the newest version, not newer than
/// the declared one, that every plugin of the list other than ours supports; `supported(type)`
/// answers a plugin's `supportedVersions` (`None`: unknown, e.g. its binary is not installed yet —
/// then it does not lower the version). Returns a note when the version was lowered or a plugin is
/// unknown, for the log. A list whose plugins share no version with it is left as declared (the
/// runtime reports the plugin's own error).
pub(crate) fn settle_version(
    list: &mut Value,
    supported: &dyn Fn(&str) -> Option<Vec<String>>,
) -> Option<String> {
    let declared = list.get("cniVersion").and_then(Value::as_str)?.to_string();
    let top = version_rank(&declared)?;
    let mut allowed: Vec<bool> = vec![true; top + 1];
    let mut notes = Vec::new();
    let types: Vec<String> = list
        .get("plugins")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .filter_map(|p| p.get("type").and_then(Value::as_str))
                .filter(|t| *t != PLUGIN_TYPE)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    for t in &types {
        match supported(t) {
            Some(vs) => {
                for (i, ok) in allowed.iter_mut().enumerate() {
                    let v = crate::plugin::config::SUPPORTED_VERSIONS[i];
                    *ok &= vs.iter().any(|s| s == v);
                }
            }
            None => notes.push(format!("{t}: its supported versions are unknown")),
        }
    }
    let best = (0..=top).rev().find(|i| allowed[*i]);
    match best {
        Some(i) if i < top => {
            let v = crate::plugin::config::SUPPORTED_VERSIONS[i];
            list["cniVersion"] = Value::from(v);
            notes.push(format!(
                "cniVersion {declared} lowered to {v}: the newest every plugin of the list supports"
            ));
        }
        None => notes.push(format!(
            "the plugins of the list share no CNI version up to {declared}; left as declared"
        )),
        _ => {}
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// The `supportedVersions` of the plugin `kind` installed in `bin_dir`, asked as a runtime asks
/// (`CNI_COMMAND=VERSION`, the config version on stdin). `None` when the binary is missing or
/// does not answer a version object.
pub(crate) fn plugin_versions(
    bin_dir: &Path,
    kind: &str,
    cni_version: &str,
) -> Option<Vec<String>> {
    use std::io::Write;
    let prog = bin_dir.join(kind);
    if kind.contains('/') || !prog.is_file() {
        return None;
    }
    let mut child = Command::new(&prog)
        .env_clear()
        .env("CNI_COMMAND", "VERSION")
        .env("CNI_PATH", bin_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(format!(r#"{{"cniVersion":"{cni_version}"}}"#).as_bytes());
    }
    let out = child.wait_with_output().ok()?;
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    let list = v.get("supportedVersions")?.as_array()?;
    Some(
        list.iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
    )
}

/// Writes `text` to `path` atomically (temporary file in the same directory, then rename), creating
/// the directory. Returns whether the content changed. Errors: I/O.
pub(crate) fn write_atomic(path: &Path, text: &str) -> io::Result<bool> {
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

    fn list(v: &str) -> Value {
        serde_json::json!({"cniVersion": v, "name": "n", "plugins": [
            {"type": "clusterctl-cni"}, {"type": "portmap"}]})
    }

    #[test]
    fn version_lowered_to_what_every_plugin_supports() {
        let debian = |_: &str| -> Option<Vec<String>> {
            Some(
                ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0"]
                    .map(String::from)
                    .to_vec(),
            )
        };
        let v1_10 = |_: &str| -> Option<Vec<String>> {
            Some(
                ["0.3.1", "0.4.0", "1.0.0", "1.1.0"]
                    .map(String::from)
                    .to_vec(),
            )
        };
        let missing = |_: &str| -> Option<Vec<String>> { None };
        let mut l = list("1.1.0");
        let note = settle_version(&mut l, &debian).unwrap();
        assert_eq!(l["cniVersion"], "1.0.0", "{note}");
        let mut l = list("1.1.0");
        assert_eq!(settle_version(&mut l, &v1_10), None);
        assert_eq!(l["cniVersion"], "1.1.0");
        let mut l = list("1.0.0");
        assert_eq!(settle_version(&mut l, &v1_10), None);
        assert_eq!(l["cniVersion"], "1.0.0", "never raised");
        let mut l = list("1.1.0");
        assert!(settle_version(&mut l, &missing)
            .unwrap()
            .contains("unknown"));
        assert_eq!(l["cniVersion"], "1.1.0");
        let none = |_: &str| -> Option<Vec<String>> { Some(vec!["0.1.0".into()]) };
        let mut l = list("1.0.0");
        assert!(settle_version(&mut l, &none).unwrap().contains("share no"));
        assert_eq!(l["cniVersion"], "1.0.0");
    }

    #[test]
    fn ipam_settings_from_the_template() {
        let t = format!(
            r#"{{"cniVersion":"1.1.0","name":"clusterctl","plugins":[{{"type":"clusterctl-cni","podCIDR":"{POD_CIDR}"}}]}}"#
        );
        let (dir, boot) = ipam_settings(&t).unwrap();
        assert_eq!(dir, Path::new("/var/lib/cni/clusterctl/clusterctl"));
        assert_eq!(boot, Path::new(crate::ipam::BOOT_ID_FILE));
        let t = r#"{"name":"x","plugins":[{"type":"clusterctl-cni","dataDir":"/d","bootIDFile":"/b"}]}"#;
        assert_eq!(
            ipam_settings(t).unwrap(),
            (PathBuf::from("/d/x"), PathBuf::from("/b"))
        );
        assert!(ipam_settings(r#"{"name":"x","plugins":[{"type":"portmap"}]}"#).is_err());
        assert!(ipam_settings(r#"{"plugins":[{"type":"clusterctl-cni"}]}"#).is_err());
    }
}
