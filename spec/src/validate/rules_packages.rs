//! Rules on `spec.packages`, where `up` gets the Kubernetes packages and the container runtime:
//! `mirror` is given with `source: mirror` and only then, its `url` is an `http(s)://host[:port][/path]`
//! prefix without query, fragment or credentials, and its `caFile` holds PEM certificates only (as the
//! registry's); `source: bundle` needs `airgap.bundle`; a bundle carrying `.deb`/`.rpm` packages of
//! kubeadm, kubelet or kubectl carries all three for `kubernetesVersion` in each OS family it has
//! packages for (otherwise a node of that family would end half-installed); `preinstalled` with
//! `replaceInstalled` is refused (nothing would replace them). Which OS family each node runs is known
//! only once `up` reads the nodes (its `packages` phase refuses a node it cannot serve, before changing
//! it).

use std::collections::{BTreeMap, BTreeSet};

use super::rules_registry::pem_file;
use super::Ctx;
use crate::diag::Diagnostic;
use crate::model::{Airgap, ClusterFile, PackageSource};
use crate::versions::VersionInfo;

/// The Kubernetes packages `up` pins to `kubernetesVersion`.
pub(crate) const PINNED: [&str; 3] = ["kubeadm", "kubelet", "kubectl"];

/// The mirror CA's certificates (PEM) when `packages.mirror.caFile` is given and valid; `Err(())`
/// after an error (pushed to `ctx`).
pub(crate) fn check(
    ctx: &mut Ctx<'_>,
    file: &ClusterFile,
    version: Option<&VersionInfo>,
) -> Result<Option<String>, ()> {
    let spec = &file.spec;
    let p = &spec.packages;
    let source = spec.package_source();
    let mut ok = true;
    let mut ca = None;
    match (&p.mirror, source) {
        (None, PackageSource::Mirror) => {
            ok = false;
            ctx.push(
                Diagnostic::error("spec::packages", "packages.source is `mirror` but packages.mirror is not set")
                    .help("add `mirror: {url: https://repo.example.com/k8s, caFile: site-ca.crt}` (the prefix under which the upstream paths are served)")
                    .at("spec.packages.source"),
            );
        }
        (Some(_), s) if s != PackageSource::Mirror => {
            ok = false;
            ctx.push(
                Diagnostic::error(
                    "spec::packages",
                    format!(
                        "packages.mirror is set but packages.source is `{}`",
                        source_name(s)
                    ),
                )
                .help("set `source: mirror` to install from the mirror, or remove `mirror`")
                .at("spec.packages.mirror"),
            );
        }
        (Some(m), _) => {
            if let Err(why) = mirror_url(&m.url) {
                ok = false;
                ctx.push(
                    Diagnostic::error("spec::packages-mirror", format!("mirror url {:?} {why}", m.url))
                        .help("write the prefix as `https://host[:port][/path]`, e.g. `https://repo.example.com/k8s`; the upstream paths (`/core:/stable:/v1.34/deb/`, …) are appended")
                        .at("spec.packages.mirror.url"),
                );
            }
            if let Some(f) = &m.ca_file {
                ca = pem_file(ctx, f, "spec.packages.mirror.caFile", "package mirror CA");
                ok &= ca.is_some();
            }
        }
        (None, _) => {}
    }
    if source == PackageSource::Bundle && spec.airgap.is_none() {
        ok = false;
        ctx.push(
            Diagnostic::error("spec::packages", "packages.source is `bundle` but the file names no air-gap bundle")
                .help("set `airgap.bundle` (and list the packages under `airgap.packages`), or use `source: upstream`")
                .at("spec.packages.source"),
        );
    }
    if source == PackageSource::Preinstalled && p.replace_installed {
        ok = false;
        ctx.push(
            Diagnostic::error("spec::packages", "replaceInstalled has no effect with packages.source `preinstalled`")
                .help("`preinstalled` only checks the nodes; choose a source to install from, or drop replaceInstalled")
                .at("spec.packages.replaceInstalled"),
        );
    }
    if source == PackageSource::Bundle {
        if let (Some(a), Some(v)) = (&spec.airgap, version) {
            ok &= bundle_carries_pinned(ctx, a, v);
        }
    }
    if ok {
        Ok(ca)
    } else {
        Err(())
    }
}

