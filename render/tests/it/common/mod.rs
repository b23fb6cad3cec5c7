//! Shared test helpers: the inputs every render test iterates over (each built-in profile and each test
//! fixture), re-targeted to every supported minor, validated through the real `clusterctl-spec` API.

#![allow(dead_code)]

use clusterctl_spec::{validate, Loaded, ValidCluster};
use std::path::{Path, PathBuf};

/// The fixtures directory (render/tests/fixtures).
pub(crate) fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Names of the test fixtures (`*.yaml` in tests/fixtures), sorted.
pub(crate) fn fixture_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .map(|n| n.trim_end_matches(".yaml").to_string())
        .collect();
    v.sort();
    v
}

/// A fixture loaded with the real loader (its CA/policy files read relative to it).
pub(crate) fn fixture(name: &str) -> Loaded {
    clusterctl_spec::load(&fixtures_dir().join(format!("{name}.yaml")))
        .unwrap_or_else(|d| panic!("fixture {name} does not load: {}", d.summary()))
}

/// Every input: ("profile:<name>" | "fixture:<name>", loaded).
pub(crate) fn inputs() -> Vec<(String, Loaded)> {
    let mut v = Vec::new();
    for (name, _) in clusterctl_spec::profiles() {
        let l = clusterctl_spec::from_profile(name)
            .unwrap_or_else(|d| panic!("profile {name}: {}", d.summary()));
        v.push((format!("profile:{name}"), l));
    }
    for name in fixture_names() {
        v.push((format!("fixture:{name}"), fixture(&name)));
    }
    v
}

/// Validates `loaded`, panicking with every diagnostic when it does not validate.
pub(crate) fn valid(label: &str, loaded: &Loaded) -> ValidCluster {
    match validate(loaded) {
        Ok(v) => v.cluster,
        Err(d) => panic!("{label} does not validate: {}\n{d:?}", d.summary()),
    }
}

/// `loaded` with its `kubernetesVersion:` line replaced by `version`.
pub(crate) fn with_version(loaded: &Loaded, version: &str) -> Loaded {
    let mut l = loaded.clone();
    // `airgap.packages[]` entries tagged with the file's own version follow it (a tag must name the
    // file's version or an extraVersions entry).
    let own = l
        .source_text
        .lines()
        .map(str::trim)
        .find_map(|t| t.strip_prefix("kubernetesVersion:"))
        .map(|v| format!(", kubernetesVersion: {}, ", v.trim()));
    let text: Vec<String> = l
        .source_text
        .lines()
        .map(|line| {
            let t = line.trim_start();
            if t.starts_with("kubernetesVersion:") {
                let indent = &line[..line.len() - t.len()];
                format!("{indent}kubernetesVersion: {version}")
            } else if let Some(own) = own.as_deref().filter(|o| line.contains(*o)) {
                line.replace(own, &format!(", kubernetesVersion: {version}, "))
            } else {
                line.to_string()
            }
        })
        .collect();
    l.source_text = text.join("\n") + "\n";
    l
}

/// The newest patch of every supported minor, as `v1.X.Y`.
pub(crate) fn supported_minors() -> Vec<String> {
    let mut minors: Vec<u64> = clusterctl_spec::versions::SUPPORTED
        .iter()
        .map(|r| r.minor)
        .collect();
    minors.dedup();
    minors
        .into_iter()
        .filter_map(clusterctl_spec::versions::newest_patch)
        .map(|v| format!("v{v}"))
        .collect()
}
