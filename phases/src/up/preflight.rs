//! `preflight`: every check of a node in one read-only round trip, every failure listed at once, and
//! with `--fix` the fixable ones applied (swap off and commented out of fstab, `overlay`/`br_netfilter`
//! loaded and persisted, the forwarding and bridge-netfilter sysctls set and persisted, firewalld
//! disabled and SELinux set permissive on EL hosts as the seed does, time sync enabled). Checks follow
//! kubeadm's own preflight (swap, ports, cgroups, kernel) and the container runtime prerequisites of the
//! Kubernetes documentation ("Container Runtimes", "Install and configure prerequisites"). Whether
//! kubeadm and kubelet are installed (at the file's version) is checked by `packages`, which runs after
//! preflight and may install them.

use super::{NodeFacts, UpData};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use clusterctl_spec::model::{CniPlugin, Role, RuntimeKind};
use serde::Deserialize;

pub(crate) mod arch;
pub(crate) mod cni_switch;
mod runtime_vip;

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
echo "capeff=$(awk '$1=="CapEff:"{print $2}' /proc/self/status 2>/dev/null)"
echo "cgroup_ro=$(findmnt -rn -o OPTIONS -t cgroup,cgroup2 2>/dev/null | grep -c '^ro')"
echo "runc=$(runc --version 2>/dev/null | awk 'NR==1{print $3}')"
echo "cni_bin=$(ls /opt/cni/bin 2>/dev/null | tr '\n' ' ')"
true"#;

/// The probe of the resolver file the kubelet hands pods with `dnsPolicy: Default` (CoreDNS): `path`
/// when the kubelet configuration names one, else `/etc/resolv.conf` — or systemd-resolved's upstream
/// file when it is active, as kubeadm picks it. Prints `resolv_file=`, `resolv_missing=1` and
/// `resolv_ns=<nameservers>`.
pub fn resolv_script(path: Option<&str>) -> String {
    let chosen = match path {
        Some(p) => format!("rc={}", clusterctl_exec::shell::quote_word(p)),
        None => "if [ \"$(systemctl is-active systemd-resolved 2>/dev/null)\" = active ]; then rc=/run/systemd/resolve/resolv.conf; else rc=/etc/resolv.conf; fi".into(),
    };
    format!(
        "{chosen}\necho \"resolv_file=$rc\"\n[ -r \"$rc\" ] || echo resolv_missing=1\necho \"resolv_ns=$(awk '$1==\"nameserver\"{{printf \"%s \", $2}}' \"$rc\" 2>/dev/null)\"\ntrue"
    )
}

/// A rendered host file present only with `nodeEnvironment: unprivileged-container` (render's
/// `host::KMSG_TMPFILES_PATH`): its presence tells preflight the node settings for unprivileged
/// containers are rendered.
pub const NODE_ENVIRONMENT_MARKER: &str = "/etc/tmpfiles.d/clusterctl-kmsg.conf";

/// Linux capability numbers read from `CapEff`.
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_RESOURCE: u32 = 24;

/// Every preflight check id, as `--ignore-preflight` names them ([`Finding::id`]); `unknown_ids`
/// refuses any other.
pub const CHECK_IDS: &[&str] = &[
    "os",
    "kernel",
    "swap",
    "module/overlay",
    "module/br_netfilter",
    "sysctl/net.ipv4.ip_forward",
    "sysctl/net.bridge.bridge-nf-call-iptables",
    "sysctl/net.bridge.bridge-nf-call-ip6tables",
    "ports",
    "cgroup-driver",
    "cgroup-version",
    "time-sync",
    "firewalld",
    "selinux",
    "node-environment",
    "container-cgroups",
    "container-ptrace",
    "resolv-conf",
    "cni-plugins",
    "cri-sockets",
    "vip-interface",
    "cni-switch",
    "arch",
];

/// The entries of `ignored` (`--ignore-preflight`) that name no preflight check ([`CHECK_IDS`]), in
/// their order: a typo would otherwise silently ignore nothing.
pub fn unknown_ids(ignored: &[String]) -> Vec<&str> {
    ignored
        .iter()
        .map(String::as_str)
        .filter(|i| !CHECK_IDS.contains(i))
        .collect()
}

