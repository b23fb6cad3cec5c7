//! Image references and the registry mirror as a rewrite prefix. An image is stored under the mirror with
//! its repository path minus the source host, the way the seed pushes them to Harbor:
//! `registry.k8s.io/kube-apiserver:v1.34.1` → `harbor.example.com/library/kube-apiserver:v1.34.1`,
//! `registry.k8s.io/coredns/coredns:v1.12.1` → `harbor.example.com/library/coredns/coredns:v1.12.1`.
//! References without a registry host are Docker Hub's (`nginx:1.27` = `docker.io/library/nginx:1.27`,
//! path `library/nginx`), as in the Docker reference grammar (distribution/reference `normalize.go`).

use std::collections::BTreeMap;

/// An image reference split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry host (with port), e.g. `registry.k8s.io`; `docker.io` when none was written.
    pub host: String,
    /// Repository path without host, e.g. `coredns/coredns`, `library/nginx`.
    pub path: String,
    /// Tag, if any (without `:`).
    pub tag: Option<String>,
    /// Digest, if any (`sha256:…`, without `@`).
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses `[host[:port]/]path[:tag][@digest]`. Errors (`None`): empty, spaces, upper-case path, empty
    /// components, or neither tag nor digest nor path.
    pub fn parse(text: &str) -> Option<ImageRef> {
        if text.is_empty()
            || text.len() > 4096
            || text.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return None;
        }
        let (rest, digest) = match text.split_once('@') {
            Some((r, d)) => {
                let (alg, hex) = d.split_once(':')?;
                if alg.is_empty() || hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                (r, Some(d.to_string()))
            }
            None => (text, None),
        };
        // The tag is after the last ':' that follows the last '/'.
        let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let t = &rest[last_slash + i + 1..];
                let valid = !t.is_empty()
                    && t.len() <= 128
                    && t.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
                    && !t.starts_with(['.', '-']);
                if !valid {
                    return None;
                }
                (&rest[..last_slash + i], Some(t.to_string()))
            }
            None => (rest, None),
        };
        let (host, path) = match name.split_once('/') {
            Some((h, p)) if h.contains('.') || h.contains(':') || h == "localhost" => {
                (h.to_string(), p.to_string())
            }
            _ => ("docker.io".to_string(), name.to_string()),
        };
        let path = if host == "docker.io" && !path.contains('/') {
            format!("library/{path}")
        } else {
            path
        };
        let path_ok = !path.is_empty()
            && path.split('/').all(|c| {
                !c.is_empty()
                    && c.chars().all(|ch| {
                        ch.is_ascii_lowercase()
                            || ch.is_ascii_digit()
                            || matches!(ch, '.' | '_' | '-')
                    })
                    && c.starts_with(|ch: char| ch.is_ascii_alphanumeric())
            });
        if !path_ok || host.is_empty() {
            return None;
        }
        Some(ImageRef {
            host,
            path,
            tag,
            digest,
        })
    }

    /// The reference with `host` replaced by the mirror prefix: `<prefix>/<path>[:tag][@digest]`.
    pub fn under(&self, prefix: &str) -> String {
        let mut s = format!("{}/{}", prefix.trim_end_matches('/'), self.path);
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
}

/// Rewrites `image` under the mirror `prefix` (see the module doc). An unparseable reference is returned
/// unchanged (validation rejects those earlier).
pub fn rewrite(prefix: &str, image: &str) -> String {
    match ImageRef::parse(image) {
        Some(r) => r.under(prefix),
        None => image.to_string(),
    }
}

/// Pairs of distinct source images that land on the same reference under `prefix`, as
/// (first, second, mirrored reference), in input order. Duplicate inputs are not collisions.
pub fn collisions(prefix: &str, images: &[String]) -> Vec<(String, String, String)> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for img in images {
        let m = rewrite(prefix, img);
        match seen.get(&m) {
            Some(first) if *first != img.as_str() => {
                out.push(((*first).to_string(), img.clone(), m))
            }
            Some(_) => {}
            None => {
                seen.insert(m, img.as_str());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_path_minus_host() {
        let p = "harbor.example.com/library";
        assert_eq!(
            rewrite(p, "registry.k8s.io/kube-apiserver:v1.34.1"),
            "harbor.example.com/library/kube-apiserver:v1.34.1"
        );
        assert_eq!(
            rewrite(p, "registry.k8s.io/coredns/coredns:v1.12.1"),
            "harbor.example.com/library/coredns/coredns:v1.12.1"
        );
        assert_eq!(
            rewrite(p, "nginx:1.27"),
            "harbor.example.com/library/library/nginx:1.27"
        );
        assert_eq!(
            rewrite(p, "localhost:5000/a/b:1"),
            "harbor.example.com/library/a/b:1"
        );
        let d = format!("quay.io/cilium/cilium:v1.16.5@sha256:{}", "a".repeat(64));
        assert_eq!(
            rewrite(p, &d),
            format!(
                "harbor.example.com/library/cilium/cilium:v1.16.5@sha256:{}",
                "a".repeat(64)
            )
        );
    }

    #[test]
    fn parse_rejects_bad_refs() {
        for bad in [
            "",
            "a b",
            "Foo/Bar:1",
            "x:",
            "reg.io//a:1",
            "a@sha256:zz",
            "a:-x",
        ] {
            assert!(ImageRef::parse(bad).is_none(), "{bad}");
        }
        let r = ImageRef::parse("reg.io:5000/a/b").expect("valid");
        assert_eq!(
            (r.host.as_str(), r.path.as_str(), r.tag),
            ("reg.io:5000", "a/b", None)
        );
    }

    #[test]
    fn detects_collisions() {
        let imgs = vec![
            "ghcr.io/kube-vip/kube-vip:v0.8.9".to_string(),
            "registry.k8s.io/pause:3.10".to_string(),
            "docker.io/kube-vip/kube-vip:v0.8.9".to_string(),
            "registry.k8s.io/pause:3.10".to_string(),
        ];
        let c = collisions("m.example/x", &imgs);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].2, "m.example/x/kube-vip/kube-vip:v0.8.9");
    }
}
