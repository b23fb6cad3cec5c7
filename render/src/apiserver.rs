//! kube-apiserver extras: audit (policy file, `--audit-*` flags, hostPath mounts for the policy and the
//! log directory — none for `logPath: "-"`, the API server's standard output) and OIDC — either the legacy `--oidc-*` flags with the issuer CA mounted, or a
//! structured `AuthenticationConfiguration` (`apiserver.config.k8s.io/v1beta1` for 1.30–1.33, `v1` from
//! 1.34; upstream staging/src/k8s.io/apiserver/pkg/apis/apiserver/{v1beta1,v1}/types.go) passed with
//! `--authentication-config` and the CA inline — never both; encryption at rest: an
//! `apiserver.config.k8s.io/v1` `EncryptionConfiguration` (staging/src/k8s.io/apiserver/pkg/apis/apiserver/
//! v1/types_encryption.go) passed with `--encryption-provider-config`, its directory mounted read-only,
//! its key a placeholder filled in by `up`. Every host path a flag names is mounted.

use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::placeholders;
use crate::yaml;
use clusterctl_spec::model::{Encryption, Oidc, OidcMode, AUDIT_LOG_STDOUT};
use clusterctl_spec::ValidNode;
use serde::Serialize;
use std::collections::BTreeMap;

/// Where the audit policy is installed on control planes (`--audit-policy-file`).
pub(crate) const AUDIT_POLICY_PATH: &str = "/etc/kubernetes/audit/policy.yaml";
/// Where the structured authentication config is installed (`--authentication-config`).
pub(crate) const AUTHN_CONFIG_PATH: &str = "/etc/kubernetes/authn/authentication-config.yaml";
/// Where the OIDC issuer CA is installed for the legacy flags (`--oidc-ca-file`).
pub(crate) const OIDC_CA_PATH: &str = "/etc/kubernetes/oidc/ca.crt";

/// The directory of the encryption configuration, mounted read-only into the API server (a directory,
/// not the file, so a file replaced by hand during a key rotation is seen by the restarted server).
pub const ENCRYPTION_DIR: &str = "/etc/kubernetes/enc";
/// Where the EncryptionConfiguration is installed on control planes (`--encryption-provider-config`).
pub const ENCRYPTION_CONFIG_PATH: &str = "/etc/kubernetes/enc/encryption.yaml";
/// The name of the key clusterctl generates (`keys[0].name`).
pub const ENCRYPTION_KEY_NAME: &str = "key1";

/// A hostPath mount of the apiserver static pod (kubeadm `HostPathMount`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Volume name.
    pub name: String,
    /// Path on the host.
    pub host_path: String,
    /// Path in the container (always equal to `host_path` here).
    pub mount_path: String,
    /// Read-only.
    pub read_only: bool,
    /// core/v1 HostPathType: `File` or `DirectoryOrCreate`.
    pub path_type: &'static str,
}

/// The apiserver flags (name without `--` → value, sorted) and mounts this cluster needs: the user's
/// `apiServer.extraArgs` override generated flags of the same name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiServerExtras {
    /// Flags.
    pub args: BTreeMap<String, String>,
    /// hostPath mounts.
    pub mounts: Vec<Mount>,
}

/// The username prefix both OIDC modes use: the file's `usernamePrefix` (`-` meaning none), else the
/// upstream legacy default — `<issuerURL>#` unless the claim is `email` — so that both modes name users
/// alike. Returns `""` for "no prefix".
pub fn username_prefix(oidc: &Oidc) -> String {
    match oidc.username_prefix.as_deref() {
        Some("-") => String::new(),
        Some(p) => p.to_string(),
        None if oidc.username_claim == "email" => String::new(),
        None => format!("{}#", oidc.issuer_url),
    }
}

/// The `apiVersion` of AuthenticationConfiguration for Kubernetes minor `minor`.
pub(crate) fn authn_api_version(minor: u64) -> &'static str {
    if minor >= 34 {
        "apiserver.config.k8s.io/v1"
    } else {
        "apiserver.config.k8s.io/v1beta1"
    }
}

