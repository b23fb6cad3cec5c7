//! `facts`: one read-only round trip per node gathering OS, architecture, kernel, cgroup version, init
//! system, interfaces with their IPv4 addresses, MTU and state, runtime versions, the builtin CNI's
//! installed overlay MTU and existing Kubernetes state. Never
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
    /// Every network interface with its MTU and state (`/sys/class/net/*`), in the kernel's order.
    #[serde(default)]
    pub links: Vec<Link>,
    /// The overlay MTU of the builtin CNI's installed agent settings
    /// (`/etc/clusterctl/cni/agent.json` `mtu`), when the node has them: the MTU the running cluster
    /// uses.
    #[serde(default)]
    pub cni_mtu: Option<u32>,
    /// `containerd --version` third field, when installed.
    pub containerd_version: String,
    /// `crio --version` version, when installed.
    pub crio_version: String,
    /// The version apt would install for `containerd` from the node's lists (`apt-cache policy`'s
    /// `Candidate:`; empty or `(none)` when unknown or not apt).
    #[serde(default)]
    pub containerd_candidate: String,
    /// The containerd the node runs once the `packages` phase is done with it (see
    /// [`crate::packages::probe::containerd_after`]): what render writes containerd's configuration
    /// for, so a node the phase gives containerd 2 gets the version 3 schema on the first `up` already.
    /// Empty: none.
    #[serde(default)]
    pub containerd_expected: String,
    /// `/etc/kubernetes/admin.conf` exists: this node holds an initialised control plane.
    pub has_admin_conf: bool,
    /// `/etc/kubernetes/kubelet.conf` exists: the node is part of a cluster.
    pub has_kubelet_conf: bool,
    /// True when the facts were gathered (false offline).
    pub known: bool,
}

/// One network interface as `/sys/class/net/<name>` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Link {
    /// Interface name, e.g. `eth0`.
    pub name: String,
    /// `mtu`, bytes (0 when unreadable).
    pub mtu: u32,
    /// `operstate`: `up`, `down`, `unknown` (no carrier detection: loopback, many virtual devices),
    /// `lowerlayerdown`, `dormant`, `notpresent`, `testing`.
    pub operstate: String,
    /// `flags` has IFF_UP: the interface is set administratively up.
    pub admin_up: bool,
}

impl Link {
    /// Set up and not reported without carrier (`operstate` `unknown` counts as up, as for loopback
    /// and devices that do not detect carrier).
    pub fn is_up(&self) -> bool {
        self.admin_up
            && !matches!(
                self.operstate.as_str(),
                "down" | "lowerlayerdown" | "notpresent" | "dormant"
            )
    }

    /// `eth0 (up, mtu 1500)`.
    pub fn describe(&self) -> String {
        let state = if self.is_up() {
            "up".to_string()
        } else if !self.admin_up {
            "down".to_string()
        } else {
            format!("no carrier: {}", self.operstate)
        };
        format!("{} ({state}, mtu {})", self.name, self.mtu)
    }
}

impl NodeFacts {
    /// The containerd version render writes the configuration for: [`NodeFacts::containerd_expected`]
    /// when known, else the installed one.
    pub fn containerd_for_render(&self) -> &str {
        if self.containerd_expected.is_empty() {
            &self.containerd_version
        } else {
            &self.containerd_expected
        }
    }

    /// The interface named `name`, when the node has it.
    pub fn link(&self, name: &str) -> Option<&Link> {
        self.links.iter().find(|l| l.name == name)
    }

    /// The interface holding `address` (an IP without prefix), when known.
    pub fn interface_of(&self, address: &str) -> Option<&str> {
        self.interfaces
            .iter()
            .find(|(_, a)| !address.is_empty() && a.split('/').next() == Some(address))
            .map(|(i, _)| i.as_str())
    }
}

/// The script run on every node; prints `key=value` lines.
pub(crate) const FACTS_SCRIPT: &str = r#". /etc/os-release 2>/dev/null
echo "os_id=${ID:-}"
echo "os_version=${VERSION_ID:-}"
echo "os_like=${ID_LIKE:-}"
echo "arch=$(uname -m)"
echo "kernel=$(uname -r)"
echo "cgroupfs=$(stat -fc %T /sys/fs/cgroup 2>/dev/null)"
echo "init=$(cat /proc/1/comm 2>/dev/null)"
for i in /sys/class/net/*; do n=${i##*/}; echo "if=$n $(cat $i/mtu 2>/dev/null) $(cat $i/operstate 2>/dev/null) $(cat $i/flags 2>/dev/null)"; done
echo "cni_mtu=$(grep -o '"mtu"[^0-9]*[0-9]*' /etc/clusterctl/cni/agent.json 2>/dev/null | grep -o '[0-9]*$')"
ip -o -4 addr show 2>/dev/null | while read -r _ n _ a _; do echo "addr=$n $a"; done
echo "containerd=$(containerd --version 2>/dev/null | awk '{print $3}')"
echo "crio=$(crio --version 2>/dev/null | awk '/^Version/{print $2}')"
command -v containerd >/dev/null 2>&1 || echo "containerd_candidate=$(apt-cache policy containerd 2>/dev/null | awk '/Candidate:/{print $2}')"
test -f /etc/kubernetes/admin.conf && echo admin_conf=yes
test -f /etc/kubernetes/kubelet.conf && echo kubelet_conf=yes
true"#;