/// With `packages.source: bundle`: every OS family the bundle carries pinned packages for at the
/// file's version `v` carries all of them (kubeadm, kubelet and kubectl together). Returns whether so.
fn bundle_carries_pinned(ctx: &mut Ctx<'_>, a: &Airgap, v: &VersionInfo) -> bool {
    let mut ok = true;
    let tag = v.tag();
    // OS family → the pinned packages it carries at the file's version.
    let mut families: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for pkg in a.packages.iter().filter(|p| p.os_family != "any") {
        let at_version = pkg
            .kubernetes_version
            .as_deref()
            .is_none_or(|k| crate::versions::untagged(k) == v.version.to_string());
        let set = families.entry(pkg.os_family.as_str()).or_default();
        if at_version && PINNED.contains(&pkg.name.as_str()) {
            set.insert(pkg.name.as_str());
        }
    }
    for (family, set) in &families {
        if !set.is_empty() && set.len() < PINNED.len() {
            let missing: Vec<&str> = PINNED
                .iter()
                .copied()
                .filter(|n| !set.contains(n))
                .collect();
            ok = false;
            ctx.push(
                    Diagnostic::error(
                        "spec::packages-bundle",
                        format!(
                            "the bundle's {family} packages hold {} but not {} for {tag}",
                            set.iter().copied().collect::<Vec<_>>().join(", "),
                            missing.join(", ")
                        ),
                    )
                    .help("carry kubeadm, kubelet and kubectl of kubernetesVersion together (with cri-tools and kubernetes-cni, which they depend on)")
                    .at("spec.airgap.packages"),
                );
        }
    }
    ok
}

fn source_name(s: PackageSource) -> &'static str {
    match s {
        PackageSource::Upstream => "upstream",
        PackageSource::Mirror => "mirror",
        PackageSource::Bundle => "bundle",
        PackageSource::Preinstalled => "preinstalled",
    }
}

