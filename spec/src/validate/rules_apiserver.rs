//! Rules on the apiserver: certSANs are IPs or DNS names; extraArgs are flag names without `--` and do
//! not fight a setting clusterctl owns; the OIDC issuer is an `https` URL, the client ID is set and the CA
//! file was read and is PEM; an audit policy file parses as an `audit.k8s.io/v1` Policy and the log path
//! is absolute.

use std::net::IpAddr;
use std::str::FromStr;

use super::rules_registry::pem_file;
use super::Ctx;
use crate::audit;
use crate::diag::Diagnostic;
use crate::load::Referenced;
use crate::model::{ApiServer, Audit, ClusterFile, Oidc};
use crate::syntax;
use crate::versions::VersionInfo;

/// Resolved apiserver facts.
pub(crate) struct Api {
    pub(crate) oidc_ca_pem: Option<String>,
    pub(crate) audit_policy: Option<String>,
}

/// Flags clusterctl sets itself, with the field to use instead.
const OWNED_FLAGS: &[(&str, &str)] = &[
    ("service-cluster-ip-range", "spec.networking.serviceSubnet"),
    ("advertise-address", "spec.nodes[].address"),
    (
        "authentication-config",
        "spec.apiServer.oidc with mode: structured",
    ),
];

pub(crate) fn check(
    ctx: &mut Ctx<'_>,
    file: &ClusterFile,
    _version: Option<&VersionInfo>,
) -> Option<Api> {
    let a = &file.spec.api_server;
    let sans_ok = cert_sans(ctx, a);
    let args_ok = extra_args(ctx, a);
    let (oidc_ok, oidc_ca_pem) = match &a.oidc {
        Some(o) => oidc_settings(ctx, o),
        None => (true, None),
    };
    let (audit_ok, audit_policy) = match &a.audit {
        Some(au) => audit_settings(ctx, au),
        None => (true, None),
    };
    (sans_ok && args_ok && oidc_ok && audit_ok).then_some(Api {
        oidc_ca_pem,
        audit_policy,
    })
}

/// Every certSAN is an IP address or a DNS name. Returns whether all are.
fn cert_sans(ctx: &mut Ctx<'_>, a: &ApiServer) -> bool {
    let mut ok = true;
    for (i, san) in a.cert_sans.iter().enumerate() {
        if IpAddr::from_str(san).is_err() {
            if let Err(why) = syntax::dns_name(san) {
                ok = false;
                ctx.push(
                    Diagnostic::error("spec::cert-san", format!("certSAN {san:?} is neither an IP address nor a DNS name: {why}"))
                        .help("give an IP address or a DNS name, e.g. `127.0.0.1` or `k8s-api.example.com`")
                        .at(format!("spec.apiServer.certSANs[{i}]")),
                );
            }
        }
    }
    ok
}

/// Every extraArgs key is a flag name without dashes that clusterctl does not set itself. Returns
/// whether all are.
fn extra_args(ctx: &mut Ctx<'_>, a: &ApiServer) -> bool {
    let mut ok = true;
    for k in a.extra_args.keys() {
        let kp = crate::position::join_key("spec.apiServer.extraArgs", k);
        if k.starts_with('-') {
            ok = false;
            ctx.push(
                Diagnostic::error(
                    "spec::extra-args",
                    format!("extraArgs key {k:?} starts with '-'"),
                )
                .help(format!(
                    "write the flag name without dashes: `{}`",
                    k.trim_start_matches('-')
                ))
                .at(format!("{kp}#key")),
            );
            continue;
        }
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            ok = false;
            ctx.push(
                Diagnostic::error(
                    "spec::extra-args",
                    format!("extraArgs key {k:?} is not a kube-apiserver flag name"),
                )
                .help("flag names are lower-case words joined by '-', e.g. `audit-log-format`")
                .at(format!("{kp}#key")),
            );
            continue;
        }
        let owned = OWNED_FLAGS
            .iter()
            .find(|(f, _)| f == k)
            .map(|(_, use_)| *use_)
            .or_else(|| {
                if k.starts_with("oidc-") && a.oidc.is_some() {
                    Some("spec.apiServer.oidc")
                } else if k.starts_with("audit-") && a.audit.is_some() && k != "audit-log-format" {
                    Some("spec.apiServer.audit")
                } else if k.starts_with("encryption-provider-config") && a.encryption.is_some() {
                    Some("spec.apiServer.encryption")
                } else {
                    None
                }
            });
        if let Some(use_) = owned {
            ok = false;
            ctx.push(
                Diagnostic::error(
                    "spec::extra-args",
                    format!("--{k} is set by clusterctl from {use_}"),
                )
                .help(format!("remove it from extraArgs and use {use_}"))
                .at(format!("{kp}#key")),
            );
        }
    }
    ok
}

