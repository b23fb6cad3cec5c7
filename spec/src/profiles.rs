//! Built-in profiles: complete cluster files from `profiles/*.yaml`, embedded in the binary together with
//! the small (fake) PEM files they reference, so `clusterctl up --dry-run` and `validate --profile` work
//! on any machine.

use crate::diag::{Diagnostic, Diagnostics, Source};
use crate::load::{Loaded, Referenced};
use std::sync::Arc;

/// The default profile, used by `clusterctl up --dry-run` with no file.
pub const DEFAULT_PROFILE: &str = "lab";

/// (name, description, text) of every profile.
const PROFILES: &[(&str, &str, &str)] = &[(
    "lab",
    "kind-style lab: docker provider, builtin CNI, 1 control plane + 2 workers",
    include_str!("../../profiles/lab.yaml"),
)];

/// Files the profiles reference, by the path written in them.
const FILES: &[(&str, &str)] = &[];

/// (name, description) of every built-in profile, default first.
pub fn profiles() -> &'static [(&'static str, &'static str)] {
    const LIST: &[(&str, &str)] = &[(
        "lab",
        "kind-style lab: docker provider, builtin CNI, 1 control plane + 2 workers",
    )];
    LIST
}

/// The cluster file of profile `name`, with its referenced files, as if loaded from `profiles/<name>.yaml`.
/// Errors: unknown name (one diagnostic listing the known names).
pub fn from_profile(name: &str) -> Result<Loaded, Diagnostics> {
    let Some((n, _, text)) = PROFILES.iter().find(|(n, _, _)| *n == name) else {
        let names: Vec<&str> = PROFILES.iter().map(|(n, _, _)| *n).collect();
        let src = Arc::new(Source {
            name: format!("profile {name}"),
            text: Arc::new(String::new()),
        });
        return Err(Diagnostics::single(
            src,
            Diagnostic::error(
                "spec::unknown-profile",
                format!("no profile named {name:?}"),
            )
            .help(format!("use one of: {}", names.join(", "))),
        ));
    };
    let mut loaded = Loaded::from_text(format!("profiles/{n}.yaml"), *text);
    loaded.resolve_references(|p| match FILES.iter().find(|(f, _)| *f == p) {
        Some((_, t)) => Referenced::Text((*t).to_string()),
        None => Referenced::Unreadable("not embedded with the profiles".to_string()),
    });
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_matches_embedded() {
        let listed: Vec<&str> = profiles().iter().map(|(n, _)| *n).collect();
        let embedded: Vec<&str> = PROFILES.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(listed, embedded);
        assert_eq!(listed.first().copied(), Some(DEFAULT_PROFILE));
        assert!(from_profile("nope").is_err());
    }
}
