//! `preflight`: every check of a node in one read-only round trip, every failure listed at once, and
//! with `--fix` the fixable ones applied (swap off and commented out of fstab, `overlay`/`br_netfilter`
//! loaded and persisted, the forwarding and bridge-netfilter sysctls set and persisted, firewalld
//! disabled and SELinux set permissive on EL hosts as the seed does, time sync enabled). Checks follow
//! kubeadm's own preflight (swap, ports, cgroups, kernel) and the container runtime prerequisites of the
//! Kubernetes documentation ("Container Runtimes", "Install and configure prerequisites").

use super::{NodeFacts, UpData};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::model::Role;

/// Read-only probe script; prints `key=value` lines. A module counts as loaded when what it provides
/// is there, so that modules built into the kernel (no `/sys/module/<name>` without parameters) and
/// nodes in containers (which cannot load modules but share the host's kernel) are judged truthfully:
/// `overlay` — the `overlay` file system in `/proc/filesystems`; `br_netfilter` — the
/// `net.bridge.bridge-nf-call-iptables` sysctl it registers.
pub const PREFLIGHT_SCRIPT: &str = r#"echo "swap=$(tail -n +2 /proc/swaps 2>/dev/null | wc -l)"
if [ -d /sys/module/overlay ] || grep -qw overlay /proc/filesystems 2>/dev/null; then echo mod_overlay=1; else echo mod_overlay=0; fi
if [ -d /sys/module/br_netfilter ] || [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then echo mod_br_netfilter=1; else echo mod_br_netfilter=0; fi
echo "ip_forward=$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null)"
echo "bnf4=$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)"
echo "bnf6=$(cat /proc/sys/net/bridge/bridge-nf-call-ip6tables 2>/dev/null)"
awk 'FNR>1 && $4=="0A" {split($2,a,":"); print "listen=" a[2]}' /proc/net/tcp /proc/net/tcp6 2>/dev/null
echo "ntp=$(timedatectl show -p NTPSynchronized --value 2>/dev/null)"
echo "container=$(systemd-detect-virt -c 2>/dev/null)"
echo "firewalld=$(systemctl is-active firewalld 2>/dev/null)"
echo "selinux=$(getenforce 2>/dev/null)"
echo "kubeadm=$(command -v kubeadm)"
echo "kubelet=$(command -v kubelet)"
true"#;

/// One preflight finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Stable id (`swap`, `module/overlay`, `sysctl/net.ipv4.ip_forward`, `ports`, `cgroup-driver`,
    /// `cgroup-version`, `time-sync`, `kernel`, `os`, `firewalld`, `selinux`, `tools`).
    pub id: String,
    /// What is wrong.
    pub message: String,
    /// The fix run by `--fix`, when there is one.
    pub fix: Option<String>,
    /// Reported but does not stop `up`.
    pub warning: bool,
}

/// Parsed probe output.
#[derive(Debug, Clone, Default)]
pub struct Probe {
    swap: u32,
    modules: Vec<(String, bool)>,
    sysctls: Vec<(String, String)>,
    listening: Vec<u16>,
    ntp: String,
    container: String,
    firewalld: String,
    selinux: String,
    kubeadm: String,
    kubelet: String,
}

/// Parses the output of [`PREFLIGHT_SCRIPT`].
pub fn parse(out: &str) -> Probe {
    let mut p = Probe::default();
    for line in out.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim();
        match k {
            "swap" => p.swap = v.parse().unwrap_or(0),
            "mod_overlay" | "mod_br_netfilter" => p.modules.push((k[4..].to_string(), v == "1")),
            "ip_forward" => p.sysctls.push(("net.ipv4.ip_forward".into(), v.into())),
            "bnf4" => p
                .sysctls
                .push(("net.bridge.bridge-nf-call-iptables".into(), v.into())),
            "bnf6" => p
                .sysctls
                .push(("net.bridge.bridge-nf-call-ip6tables".into(), v.into())),
            "listen" => {
                if let Ok(port) = u16::from_str_radix(v, 16) {
                    p.listening.push(port);
                }
            }
            "ntp" => p.ntp = v.into(),
            "container" => p.container = v.into(),
            "firewalld" => p.firewalld = v.into(),
            "selinux" => p.selinux = v.into(),
            "kubeadm" => p.kubeadm = v.into(),
            "kubelet" => p.kubelet = v.into(),
            _ => {}
        }
    }
    p
}

/// Ports kubeadm needs free on a node of `role` that is not yet part of a cluster.
pub fn required_ports(role: Role) -> &'static [u16] {
    match role {
        Role::ControlPlane => &[6443, 2379, 2380, 10250, 10257, 10259],
        Role::Worker => &[10250],
    }
}

fn kernel_at_least(kernel: &str, major: u64, minor: u64) -> Option<bool> {
    let mut it = kernel
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty());
    let a: u64 = it.next()?.parse().ok()?;
    let b: u64 = it.next()?.parse().ok()?;
    Some((a, b) >= (major, minor))
}