/// One preflight finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Stable id (`swap`, `module/overlay`, `sysctl/net.ipv4.ip_forward`, `ports`, `cgroup-driver`,
    /// `cgroup-version`, `time-sync`, `kernel`, `os`, `firewalld`, `selinux`, `node-environment`,
    /// `container-cgroups`, `container-ptrace`, `resolv-conf`; whether kubeadm and kubelet are installed is the `packages` phase's check, after preflight).
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
    /// Effective capabilities (`CapEff`), when read.
    capeff: Option<u64>,
    /// Read-only cgroup mounts.
    cgroup_ro: u32,
    /// `runc --version` (e.g. `1.1.5+ds1`).
    runc: String,
    resolv_file: String,
    resolv_missing: bool,
    resolv_ns: Vec<String>,
    /// The files in `/opt/cni/bin`.
    cni_bin: Vec<String>,
}

impl Probe {
    fn has_cap(&self, cap: u32) -> bool {
        self.capeff.is_none_or(|c| c & (1u64 << cap) != 0)
    }
}

/// What preflight knows of the rendered settings that bear on the node's environment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The rendered kubelet configuration sets `failCgroupV1: false` (needed on cgroup v1 hosts from
    /// Kubernetes 1.35).
    pub kubelet_allows_cgroup_v1: bool,
    /// `nodeEnvironment: unprivileged-container` is rendered (containerd, kube-proxy and the node files).
    pub unprivileged_container: bool,
    /// The runtime is containerd (which runs the `loopback` plugin from `/opt/cni/bin` for every pod).
    pub containerd: bool,
    /// The CNI is the builtin one (whose conflist chains `portmap` from `/opt/cni/bin`).
    pub builtin_cni: bool,
    /// The CNI is flannel, whose conflist (`10-flannel.conflist` of `kube-flannel.yml`) chains `portmap`
    /// and whose plugin delegates to `bridge` with `host-local` IPAM, all from `/opt/cni/bin` (its
    /// DaemonSet only copies the `flannel` plugin there).
    pub flannel_cni: bool,
    /// The `packages` phase after preflight installs the Kubernetes packages (`packages.source`
    /// `upstream`, `mirror` or `bundle`), `kubernetes-cni` with them: the plugins are not checked here.
    pub cni_from_packages: bool,
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
            "capeff" => p.capeff = u64::from_str_radix(v, 16).ok(),
            "cgroup_ro" => p.cgroup_ro = v.parse().unwrap_or(0),
            "runc" => p.runc = v.into(),
            "resolv_file" => p.resolv_file = v.into(),
            "resolv_missing" => p.resolv_missing = v == "1",
            "resolv_ns" => p.resolv_ns = v.split_whitespace().map(String::from).collect(),
            "cni_bin" => p.cni_bin = v.split_whitespace().map(String::from).collect(),
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

/// True for a loopback nameserver address (`127.0.0.0/8`, `::1`).
fn loopback(ns: &str) -> bool {
    ns.parse::<std::net::IpAddr>()
        .is_ok_and(|a| a.is_loopback())
}

/// Evaluates the probe against the node's facts and what is rendered for it.
pub fn evaluate(
    role: Role,
    facts: &NodeFacts,
    p: &Probe,
    k8s_version: &semver::Version,
    rendered: Rendered,
) -> Vec<Finding> {
    let mut f = Findings(Vec::new());
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
    let in_container = !p.container.is_empty() && p.container != "none";
    host(&mut f, role, facts, p, supported);
    init_and_cgroups(&mut f, facts, k8s_version, &rendered);
    clock_kernel_security(&mut f, facts, p, el, in_container);
    if in_container {
        container_limits(&mut f, p, &rendered);
    }
    resolv_conf(&mut f, p);
    cni_plugins(&mut f, p, &rendered);
    f.0
}

/// The findings of one evaluation, in the order they are found.
struct Findings(Vec<Finding>);

