//! Image references in the Docker/OCI distribution grammar (`distribution/reference`):
//! `[registry[:port]/]repository[:tag][@sha256:hex]`, normalised as containerd and kubelet do
//! (no registry means `docker.io`; a one-component Docker Hub repository gets `library/`).

use crate::digest::Digest;
use crate::error::{AirgapError, Result};
use std::fmt;

/// A parsed image reference. At least one of `tag` and `digest` is set (a bare name means `:latest`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageRef {
    /// Registry host and optional port, e.g. `registry.k8s.io`, `127.0.0.1:5000`, `docker.io`.
    pub registry: String,
    /// Repository path inside the registry, e.g. `coredns/coredns`, `library/nginx`.
    pub repository: String,
    /// Tag, e.g. `v1.12.1`.
    pub tag: Option<String>,
    /// Manifest digest when the reference pins one.
    pub digest: Option<Digest>,
}

fn bad(reference: &str, reason: &str) -> AirgapError {
    AirgapError::Reference {
        reference: reference.to_string(),
        reason: reason.to_string(),
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

impl ImageRef {
    /// Parses and normalises `s`. Errors: `AirgapError::Reference` naming the reason (empty, upper
    /// case in the repository, bad tag, bad digest).
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        if s.is_empty() {
            return Err(bad(s, "empty"));
        }
        let (name_tag, digest) = match s.split_once('@') {
            Some((n, d)) => (
                n,
                Some(Digest::parse(d).map_err(|_| bad(s, "digest is not sha256:<64 hex>"))?),
            ),
            None => (s, None),
        };
        let last_slash = name_tag.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match name_tag[last_slash..].rfind(':') {
            Some(i) => (
                &name_tag[..last_slash + i],
                Some(&name_tag[last_slash + i + 1..]),
            ),
            None => (name_tag, None),
        };
        if let Some(t) = tag {
            if !valid_tag(t) {
                return Err(bad(s, "invalid tag"));
            }
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
            return Err(bad(s, "invalid registry host[:port]"));
        }
        let repository = if registry == "docker.io" && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        if !repository.split('/').all(valid_component) {
            return Err(bad(
                s,
                "repository must be lower-case path components [a-z0-9._-]",
            ));
        }
        let tag = match (tag, &digest) {
            (Some(t), _) => Some(t.to_string()),
            (None, Some(_)) => None,
            (None, None) => Some("latest".to_string()),
        };
        Ok(ImageRef {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The host to talk to for this registry (`docker.io` is served by `registry-1.docker.io`).
    pub fn api_host(&self) -> &str {
        if self.registry == "docker.io" {
            "registry-1.docker.io"
        } else {
            &self.registry
        }
    }

    /// What to ask the registry's manifest endpoint for: the digest when pinned, else the tag.
    pub fn manifest_reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.to_string(),
            (None, Some(t)) => t.clone(),
            (None, None) => "latest".to_string(),
        }
    }

    /// The same image under another registry prefix: `prefix` is `host[:port][/path]`, and the
    /// repository keeps its full path below it (`registry.k8s.io/coredns/coredns:v1.12.1` with
    /// `harbor.example.com/library` gives `harbor.example.com/library/coredns/coredns:v1.12.1`).
    /// Tag and digest are kept.
    pub fn under_prefix(&self, prefix: &str) -> Result<ImageRef> {
        let prefix = prefix.trim_end_matches('/');
        let mut s = format!("{prefix}/{}", self.repository);
        if let Some(t) = &self.tag {
            s.push(':');
            s.push_str(t);
        }
        if let Some(d) = &self.digest {
            s.push('@');
            s.push_str(&d.to_string());
        }
        ImageRef::parse(&s)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ImageRef {
        ImageRef::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn normalises_like_containerd() {
        assert_eq!(p("nginx").to_string(), "docker.io/library/nginx:latest");
        assert_eq!(
            p("registry.k8s.io/coredns/coredns:v1.12.1").repository,
            "coredns/coredns"
        );
        let r = p("127.0.0.1:5000/a/b:1.0");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("127.0.0.1:5000", "a/b", Some("1.0"))
        );
        let d = format!("sha256:{}", "a".repeat(64));
        let r = p(&format!(
            "registry.k8s.io/ingress-nginx/controller:v1.13.3@{d}"
        ));
        assert_eq!(r.manifest_reference(), d);
        assert_eq!(r.tag.as_deref(), Some("v1.13.3"));
        assert_eq!(p("localhost/x").registry, "localhost");
        assert_eq!(p("nginx").api_host(), "registry-1.docker.io");
    }

    #[test]
    fn rejects_bad_input() {
        for s in ["", "UPPER/x", "a:b:c/d", "x@sha256:zz", "x:-bad", "a//b"] {
            assert!(ImageRef::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn rewrites_prefix() {
        let r = p("registry.k8s.io/coredns/coredns:v1.12.1");
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
}
