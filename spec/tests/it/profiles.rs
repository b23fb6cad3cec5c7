//! Every built-in profile validates with no error, and resolves the facts other crates rely on.

use clusterctl_spec::{from_profile, profiles, validate};

#[test]
fn every_profile_validates_without_errors() {
    for (name, _) in profiles() {
        let loaded = from_profile(name).unwrap_or_else(|d| panic!("{name}: {d}"));
        match validate(&loaded) {
            Ok(v) => {
                assert!(v.cluster.first_control_plane().is_control_plane(), "{name}");
                assert!(v.cluster.control_planes().count() >= 1, "{name}");
                for w in &v.warnings {
                    eprintln!("{name}: {w}");
                }
            }
            Err(d) => panic!("profile {name} does not validate:\n{d}"),
        }
    }
}
