//! The credential rules shared by `spec.registry` and `spec.airgap.sourceRegistries[]`: secrets are
//! never written inline (the diagnostic hides the value), `usernameEnv`/`passwordEnv` are
//! environment variable names, and the two come together or not at all.

use super::Ctx;
use crate::diag::Diagnostic;
use crate::syntax;

/// One registry entry's credential fields and how its diagnostics speak of it.
pub(crate) struct CredentialFields<'a> {
    /// Path of the entry, e.g. `spec.registry` or `spec.airgap.sourceRegistries[0]`.
    pub at: &'a str,
    /// What the entry is called in messages: `registry`, `source registry`.
    pub subject: &'a str,
    /// Prefix of the example variable names, e.g. `HARBOR` (`HARBOR_PASSWORD`).
    pub example: &'a str,
    /// The command the variables must be exported for, e.g. `clusterctl`.
    pub command: &'a str,
    /// Before the pair-rule message, e.g. `source registry "ghcr.io": ` (may be empty).
    pub pair_prefix: String,
    /// Inline fields present in the file, in the order to report them: (`username`|`password`, set).
    pub inline: [(&'a str, bool); 2],
    /// `usernameEnv`.
    pub username_env: &'a Option<String>,
    /// `passwordEnv`.
    pub password_env: &'a Option<String>,
}

/// Checks `c`, pushing a diagnostic for each broken rule. Returns false after any error.
pub(crate) fn check(ctx: &mut Ctx<'_>, c: &CredentialFields<'_>) -> bool {
    let mut ok = true;
    for (field, present) in c.inline {
        if !present {
            continue;
        }
        ok = false;
        let upper = field.to_uppercase();
        ctx.push(
            Diagnostic::error(
                "spec::inline-credentials",
                format!("{} {field} written inline in the cluster file", c.subject),
            )
            .help(format!(
                "remove `{field}` and name an environment variable instead: `{field}Env: {ex}_{upper}` then `export {ex}_{upper}=…` before running {cmd}",
                ex = c.example,
                cmd = c.command
            ))
            .label("secret value hidden")
            .at(format!("{}.{field}#key", c.at)),
        );
    }
    for (field, v) in [
        ("usernameEnv", c.username_env),
        ("passwordEnv", c.password_env),
    ] {
        if let Some(name) = v {
            if let Err(why) = syntax::env_name(name) {
                ok = false;
                // The value is not quoted: what was pasted here may be the secret itself.
                ctx.push(
                    Diagnostic::error(
                        "spec::credentials-env",
                        format!("{field} is not an environment variable name: it {why}"),
                    )
                    .label("value hidden")
                    .help(format!(
                        "give the NAME of a variable, e.g. `{}_PASSWORD`, never the secret itself",
                        c.example
                    ))
                    .at(format!("{}.{field}", c.at)),
                );
            }
        }
    }
    if c.username_env.is_some() != c.password_env.is_some() {
        ok = false;
        let (have, missing) = if c.username_env.is_some() {
            ("usernameEnv", "passwordEnv")
        } else {
            ("passwordEnv", "usernameEnv")
        };
        ctx.push(
            Diagnostic::error(
                "spec::credentials-env",
                format!("{}{have} is set but {missing} is not", c.pair_prefix),
            )
            .help(format!(
                "set both usernameEnv and passwordEnv, or neither; add `{missing}`"
            ))
            .at(format!("{}.{have}", c.at)),
        );
    }
    ok
}
