//! The plugin's network configuration (CNI spec 1.1.0, section 1 "Plugin configuration objects"),
//! as it arrives on stdin: the spec's common keys plus ours. Unknown keys are ignored (runtimes add
//! `runtimeConfig`, `args`, capability keys).
//!
//! ```json
//! {"cniVersion": "1.0.0", "name": "clusterctl", "type": "clusterctl-cni", "mtu": 1450,
//!  "podCIDR": "10.244.1.0/24", "dataDir": "/var/lib/cni/clusterctl"}
//! ```
//! `podCIDR` may be left out; the plugin then reads it from `podCIDRFile` (default
//! [`DEFAULT_PODCIDR_FILE`], written by the agent).

use super::error::{code, CniError};
use ipnet::Ipv4Net;
use serde::Deserialize;
use std::path::PathBuf;

/// Versions of the spec this plugin speaks (VERSION result `supportedVersions`).
pub const SUPPORTED_VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];
/// Where the agent writes this node's podCIDR (one line, e.g. `10.244.1.0/24`).
pub const DEFAULT_PODCIDR_FILE: &str = "/run/clusterctl-cni/podcidr";
/// Default IPAM data directory; state lives in `<dataDir>/<network name>/`.
pub const DEFAULT_DATA_DIR: &str = "/var/lib/cni/clusterctl";
/// Default pod interface MTU, bytes (a 1500 underlay minus the 50-byte VXLAN overhead).
pub const DEFAULT_MTU: u32 = 1450;

/// DNS settings passed through into the result (`dns` key).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
pub struct Dns {
    /// Name servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// Local domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
    /// Resolver options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// One entry of `cni.dev/valid-attachments` (GC input).
#[derive(Debug, Clone, Deserialize)]
pub struct ValidAttachment {
    /// `CNI_CONTAINERID` of the ADD.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// `CNI_IFNAME` of the ADD.
    pub ifname: String,
}

#[derive(Debug, Deserialize)]
struct Raw {
    #[serde(rename = "cniVersion")]
    cni_version: Option<String>,
    name: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    mtu: Option<u32>,
    #[serde(rename = "podCIDR")]
    pod_cidr: Option<String>,
    #[serde(rename = "podCIDRFile")]
    pod_cidr_file: Option<PathBuf>,
    #[serde(rename = "dataDir")]
    data_dir: Option<PathBuf>,
    dns: Option<Dns>,
    #[serde(rename = "prevResult")]
    prev_result: Option<serde_json::Value>,
    #[serde(rename = "cni.dev/valid-attachments")]
    valid_attachments: Option<Vec<ValidAttachment>>,
    #[serde(rename = "bootIDFile")]
    boot_id_file: Option<PathBuf>,
}

/// The decoded configuration.
#[derive(Debug, Clone)]
pub struct NetConf {
    /// `cniVersion`, one of [`SUPPORTED_VERSIONS`].
    pub cni_version: String,
    /// Network name (IPAM state is kept per name).
    pub name: String,
    /// Interface MTU, bytes.
    pub mtu: u32,
    /// The node's podCIDR, if given inline.
    pub pod_cidr: Option<Ipv4Net>,
    /// File to read the podCIDR from when it is not inline.
    pub pod_cidr_file: PathBuf,
    /// IPAM data directory root.
    pub data_dir: PathBuf,
    /// DNS for the result.
    pub dns: Option<Dns>,
    /// The previous plugin's result in a chain (or the ADD result for CHECK/DEL).
    pub prev_result: Option<serde_json::Value>,
    /// GC: the attachments still valid.
    pub valid_attachments: Option<Vec<ValidAttachment>>,
    /// Where the boot ID is read from (key `bootIDFile`; default [`crate::ipam::BOOT_ID_FILE`]).
    /// Tests point it at a file of their own to simulate a reboot; nodes leave it unset.
    pub boot_id_file: PathBuf,
}

/// Reads just the `cniVersion` of possibly broken input, for the version of an error result.
pub fn sniff_version(stdin: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct V {
        #[serde(rename = "cniVersion")]
        v: Option<String>,
    }
    serde_json::from_slice::<V>(stdin).ok().and_then(|v| v.v)
}

/// Decodes and validates the configuration. Errors: code 6 for undecodable JSON, 1 for an
/// unsupported `cniVersion`, 7 for a missing `name`/`type`, a bad podCIDR or MTU.
pub fn parse(stdin: &[u8]) -> Result<NetConf, CniError> {
    let raw: Raw = serde_json::from_slice(stdin).map_err(|e| {
        CniError::new(
            code::DECODE,
            "failed to decode the network configuration",
            e.to_string(),
        )
    })?;
    let version = raw.cni_version.unwrap_or_default();
    if !SUPPORTED_VERSIONS.contains(&version.as_str()) {
        return Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            "incompatible CNI version",
            format!(
                "cniVersion {version:?} is not one of {}",
                SUPPORTED_VERSIONS.join(", ")
            ),
        ));
    }
    let name = raw.name.filter(|n| !n.is_empty()).ok_or_else(|| {
        CniError::new(
            code::INVALID_CONFIG,
            "invalid network configuration",
            "missing \"name\"",
        )
    })?;
    if name.contains('/') || name == "." || name == ".." {
        return Err(CniError::new(
            code::INVALID_CONFIG,
            "invalid network configuration",
            format!("network name {name:?} must not contain '/'"),
        ));
    }
    if raw.kind.as_deref().is_none_or(str::is_empty) {
        return Err(CniError::new(
            code::INVALID_CONFIG,
            "invalid network configuration",
            "missing \"type\"",
        ));
    }
    let mtu = raw.mtu.unwrap_or(DEFAULT_MTU);
    if !(576..=65535).contains(&mtu) {
        return Err(CniError::new(
            code::INVALID_CONFIG,
            "invalid network configuration",
            format!("mtu {mtu} is outside 576..65535"),
        ));
    }
    let pod_cidr = match raw.pod_cidr {
        None => None,
        Some(s) => Some(parse_cidr(&s)?),
    };
    Ok(NetConf {
        cni_version: version,
        name,
        mtu,
        pod_cidr,
        pod_cidr_file: raw
            .pod_cidr_file
            .unwrap_or_else(|| DEFAULT_PODCIDR_FILE.into()),
        data_dir: raw.data_dir.unwrap_or_else(|| DEFAULT_DATA_DIR.into()),
        dns: raw.dns,
        prev_result: raw.prev_result.filter(|v| !v.is_null()),
        valid_attachments: raw.valid_attachments,
        boot_id_file: raw
            .boot_id_file
            .unwrap_or_else(|| crate::ipam::BOOT_ID_FILE.into()),
    })
}