/// Checks a mirror URL prefix. Errors: why it is not one.
pub(crate) fn mirror_url(url: &str) -> Result<(), &'static str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("is not an http:// or https:// URL")?;
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("contains white space or control characters");
    }
    if rest.contains(['?', '#']) {
        return Err("has a query or fragment (only a prefix is appended to)");
    }
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() {
        return Err("has no host");
    }
    if host.contains('@') {
        return Err("carries credentials (give the mirror's CA in caFile; credentials in URLs end up in files on every node)");
    }
    if rest.contains("//") || rest.split('/').any(|s| s == "." || s == "..") {
        return Err("has an empty, `.` or `..` path segment");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {name: demo}\nspec:\n  kubernetesVersion: v1.34.4\n  provider: ssh\n  networking: {podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/16}\n  nodes:\n    - {name: cp1, role: control-plane, address: 10.0.0.11/24}\n";

    /// Validates BASE with `packages` (lines indented two spaces) and `files` next to it: the error
    /// messages, or the valid cluster's package settings.
    fn check_text(
        packages: &str,
        files: &[(&str, &str)],
    ) -> Result<(PackageSource, Option<String>), Vec<String>> {
        let dir = tempfile::tempdir().expect("tempdir");
        for (n, t) in files {
            std::fs::write(dir.path().join(n), t).expect("write");
        }
        let path = dir.path().join("cluster.yaml");
        std::fs::write(&path, format!("{BASE}{packages}")).expect("write");
        let loaded = crate::load::load(&path).map_err(|d| {
            d.items
                .iter()
                .map(|i| i.message.clone())
                .collect::<Vec<_>>()
        })?;
        match super::super::validate(&loaded) {
            Ok(v) => Ok((
                v.cluster.spec().package_source(),
                v.cluster.packages_mirror_ca_pem().map(String::from),
            )),
            Err(d) => Err(d
                .items
                .iter()
                .filter(|i| i.severity == crate::diag::Severity::Error)
                .map(|i| i.message.clone())
                .collect()),
        }
    }

    #[test]
    fn sources_and_the_mirror() {
        assert_eq!(
            check_text("", &[]).expect("valid"),
            (PackageSource::Upstream, None),
            "unset on SSH hosts: upstream (up takes bare hosts to a cluster)"
        );
        assert_eq!(
            check_text("  airgap: {bundle: site.tar}\n", &[])
                .expect("valid")
                .0,
            PackageSource::Preinstalled,
            "unset with an air-gap bundle without kubeadm: airgap/packages places its files, the phase checks"
        );
        let debs = "  airgap:\n    bundle: site.tar\n    packages:\n      - {name: kubeadm, osFamily: debian, arch: amd64, path: a.deb}\n      - {name: kubelet, osFamily: debian, arch: amd64, path: b.deb}\n      - {name: kubectl, osFamily: debian, arch: amd64, path: c.deb}\n";
        assert_eq!(
            check_text(debs, &[]).expect("valid").0,
            PackageSource::Bundle,
            "unset with a bundle carrying kubeadm: the packages phase installs from it"
        );
        assert_eq!(
            check_text("  packages: {source: upstream}\n", &[])
                .expect("valid")
                .0,
            PackageSource::Upstream
        );
        let ca = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ3F5b2xvZ2ljYWwgdGVzdCBDQTAKBggqhkjOPQQDAjAS\n-----END CERTIFICATE-----\n";
        let e = check_text(
            "  packages:\n    source: mirror\n    mirror: {url: \"https://repo.site/k8s\", caFile: site-ca.crt}\n",
            &[("site-ca.crt", ca)],
        );
        let (s, pem) = e.expect("valid mirror");
        assert_eq!(s, PackageSource::Mirror);
        assert_eq!(pem.as_deref(), Some(ca));
        let e = check_text(
            "  packages:\n    source: mirror\n    mirror: {url: \"https://repo.site/k8s\", caFile: site-ca.crt}\n",
            &[("site-ca.crt", &format!("{ca}-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"))],
        )
        .unwrap_err();
        assert!(
            e.iter()
                .any(|m| m.contains("package mirror CA file \"site-ca.crt\"")),
            "{e:?}"
        );
        let e = check_text("  packages: {source: mirror}\n", &[]).unwrap_err();
        assert!(
            e.iter()
                .any(|m| m.contains("packages.source is `mirror` but packages.mirror is not set")),
            "{e:?}"
        );
        let e = check_text(
            "  packages:\n    source: upstream\n    mirror: {url: \"https://repo.site/k8s\"}\n",
            &[],
        )
        .unwrap_err();
        assert!(
            e.iter()
                .any(|m| m.contains("packages.mirror is set but packages.source is `upstream`")),
            "{e:?}"
        );
        let e = check_text(
            "  packages:\n    source: mirror\n    mirror: {url: \"https://u:p@repo.site/k8s\"}\n",
            &[],
        )
        .unwrap_err();
        assert!(e.iter().any(|m| m.contains("carries credentials")), "{e:?}");
        let e = check_text("  packages: {source: bundle}\n", &[]).unwrap_err();
        assert!(
            e.iter().any(|m| m.contains("names no air-gap bundle")),
            "{e:?}"
        );
        let e = check_text(
            "  packages: {source: preinstalled, replaceInstalled: true}\n",
            &[],
        )
        .unwrap_err();
        assert!(
            e.iter()
                .any(|m| m.contains("replaceInstalled has no effect")),
            "{e:?}"
        );
        let e = check_text("  packages: {source: apt}\n", &[]).unwrap_err();
        assert!(!e.is_empty());
    }

    #[test]
    fn mirror_urls() {
        assert!(mirror_url("https://repo.example.com/k8s").is_ok());
        assert!(mirror_url("https://repo.example.com:8443").is_ok());
        assert!(mirror_url("http://10.0.0.1/k8s/").is_ok());
        for bad in [
            "repo.example.com/k8s",
            "ftp://repo",
            "https://",
            "https://u:p@repo/k8s",
            "https://repo/k8s?x=1",
            "https://repo/../k8s",
            "https://repo//k8s",
            "https://repo/k 8s",
        ] {
            assert!(mirror_url(bad).is_err(), "{bad}");
        }
    }
}
