//! The registry mirror as a rewrite prefix (references parsed by [`crate::image::ImageRef`]). An image
//! is stored under the mirror with its repository path minus the source host, the way the seed pushes
//! them to Harbor:
//! `registry.k8s.io/kube-apiserver:v1.34.1` → `harbor.example.com/library/kube-apiserver:v1.34.1`,
//! `registry.k8s.io/coredns/coredns:v1.12.1` → `harbor.example.com/library/coredns/coredns:v1.12.1`.
//! References without a registry host are Docker Hub's (`nginx:1.27` = `docker.io/library/nginx:1.27`,
//! repository `library/nginx`), as in the Docker reference grammar (distribution/reference `normalize.go`).

use crate::image::ImageRef;
use std::collections::BTreeMap;

/// Rewrites `image` under the mirror `prefix` (see the module doc). An unparseable reference is returned
/// unchanged (validation rejects those earlier).
pub fn rewrite(prefix: &str, image: &str) -> String {
    match ImageRef::parse(image) {
        Ok(r) => r.under(prefix),
        Err(_) => image.to_string(),
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
