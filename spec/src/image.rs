//! Image references: the one type and parser of the Docker/OCI distribution grammar
//! (`distribution/reference`) used by validation, the mirror rewrite ([`crate::mirror`]), render and
//! airgap: `[registry[:port]/]repository[:tag][@algorithm:hex]`.
//!
//! A reference without a registry host is Docker Hub's (`nginx:1.27` = `docker.io/library/nginx:1.27`,
//! repository `library/nginx`), as in `normalize.go`. The tag stays as written: a bare name has none
//! here; [`ImageRef::with_default_tag`] adds `latest` as containerd and kubelet do when they pull
//! (`reference.TagNameOnly`).

use std::fmt;

/// Longest reference accepted, bytes.
const MAX_LEN: usize = 4096;

/// An image reference that does not parse, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image reference {reference:?}: {reason}")]
pub struct ReferenceError {
    /// The reference as given.
    pub reference: String,
    /// Why it does not parse, e.g. `invalid tag`.
    pub reason: &'static str,
}

/// An image reference split into its parts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageRef {
    /// Registry host and optional port, e.g. `registry.k8s.io`, `127.0.0.1:5000`; `docker.io` when
    /// none was written.
    pub registry: String,
    /// Repository path inside the registry, e.g. `coredns/coredns`, `library/nginx`.
    pub repository: String,
    /// Tag as written (without `:`), e.g. `v1.12.1`.
    pub tag: Option<String>,
    /// Manifest digest as written (without `@`), e.g. `sha256:…`, when the reference pins one.
    pub digest: Option<String>,
}

fn bad(reference: &str, reason: &'static str) -> ReferenceError {
    ReferenceError {
        reference: reference.to_string(),
        reason,
    }
}

