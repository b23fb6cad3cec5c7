//! The CNI protocol parameters (CNI spec 1.1.0, section 2 "Parameters"): `CNI_COMMAND`,
//! `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`, `CNI_ARGS`, `CNI_PATH`, validated per command.

use super::error::{code, CniError};

/// The operation requested by `CNI_COMMAND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// Add the container to the network.
    Add,
    /// Remove it.
    Del,
    /// Verify it.
    Check,
    /// Report supported versions.
    Version,
    /// Report readiness (1.1.0).
    Status,
    /// Free resources of attachments that are no longer valid (1.1.0).
    Gc,
}

/// The validated parameters of one invocation.
#[derive(Debug, Clone)]
pub(crate) struct Env {
    /// The command.
    pub command: Command,
    /// `CNI_CONTAINERID` (required for ADD, DEL, CHECK).
    pub container_id: String,
    /// `CNI_NETNS` (required for ADD and CHECK, optional for DEL).
    pub netns: Option<String>,
    /// `CNI_IFNAME` (required for ADD, DEL, CHECK).
    pub ifname: String,
}

/// Reads and validates the parameters through `get` (the process environment in production).
/// Errors: code 4 naming every invalid or missing variable.
pub(crate) fn parse(get: &dyn Fn(&str) -> Option<String>) -> Result<Env, CniError> {
    let raw = get("CNI_COMMAND").unwrap_or_default();
    let command = match raw.as_str() {
        "ADD" => Command::Add,
        "DEL" => Command::Del,
        "CHECK" => Command::Check,
        "VERSION" => Command::Version,
        "STATUS" => Command::Status,
        "GC" => Command::Gc,
        _ => {
            return Err(CniError::new(
                code::INVALID_ENV,
                "invalid CNI_COMMAND",
                format!("CNI_COMMAND={raw:?} is not one of ADD, DEL, CHECK, VERSION, STATUS, GC"),
            ))
        }
    };
    let mut env = Env {
        command,
        container_id: String::new(),
        netns: None,
        ifname: String::new(),
    };
    if !matches!(command, Command::Add | Command::Del | Command::Check) {
        return Ok(env);
    }
    let mut bad = Vec::new();
    env.container_id = get("CNI_CONTAINERID").unwrap_or_default();
    if !valid_container_id(&env.container_id) {
        bad.push("CNI_CONTAINERID");
    }
    env.ifname = get("CNI_IFNAME").unwrap_or_default();
    if !valid_ifname(&env.ifname) {
        bad.push("CNI_IFNAME");
    }
    env.netns = get("CNI_NETNS").filter(|s| !s.is_empty());
    if env.netns.is_none() && command != Command::Del {
        bad.push("CNI_NETNS");
    }
    if bad.is_empty() {
        Ok(env)
    } else {
        Err(CniError::new(
            code::INVALID_ENV,
            format!(
                "invalid or missing environment variables: {}",
                bad.join(", ")
            ),
            "",
        ))
    }
}

/// A container ID per the spec: starts alphanumeric, then alphanumerics, `_`, `.`, `-`.
pub(crate) fn valid_container_id(id: &str) -> bool {
    let mut chars = id.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// A Linux interface name: 1–15 bytes, not `.`/`..`, no `/`, `:` or whitespace.
pub(crate) fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c == '\0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> Result<Env, CniError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse(&move |k| m.get(k).cloned())
    }

    #[test]
    fn names_every_missing_variable() {
        let e = env(&[("CNI_COMMAND", "ADD")]).unwrap_err();
        assert_eq!(e.code, 4);
        for v in ["CNI_CONTAINERID", "CNI_IFNAME", "CNI_NETNS"] {
            assert!(e.msg.contains(v), "{}", e.msg);
        }
        let e = env(&[("CNI_COMMAND", "FOO")]).unwrap_err();
        assert_eq!(e.code, 4);
        assert!(env(&[
            ("CNI_COMMAND", "DEL"),
            ("CNI_CONTAINERID", "a1"),
            ("CNI_IFNAME", "eth0")
        ])
        .is_ok());
        assert!(env(&[("CNI_COMMAND", "VERSION")]).is_ok());
        let e = env(&[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "-bad"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/run/netns/x"),
        ])
        .unwrap_err();
        assert!(e.msg.contains("CNI_CONTAINERID") && !e.msg.contains("CNI_NETNS"));
    }

    #[test]
    fn interface_names() {
        assert!(valid_ifname("eth0"));
        assert!(!valid_ifname("a-very-long-name0"));
        assert!(!valid_ifname("a/b"));
        assert!(!valid_ifname(".."));
    }
}
