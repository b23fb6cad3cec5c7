//! `arch` (an error): with the builtin CNI, `up` places its own binary on every node as the CNI agent
//! and plugin (`up::cni`). A node whose architecture (`uname -m`, from the facts) differs from this
//! binary's gets a program it cannot run — unless the bundle (`airgap.bundle`) carries the agent for
//! that architecture (`airgap bundle --agent ARCH=PATH`), which `up` then places on it instead.

use super::Finding;

/// This binary's architecture, as OCI names it (`amd64`, `arm64`).
pub(crate) fn local_arch() -> String {
    clusterctl_airgap::node::oci_arch(std::env::consts::ARCH)
}

/// The `arch` finding for a node reporting `uname_m` when the builtin CNI places this binary (of
/// architecture `local`) on it and the bundle carries agents for `carried` (OCI names); `None` when
/// the architectures agree, the bundle carries the node's, another CNI is used, or the node's
/// architecture is unknown (offline).
pub(super) fn agent_arch(
    uname_m: &str,
    local: &str,
    builtin_cni: bool,
    carried: &[String],
) -> Option<Finding> {
    let node = clusterctl_airgap::node::oci_arch(uname_m);
    if !builtin_cni || uname_m.trim().is_empty() || node == local || carried.contains(&node) {
        return None;
    }
    Some(Finding {
        id: "arch".into(),
        message: format!(
            "the node is {node} (`uname -m`: {}) but this clusterctl is built for {local}: the builtin CNI's agent and plugin `up` places on every node are this binary and would not run there. Either run `up` with a clusterctl built for {node} (install.sh on a {node} machine, or the release's {node} build) when every node is {node}, or carry the {node} agent in the bundle — `clusterctl airgap bundle -f FILE --agent {node}=PATH-TO-CLUSTERCTL-FOR-{node}` with `airgap.bundle` in the file — and `up` places it on the {node} nodes",
            uname_m.trim()
        ),
        fix: None,
        warning: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_architecture_is_refused_unless_the_bundle_carries_it() {
        let f = agent_arch("aarch64\n", "amd64", true, &[]).expect("refused");
        assert_eq!(f.id, "arch");
        assert!(
            f.message
                .contains("the node is arm64 (`uname -m`: aarch64)")
                && f.message.contains("built for amd64")
                && f.message.contains("--agent arm64="),
            "{}",
            f.message
        );
        assert_eq!(
            agent_arch("aarch64", "amd64", true, &["arm64".into()]),
            None
        );
        assert_eq!(agent_arch("x86_64", "amd64", true, &[]), None);
        assert_eq!(agent_arch("aarch64", "amd64", false, &[]), None);
        assert_eq!(agent_arch("", "amd64", true, &[]), None);
        assert!(agent_arch("i686", "amd64", true, &[]).is_some());
    }
}
