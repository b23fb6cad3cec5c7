//! `facts`: one read-only round trip per node gathering OS, architecture, kernel, cgroup version, init
//! system, interfaces with their IPv4 addresses, runtime versions and existing Kubernetes state. Never
//! changes anything; offline (dry-run without `--probe`) every fact is unknown.

use super::UpData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;

/// What `facts` learned about a node. Empty strings mean unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeFacts {
    /// `/etc/os-release` `ID` (e.g. `debian`, `ubuntu`, `rhel`, `rocky`, `almalinux`).
    pub os_id: String,
    /// `/etc/os-release` `VERSION_ID` (e.g. `12`, `9.6`).
    pub os_version: String,
    /// `/etc/os-release` `ID_LIKE` (e.g. `rhel centos fedora`).
    pub os_like: String,
    /// `uname -m` (e.g. `x86_64`, `aarch64`).
    pub arch: String,
    /// `uname -r` (e.g. `6.1.0-28-amd64`).
    pub kernel: String,
    /// 2 for the unified hierarchy (`cgroup2fs` at `/sys/fs/cgroup`), 1 otherwise, 0 unknown.
    pub cgroup_version: u8,
    /// The name of PID 1 (`systemd` on supported hosts).
    pub init: String,
    /// Interfaces with their IPv4 addresses in CIDR form, as `(name, address)` pairs.
    pub interfaces: Vec<(String, String)>,
    /// `containerd --version` third field, when installed.
    pub containerd_version: String,
    /// `crio --version` version, when installed.
    pub crio_version: String,
    /// `/etc/kubernetes/admin.conf` exists: this node holds an initialised control plane.
    pub has_admin_conf: bool,
    /// `/etc/kubernetes/kubelet.conf` exists: the node is part of a cluster.
    pub has_kubelet_conf: bool,
    /// True when the facts were gathered (false offline).
    pub known: bool,
}

/// The script run on every node; prints `key=value` lines.
pub const FACTS_SCRIPT: &str = r#". /etc/os-release 2>/dev/null
echo "os_id=${ID:-}"
echo "os_version=${VERSION_ID:-}"
echo "os_like=${ID_LIKE:-}"
echo "arch=$(uname -m)"
echo "kernel=$(uname -r)"
echo "cgroupfs=$(stat -fc %T /sys/fs/cgroup 2>/dev/null)"
echo "init=$(cat /proc/1/comm 2>/dev/null)"
for i in /sys/class/net/*; do n=${i##*/}; echo "if=$n"; done
ip -o -4 addr show 2>/dev/null | while read -r _ n _ a _; do echo "addr=$n $a"; done
echo "containerd=$(containerd --version 2>/dev/null | awk '{print $3}')"
echo "crio=$(crio --version 2>/dev/null | awk '/^Version/{print $2}')"
test -f /etc/kubernetes/admin.conf && echo admin_conf=yes
test -f /etc/kubernetes/kubelet.conf && echo kubelet_conf=yes
true"#;

/// Parses the output of [`FACTS_SCRIPT`].
pub fn parse(out: &str) -> NodeFacts {
    let mut f = NodeFacts {
        known: true,
        ..Default::default()
    };
    let mut names = Vec::new();
    for line in out.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim().to_string();
        match k {
            "os_id" => f.os_id = v,
            "os_version" => f.os_version = v,
            "os_like" => f.os_like = v,
            "arch" => f.arch = v,
            "kernel" => f.kernel = v,
            "cgroupfs" => {
                f.cgroup_version = if v == "cgroup2fs" {
                    2
                } else if v.is_empty() {
                    0
                } else {
                    1
                }
            }
            "init" => f.init = v,
            "if" => names.push(v),
            "addr" => {
                if let Some((n, a)) = v.split_once(' ') {
                    f.interfaces.push((n.to_string(), a.to_string()));
                }
            }
            "containerd" => f.containerd_version = v,
            "crio" => f.crio_version = v,
            "admin_conf" => f.has_admin_conf = v == "yes",
            "kubelet_conf" => f.has_kubelet_conf = v == "yes",
            _ => {}
        }
    }
    for n in names {
        if !f.interfaces.iter().any(|(m, _)| *m == n) {
            f.interfaces.push((n, String::new()));
        }
    }
    f
}

/// The `facts` phase: gathers and stores the node's facts. Errors: the script failed or the node is
/// unreachable.
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let facts = match ctx.read(FACTS_SCRIPT)? {
        Some(out) => parse(&out),
        None => NodeFacts::default(),
    };
    if let Ok(mut all) = data.facts.lock() {
        all.insert(ctx.name().to_string(), facts);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_fact_lines() {
        let out = "os_id=debian\nos_version=12\nos_like=\narch=x86_64\nkernel=6.1.0-28-amd64\ncgroupfs=tmpfs\ninit=systemd\nif=eth0\nif=lo\naddr=lo 127.0.0.1/8\naddr=eth0 172.18.0.2/16\ncontainerd=1.6.20~ds1\ncrio=\nkubelet_conf=yes\n";
        let f = parse(out);
        assert_eq!(f.os_id, "debian");
        assert_eq!(f.cgroup_version, 1);
        assert_eq!(
            f.interfaces,
            vec![
                ("lo".into(), "127.0.0.1/8".into()),
                ("eth0".into(), "172.18.0.2/16".into())
            ]
        );
        assert_eq!(f.containerd_version, "1.6.20~ds1");
        assert!(f.has_kubelet_conf && !f.has_admin_conf && f.known);
    }
}
