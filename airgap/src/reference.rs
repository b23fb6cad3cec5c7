//! Image references as airgap reads them: the one grammar and type of the workspace
//! ([`clusterctl_spec::image::ImageRef`]), normalised as containerd and kubelet pull (a bare name
//! means `:latest`), with digests limited to sha256 (the only one this crate produces or accepts).

use crate::digest::Digest;
use crate::error::{AirgapError, ReferenceError, Result};
pub use clusterctl_spec::image::ImageRef;

/// Parses `s` (surrounding whitespace ignored) and adds `latest` when it names neither tag nor
/// digest. Errors: `AirgapError::Reference` naming the reason (empty, upper case in the repository,
/// bad tag, a digest other than `sha256:<64 hex>`).
pub(crate) fn parse(s: &str) -> Result<ImageRef> {
    parse_reference(s).map_err(AirgapError::Reference)
}

/// [`parse`] with spec's error alone (for a caller that names where the reference came from).
pub(crate) fn parse_reference(s: &str) -> std::result::Result<ImageRef, ReferenceError> {
    let s = s.trim();
    let r = ImageRef::parse(s)?;
    if let Some(d) = &r.digest {
        if Digest::parse(d).is_err() {
            return Err(ReferenceError {
                reference: s.to_string(),
                reason: "digest is not sha256:<64 hex>",
            });
        }
    }
    Ok(r.with_default_tag())
}

/// `r` under the registry prefix `prefix` ([`ImageRef::under`]), parsed by [`parse`].
pub(crate) fn under_prefix(r: &ImageRef, prefix: &str) -> Result<ImageRef> {
    parse(&r.under(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ImageRef {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn normalises_like_containerd() {
        assert_eq!(p("nginx").to_string(), "docker.io/library/nginx:latest");
        assert_eq!(p(" nginx:1 ").to_string(), "docker.io/library/nginx:1");
        let d = format!("sha256:{}", "a".repeat(64));
        let r = p(&format!("registry.k8s.io/x@{d}"));
        assert_eq!(
            (
                r.tag.clone(),
                r.digest
                    .as_deref()
                    .and_then(|d| Digest::parse(d).ok())
                    .map(|d| d.to_string())
            ),
            (None, Some(d))
        );
    }

    #[test]
    fn rejects_bad_input() {
        for s in ["", "UPPER/x", "a:b:c/d", "x@sha256:zz", "x:-bad", "a//b"] {
            assert!(parse(s).is_err(), "{s}");
        }
        let sha512 = format!("x@sha512:{}", "a".repeat(128));
        assert!(ImageRef::parse(&sha512).is_ok(), "the grammar allows it");
        assert!(
            matches!(parse(&sha512), Err(AirgapError::Reference(e)) if e.reason == "digest is not sha256:<64 hex>")
        );
    }

    #[test]
    fn rewrites_prefix() {
        let r = p("registry.k8s.io/coredns/coredns:v1.12.1");
        assert_eq!(
            under_prefix(&r, "harbor.example.com/library/")
                .map(|r| r.to_string())
                .ok()
                .as_deref(),
            Some("harbor.example.com/library/coredns/coredns:v1.12.1")
        );
    }
}