/// Parses the output of [`FACTS_SCRIPT`].
pub(crate) fn parse(out: &str) -> NodeFacts {
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
            "if" => {
                let mut it = v.split_whitespace();
                let name = it.next().unwrap_or_default().to_string();
                if let (Some(mtu), Some(state), Some(flags)) = (it.next(), it.next(), it.next()) {
                    let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok();
                    f.links.push(Link {
                        name: name.clone(),
                        mtu: mtu.parse().unwrap_or(0),
                        operstate: state.to_string(),
                        admin_up: flags.is_some_and(|x| x & 1 != 0),
                    });
                }
                names.push(name)
            }
            "cni_mtu" => f.cni_mtu = v.parse().ok(),
            "addr" => {
                if let Some((n, a)) = v.split_once(' ') {
                    f.interfaces.push((n.to_string(), a.to_string()));
                }
            }
            "containerd" => f.containerd_version = v,
            "crio" => f.crio_version = v,
            "containerd_candidate" => f.containerd_candidate = v,
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

/// [`NodeFacts::containerd_expected`] of a node with `facts`: from a repository source,
/// [`crate::packages::probe::containerd_after`]; from the bundle (`packages.source: bundle`, the
/// bundle verified by `airgap/verify` before `facts`), on a node without containerd, the version of
/// the containerd release archive the bundle unpacks there ([`crate::packages::bundle::bundle_containerd`]).
fn expected_containerd(data: &UpData, facts: &NodeFacts) -> String {
    let version = &data.spec.kubernetes_version;
    if !facts.known {
        return facts.containerd_version.clone();
    }
    let settings = &data.spec.packages;
    if settings.source == crate::packages::Source::Bundle
        && settings.runtime == clusterctl_spec::model::RuntimeKind::Containerd
        && facts.containerd_version.is_empty()
    {
        let Some(vb) = data.spec.airgap.as_ref().and_then(|a| a.verified()) else {
            return String::new();
        };
        let family = clusterctl_airgap::node::os_family(&facts.os_id, &facts.os_like);
        let arch = clusterctl_airgap::node::oci_arch(&facts.arch);
        return crate::packages::bundle::bundle_containerd(
            vb.manifest
                .packages
                .iter()
                .filter(|p| {
                    p.os.as_deref().is_none_or(|o| o == family || o == "any")
                        && p.arch.as_deref().is_none_or(|a| a == arch)
                })
                .map(|p| (p.path.as_str(), p.extract_to.as_deref())),
        )
        .unwrap_or_default();
    }
    crate::packages::probe::containerd_after(
        settings,
        &facts.containerd_version,
        crate::packages::Family::of(&facts.os_id, &facts.os_like),
        &facts.containerd_candidate,
        version,
    )
    .unwrap_or_default()
}

/// The `facts` phase: gathers and stores the node's facts. Errors: the script failed or the node is
/// unreachable.
pub(crate) fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let mut facts = match ctx.read(FACTS_SCRIPT)? {
        Some(out) => parse(&out),
        None => NodeFacts::default(),
    };
    facts.containerd_expected = expected_containerd(data, &facts);
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
        assert!(f.links.is_empty() && f.cni_mtu.is_none());
    }

    /// Interfaces with MTU, operstate and flags (as `/sys/class/net` gives them) and the installed
    /// agent's MTU; the script's output as a node prints it.
    #[test]
    fn links_and_the_installed_overlay_mtu() {
        let out = "if=eth0 1500 up 0x1003
if=ens19 9000 down 0x1002
if=ens20 1500 down 0x1003
if=lo 65536 unknown 0x9
addr=eth0 10.0.0.11/24
cni_mtu=1450
";
        let f = parse(out);
        assert_eq!(f.cni_mtu, Some(1450));
        assert_eq!(f.interface_of("10.0.0.11"), Some("eth0"));
        let eth0 = f.link("eth0").expect("eth0");
        assert!(eth0.is_up() && eth0.mtu == 1500);
        assert_eq!(
            f.link("ens19").map(Link::describe).as_deref(),
            Some("ens19 (down, mtu 9000)")
        );
        assert_eq!(
            f.link("ens20").map(Link::describe).as_deref(),
            Some("ens20 (no carrier: down, mtu 1500)")
        );
        assert!(
            f.link("lo").is_some_and(Link::is_up),
            "operstate unknown counts as up"
        );
        assert_eq!(parse("cni_mtu=\n").cni_mtu, None);
    }

    /// The script itself on this machine: every interface of /sys/class/net has a link with its MTU.
    #[test]
    fn the_script_reads_this_machines_links() {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(FACTS_SCRIPT)
            .output()
            .expect("sh");
        let f = parse(&String::from_utf8_lossy(&out.stdout));
        let lo = f.link("lo").expect("lo in /sys/class/net");
        assert_eq!(
            lo.mtu,
            std::fs::read_to_string("/sys/class/net/lo/mtu")
                .expect("mtu")
                .trim()
                .parse::<u32>()
                .expect("n")
        );
        assert!(lo.admin_up, "{lo:?}");
    }
}