impl Findings {
    fn push(&mut self, id: &str, message: String, fix: Option<String>, warning: bool) {
        self.0.push(Finding {
            id: id.into(),
            message,
            fix,
            warning,
        });
    }
}

/// The OS (`supported`), swap, kernel modules, sysctls and, before the kubelet is configured, the
/// ports the node's role needs.
fn host(f: &mut Findings, role: Role, facts: &NodeFacts, p: &Probe, supported: bool) {
    if !supported {
        f.push(
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
        f.push(
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
            f.push(&format!("module/{m}"), format!("kernel module {m} not loaded"),
                Some(format!("modprobe {m} && (grep -qx {m} /etc/modules-load.d/clusterctl.conf 2>/dev/null || echo {m} >> /etc/modules-load.d/clusterctl.conf)")), false);
        }
    }
    for (k, v) in &p.sysctls {
        if v != "1" {
            let shown = if v.is_empty() { "missing" } else { v.as_str() };
            f.push(&format!("sysctl/{k}"), format!("sysctl {k} is {shown}, must be 1"),
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
            f.push(
                "ports",
                format!("port(s) {} already in use", busy.join(", ")),
                None,
                false,
            );
        }
    }
}

/// PID 1 is systemd (the cgroup driver); cgroup v1 (an error from Kubernetes 1.35 unless the kubelet
/// allows it, else a warning).
fn init_and_cgroups(
    f: &mut Findings,
    facts: &NodeFacts,
    k8s_version: &semver::Version,
    rendered: &Rendered,
) {
    if !facts.init.is_empty() && facts.init != "systemd" {
        f.push(
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
        let needs = (k8s_version.major, k8s_version.minor) >= (1, 35);
        if needs && !rendered.kubelet_allows_cgroup_v1 {
            f.push("cgroup-version", format!("cgroup v1 host: Kubernetes {k8s_version} needs cgroup v2 or the kubelet's `failCgroupV1: false`"), None, false);
        } else {
            f.push(
                "cgroup-version",
                "cgroup v1 host (deprecated by Kubernetes; cgroup v2 recommended)".into(),
                None,
                true,
            );
        }
    }
}

/// Clock synchronisation (a container shares the host's), the kernel's version, firewalld on EL and
/// SELinux enforcing.
fn clock_kernel_security(
    f: &mut Findings,
    facts: &NodeFacts,
    p: &Probe,
    el: bool,
    in_container: bool,
) {
    if p.ntp != "yes" && in_container {
        // The kernel clock is the host's: a container can neither run a time daemon on it nor set it.
        f.push("time-sync", format!("clock not reported synchronised (timedatectl NTPSynchronized); this node is a {} container sharing the host's kernel clock: synchronise the host", p.container),
            None, true);
    } else if p.ntp != "yes" {
        f.push("time-sync", "clock not reported synchronised (timedatectl NTPSynchronized)".into(),
            Some("systemctl enable --now chronyd 2>/dev/null || systemctl enable --now systemd-timesyncd".into()), true);
    }
    if kernel_at_least(&facts.kernel, 4, 19) == Some(false) {
        f.push(
            "kernel",
            format!("kernel {} is older than 4.19", facts.kernel),
            None,
            false,
        );
    }
    if el && p.firewalld == "active" {
        f.push(
            "firewalld",
            "firewalld is active".into(),
            Some("systemctl disable --now firewalld.service".into()),
            false,
        );
    }
    if p.selinux == "Enforcing" {
        f.push("selinux", "SELinux is enforcing".into(),
            Some("setenforce 0 && sed -i 's/^SELINUX=enforcing$/SELINUX=permissive/' /etc/selinux/config".into()), false);
    }
}

/// What a node container lacks (CAP_SYS_RESOURCE, writable cgroups, CAP_SYS_PTRACE for runc).
fn container_limits(f: &mut Findings, p: &Probe, rendered: &Rendered) {
    // An unprivileged container (no CAP_SYS_RESOURCE): what clusterctl renders for it, and what only
    // the one who starts the container can give.
    if !p.has_cap(CAP_SYS_RESOURCE) {
        if !rendered.unprivileged_container {
            f.push("node-environment", format!("this node is an unprivileged {} container (no CAP_SYS_RESOURCE): pod sandboxes fail (oom_score_adj), privileged pods fail (devices cgroup), kube-proxy cannot set nf_conntrack_max the CNI cannot set per-interface values in the read-only /proc/sys/net, and the kubelet exits on /dev/kmsg and read-only kernel settings; set `spec.nodeEnvironment: unprivileged-container` in the cluster file", p.container), None, false);
        }
        if p.cgroup_ro > 0 {
            f.push("container-cgroups", format!("{} cgroup mount(s) are read-only in this container: containerd and the kubelet need a writable, private cgroup tree (start the container with `--cgroupns private` and remount its cgroup mounts read-write before systemd starts, as kind's node image entrypoint does; do not bind-mount the host's /sys/fs/cgroup)", p.cgroup_ro), None, false);
        }
        let runc_12 = minor_version(&p.runc).is_some_and(|v| v >= (1, 2));
        if runc_12 && !p.has_cap(CAP_SYS_PTRACE) {
            f.push("container-ptrace", format!("runc {} (≥ 1.2) needs CAP_SYS_PTRACE in this container to start containers that join a pod (\"open container mntns: permission denied\"): add it to the node container (`docker run --cap-add SYS_PTRACE`), or use runc < 1.2", p.runc), None, false);
        } else if !p.has_cap(CAP_SYS_PTRACE) {
            // runc, root here, opens /proc/<sandbox pid>/ns/* of the pod it joins: the kernel's
            // ptrace access check refuses that for a sandbox running as another user.
            f.push("container-ptrace", "no CAP_SYS_PTRACE in this container: a pod whose sandbox runs as a non-root user (a pod-level runAsUser, e.g. the health-check Job of `kubeadm upgrade plan|apply`) cannot start (\"can't get final child's PID from pipe: EOF\"; runc's log: \"failed to open /proc/N/ns/ipc: Permission denied\"): add it to the node container (`docker run --cap-add SYS_PTRACE`)".into(), None, true);
        }
    }
}

/// The kubelet's resolvConf exists and names a resolver that is not loopback.
fn resolv_conf(f: &mut Findings, p: &Probe) {
    if !p.resolv_file.is_empty() {
        if p.resolv_missing {
            f.push(
                "resolv-conf",
                format!(
                    "{} (the kubelet's resolvConf) does not exist or is not readable",
                    p.resolv_file
                ),
                None,
                false,
            );
        } else if !p.resolv_ns.is_empty() && p.resolv_ns.iter().all(|n| loopback(n)) {
            f.push("resolv-conf", format!("{} (the kubelet's resolvConf) names only loopback resolvers ({}): CoreDNS would forward to itself (\"plugin/loop: Loop detected\") and crash; set `spec.kubelet.resolvConf` to a file naming a resolver reachable from pods", p.resolv_file, p.resolv_ns.join(", ")), None, false);
        }
    }
}

/// The CNI plugins containerd, the builtin CNI and flannel run from `/opt/cni/bin`, unless the
/// packages phase installs them.
fn cni_plugins(f: &mut Findings, p: &Probe, rendered: &Rendered) {
    let mut plugins = Vec::new();
    if rendered.containerd {
        plugins.push("loopback");
    }
    if rendered.flannel_cni {
        plugins.extend(["bridge", "host-local"]);
    }
    if rendered.builtin_cni || rendered.flannel_cni {
        plugins.push("portmap");
    }
    let absent: Vec<&str> = plugins
        .into_iter()
        .filter(|n| !p.cni_bin.iter().any(|b| b == n))
        .collect();
    if !absent.is_empty() && !rendered.cni_from_packages {
        f.push("cni-plugins", format!("{} missing from /opt/cni/bin: containerd runs `loopback` from there for every pod, the builtin CNI and flannel chain `portmap`, flannel's plugin delegates to `bridge` with `host-local` IPAM (pod sandboxes fail with \"failed to find plugin ... in path [/opt/cni/bin]\"); install the CNI reference plugins there (package kubernetes-cni, or the containernetworking plugins)", join_and(&absent)), None, false);
    }
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[&str]) -> String {
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => items.join(""),
    }
}

/// The kubelet's `resolvConf` as rendered (the `KubeletConfiguration` inside the first control plane's
/// init configuration, which every node's kubelet gets through kubeadm), if set.
fn kubelet_resolv_conf(data: &UpData) -> Option<String> {
    let first = data.first_cp()?.name.clone();
    let init = super::init::init_config(data, &first)?;
    let text = String::from_utf8_lossy(&init.content).into_owned();
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
        .filter_map(|d| serde_yaml::Value::deserialize(d).ok())
        .collect();
    docs.iter()
        .find(|d| d["kind"].as_str() == Some("KubeletConfiguration"))
        .and_then(|d| d["resolvConf"].as_str().map(String::from))
}

/// The `preflight` phase. Errors: [`PhaseError::Check`] listing every blocking failure left (each with
/// `(fixable with --fix)` when it is), or a fix command's failure.
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let resolv_conf = kubelet_resolv_conf(data);
    let script = format!(
        "{PREFLIGHT_SCRIPT}\n{}\n{}\n{}",
        resolv_script(resolv_conf.as_deref()),
        runtime_vip::SOCKETS_SCRIPT,
        cni_switch::CONF_SCRIPT
    );
    let Some(out) = ctx.read(&script)? else {
        if ctx.mode.fix {
            ctx.info("--fix: the fix of every failed check is applied");
        }
        return Ok(());
    };
    let facts = data.facts_of(ctx.name());
    let rendered = data
        .files
        .read()
        .ok()
        .and_then(|f| {
            f.get(ctx.name()).map(|v| Rendered {
                kubelet_allows_cgroup_v1: v
                    .iter()
                    .any(|x| String::from_utf8_lossy(&x.content).contains("failCgroupV1: false")),
                unprivileged_container: v.iter().any(|x| x.path == NODE_ENVIRONMENT_MARKER),
                containerd: data.spec.runtime == RuntimeKind::Containerd,
                builtin_cni: data.spec.cni == CniPlugin::Builtin,
                flannel_cni: data.spec.cni == CniPlugin::Flannel,
                cni_from_packages: data.spec.packages.source
                    != crate::packages::Source::Preinstalled,
            })
        })
        .unwrap_or_default();
    let mut findings = evaluate(
        ctx.node.role,
        &facts,
        &parse(&out),
        &data.spec.kubernetes_version,
        rendered,
    );
    findings.extend(runtime_vip::other_runtimes(
        data.spec.runtime,
        &runtime_vip::sockets(&out),
    ));
    findings.extend(arch::agent_arch(
        &facts.arch,
        &arch::local_arch(),
        data.spec.cni == CniPlugin::Builtin,
        &crate::up::airgap::agent_archs(data),
    ));
    findings.extend(cni_switch::other_cni(
        data.spec.cni.name(),
        &cni_switch::confs(&out),
    ));
    if let Some(vip) = &data.spec.vip {
        let interface = data
            .files_of(ctx.name(), crate::up::placed::KUBE_VIP)
            .iter()
            .find_map(|f| runtime_vip::manifest_interface(&String::from_utf8_lossy(&f.content)));
        if let Some(i) = interface {
            findings.extend(runtime_vip::vip_interface(vip, &i, &facts.links));
        }
    }
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

    fn v(text: &str) -> semver::Version {
        clusterctl_spec::versions::parse_version(text).expect("version")
    }

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
        let p = parse(
            "swap=0\nmod_overlay=1\nmod_br_netfilter=1\nip_forward=1\nbnf4=1\nbnf6=1\nntp=yes\n",
        );
        assert_eq!(
            evaluate(
                Role::ControlPlane,
                &facts(),
                &p,
                &v("1.34.1"),
                Rendered::default()
            ),
            vec![]
        );
    }

    #[test]
    fn a_container_nodes_clock_is_the_hosts() {
        let p = parse("swap=0\nmod_overlay=1\nmod_br_netfilter=1\nip_forward=1\nbnf4=1\nbnf6=1\nntp=no\ncontainer=docker\n");
        let f = evaluate(
            Role::Worker,
            &facts(),
            &p,
            &v("1.34.1"),
            Rendered::default(),
        );
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, "time-sync");
        assert!(f[0].warning && f[0].fix.is_none(), "{f:?}");
        assert!(f[0].message.contains("docker container"), "{f:?}");
    }

    #[test]
    fn every_id_found_is_a_known_check() {
        let p = parse("swap=1\nmod_overlay=0\nmod_br_netfilter=0\nip_forward=0\nbnf4=0\nbnf6=0\nlisten=192B\nntp=no\nfirewalld=active\nselinux=Enforcing\ncontainer=docker\ncapeff=0\ncgroup_ro=3\nrunc=1.3.0\ncni_bin=\n");
        let mut f = facts();
        f.cgroup_version = 1;
        f.os_id = "rocky".into();
        f.os_version = "8.1".into();
        f.kernel = "3.10.0".into();
        f.init = "sh".into();
        let found = evaluate(
            Role::ControlPlane,
            &f,
            &p,
            &v("v1.35.0"),
            Rendered::default(),
        );
        assert!(found.len() > 12, "{found:?}");
        for x in &found {
            assert!(
                CHECK_IDS.contains(&x.id.as_str()),
                "{} not in CHECK_IDS",
                x.id
            );
        }
        assert_eq!(
            unknown_ids(&["swap".into(), "tme-sync".into(), "module".into()]),
            ["tme-sync", "module"]
        );
    }

    #[test]
    fn every_failure_is_listed() {
        let p = parse("swap=1\nmod_overlay=1\nmod_br_netfilter=0\nip_forward=0\nbnf4=\nbnf6=1\nlisten=192B\nntp=no\nfirewalld=active\nselinux=Enforcing\n");
        let mut f = facts();
        f.cgroup_version = 1;
        f.os_id = "rocky".into();
        f.os_version = "9.6".into();
        let ids: Vec<String> = evaluate(
            Role::ControlPlane,
            &f,
            &p,
            &v("v1.35.0"),
            Rendered::default(),
        )
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
            ]
        );
        // 0x192B = 6443 is in use; a node already in the cluster does not check ports.
        f.has_kubelet_conf = true;
        assert!(!evaluate(
            Role::ControlPlane,
            &f,
            &p,
            &v("1.35.0"),
            Rendered {
                kubelet_allows_cgroup_v1: true,
                ..Default::default()
            }
        )
        .iter()
        .any(|x| x.id == "ports" || (x.id == "cgroup-version" && !x.warning)));
    }

    /// An unprivileged container node (CapEff without CAP_SYS_RESOURCE): without the rendered
    /// unprivileged-container settings it is refused, saying which; a read-only cgroup tree and runc
    /// ≥ 1.2 without CAP_SYS_PTRACE are refused either way, an older runc without it is warned about
    /// (non-root pod sandboxes cannot be joined); a privileged container (all capabilities)
    /// is a host. A kubelet resolver file naming only loopback resolvers, or missing, is refused.
    #[test]
    fn unprivileged_containers_and_loopback_resolvers() {
        let base = "swap=0\nmod_overlay=1\nmod_br_netfilter=1\nip_forward=1\nbnf4=1\nbnf6=1\nntp=yes\ncontainer=docker\n";
        let ids = |probe: &str, r: Rendered| -> Vec<String> {
            evaluate(Role::Worker, &facts(), &parse(probe), &v("1.34.4"), r)
                .into_iter()
                .filter(|f| !f.warning)
                .map(|f| f.id)
                .collect()
        };
        // Docker's default set + SYS_ADMIN + NET_ADMIN: no CAP_SYS_RESOURCE (bit 24), no SYS_PTRACE (19).
        let unpriv = format!("{base}capeff=00000000a82435fb\ncgroup_ro=0\nrunc=1.1.5+ds1\n");
        assert_eq!(ids(&unpriv, Rendered::default()), ["node-environment"]);
        let set = Rendered {
            unprivileged_container: true,
            ..Default::default()
        };
        assert!(ids(&unpriv, set).is_empty());
        // runc < 1.2 without SYS_PTRACE: root pods start, non-root sandboxes do not (a warning).
        let warned: Vec<_> = evaluate(Role::Worker, &facts(), &parse(&unpriv), &v("1.34.4"), set)
            .into_iter()
            .filter(|f| f.warning && f.id == "container-ptrace")
            .collect();
        assert!(
            warned.len() == 1 && warned[0].message.contains("non-root"),
            "{warned:?}"
        );
        let ro = format!("{base}capeff=00000000a82435fb\ncgroup_ro=12\nrunc=1.3.3\n");
        assert_eq!(ids(&ro, set), ["container-cgroups", "container-ptrace"]);
        let ptrace = format!("{base}capeff=00000000a82c35fb\ncgroup_ro=0\nrunc=1.3.3\n");
        assert!(ids(&ptrace, set).is_empty(), "CAP_SYS_PTRACE given");
        let privileged = format!("{base}capeff=000001ffffffffff\ncgroup_ro=0\nrunc=1.3.3\n");
        assert!(ids(&privileged, Rendered::default()).is_empty());
        let msg = evaluate(
            Role::Worker,
            &facts(),
            &parse(&unpriv),
            &v("1.34.4"),
            Rendered::default(),
        );
        assert!(
            msg[0]
                .message
                .contains("nodeEnvironment: unprivileged-container"),
            "{msg:?}"
        );

        let docker_dns = format!("{base}resolv_file=/etc/resolv.conf\nresolv_ns=127.0.0.11 \n");
        assert_eq!(ids(&docker_dns, Rendered::default()), ["resolv-conf"]);
        let f = evaluate(
            Role::Worker,
            &facts(),
            &parse(&docker_dns),
            &v("1.34.4"),
            Rendered::default(),
        );
        assert!(f[0].message.contains("spec.kubelet.resolvConf"), "{f:?}");
        let mixed = format!("{base}resolv_file=/etc/resolv.conf\nresolv_ns=127.0.0.53 10.0.0.2\n");
        assert!(ids(&mixed, Rendered::default()).is_empty());
        let missing = format!("{base}resolv_file=/etc/k.conf\nresolv_missing=1\nresolv_ns=\n");
        let cni = Rendered {
            containerd: true,
            builtin_cni: true,
            ..Default::default()
        };
        let no_plugins = format!("{base}cni_bin=clusterctl-cni\n");
        assert_eq!(ids(&no_plugins, cni), ["cni-plugins"]);
        let f = evaluate(
            Role::Worker,
            &facts(),
            &parse(&no_plugins),
            &v("1.34.4"),
            cni,
        );
        assert!(
            f[0].message.starts_with("loopback and portmap missing"),
            "{f:?}"
        );
        let plugins = format!("{base}cni_bin=bridge clusterctl-cni loopback portmap\n");
        assert!(ids(&plugins, cni).is_empty());
        // flannel: its conflist chains portmap, its plugin delegates to bridge with host-local IPAM.
        let flannel = Rendered {
            containerd: true,
            flannel_cni: true,
            ..Default::default()
        };
        let f = evaluate(
            Role::Worker,
            &facts(),
            &parse(&plugins),
            &v("1.34.4"),
            flannel,
        );
        assert!(
            f.len() == 1 && f[0].message.starts_with("host-local missing"),
            "{f:?}"
        );
        let f = evaluate(
            Role::Worker,
            &facts(),
            &parse(&no_plugins),
            &v("1.34.4"),
            flannel,
        );
        assert!(
            f[0].message
                .starts_with("loopback, bridge, host-local and portmap missing"),
            "{f:?}"
        );
        let all = format!("{base}cni_bin=bridge flannel host-local loopback portmap\n");
        assert!(ids(&all, flannel).is_empty());
        assert_eq!(ids(&missing, Rendered::default()), ["resolv-conf"]);
        assert!(
            resolv_script(Some("/etc/k.conf")).starts_with("rc='/etc/k.conf'")
                || resolv_script(Some("/etc/k.conf")).starts_with("rc=/etc/k.conf")
        );
    }
}
