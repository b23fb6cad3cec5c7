//! The CNI error result (CNI spec 1.1.0, section 5 "Error"): `{cniVersion, code, msg, details}` on
//! stdout with a non-zero exit. Codes 0–99 are the spec's well-known ones; 100+ are ours.

use serde::Serialize;

/// Well-known and plugin-specific CNI error codes.
pub(crate) mod code {
    /// Incompatible CNI version.
    pub(crate) const INCOMPATIBLE_VERSION: u32 = 1;
    /// Unsupported field in the network configuration.
    #[expect(
        dead_code,
        reason = "the spec's table of well-known codes is kept whole; no failure of this plugin is this one"
    )]
    pub(crate) const UNSUPPORTED_FIELD: u32 = 2;
    /// Container unknown or does not exist (its network namespace is gone).
    pub(crate) const UNKNOWN_CONTAINER: u32 = 3;
    /// Invalid necessary environment variables (`CNI_COMMAND`, `CNI_CONTAINERID`, …).
    pub(crate) const INVALID_ENV: u32 = 4;
    /// I/O failure (reading stdin, IPAM state).
    pub(crate) const IO_FAILURE: u32 = 5;
    /// Failed to decode content (the configuration is not valid JSON of the expected shape).
    pub(crate) const DECODE: u32 = 6;
    /// Invalid network configuration.
    pub(crate) const INVALID_CONFIG: u32 = 7;
    /// Try again later (transient: e.g. the pod CIDR is exhausted until a pod is deleted).
    pub(crate) const TRY_AGAIN_LATER: u32 = 11;
    /// STATUS: the plugin cannot service ADD (pod CIDR unknown, no free address).
    pub(crate) const NOT_AVAILABLE: u32 = 50;
    /// CHECK: the container interface `CNI_IFNAME` is missing or not up.
    pub(crate) const CHECK_INTERFACE: u32 = 110;
    /// CHECK: the pod address is missing from the container interface.
    pub(crate) const CHECK_ADDRESS: u32 = 111;
    /// CHECK: a container route (`169.254.1.1 scope link`, default) or the host `/32` route is missing.
    pub(crate) const CHECK_ROUTE: u32 = 112;
    /// CHECK: the host end of the veth pair is missing or not up.
    pub(crate) const CHECK_HOST_END: u32 = 113;
    /// CHECK: the IPAM reservation is missing or differs from prevResult.
    pub(crate) const CHECK_IPAM: u32 = 114;
    /// Any other failure (netlink, sysctl), as libcni's generic internal error.
    pub(crate) const INTERNAL: u32 = 999;
}

/// A CNI error to print on stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CniError {
    /// Protocol version in use (the config's, or "1.1.0" when it could not be read).
    #[serde(rename = "cniVersion")]
    pub cni_version: String,
    /// Error code (see [`code`]).
    pub code: u32,
    /// Short message.
    pub msg: String,
    /// Longer description (may be empty).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    /// A new error with `code`, `msg` and `details`, version filled in later by the dispatcher.
    pub fn new(code: u32, msg: impl Into<String>, details: impl Into<String>) -> Self {
        Self {
            cni_version: String::new(),
            code,
            msg: msg.into(),
            details: details.into(),
        }
    }

    /// The JSON text of the error object.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            format!(
                r#"{{"cniVersion":"1.1.0","code":{},"msg":"error"}}"#,
                self.code
            )
        })
    }
}

impl std::fmt::Display for CniError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CNI error {}: {}", self.code, self.msg)?;
        if !self.details.is_empty() {
            write!(f, ": {}", self.details)?;
        }
        Ok(())
    }
}

impl From<crate::netlink::NetlinkError> for CniError {
    fn from(e: crate::netlink::NetlinkError) -> Self {
        CniError::new(code::INTERNAL, "netlink operation failed", e.to_string())
    }
}

impl From<crate::ipam::IpamError> for CniError {
    fn from(e: crate::ipam::IpamError) -> Self {
        use crate::ipam::IpamError as E;
        let c = match &e {
            E::Exhausted(..) => code::TRY_AGAIN_LATER,
            E::TooSmall(_) => code::INVALID_CONFIG,
            E::Io { .. } => code::IO_FAILURE,
            E::Corrupt { .. } => code::IO_FAILURE,
            E::BootId { .. } => code::IO_FAILURE,
        };
        CniError::new(c, "IPAM failed", e.to_string())
    }
}
