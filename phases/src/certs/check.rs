//! `certs check-expiration`'s one entry point, [`run`]: every node of the file reached through its
//! transport ([`crate::reach::reach`]), its certificate files ([`super::files_of`]) downloaded and
//! parsed here ([`super::parse`]), and one row per certificate with its dates, residual time, CA,
//! whether it is externally managed, and whether it expires within the threshold. Read-only: nothing
//! is changed on any node. A node that cannot be reached or a file that cannot be read is a failure
//! of the report, not of the run; only a cluster with no node reached at all is an error.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clusterctl_exec::{Cmd, Transport};
use clusterctl_spec::{ValidCluster, ValidNode};

use super::parse::{self, Parsed};
use super::{CertFile, Kind, RenewedBy, KUBELET_SERVING, KUBELET_SERVING_BOOTSTRAPPED};
use crate::reach::{self, ReachError};

/// What `certs check-expiration` is asked.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The known_hosts file for SSH nodes (`None`: `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// A certificate whose residual time is at most this many seconds is reported as expiring.
    pub warn_within: u64,
}

/// Why no report could be made.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// No node of the file could be reached.
    #[error("no node could be reached: {}", .0.iter().map(|(n, e)| format!("{n}: {e}")).collect::<Vec<_>>().join("; "))]
    Unreachable(BTreeMap<String, ReachError>),
}

/// How the check went: the `result` of `-o json|yaml`.
#[derive(serde::Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CheckResult {
    /// Every certificate was read and none expires within the threshold.
    Ok,
    /// Every certificate was read and at least one expires within the threshold (or has expired).
    Degraded,
    /// A node or a file could not be read ([`CheckReport::failures`]).
    Failed,
}

/// One certificate on one node.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Certificate {
    /// The node it was read on.
    pub node: String,
    /// kubeadm's name (`apiserver`, `admin.conf`, `ca`), or `kubelet-client`/`kubelet-serving`.
    pub name: String,
    /// The file on the node.
    pub path: String,
    /// What the file is.
    pub kind: Kind,
    /// The subject's common name.
    pub subject: String,
    /// The CA that signs it (`ca`, `etcd-ca`, `front-proxy-ca`; `self-signed` for the kubelet's own).
    pub ca: String,
    /// `notBefore` (RFC 3339, UTC).
    pub not_before: String,
    /// `notAfter` (RFC 3339, UTC).
    pub not_after: String,
    /// Seconds from the check to `notAfter` (negative: expired).
    pub residual_seconds: i64,
    /// The same as kubeadm prints it (`364d`, `expired`).
    pub residual: String,
    /// The CA's key is not on the node: kubeadm cannot renew it (as `kubeadm certs check-expiration`).
    pub externally_managed: bool,
    /// Who renews it.
    pub renewed_by: RenewedBy,
    /// It expires within the threshold (or has expired).
    pub expiring: bool,
}

/// A file that is not on a node (`super-admin.conf` exists only on the first control plane).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Missing {
    /// The node.
    pub node: String,
    /// kubeadm's name.
    pub name: String,
    /// The file that is not there.
    pub path: String,
}

/// A node or a file that could not be read.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeFailure {
    /// The node.
    pub node: String,
    /// The file, when one file failed (`None`: the node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Why.
    pub error: String,
}

/// The report (`certs check-expiration -o json` prints it).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    /// The cluster's name.
    pub cluster: String,
    /// `ok`, `degraded` (something expires within the threshold) or `failed` (something unread).
    pub result: CheckResult,
    /// When the check ran (RFC 3339, this machine's clock).
    pub checked_at: String,
    /// The threshold, seconds.
    pub warn_within_seconds: u64,
    /// How many certificates expire within the threshold.
    pub expiring: usize,
    /// Every certificate read, node by node in file order, each node's in kubeadm's order.
    pub certificates: Vec<Certificate>,
    /// Files that are not there.
    pub missing: Vec<Missing>,
    /// Nodes and files that could not be read.
    pub failures: Vec<NodeFailure>,
}

/// What one node gave.
#[derive(Default)]
struct NodeRead {
    certificates: Vec<Certificate>,
    missing: Vec<Missing>,
    failures: Vec<NodeFailure>,
}

/// Reads every node's certificates (see the module documentation). Errors: no node reached.
pub fn run(cluster: &ValidCluster, opts: &CheckOptions) -> Result<CheckReport, CheckError> {
    let all: Vec<&ValidNode> = cluster.nodes().iter().collect();
    let reached = reach::reach(cluster, &all, opts.known_hosts.as_deref());
    if reached.transports.is_empty() {
        return Err(CheckError::Unreachable(reached.errors));
    }
    let now = i64::try_from(crate::util::now_secs()).unwrap_or(i64::MAX);
    let warn = i64::try_from(opts.warn_within).unwrap_or(i64::MAX);
    let by_name: BTreeMap<&str, &ValidNode> = all.iter().map(|n| (n.name.as_str(), *n)).collect();
    let mut read = reach::on_each(&reached.transports, |name, t| {
        by_name
            .get(name)
            .map(|n| read_node(n, t, now, warn))
            .unwrap_or_default()
    });
    let mut report = CheckReport {
        cluster: cluster.name().to_string(),
        result: CheckResult::Ok,
        checked_at: parse::rfc3339(now),
        warn_within_seconds: opts.warn_within,
        expiring: 0,
        certificates: Vec::new(),
        missing: Vec::new(),
        failures: Vec::new(),
    };
    for n in &all {
        if let Some(e) = reached.errors.get(&n.name) {
            report.failures.push(NodeFailure {
                node: n.name.clone(),
                path: None,
                error: format!("not reached: {e}"),
            });
        }
        if let Some(r) = read.remove(&n.name) {
            report.certificates.extend(r.certificates);
            report.missing.extend(r.missing);
            report.failures.extend(r.failures);
        }
    }
    report.expiring = report.certificates.iter().filter(|c| c.expiring).count();
    report.result = if !report.failures.is_empty() {
        CheckResult::Failed
    } else if report.expiring > 0 {
        CheckResult::Degraded
    } else {
        CheckResult::Ok
    };
    Ok(report)
}