pub(crate) fn extras(cx: &Ctx) -> ApiServerExtras {
    let spec = cx.c.spec();
    let mut x = ApiServerExtras::default();
    if let Some(a) = &spec.api_server.audit {
        x.args
            .insert("audit-policy-file".into(), AUDIT_POLICY_PATH.into());
        x.args.insert("audit-log-path".into(), a.log_path.clone());
        x.mounts.push(Mount {
            name: "audit-policy".into(),
            host_path: AUDIT_POLICY_PATH.into(),
            mount_path: AUDIT_POLICY_PATH.into(),
            read_only: true,
            path_type: "File",
        });
        // `-` is the API server's standard output (the container log a collector reads): no file,
        // so no directory to mount and nothing to rotate.
        if a.log_path != AUDIT_LOG_STDOUT {
            x.args
                .insert("audit-log-maxage".into(), a.max_age.to_string());
            x.args
                .insert("audit-log-maxbackup".into(), a.max_backup.to_string());
            x.args
                .insert("audit-log-maxsize".into(), a.max_size.to_string());
            let dir = parent_dir(&a.log_path);
            x.mounts.push(Mount {
                name: "audit-log".into(),
                host_path: dir.clone(),
                mount_path: dir,
                read_only: false,
                path_type: "DirectoryOrCreate",
            });
        }
    }
    if let Some(o) = &spec.api_server.oidc {
        match o.mode {
            OidcMode::Flags => {
                x.args
                    .insert("oidc-issuer-url".into(), o.issuer_url.clone());
                x.args.insert("oidc-client-id".into(), o.client_id.clone());
                x.args
                    .insert("oidc-username-claim".into(), o.username_claim.clone());
                let p = username_prefix(o);
                x.args.insert(
                    "oidc-username-prefix".into(),
                    if p.is_empty() { "-".into() } else { p },
                );
                if let Some(g) = &o.groups_claim {
                    x.args.insert("oidc-groups-claim".into(), g.clone());
                }
                if let Some(g) = &o.groups_prefix {
                    x.args.insert("oidc-groups-prefix".into(), g.clone());
                }
                if cx.c.oidc_ca_pem().is_some() {
                    x.args.insert("oidc-ca-file".into(), OIDC_CA_PATH.into());
                    x.mounts.push(Mount {
                        name: "oidc-ca".into(),
                        host_path: OIDC_CA_PATH.into(),
                        mount_path: OIDC_CA_PATH.into(),
                        read_only: true,
                        path_type: "File",
                    });
                }
            }
            OidcMode::Structured => {
                x.args
                    .insert("authentication-config".into(), AUTHN_CONFIG_PATH.into());
                x.mounts.push(Mount {
                    name: "authentication-config".into(),
                    host_path: AUTHN_CONFIG_PATH.into(),
                    mount_path: AUTHN_CONFIG_PATH.into(),
                    read_only: true,
                    path_type: "File",
                });
            }
        }
    }
    if spec.api_server.encryption.is_some() {
        x.args.insert(
            "encryption-provider-config".into(),
            ENCRYPTION_CONFIG_PATH.into(),
        );
        x.mounts.push(Mount {
            name: "encryption-config".into(),
            host_path: ENCRYPTION_DIR.into(),
            mount_path: ENCRYPTION_DIR.into(),
            read_only: true,
            path_type: "DirectoryOrCreate",
        });
    }
    for (k, v) in &spec.api_server.extra_args {
        x.args.insert(k.clone(), v.clone());
    }
    mount_user_paths(&mut x);
    x
}

/// Directories kubeadm already mounts into the kube-apiserver static pod
/// (cmd/kubeadm/app/phases/controlplane/volumes.go: `k8s-certs`, `ca-certs`, `etc-pki`, …).
pub const KUBEADM_MOUNTED_DIRS: &[&str] = &[
    "/etc/kubernetes/pki",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/pki",
    "/usr/share/ca-certificates",
    "/usr/local/share/ca-certificates",
];

fn parent_dir(p: &str) -> String {
    match p.rfind('/') {
        Some(0) | None => "/".to_string(),
        Some(i) => p[..i].to_string(),
    }
}

fn covered(mounts: &[Mount], path: &str) -> bool {
    let under =
        |dir: &str| path == dir || path.starts_with(&format!("{}/", dir.trim_end_matches('/')));
    KUBEADM_MOUNTED_DIRS.iter().any(|d| under(d)) || mounts.iter().any(|m| under(&m.mount_path))
}

