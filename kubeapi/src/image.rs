//! Image references as runtimes list them: `normalize_image` turns the short names written in pod specs
//! (`cka-api:v4`, `nginx`) into the fully qualified form containerd stores (`docker.io/library/cka-api:v4`,
//! `docker.io/library/nginx:latest`), following the distribution reference rules (docker/distribution
//! `reference.ParseNormalizedNamed`: the first component is a registry when it has a `.` or `:` or is
//! `localhost`; the default registry is `docker.io`, whose one-component names live under `library/`).

/// The fully qualified form of `image`: registry, repository, and `:latest` when neither tag nor digest
/// is given. Example: `cka-api:v4` → `docker.io/library/cka-api:v4`.
pub fn normalize_image(image: &str) -> String {
    let image = image.trim();
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let (repo, tag) = match name.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r, Some(t)),
        _ => (name, None),
    };
    let first = repo.split('/').next().unwrap_or("");
    let has_registry =
        repo.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let full_repo = if has_registry {
        repo.to_string()
    } else if repo.contains('/') {
        format!("docker.io/{repo}")
    } else {
        format!("docker.io/library/{repo}")
    };
    match (tag, digest) {
        (Some(t), Some(d)) => format!("{full_repo}:{t}@{d}"),
        (None, Some(d)) => format!("{full_repo}@{d}"),
        (Some(t), None) => format!("{full_repo}:{t}"),
        (None, None) => format!("{full_repo}:latest"),
    }
}

/// True when `listed` (as a runtime lists it, e.g. `ctr images ls -q`) names the same image as `wanted`
/// (as a pod spec writes it), after normalizing both.
pub fn image_matches(wanted: &str, listed: &str) -> bool {
    normalize_image(wanted) == normalize_image(listed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_gain_registry_library_and_tag() {
        assert_eq!(
            normalize_image("cka-api:v4"),
            "docker.io/library/cka-api:v4"
        );
        assert_eq!(normalize_image("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(
            normalize_image("calico/node:v3.32.2"),
            "docker.io/calico/node:v3.32.2"
        );
        assert_eq!(
            normalize_image("quay.io/calico/node:v3.32.2"),
            "quay.io/calico/node:v3.32.2"
        );
        assert_eq!(
            normalize_image("localhost:5000/app"),
            "localhost:5000/app:latest"
        );
        assert_eq!(
            normalize_image("registry.k8s.io/pause@sha256:abc"),
            "registry.k8s.io/pause@sha256:abc"
        );
    }

    #[test]
    fn matching_ignores_spelling_but_not_tag() {
        assert!(image_matches("cka-api:v4", "docker.io/library/cka-api:v4"));
        assert!(!image_matches("cka-api:v3", "docker.io/library/cka-api:v4"));
    }
}
