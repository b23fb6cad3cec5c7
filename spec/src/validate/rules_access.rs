//! How the nodes are reached: `spec.ssh.bastion` (the jump host) — required address (a host name or
//! IP literal, no user or port folded into it), port, user, key file and host-key policy (never
//! `insecure`), and only with the ssh provider.

use std::net::IpAddr;

use crate::diag::Diagnostic;
use crate::model::{ClusterFile, HostKeyPolicy, SshBastion};

use super::Ctx;

/// Checks `spec.ssh.bastion` when the file gives one.
pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    let Some(b) = &file.spec.ssh.bastion else {
        return;
    };
    if file.spec.provider.node_containers() {
        ctx.push(
            Diagnostic::error(
                "spec::ssh-bastion",
                "a bastion is used only by the ssh provider; docker node containers are reached through the Docker engine",
            )
            .help("remove spec.ssh.bastion, or use `provider: ssh`")
            .at("spec.ssh.bastion#key"),
        );
    }
    check_address(ctx, b);
    if b.port == Some(0) {
        ctx.push(
            Diagnostic::error("spec::ssh-bastion", "bastion port 0 is not valid")
                .help("use 1–65535 (usually 22), or remove the field for 22")
                .at("spec.ssh.bastion.port"),
        );
    }
    if b.user.as_deref().is_some_and(|u| u.trim().is_empty()) {
        ctx.push(
            Diagnostic::error("spec::ssh-bastion", "bastion user is empty")
                .help("give the bastion's login user, or remove the field to use spec.ssh.user")
                .at("spec.ssh.bastion.user"),
        );
    }
    if b.key_file.as_deref().is_some_and(|k| k.trim().is_empty()) {
        ctx.push(
            Diagnostic::error("spec::ssh-bastion", "bastion keyFile is empty")
                .help("give a key file path, or remove the field to use spec.ssh.keyFile (else the SSH agent)")
                .at("spec.ssh.bastion.keyFile"),
        );
    }
    if b.host_key_policy == Some(HostKeyPolicy::Insecure) {
        ctx.push(super::rules_runtime::insecure_host_keys(
            "spec.ssh.bastion.hostKeyPolicy",
        ));
    }
}

/// The address: given, and a host name or an IP literal (not `user@host`, `host:port`, a URL).
fn check_address(ctx: &mut Ctx<'_>, b: &SshBastion) {
    let a = b.address.trim();
    if a.is_empty() {
        ctx.push(
            Diagnostic::error("spec::ssh-bastion", "the bastion has no address")
                .help("give the jump host's name or IP address as the machine running clusterctl reaches it, e.g. `bastion: {address: jump.example.com}`")
                .at("spec.ssh.bastion.address"),
        );
        return;
    }
    if a.parse::<IpAddr>().is_ok() || is_host_name(a) {
        return;
    }
    let hint = if a.contains('@') {
        "give the login user in `user`, not in the address"
    } else if a.contains("://") {
        "give a host name or IP address, not a URL"
    } else if a.contains(':') {
        "give the port in `port`, not in the address (IPv6 literals are written bare)"
    } else {
        "give a host name (letters, digits, `-` and `.`) or an IP address"
    };
    ctx.push(
        Diagnostic::error(
            "spec::ssh-bastion",
            format!("bastion address {a:?} is not a host name or IP address"),
        )
        .help(hint)
        .at("spec.ssh.bastion.address"),
    );
}

/// A DNS name: dot-separated labels of letters, digits and `-`, none empty or starting/ending in `-`.
fn is_host_name(s: &str) -> bool {
    s.len() <= 253
        && s.trim_end_matches('.').split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::is_host_name;

    #[test]
    fn host_names() {
        for ok in ["jump", "jump.example.com", "a-b.c", "jump.example.com."] {
            assert!(is_host_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a..b",
            "root@jump",
            "jump:22",
            "a b",
            "ssh://jump",
        ] {
            assert!(!is_host_name(bad), "{bad}");
        }
    }
}
