//! `node remove`'s kube-vip handover, the first step of a control plane's `reset` in a cluster with a
//! VIP: kube-vip's static pod is stopped (its manifest removed) and, while the node's API server and
//! etcd member still serve, the step waits until no kube-vip lease (`plndr-*` in `kube-system`: the
//! control-plane VIP's and the LoadBalancer Services') names the node — kube-vip, stopped, releases
//! them itself and takes the VIP off; another control plane's kube-vip takes them within its retry
//! period — then takes the VIP off its interfaces if it is still there. Without it `kubeadm reset` first removes the etcd member — the node's API server, still
//! behind the VIP, stops answering — and then kills kube-vip without a handover: the API through the
//! VIP was away for kube-vip's whole lease (4.7 s measured on the real HA cluster, the lease being
//! 5 s) and the address stayed on the reset node until the `network` step.

use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::steps::printed;
use clusterctl_exec::shell::quote_word;

/// The kube-vip static pod manifest on a control plane.
pub(crate) const MANIFEST: &str = "/etc/kubernetes/manifests/kube-vip.yaml";

/// How long the handover waits for another control plane to take the leases (kube-vip's lease is
/// 5 s, its retry period 1 s).
pub(crate) const WAIT_SECS: u32 = 30;

/// The handover script for `node` and `vip` with the manifest at `manifest`: prints what it did.
pub(crate) fn script(node: &str, vip: &str, manifest: &str) -> String {
    let (n, m) = (quote_word(node), quote_word(manifest));
    format!(
        "out=''; if [ ! -e {m} ]; then echo 'no kube-vip static pod'; exit 0; fi; \
         rm -f {m}; out='static pod stopped;'; \
         held() {{ l=$({kubectl} -n kube-system get lease -o jsonpath='{{range .items[*]}}{{.metadata.name}}={{.spec.holderIdentity}}{{\"\\n\"}}{{end}}' 2>/dev/null) || return 0; \
         printf '%s\\n' \"$l\" | awk -F= -v n={n} '$1 ~ /^plndr-/ && $2 == n {{f = 1}} END {{exit !f}}'; }}; \
         i=0; while held && [ $i -lt {WAIT_SECS} ]; do sleep 1; i=$((i + 1)); done; \
         if held; then out=\"$out its leases not taken over after {WAIT_SECS}s;\"; \
         else out=\"$out its leases released after ${{i}}s;\"; fi; \
         {vip}echo \"$out\"",
        kubectl = crate::up::KUBECTL,
        vip = crate::destroy::scripts::vip_script(vip),
    )
}

/// The handover on the node of `ctx`; its step line's text.
pub(crate) fn handover(ctx: &mut NodeCtx, vip: &str) -> Result<String, PhaseError> {
    let node = ctx.name().to_string();
    Ok(printed(ctx.run_script(&script(&node, vip, MANIFEST))?))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    /// A directory with stand-ins for `kubectl` (the leases: held by `cp1` for the first `held`
    /// answers, then by `cp2`) and `ip` (the VIP on eth0 until deleted).
    fn stand_ins(held_for: u32) -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().display();
        let kubectl = format!(
            "#!/bin/sh\nn=$(cat {p}/calls 2>/dev/null || echo 0); echo $((n + 1)) > {p}/calls\n\
             if [ $n -lt {held_for} ]; then h=cp1; else h=cp2; fi\n\
             printf 'plndr-cp-lock=%s\\nplndr-svcs-lock=%s\\nother=cp1\\n' $h $h\n"
        );
        let ip = format!(
            "#!/bin/sh\nif [ \"$1\" = addr ] && [ \"$2\" = del ]; then echo \"$3 $5\" > {p}/deleted; exit 0; fi\n\
             [ -e {p}/deleted ] || echo '2: eth0    inet 10.0.0.250/32 scope global eth0'\n"
        );
        for (name, body) in [("kubectl", kubectl), ("ip", ip)] {
            let f = d.path().join(name);
            std::fs::write(&f, body).expect("stand-in");
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        std::fs::write(d.path().join("kube-vip.yaml"), "manifest").expect("manifest");
        d
    }

    fn run(d: &tempfile::TempDir) -> String {
        let manifest = d.path().join("kube-vip.yaml");
        let s = super::script("cp1", "10.0.0.250", &manifest.to_string_lossy());
        let path = format!("{}:{}", d.path().display(), std::env::var("PATH").unwrap());
        let out = Command::new("sh")
            .args(["-c", &s])
            .env("PATH", path)
            .output()
            .expect("sh");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn stops_kube_vip_waits_for_the_leases_to_move_then_drops_the_vip() {
        let d = stand_ins(2);
        let out = run(&d);
        assert!(!d.path().join("kube-vip.yaml").exists(), "manifest removed");
        assert_eq!(
            out,
            "static pod stopped; its leases released after 2s; address 10.0.0.250/32 removed from eth0;"
        );
        let deleted = std::fs::read_to_string(d.path().join("deleted")).expect("ip addr del");
        assert_eq!(deleted.trim(), "10.0.0.250/32 eth0");
        // Without a manifest nothing is done.
        assert_eq!(run(&d), "no kube-vip static pod");
    }

    #[test]
    fn the_vip_is_never_taken_off_before_the_leases_moved() {
        let s = super::script("cp1", "10.0.0.250", super::MANIFEST);
        let wait = s.find("while held").expect("wait");
        let del = s.find("ip addr del").expect("vip removal");
        assert!(s.find("rm -f").expect("rm") < wait && wait < del, "{s}");
        assert!(
            s.contains("kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get lease")
        );
    }
}