/// Mounts every absolute path a flag names that no volume covers yet: log flags get their directory,
/// writable (`DirectoryOrCreate`); anything else the file, read-only (`File`). Names `flag-<flag>`.
fn mount_user_paths(x: &mut ApiServerExtras) {
    let wanted: Vec<(String, String)> = x
        .args
        .iter()
        .filter(|(_, v)| v.starts_with('/') && !v.contains(',') && !v.contains(':'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (flag, path) in wanted {
        if covered(&x.mounts, &path) {
            continue;
        }
        let name = format!("flag-{flag}");
        if flag.contains("log") {
            let dir = parent_dir(&path);
            x.mounts.push(Mount {
                name,
                host_path: dir.clone(),
                mount_path: dir,
                read_only: false,
                path_type: "DirectoryOrCreate",
            });
        } else {
            x.mounts.push(Mount {
                name,
                host_path: path.clone(),
                mount_path: path,
                read_only: true,
                path_type: "File",
            });
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AuthenticationConfiguration {
    api_version: &'static str,
    kind: &'static str,
    jwt: Vec<Jwt>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Jwt {
    issuer: Issuer,
    claim_mappings: ClaimMappings,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Issuer {
    url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate_authority: Option<String>,
    audiences: Vec<String>,
}

#[derive(Serialize)]
struct ClaimMappings {
    username: Prefixed,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<Prefixed>,
}

#[derive(Serialize)]
struct Prefixed {
    claim: String,
    prefix: String,
}

/// The structured AuthenticationConfiguration for `oidc` at Kubernetes minor `minor`, CA inline.
pub(crate) fn authentication_config(
    oidc: &Oidc,
    ca_pem: Option<&str>,
    minor: u64,
) -> Result<String, RenderError> {
    let cfg = AuthenticationConfiguration {
        api_version: authn_api_version(minor),
        kind: "AuthenticationConfiguration",
        jwt: vec![Jwt {
            issuer: Issuer {
                url: oidc.issuer_url.clone(),
                certificate_authority: ca_pem.map(str::to_string),
                audiences: vec![oidc.client_id.clone()],
            },
            claim_mappings: ClaimMappings {
                username: Prefixed {
                    claim: oidc.username_claim.clone(),
                    prefix: username_prefix(oidc),
                },
                groups: oidc.groups_claim.as_ref().map(|g| Prefixed {
                    claim: g.clone(),
                    prefix: oidc.groups_prefix.clone().unwrap_or_default(),
                }),
            },
        }],
    };
    yaml::doc("AuthenticationConfiguration", &cfg)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EncryptionConfiguration {
    api_version: &'static str,
    kind: &'static str,
    resources: Vec<ResourceConfiguration>,
}

#[derive(Serialize)]
struct ResourceConfiguration {
    resources: Vec<String>,
    providers: Vec<BTreeMap<&'static str, ProviderKeys>>,
}

/// A provider's configuration: `keys` for aescbc and secretbox, nothing for `identity`.
#[derive(Serialize)]
struct ProviderKeys {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    keys: Vec<Key>,
}

#[derive(Serialize)]
struct Key {
    name: &'static str,
    secret: &'static str,
}

/// The EncryptionConfiguration for `enc`: the chosen provider with one key (its secret the
/// [`placeholders::ENCRYPTION_KEY`]), then `identity`, so what was stored before encryption was on stays
/// readable until it is rewritten.
pub(crate) fn encryption_config(enc: &Encryption) -> Result<String, RenderError> {
    let provider = BTreeMap::from([(
        enc.provider.as_str(),
        ProviderKeys {
            keys: vec![Key {
                name: ENCRYPTION_KEY_NAME,
                secret: placeholders::ENCRYPTION_KEY,
            }],
        },
    )]);
    let identity = BTreeMap::from([("identity", ProviderKeys { keys: Vec::new() })]);
    let cfg = EncryptionConfiguration {
        api_version: "apiserver.config.k8s.io/v1",
        kind: "EncryptionConfiguration",
        resources: vec![ResourceConfiguration {
            resources: enc.resources.clone(),
            providers: vec![provider, identity],
        }],
    };
    yaml::doc("EncryptionConfiguration", &cfg)
}

pub(crate) fn node_files(
    cx: &Ctx,
    _node: &ValidNode,
    out: &mut Vec<RenderedFile>,
) -> Result<(), RenderError> {
    let spec = cx.c.spec();
    if spec.api_server.audit.is_some() {
        if let Some(policy) = cx.c.audit_policy() {
            let mut text = policy.to_string();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            out.push(RenderedFile::text(
                AUDIT_POLICY_PATH,
                0o600,
                text,
                Purpose::AuditPolicy,
            ));
        }
    }
    if let Some(o) = &spec.api_server.oidc {
        match o.mode {
            OidcMode::Flags => {
                if let Some(ca) = cx.c.oidc_ca_pem() {
                    let mut t = ca.to_string();
                    if !t.ends_with('\n') {
                        t.push('\n');
                    }
                    out.push(RenderedFile::text(OIDC_CA_PATH, 0o644, t, Purpose::OidcCa));
                }
            }
            OidcMode::Structured => {
                let minor = cx.c.kubernetes_version().minor;
                let text = authentication_config(o, cx.c.oidc_ca_pem(), minor)?;
                out.push(RenderedFile::text(
                    AUTHN_CONFIG_PATH,
                    0o600,
                    text,
                    Purpose::AuthenticationConfig,
                ));
            }
        }
    }
    if let Some(enc) = &spec.api_server.encryption {
        out.push(RenderedFile::text(
            ENCRYPTION_CONFIG_PATH,
            0o600,
            encryption_config(enc)?,
            Purpose::EncryptionConfig,
        ));
    }
    Ok(())
}