fn minor_version(v: &str) -> Option<(u64, u64)> {
    let v = v.trim_start_matches('v');
    let mut it = v.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Evaluates the probe against the node's facts. `kubelet_allows_cgroup_v1`: the rendered kubelet
/// configuration sets `failCgroupV1: false` (needed on cgroup v1 hosts from Kubernetes 1.35).
pub fn evaluate(
    role: Role,
    facts: &NodeFacts,
    p: &Probe,
    k8s_version: &str,
    kubelet_allows_cgroup_v1: bool,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut push = |id: &str, message: String, fix: Option<String>, warning: bool| {
        out.push(Finding {
            id: id.into(),
            message,
            fix,
            warning,
        })
    };
    let el = facts.os_like.contains("rhel")
        || ["rhel", "rocky", "almalinux", "centos"].contains(&facts.os_id.as_str());
    let supported = match facts.os_id.as_str() {
        "debian" => facts
            .os_version
            .parse::<u32>()
            .map(|v| v >= 11)
            .unwrap_or(true),
        "ubuntu" => minor_version(&facts.os_version)
            .map(|v| v >= (20, 4))
            .unwrap_or(true),
        _ => {
            el && facts
                .os_version
                .split('.')
                .next()
                .and_then(|m| m.parse::<u32>().ok())
                .is_some_and(|m| m >= 9)
        }
    };
    if !supported {
        push(
            "os",
            format!(
                "unsupported OS `{} {}` (Debian ≥ 11, Ubuntu ≥ 20.04, EL 9)",
                facts.os_id, facts.os_version
            ),
            None,
            false,
        );
    }
    if p.swap > 0 {
        push(
            "swap",
            format!(
                "{} swap device(s) active; the kubelet needs swap off",
                p.swap
            ),
            Some(crate::undo::SWAP_FIX.into()),
            false,
        );
    }
    for (m, loaded) in &p.modules {
        if !loaded {
            push(&format!("module/{m}"), format!("kernel module {m} not loaded"),
                Some(format!("modprobe {m} && (grep -qx {m} /etc/modules-load.d/clusterctl.conf 2>/dev/null || echo {m} >> /etc/modules-load.d/clusterctl.conf)")), false);
        }
    }
    for (k, v) in &p.sysctls {
        if v != "1" {
            let shown = if v.is_empty() { "missing" } else { v.as_str() };
            push(&format!("sysctl/{k}"), format!("sysctl {k} is {shown}, must be 1"),
                Some(format!("mkdir -p /etc/sysctl.d && (grep -qx '{k} = 1' /etc/sysctl.d/99-clusterctl.conf 2>/dev/null || echo '{k} = 1' >> /etc/sysctl.d/99-clusterctl.conf) && sysctl -w {k}=1")), false);
        }
    }
    if !facts.has_kubelet_conf {
        let busy: Vec<String> = required_ports(role)
            .iter()
            .filter(|p2| p.listening.contains(p2))
            .map(|p2| p2.to_string())
            .collect();
        if !busy.is_empty() {
            push(
                "ports",
                format!("port(s) {} already in use", busy.join(", ")),
                None,
                false,
            );
        }
    }
    if !facts.init.is_empty() && facts.init != "systemd" {
        push(
            "cgroup-driver",
            format!(
                "PID 1 is `{}`; the systemd cgroup driver needs systemd",
                facts.init
            ),
            None,
            false,
        );
    }
    if facts.cgroup_version == 1 {
        let needs = minor_version(k8s_version).is_some_and(|v| v >= (1, 35));
        if needs && !kubelet_allows_cgroup_v1 {
            push("cgroup-version", format!("cgroup v1 host: Kubernetes {k8s_version} needs cgroup v2 or the kubelet's `failCgroupV1: false`"), None, false);
        } else {
            push(
                "cgroup-version",
                "cgroup v1 host (deprecated by Kubernetes; cgroup v2 recommended)".into(),
                None,
                true,
            );
        }
    }
    let in_container = !p.container.is_empty() && p.container != "none";
    if p.ntp != "yes" && in_container {
        // The kernel clock is the host's: a container can neither run a time daemon on it nor set it.
        push("time-sync", format!("clock not reported synchronised (timedatectl NTPSynchronized); this node is a {} container sharing the host's kernel clock: synchronise the host", p.container),
            None, true);
    } else if p.ntp != "yes" {
        push("time-sync", "clock not reported synchronised (timedatectl NTPSynchronized)".into(),
            Some("systemctl enable --now chronyd 2>/dev/null || systemctl enable --now systemd-timesyncd".into()), true);
    }
    if kernel_at_least(&facts.kernel, 4, 19) == Some(false) {
        push(
            "kernel",
            format!("kernel {} is older than 4.19", facts.kernel),
            None,
            false,
        );
    }
    if el && p.firewalld == "active" {
        push(
            "firewalld",
            "firewalld is active".into(),
            Some("systemctl disable --now firewalld.service".into()),
            false,
        );
    }
    if p.selinux == "Enforcing" {
        push("selinux", "SELinux is enforcing".into(),
            Some("setenforce 0 && sed -i 's/^SELINUX=enforcing$/SELINUX=permissive/' /etc/selinux/config".into()), false);
    }
    let mut missing = Vec::new();
    if p.kubeadm.is_empty() {
        missing.push("kubeadm");
    }
    if p.kubelet.is_empty() {
        missing.push("kubelet");
    }
    if !missing.is_empty() {
        push(
            "tools",
            format!(
                "{} not installed (install the packages, or `clusterctl airgap import`)",
                missing.join(" and ")
            ),
            None,
            false,
        );
    }
    out
}

/// The `preflight` phase. Errors: [`PhaseError::Check`] listing every blocking failure left (each with
/// `(fixable with --fix)` when it is), or a fix command's failure.
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(out) = ctx.read(PREFLIGHT_SCRIPT)? else {
        if ctx.mode.fix {
            ctx.info("--fix: the fix of every failed check is applied");
        }
        return Ok(());
    };
    let facts = data.facts_of(ctx.name());
    let allows_v1 = data
        .files
        .read()
        .ok()
        .and_then(|f| {
            f.get(ctx.name()).map(|v| {
                v.iter()
                    .any(|x| String::from_utf8_lossy(&x.content).contains("failCgroupV1: false"))
            })
        })
        .unwrap_or(false);
    let findings = evaluate(
        ctx.node.role,
        &facts,
        &parse(&out),
        &data.spec.kubernetes_version,
        allows_v1,
    );
    let mut problems = Vec::new();
    for f in findings {
        let ignored = data.spec.ignore_preflight.iter().any(|i| i == &f.id);
        if ctx.mode.fix {
            if let Some(fix) = &f.fix {
                ctx.run_script(fix)?;
                continue;
            }
        }
        if f.warning || ignored {
            ctx.reporter().note(&format!(
                "[{}] preflight warning: {}: {}",
                ctx.name(),
                f.id,
                f.message
            ));
            ctx.info(&format!("warning: {}: {}", f.id, f.message));
        } else {
            let hint = if f.fix.is_some() {
                " (fixable with --fix)"
            } else {
                ""
            };
            problems.push(format!("{}: {}{hint}", f.id, f.message));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ctx.check_error(problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> NodeFacts {
        NodeFacts {
            os_id: "debian".into(),
            os_version: "12".into(),
            kernel: "6.1.0-28-amd64".into(),
            cgroup_version: 2,
            init: "systemd".into(),
            known: true,
            ..Default::default()
        }
    }

    #[test]
    fn a_good_node_has_no_findings() {
        let p = parse("swap=0\nmod_overlay=1\nmod_br_netfilter=1\nip_forward=1\nbnf4=1\nbnf6=1\nntp=yes\nkubeadm=/usr/bin/kubeadm\nkubelet=/usr/bin/kubelet\n");
        assert_eq!(
            evaluate(Role::ControlPlane, &facts(), &p, "1.34.1", false),
            vec![]
        );
    }

    #[test]
    fn a_container_nodes_clock_is_the_hosts() {
        let p = parse("swap=0\nmod_overlay=1\nmod_br_netfilter=1\nip_forward=1\nbnf4=1\nbnf6=1\nntp=no\ncontainer=docker\nkubeadm=/usr/bin/kubeadm\nkubelet=/usr/bin/kubelet\n");
        let f = evaluate(Role::Worker, &facts(), &p, "1.34.1", false);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, "time-sync");
        assert!(f[0].warning && f[0].fix.is_none(), "{f:?}");
        assert!(f[0].message.contains("docker container"), "{f:?}");
    }

    #[test]
    fn every_failure_is_listed() {
        let p = parse("swap=1\nmod_overlay=1\nmod_br_netfilter=0\nip_forward=0\nbnf4=\nbnf6=1\nlisten=192B\nntp=no\nfirewalld=active\nselinux=Enforcing\nkubeadm=\nkubelet=/usr/bin/kubelet\n");
        let mut f = facts();
        f.cgroup_version = 1;
        f.os_id = "rocky".into();
        f.os_version = "9.6".into();
        let ids: Vec<String> = evaluate(Role::ControlPlane, &f, &p, "v1.35.0", false)
            .into_iter()
            .map(|f| f.id)
            .collect();
        assert_eq!(
            ids,
            [
                "swap",
                "module/br_netfilter",
                "sysctl/net.ipv4.ip_forward",
                "sysctl/net.bridge.bridge-nf-call-iptables",
                "ports",
                "cgroup-version",
                "time-sync",
                "firewalld",
                "selinux",
                "tools"
            ]
        );
        // 0x192B = 6443 is in use; a node already in the cluster does not check ports.
        f.has_kubelet_conf = true;
        assert!(!evaluate(Role::ControlPlane, &f, &p, "1.35.0", true)
            .iter()
            .any(|x| x.id == "ports" || (x.id == "cgroup-version" && !x.warning)));
    }
}