/// Which CA keys are on a control plane (`ca`, `etcd-ca`, `front-proxy-ca`), asked with `sh` alone.
const CA_KEYS: &str = "for f in ca front-proxy-ca etcd/ca; do [ -e /etc/kubernetes/pki/$f.key ] && echo $f; done; true";

/// Reads one node's files.
fn read_node(node: &ValidNode, t: &dyn Transport, now: i64, warn: i64) -> NodeRead {
    let mut out = NodeRead::default();
    let fail = |path: Option<&str>, error: String| NodeFailure {
        node: node.name.clone(),
        path: path.map(str::to_string),
        error,
    };
    let keys: Vec<String> = if node.is_control_plane() {
        match t.run(&Cmd::new(CA_KEYS).sudo()) {
            Ok(o) => o
                .stdout_str()
                .lines()
                .map(|l| l.trim().replace('/', "-"))
                .collect(),
            Err(e) => {
                out.failures
                    .push(fail(None, format!("asking which CA keys exist: {e}")));
                return out;
            }
        }
    } else {
        Vec::new()
    };
    let mut files = super::files_of(node.is_control_plane());
    match t.download(KUBELET_SERVING_BOOTSTRAPPED.path) {
        Ok(Some(_)) => files.push(KUBELET_SERVING_BOOTSTRAPPED),
        _ => files.push(KUBELET_SERVING),
    }
    for f in files {
        match t.download(f.path) {
            Ok(None) => out.missing.push(Missing {
                node: node.name.clone(),
                name: f.name.to_string(),
                path: f.path.to_string(),
            }),
            Err(e) => out.failures.push(fail(Some(f.path), e.to_string())),
            Ok(Some(bytes)) => {
                let parsed = match f.kind {
                    Kind::Kubeconfig => parse::kubeconfig_certificate(&bytes),
                    _ => parse::pem_certificate(&bytes),
                };
                // The bytes (a kubeconfig or kubelet PEM holds a private key) go out of scope here.
                drop(bytes);
                match parsed {
                    Ok(p) => out
                        .certificates
                        .push(row(&node.name, &f, &p, &keys, now, warn)),
                    Err(e) => out.failures.push(fail(Some(f.path), e.to_string())),
                }
            }
        }
    }
    out
}

/// The row of file `f` read on `node` as `p`; `keys`: the CA keys on the node.
fn row(node: &str, f: &CertFile, p: &Parsed, keys: &[String], now: i64, warn: i64) -> Certificate {
    let kubelet = f.name.starts_with("kubelet-");
    let external = !kubelet && !keys.iter().any(|k| k == f.ca);
    // The kubelet's own serving certificate is signed by a CA it made for itself at start (its
    // issuer is `<host>-ca@<time>`, not the certificate's subject): `self-signed` comes from the file.
    let ca = f.ca;
    let residual = p.not_after.saturating_sub(now);
    Certificate {
        node: node.to_string(),
        name: f.name.to_string(),
        path: f.path.to_string(),
        kind: f.kind,
        subject: p.subject.clone(),
        ca: ca.to_string(),
        not_before: parse::rfc3339(p.not_before),
        not_after: parse::rfc3339(p.not_after),
        residual_seconds: residual,
        residual: parse::residual(residual),
        externally_managed: external,
        renewed_by: match (kubelet, f.kind, external) {
            (true, _, _) => RenewedBy::Kubelet,
            (false, Kind::Authority, _) | (false, _, true) => RenewedBy::External,
            _ => RenewedBy::Kubeadm,
        },
        expiring: residual <= warn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(self_issued: bool, not_after: i64) -> Parsed {
        Parsed {
            subject: "x".into(),
            issuer: "y".into(),
            self_issued,
            not_before: 0,
            not_after,
        }
    }

    #[test]
    fn rows_say_the_ca_who_renews_and_whether_it_expires() {
        let keys = vec!["ca".to_string(), "etcd-ca".to_string()];
        let apiserver = super::super::KUBEADM_FILES[1];
        let r = row(
            "cp1",
            &apiserver,
            &parsed(false, 100 * 86_400),
            &keys,
            0,
            30 * 86_400,
        );
        assert_eq!(
            (r.ca.as_str(), r.externally_managed, r.expiring),
            ("ca", false, false)
        );
        assert_eq!(
            (r.renewed_by, r.residual.as_str()),
            (RenewedBy::Kubeadm, "100d")
        );
        let front = super::super::KUBEADM_FILES[8];
        let r = row("cp1", &front, &parsed(false, 10), &keys, 0, 30 * 86_400);
        assert_eq!(r.ca, "front-proxy-ca");
        assert!(r.externally_managed && r.expiring);
        assert_eq!(r.renewed_by, RenewedBy::External);
        let r = row("w1", &KUBELET_SERVING, &parsed(false, -5), &[], 0, 0);
        assert_eq!(
            (r.ca.as_str(), r.residual.as_str()),
            ("self-signed", "expired")
        );
        assert_eq!(
            (r.renewed_by, r.externally_managed),
            (RenewedBy::Kubelet, false)
        );
    }
}