fn parse_cidr(s: &str) -> Result<Ipv4Net, CniError> {
    let net: Ipv4Net = s.trim().parse().map_err(|_| {
        CniError::new(
            code::INVALID_CONFIG,
            "invalid network configuration",
            format!("podCIDR {s:?} is not an IPv4 CIDR"),
        )
    })?;
    Ok(net.trunc())
}

impl NetConf {
    /// The podCIDR: inline, else from `podCIDRFile`. Errors: code 11 when the file does not exist
    /// yet (the agent has not learnt it), 7 when it does not parse.
    pub fn resolve_pod_cidr(&self) -> Result<Ipv4Net, CniError> {
        if let Some(c) = self.pod_cidr {
            return Ok(c);
        }
        match std::fs::read_to_string(&self.pod_cidr_file) {
            Ok(s) => parse_cidr(&s),
            Err(e) => Err(CniError::new(
                code::TRY_AGAIN_LATER,
                "the node's podCIDR is not known yet",
                format!(
                    "no podCIDR in the config and {}: {e}",
                    self.pod_cidr_file.display()
                ),
            )),
        }
    }

    /// True when the config's version is at least 1.1.0 (STATUS and GC exist).
    pub fn at_least_1_1(&self) -> bool {
        self.cni_version == "1.1.0"
    }

    /// IPAM state directory of this network.
    pub fn ipam_dir(&self) -> PathBuf {
        self.data_dir.join(&self.name)
    }

    /// The IPAM store of this network as seen from the running boot (leases of earlier boots are
    /// free), allocating from `cidr`, or — `None` — only releasing and looking up. Errors: the
    /// boot ID cannot be read (code 5), `cidr` too small (code 7).
    pub fn ipam(&self, cidr: Option<Ipv4Net>) -> Result<crate::ipam::Ipam, CniError> {
        let boot = crate::ipam::read_boot_id(&self.boot_id_file)?;
        let ipam = match cidr {
            Some(c) => crate::ipam::Ipam::new(self.ipam_dir(), c)?,
            None => crate::ipam::Ipam::existing(self.ipam_dir()),
        };
        Ok(ipam.with_boot_id(boot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_validates() {
        let c = parse(br#"{"cniVersion":"1.1.0","name":"n","type":"clusterctl-cni","podCIDR":"10.244.1.7/24","runtimeConfig":{}}"#).unwrap();
        assert_eq!(c.pod_cidr.unwrap().to_string(), "10.244.1.0/24");
        assert_eq!(c.mtu, DEFAULT_MTU);
        assert!(c.at_least_1_1());
        assert_eq!(parse(b"{nope").unwrap_err().code, 6);
        assert_eq!(
            parse(br#"{"cniVersion":"9.9.9","name":"n","type":"t"}"#)
                .unwrap_err()
                .code,
            1
        );
        assert_eq!(
            parse(br#"{"cniVersion":"1.0.0","type":"t"}"#)
                .unwrap_err()
                .code,
            7
        );
        assert_eq!(
            parse(br#"{"cniVersion":"1.0.0","name":"n","type":"t","podCIDR":"x"}"#)
                .unwrap_err()
                .code,
            7
        );
        assert_eq!(
            parse(br#"{"cniVersion":"1.0.0","name":"n","type":"t","mtu":10}"#)
                .unwrap_err()
                .code,
            7
        );
        assert_eq!(
            sniff_version(br#"{"cniVersion":"0.4.0"}"#).as_deref(),
            Some("0.4.0")
        );
    }

    #[test]
    fn pod_cidr_from_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("podcidr");
        let conf = format!(
            r#"{{"cniVersion":"1.0.0","name":"n","type":"t","podCIDRFile":"{}"}}"#,
            f.display()
        );
        let c = parse(conf.as_bytes()).unwrap();
        assert_eq!(c.resolve_pod_cidr().unwrap_err().code, 11);
        std::fs::write(&f, "10.244.9.0/24\n").unwrap();
        assert_eq!(c.resolve_pod_cidr().unwrap().to_string(), "10.244.9.0/24");
    }
}