/// The OIDC settings: an https issuer, a client ID, claims, a readable PEM CA file. Returns whether
/// they hold, and the CA's PEM when one is given.
fn oidc_settings(ctx: &mut Ctx<'_>, o: &Oidc) -> (bool, Option<String>) {
    let mut ok = true;
    let mut oidc_ca_pem = None;
    let url_ok = match o.issuer_url.strip_prefix("https://") {
        Some(rest) => {
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            let hostname = host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host);
            !hostname.is_empty()
                && !rest.contains(['?', '#'])
                && (IpAddr::from_str(hostname).is_ok() || syntax::dns_name(hostname).is_ok())
        }
        None => false,
    };
    if !url_ok {
        ok = false;
        let help = if o.issuer_url.starts_with("http://") {
            format!(
                "the apiserver accepts only https issuers: use `{}`",
                o.issuer_url.replacen("http://", "https://", 1)
            )
        } else {
            "write the issuer as `https://host/path` exactly as in the tokens' `iss` claim (no query, no fragment)".to_string()
        };
        ctx.push(
            Diagnostic::error(
                "spec::oidc-issuer",
                format!("OIDC issuerURL {:?} is not an https URL", o.issuer_url),
            )
            .help(help)
            .at("spec.apiServer.oidc.issuerURL"),
        );
    }
    if o.client_id.trim().is_empty() {
        ok = false;
        ctx.push(
            Diagnostic::error("spec::oidc-client-id", "OIDC clientID is empty")
                .help("give the client ID registered at the issuer, e.g. `kube-apiserver`")
                .at("spec.apiServer.oidc.clientID"),
        );
    }
    if o.username_claim.trim().is_empty() {
        ok = false;
        ctx.push(
            Diagnostic::error("spec::oidc-claim", "OIDC usernameClaim is empty")
                .help("use e.g. `sub`, `email` or `preferred_username`")
                .at("spec.apiServer.oidc.usernameClaim"),
        );
    }
    if o.groups_claim
        .as_deref()
        .is_some_and(|g| g.trim().is_empty())
    {
        ok = false;
        ctx.push(
            Diagnostic::error("spec::oidc-claim", "OIDC groupsClaim is empty")
                .help("give a claim name or remove the field")
                .at("spec.apiServer.oidc.groupsClaim"),
        );
    }
    if let Some(ca) = &o.ca_file {
        oidc_ca_pem = pem_file(ctx, ca, "spec.apiServer.oidc.caFile", "OIDC CA");
        if oidc_ca_pem.is_none() {
            ok = false;
        }
    }
    (ok, oidc_ca_pem)
}

/// The audit settings: an absolute log path (or `-`), a policy that is the default or a readable
/// `audit.k8s.io/v1` Policy; a warning when rotation is off. Returns whether they hold, and the
/// policy's text.
fn audit_settings(ctx: &mut Ctx<'_>, au: &Audit) -> (bool, Option<String>) {
    let mut ok = true;
    let mut audit_policy = None;
    let stdout = au.log_path == crate::model::AUDIT_LOG_STDOUT;
    if !stdout && (!au.log_path.starts_with('/') || au.log_path.ends_with('/')) {
        ok = false;
        ctx.push(
            Diagnostic::error(
                "spec::audit-log-path",
                format!(
                    "audit logPath {:?} is not an absolute file path",
                    au.log_path
                ),
            )
            .help("use an absolute file path such as /var/log/kubernetes/audit/audit.log, or `-` for the API server's standard output")
            .at("spec.apiServer.audit.logPath"),
        );
    }
    if au.policy == "default" {
        audit_policy = Some(audit::DEFAULT_POLICY.to_string());
    } else {
        match ctx.loaded.referenced.get(&au.policy) {
            Some(Referenced::Text(t)) => match audit::check_policy(t) {
                Ok(_) => audit_policy = Some(t.clone()),
                Err(why) => {
                    ok = false;
                    ctx.push(
                        Diagnostic::error("spec::audit-policy", format!("audit policy file {:?} is not a valid audit.k8s.io/v1 Policy: {why}", au.policy))
                            .help("fix the policy file (what it holds is never quoted here), or use `policy: default` for the built-in policy")
                            .at("spec.apiServer.audit.policy"),
                    );
                }
            },
            Some(Referenced::Unreadable(why)) => {
                ok = false;
                ctx.push(
                    Diagnostic::error(
                        "spec::audit-policy",
                        format!("cannot read audit policy file {:?}: {why}", au.policy),
                    )
                    .help("paths are relative to the cluster file; or use `policy: default`")
                    .at("spec.apiServer.audit.policy"),
                );
            }
            None => {
                ok = false;
                ctx.push(
                    Diagnostic::error("spec::audit-policy", format!("audit policy file {:?} was not loaded", au.policy))
                        .help("load the cluster file with `clusterctl validate -f FILE`, or use `policy: default`")
                        .at("spec.apiServer.audit.policy"),
                );
            }
        }
    }
    if au.max_size == 0 && !stdout {
        ctx.push(
            Diagnostic::warning(
                "spec::audit-rotation",
                "audit maxSize 0 turns off log rotation; the log grows without bound",
            )
            .help("set maxSize in megabytes, e.g. 100")
            .at("spec.apiServer.audit.maxSize"),
        );
    }
    (ok, audit_policy)
}