fn valid_component(c: &str) -> bool {
    !c.is_empty()
        && c.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
        && c.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && c.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

fn valid_registry(r: &str) -> bool {
    let (host, port) = match r.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (r, None),
    };
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        && port
            .is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

fn valid_tag(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 128
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && t.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `algorithm:hex` with at least 32 hex digits (the grammar's `digest`; which algorithms a registry
/// serves is the caller's business).
fn valid_digest(d: &str) -> bool {
    d.split_once(':').is_some_and(|(alg, hex)| {
        !alg.is_empty() && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

impl ImageRef {
    /// Parses and normalises `text` (no registry → `docker.io`; a one-component Docker Hub repository
    /// gets `library/`). Errors: [`ReferenceError`] naming the reason (empty, whitespace, too long, bad
    /// digest, bad tag, bad registry, upper case or empty repository components).
    pub fn parse(text: &str) -> Result<ImageRef, ReferenceError> {
        if text.is_empty() {
            return Err(bad(text, "empty"));
        }
        if text.len() > MAX_LEN {
            return Err(bad(text, "longer than 4096 bytes"));
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad(text, "contains whitespace or control characters"));
        }
        let (name_tag, digest) = match text.split_once('@') {
            Some((n, d)) if valid_digest(d) => (n, Some(d.to_string())),
            Some(_) => return Err(bad(text, "digest is not <algorithm>:<hex>")),
            None => (text, None),
        };
        // The tag is after the last ':' that follows the last '/'.
        let last_slash = name_tag.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match name_tag[last_slash..].rfind(':') {
            Some(i) => (
                &name_tag[..last_slash + i],
                Some(&name_tag[last_slash + i + 1..]),
            ),
            None => (name_tag, None),
        };
        if tag.is_some_and(|t| !valid_tag(t)) {
            return Err(bad(text, "invalid tag"));
        }
        let (registry, repository) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), rest.to_string())
            }
            _ => ("docker.io".to_string(), name.to_string()),
        };
        if !valid_registry(&registry) {
            return Err(bad(text, "invalid registry host[:port]"));
        }
        let repository = if registry == "docker.io" && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        if !repository.split('/').all(valid_component) {
            return Err(bad(
                text,
                "repository must be lower-case path components [a-z0-9._-]",
            ));
        }
        Ok(ImageRef {
            registry,
            repository,
            tag: tag.map(str::to_string),
            digest,
        })
    }

    /// The reference as a runtime pulls it: `latest` as the tag when neither tag nor digest was
    /// written (`nginx` → `docker.io/library/nginx:latest`).
    pub fn with_default_tag(mut self) -> ImageRef {
        if self.tag.is_none() && self.digest.is_none() {
            self.tag = Some("latest".to_string());
        }
        self
    }

    /// The host to talk to for this registry (`docker.io` is served by `registry-1.docker.io`).
    pub fn api_host(&self) -> &str {
        if self.registry == "docker.io" {
            "registry-1.docker.io"
        } else {
            &self.registry
        }
    }

    /// What to ask the registry's manifest endpoint for: the digest when pinned, else the tag, else
    /// `latest`.
    pub fn manifest_reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.clone(),
            (None, Some(t)) => t.clone(),
            (None, None) => "latest".to_string(),
        }
    }

    /// The text of the reference with the registry replaced by `prefix` (`host[:port][/path]`; the
    /// repository keeps its full path below it): `<prefix>/<repository>[:tag][@digest]`. Not parsed
    /// again (see [`ImageRef::under_prefix`]).
    pub fn under(&self, prefix: &str) -> String {
        let mut s = format!("{}/{}", prefix.trim_end_matches('/'), self.repository);
        if let Some(t) = &self.tag {
            s.push(':');
            s.push_str(t);
        }
        if let Some(d) = &self.digest {
            s.push('@');
            s.push_str(d);
        }
        s
    }

    /// The same image under another registry prefix ([`ImageRef::under`]), parsed:
    /// `registry.k8s.io/coredns/coredns:v1.12.1` under `harbor.example.com/library` is
    /// `harbor.example.com/library/coredns/coredns:v1.12.1`. Errors: the result does not parse.
    pub fn under_prefix(&self, prefix: &str) -> Result<ImageRef, ReferenceError> {
        ImageRef::parse(&self.under(prefix))
    }

    /// The same image on another registry host (used by `--source-registry-override`).
    pub fn with_registry(&self, registry: &str) -> ImageRef {
        ImageRef {
            registry: registry.to_string(),
            ..self.clone()
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// The fully qualified form of `text` as a runtime lists it (`ctr images ls -q`, `crictl images`):
/// registry, repository and `:latest` when neither tag nor digest is written (`cka-api:v4` →
/// `docker.io/library/cka-api:v4`). Text that does not parse is returned trimmed, as written.
pub fn normalized(text: &str) -> String {
    let text = text.trim();
    match ImageRef::parse(text) {
        Ok(r) => r.with_default_tag().to_string(),
        Err(_) => text.to_string(),
    }
}

/// True when `listed` (as a runtime lists it) names the same image as `wanted` (as a pod spec or
/// `image load` writes it), after [`normalized`] on both.
pub fn same_image(wanted: &str, listed: &str) -> bool {
    normalized(wanted) == normalized(listed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ImageRef {
        ImageRef::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn normalises_like_containerd() {
        assert_eq!(p("nginx").to_string(), "docker.io/library/nginx");
        assert_eq!(
            p("nginx").with_default_tag().to_string(),
            "docker.io/library/nginx:latest"
        );
        assert_eq!(
            p("registry.k8s.io/coredns/coredns:v1.12.1").repository,
            "coredns/coredns"
        );
        let r = p("127.0.0.1:5000/a/b:1.0");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("127.0.0.1:5000", "a/b", Some("1.0"))
        );
        let r = p("reg.io:5000/a/b");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag),
            ("reg.io:5000", "a/b", None)
        );
        let d = format!("sha256:{}", "a".repeat(64));
        let r = p(&format!(
            "registry.k8s.io/ingress-nginx/controller:v1.13.3@{d}"
        ));
        assert_eq!(r.manifest_reference(), d);
        assert_eq!(r.tag.as_deref(), Some("v1.13.3"));
        assert_eq!(r.clone().with_default_tag(), r);
        assert_eq!(p("localhost/x").registry, "localhost");
        assert_eq!(p("nginx").api_host(), "registry-1.docker.io");
    }

    #[test]
    fn rejects_bad_input() {
        let long = format!("r.io/{}", "a".repeat(MAX_LEN));
        for s in [
            "",
            "a b",
            "Foo/Bar:1",
            "UPPER/x",
            "x:",
            "reg.io//a:1",
            "a//b",
            "a@sha256:zz",
            "a:-x",
            "x:-bad",
            "a:b:c/d",
            "a-/b:1",
            long.as_str(),
        ] {
            assert!(ImageRef::parse(s).is_err(), "{s}");
        }
        assert_eq!(
            ImageRef::parse("x:-bad").map_err(|e| e.reason),
            Err("invalid tag")
        );
    }

    #[test]
    fn rewrites_prefix() {
        let r = p("registry.k8s.io/coredns/coredns:v1.12.1");
        assert_eq!(
            r.under("harbor.example.com/library/"),
            "harbor.example.com/library/coredns/coredns:v1.12.1"
        );
        assert_eq!(
            r.under_prefix("harbor.example.com/library/")
                .map(|r| r.to_string())
                .ok()
                .as_deref(),
            Some("harbor.example.com/library/coredns/coredns:v1.12.1")
        );
        assert_eq!(
            r.with_registry("127.0.0.1:5000").to_string(),
            "127.0.0.1:5000/coredns/coredns:v1.12.1"
        );
    }

    #[test]
    fn short_names_gain_registry_library_and_tag() {
        assert_eq!(normalized("cka-api:v4"), "docker.io/library/cka-api:v4");
        assert_eq!(normalized("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(
            normalized("calico/node:v3.32.2"),
            "docker.io/calico/node:v3.32.2"
        );
        assert_eq!(
            normalized("quay.io/calico/node:v3.32.2"),
            "quay.io/calico/node:v3.32.2"
        );
        assert_eq!(
            normalized("localhost:5000/app"),
            "localhost:5000/app:latest"
        );
        assert_eq!(
            normalized("registry.k8s.io/pause@sha256:abc"),
            "registry.k8s.io/pause@sha256:abc"
        );
    }

    #[test]
    fn matching_ignores_spelling_but_not_tag() {
        assert!(same_image("cka-api:v4", "docker.io/library/cka-api:v4"));
        assert!(!same_image("cka-api:v3", "docker.io/library/cka-api:v4"));
    }
}
