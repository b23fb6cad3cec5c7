//! Rules on `spec.airgap.sourceRegistries`, the registries `airgap bundle` pulls from with
//! credentials or a private CA: each names a plain `host[:port]` (no scheme, no path) once; the
//! credentials are the names of two environment variables, both or neither (an inline
//! `username`/`password` is an error that never echoes the value); a `caFile` was read and holds a
//! PEM certificate (as the mirror's `caFile`).

use std::collections::BTreeMap;

use super::credentials::{self, CredentialFields};
use super::rules_registry::{mirror_parts, pem_file, PrefixError};
use super::Ctx;
use crate::diag::Diagnostic;
use crate::model::{ClusterFile, SourceRegistry};
use crate::valid::SourceAuth;

/// The resolved entries in file order (empty without `airgap` or without the list); `None` after
/// any error (each pushed to `ctx`).
pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile) -> Option<Vec<SourceAuth>> {
    let Some(a) = &file.spec.airgap else {
        return Some(Vec::new());
    };
    let mut ok = true;
    let mut out = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (i, r) in a.source_registries.iter().enumerate() {
        let at = format!("spec.airgap.sourceRegistries[{i}]");
        let host = r.registry.trim().to_ascii_lowercase();
        match registry_host(&host) {
            Err(why) => {
                ok = false;
                ctx.push(
                    Diagnostic::error(
                        "spec::source-registry",
                        format!("source registry {:?} {why}", r.registry),
                    )
                    .help("write the registry as it appears in image references, `host[:port]`, e.g. `harbor.corp.example:8443` (no scheme, no path)")
                    .at(format!("{at}.registry")),
                );
            }
            Ok(()) => {
                if let Some(first) = seen.insert(host.clone(), i) {
                    ok = false;
                    ctx.push(
                        Diagnostic::error(
                            "spec::source-registry",
                            format!("source registry {host:?} is listed twice (also sourceRegistries[{first}])"),
                        )
                        .help("list each registry once, with all of its settings in one entry")
                        .at(format!("{at}.registry")),
                    );
                }
            }
        }
        ok &= check_credentials(ctx, r, &at);
        let ca_pem = match &r.ca_file {
            None => None,
            Some(path) => {
                let pem = pem_file(ctx, path, &format!("{at}.caFile"), "source registry CA");
                ok &= pem.is_some();
                pem
            }
        };
        let credentials_env = match (&r.username_env, &r.password_env) {
            (Some(u), Some(p)) => Some((u.clone(), p.clone())),
            _ => None,
        };
        out.push(SourceAuth {
            registry: host,
            credentials_env,
            ca_pem,
        });
    }
    ok.then_some(out)
}

/// `host[:port]` with nothing after it (the mirror's host rules). Errors: [`PrefixError`].
fn registry_host(host: &str) -> Result<(), PrefixError> {
    if host.contains('/') && !host.contains("://") {
        return Err(PrefixError::PathNotAllowed);
    }
    mirror_parts(host).map(|_| ())
}

/// Inline secrets, variable names and the pair rule of one entry; false after any error.
fn check_credentials(ctx: &mut Ctx<'_>, r: &SourceRegistry, at: &str) -> bool {
    credentials::check(
        ctx,
        &CredentialFields {
            at,
            subject: "source registry",
            example: "SOURCE",
            command: "`clusterctl airgap bundle`",
            pair_prefix: format!("source registry {:?}: ", r.registry),
            inline: [
                ("username", r.username.is_some()),
                ("password", r.password.is_some()),
            ],
            username_env: &r.username_env,
            password_env: &r.password_env,
        },
    )
}
