//! Version rules of `clusterctl upgrade` and `up`: Kubernetes supports upgrading one minor at a time and
//! never going down (kubeadm's upgrade policy and the version skew policy, kubernetes.io "Version Skew
//! Policy"). Versions are `MAJOR.MINOR.PATCH`, with or without a leading `v`; a pre-release or build
//! suffix (`v1.34.1-standin`, `+k3s1`) is ignored for these rules. Also reading the control plane's
//! running version from the kube-apiserver static pod manifest kubeadm writes. A module of its own
//! because `up`'s rollouts and `upgrade` both read it (`upgrade::version` re-exports it), so neither
//! imports the other for it.

pub use semver::Version;

/// Why a version is not one, or a step between two is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// Not `MAJOR.MINOR.PATCH`.
    #[error("`{0}` is not an exact Kubernetes version MAJOR.MINOR.PATCH (e.g. 1.35.0)")]
    NotExact(String),
    /// The target is older than what runs.
    #[error("{what} runs v{current}, newer than the target v{target}: going down is not supported (kubeadm cannot downgrade; restore the etcd snapshot taken before the upgrade instead)")]
    Down {
        /// What runs `current` (`the control plane`, `node w1`).
        what: String,
        /// The running version.
        current: Version,
        /// The target version.
        target: Version,
    },
    /// Another major version.
    #[error(
        "{what} runs v{current}: upgrading across a major version to v{target} is not supported"
    )]
    Major {
        /// What runs `current`.
        what: String,
        /// The running version.
        current: Version,
        /// The target version.
        target: Version,
    },
    /// More than one minor up.
    #[error("{what} runs v{current}: v{target} skips a minor; upgrade one minor at a time (first to 1.{}.x)", current.minor + 1)]
    SkipsMinor {
        /// What runs `current`.
        what: String,
        /// The running version.
        current: Version,
        /// The target version.
        target: Version,
    },
}

/// Parses `1.34.1`/`v1.34.1` (suffixes after the patch number ignored). Errors: not three numbers.
pub fn parse(text: &str) -> Result<Version, VersionError> {
    let t = clusterctl_spec::versions::untagged(text.trim());
    let core = t.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    let nums: Vec<u64> = parts.iter().filter_map(|p| p.parse().ok()).collect();
    if parts.len() != 3 || nums.len() != 3 {
        return Err(VersionError::NotExact(text.to_string()));
    }
    Ok(Version::new(nums[0], nums[1], nums[2]))
}

/// Checks that `current` (a node's or the control plane's version) may be upgraded to `target`: same
/// version (nothing to do), a higher patch of the same minor, or any patch of the next minor.
/// Errors: going down, skipping a minor, or a different major.
pub fn check_step(what: &str, current: &Version, target: &Version) -> Result<(), VersionError> {
    let (what, current, target) = (what.to_string(), current.clone(), target.clone());
    if current > target {
        return Err(VersionError::Down {
            what,
            current,
            target,
        });
    }
    if current.major != target.major {
        return Err(VersionError::Major {
            what,
            current,
            target,
        });
    }
    if target.minor > current.minor + 1 {
        return Err(VersionError::SkipsMinor {
            what,
            current,
            target,
        });
    }
    Ok(())
}

/// The version tag of the `kube-apiserver` image in a static pod manifest (`image:
/// registry.k8s.io/kube-apiserver:v1.34.1` → `1.34.1`), if it names one.
pub fn apiserver_manifest_version(manifest: &str) -> Option<Version> {
    manifest.lines().find_map(|l| {
        let img = l
            .trim()
            .trim_start_matches("- ")
            .strip_prefix("image:")?
            .trim();
        let img = img.trim_matches(['"', '\'']);
        let (repo, tag) = img.rsplit_once(':')?;
        if !repo.ends_with("kube-apiserver") {
            return None;
        }
        parse(tag).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        parse(s).expect("version")
    }

    #[test]
    fn parses_with_and_without_v_and_suffix() {
        assert_eq!(v("v1.34.1"), Version::new(1, 34, 1));
        assert_eq!(v("1.35.0-standin"), Version::new(1, 35, 0));
        assert!(parse("1.35").is_err());
        assert!(parse("latest").is_err());
    }

    #[test]
    fn one_minor_at_a_time_never_down() {
        check_step("cluster", &v("1.34.1"), &v("1.35.0")).expect("next minor");
        check_step("cluster", &v("1.34.1"), &v("1.34.3")).expect("patch");
        check_step("cluster", &v("1.35.0"), &v("1.35.0")).expect("same");
        let skip = check_step("cluster", &v("1.33.5"), &v("1.35.0"))
            .expect_err("skip")
            .to_string();
        assert!(
            skip.contains("skips a minor") && skip.contains("1.34.x"),
            "{skip}"
        );
        let down = check_step("node w1", &v("1.35.1"), &v("1.35.0"))
            .expect_err("down")
            .to_string();
        assert!(
            down.contains("going down") && down.contains("node w1"),
            "{down}"
        );
        assert!(check_step("c", &v("1.34.0"), &v("2.0.0")).is_err());
    }

    #[test]
    fn reads_the_apiserver_image_tag() {
        let m = "spec:\n  containers:\n  - command: [kube-apiserver]\n    image: registry.k8s.io/kube-apiserver:v1.34.1\n";
        assert_eq!(apiserver_manifest_version(m), Some(Version::new(1, 34, 1)));
        let mirror = "    image: \"harbor.example.com:5000/library/kube-apiserver:v1.35.2\"\n";
        assert_eq!(
            apiserver_manifest_version(mirror),
            Some(Version::new(1, 35, 2))
        );
        assert_eq!(apiserver_manifest_version("image: etcd:3.5.0-0\n"), None);
    }
}
