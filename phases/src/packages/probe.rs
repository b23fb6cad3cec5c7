//! What a node has ([`PROBE_SCRIPT`], read-only, one round trip; parsed into [`Installed`]) and what
//! `up` does about it ([`decide`] → [`Plan`], or the reasons it refuses the node).

use std::collections::{BTreeMap, BTreeSet};

use semver::Version;

use super::table::{self, triple};
use super::{arch_of, minor_of, Family, Settings, Source, EXTRAS, PINNED};
use clusterctl_spec::model::RuntimeKind;

/// The read-only probe; prints `key=value` lines (`pkg=NAME VERSION` per installed package). It runs
/// none of kubeadm, kubelet or the runtime's programs except `containerd --version` and `crio
/// --version` (a probe that ran kubeadm would show in every run's audit of what was executed), so
/// `kubeadm_bin` and `kubelet_bin` stay empty unless a caller fills them.
pub const PROBE_SCRIPT: &str = r#". /etc/os-release 2>/dev/null
echo "id=${ID:-}"
echo "like=${ID_LIKE:-}"
echo "version_id=${VERSION_ID:-}"
echo "arch=$(uname -m)"
P="kubeadm kubelet kubectl cri-tools kubernetes-cni containerd containerd.io runc cri-o"
if command -v dpkg-query >/dev/null 2>&1; then
  dpkg-query -W -f='${db:Status-Abbrev}|${Package} ${Version}\n' $P 2>/dev/null | sed -n 's/^[hi]i *|/pkg=/p'
  echo "held=$(apt-mark showhold 2>/dev/null | tr '\n' ' ')"
  echo "containerd_candidate=$(apt-cache policy containerd 2>/dev/null | awk '/Candidate:/{print $2}')"
elif command -v rpm >/dev/null 2>&1; then
  for p in $P; do rpm -q --qf 'pkg=%{NAME} %{VERSION}-%{RELEASE}\n' "$p" 2>/dev/null | grep '^pkg='; done
fi
echo "containerd_bin=$(containerd --version 2>/dev/null | awk '{print $3}')"
echo "crio_bin=$(crio --version 2>/dev/null | awk '/^Version/{print $2}')"
echo "kubeadm_path=$(command -v kubeadm)"
echo "kubelet_path=$(command -v kubelet)"
echo "kubectl_path=$(command -v kubectl)"
echo "kubelet_enabled=$(systemctl is-enabled kubelet 2>/dev/null)"
echo "containerd_enabled=$(systemctl is-enabled containerd 2>/dev/null)"
[ -f /var/lib/clusterctl-packages/before ] && echo recorded=1
[ -s /etc/apt/keyrings/kubernetes-apt-keyring.gpg ] && echo k8s_key=1
[ -s /etc/apt/keyrings/cri-o-apt-keyring.gpg ] && echo crio_key=1
true"#;

/// What [`PROBE_SCRIPT`] found on a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Installed {
    /// `/etc/os-release` `ID`.
    pub os_id: String,
    /// `ID_LIKE`.
    pub os_like: String,
    /// `VERSION_ID`.
    pub os_version: String,
    /// `uname -m`.
    pub arch: String,
    /// Installed packages of interest: name → version (`1.34.4-1.1`, `1.34.4-150500.1.1`).
    pub packages: BTreeMap<String, String>,
    /// Held packages (`apt-mark showhold`).
    pub held: BTreeSet<String>,
    /// The version apt would install for `containerd` from the node's present lists (`(none)` or
    /// empty when unknown).
    pub containerd_candidate: String,
    /// `containerd --version` (third field), when a containerd is on PATH.
    pub containerd_bin: String,
    /// `crio --version`'s version.
    pub crio_bin: String,
    /// `kubeadm version -o short`.
    pub kubeadm_bin: String,
    /// `kubelet --version`'s version.
    pub kubelet_bin: String,
    /// `command -v kubeadm` (empty: not on PATH).
    pub kubeadm_path: String,
    /// `command -v kubelet`.
    pub kubelet_path: String,
    /// `command -v kubectl` (the waits on control planes use it with admin.conf).
    pub kubectl_path: String,
    /// `systemctl is-enabled kubelet`.
    pub kubelet_enabled: String,
    /// `systemctl is-enabled containerd` (empty: no such unit).
    pub containerd_enabled: String,
    /// The record of the node's packages before `up` ([`super::script::record`]) exists.
    pub recorded: bool,
    /// The Kubernetes apt keyring is there.
    pub k8s_key: bool,
    /// CRI-O's apt keyring is there.
    pub crio_key: bool,
}

impl Installed {
    /// Parses [`PROBE_SCRIPT`]'s output.
    pub fn parse(out: &str) -> Installed {
        let mut i = Installed::default();
        for line in out.lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            let v = v.trim();
            match k {
                "id" => i.os_id = v.into(),
                "like" => i.os_like = v.into(),
                "version_id" => i.os_version = v.into(),
                "arch" => i.arch = v.into(),
                "pkg" => {
                    if let Some((n, ver)) = v.split_once(' ') {
                        i.packages.insert(n.into(), ver.trim().into());
                    }
                }
                "held" => i.held = v.split_whitespace().map(String::from).collect(),
                "containerd_candidate" => i.containerd_candidate = v.into(),
                "containerd_bin" => i.containerd_bin = v.into(),
                "crio_bin" => i.crio_bin = v.into(),
                "kubeadm_bin" => i.kubeadm_bin = v.into(),
                "kubelet_bin" => i.kubelet_bin = v.into(),
                "kubeadm_path" => i.kubeadm_path = v.into(),
                "kubelet_path" => i.kubelet_path = v.into(),
                "kubectl_path" => i.kubectl_path = v.into(),
                "kubelet_enabled" => i.kubelet_enabled = v.into(),
                "containerd_enabled" => i.containerd_enabled = v.into(),
                "recorded" => i.recorded = v == "1",
                "k8s_key" => i.k8s_key = v == "1",
                "crio_key" => i.crio_key = v == "1",
                _ => {}
            }
        }
        i
    }

    /// The node's OS family, when supported.
    pub fn family(&self) -> Option<Family> {
        Family::of(&self.os_id, &self.os_like)
    }

    /// The installed containerd's version: its package's, else the binary's.
    pub fn containerd(&self) -> Option<String> {
        self.packages
            .get("containerd")
            .or_else(|| self.packages.get("containerd.io"))
            .cloned()
            .or_else(|| (!self.containerd_bin.is_empty()).then(|| self.containerd_bin.clone()))
    }

    /// The installed CRI-O's version: its package's, else the binary's.
    pub fn crio(&self) -> Option<String> {
        self.packages
            .get("cri-o")
            .cloned()
            .or_else(|| (!self.crio_bin.is_empty()).then(|| self.crio_bin.clone()))
    }
}

/// What `up` does with the container runtime of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeStep {
    /// An accepted runtime is installed (what was found, e.g. `containerd 2.2.1`).
    Keep(String),
    /// The distribution's containerd package (its candidate version is accepted).
    DistroContainerd(String),
    /// The containerd and runc release archives, each checked against its published sha256; the
    /// packages named are removed first (an older containerd being replaced).
    ContainerdArchive {
        /// containerd version.
        containerd: String,
        /// runc version.
        runc: String,
        /// Packages to remove first.
        remove: Vec<String>,
    },
    /// CRI-O from its repository of the cluster's minor.
    Crio,
}

/// What `up` does on one node to bring its packages to the file's versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The node's family.
    pub family: Family,
    /// Its package architecture (`amd64`, …).
    pub arch: &'static str,
    /// Packages to install from the Kubernetes repository: name and, for the pinned ones, the exact
    /// upstream version (`1.34.4`; any package revision of it).
    pub install: Vec<(String, Option<String>)>,
    /// Some installed pinned package is newer than wanted (dnf needs `downgrade`).
    pub downgrade: bool,
    /// Packages to hold once installed (those not held yet).
    pub hold: Vec<String>,
    /// `systemctl enable kubelet` is needed.
    pub enable_kubelet: bool,
    /// The runtime.
    pub runtime: RuntimeStep,
    /// What was found in place and kept, for the report (`kubeadm 1.34.4-1.1`).
    pub kept: Vec<String>,
}

impl Plan {
    /// True when the node already has everything (nothing to download, install, hold or enable).
    pub fn is_done(&self) -> bool {
        self.install.is_empty()
            && self.hold.is_empty()
            && !self.enable_kubelet
            && matches!(self.runtime, RuntimeStep::Keep(_))
    }

    /// True when something comes from the Kubernetes repository (its source file and key are needed).
    pub fn needs_kubernetes_repo(&self) -> bool {
        !self.install.is_empty()
    }
}

/// The exact `x.y.z` a program printed (`v1.34.4`, `Kubernetes v1.34.4` already cut): `None` unless it
/// is exactly that (a build suffix or another text is not judged).
fn exact_program_version(s: &str) -> Option<(u64, u64, u64)> {
    let t = s.trim().trim_start_matches('v');
    let parts: Vec<&str> = t.split('.').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    triple(t)
}

/// For `source: preinstalled`: the programs that report another exact version than `version`.
pub fn preinstalled_mismatches(installed: &Installed, version: &Version) -> Vec<String> {
    let want = (version.major, version.minor, version.patch);
    let mut out = Vec::new();
    for (name, v) in [
        ("kubeadm", &installed.kubeadm_bin),
        ("kubelet", &installed.kubelet_bin),
    ] {
        if let Some(have) = exact_program_version(v) {
            if have != want {
                out.push(format!(
                    "{name} {} is installed; the cluster file wants {version} (packages.source is `preinstalled`: install {version} yourself, or let up install it with `packages.source: upstream` and `replaceInstalled: true`)",
                    v.trim()
                ));
            }
        }
    }
    out
}

/// The installed pinned packages of another version than `version`: `(name, installed version)`.
pub fn pinned_mismatches(installed: &Installed, version: &Version) -> Vec<(String, String)> {
    let want = (version.major, version.minor, version.patch);
    PINNED
        .iter()
        .filter_map(|p| {
            let v = installed.packages.get(*p)?;
            (triple(v) != Some(want)).then(|| (p.to_string(), v.clone()))
        })
        .collect()
}

/// The refusal text of a pinned package of another version.
pub fn mismatch_message(name: &str, have: &str, version: &Version) -> String {
    format!(
        "{name} {have} is installed; the cluster file wants {version}: set `packages.replaceInstalled: true` to replace it (for a running cluster, `clusterctl upgrade --to {version}`)"
    )
}

/// What `up` does on a node with `installed` to reach `version` with `settings` (a repository source:
/// upstream or mirror). Errors: every reason the node is refused (unsupported family, EL before 8,
/// architecture, another version installed without `replaceInstalled`, a minor without a table row).
pub fn decide(
    settings: &Settings,
    installed: &Installed,
    version: &Version,
) -> Result<Plan, Vec<String>> {
    let mut problems = Vec::new();
    let (family, arch, row) = platform(installed, version, &mut problems);
    let steps = package_steps(settings, installed, version, &mut problems);
    let enable_kubelet = installed.kubelet_enabled != "enabled";
    let runtime = runtime_step(settings, installed, version, (family, row), &mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Plan {
        family: family.unwrap_or(Family::Debian),
        arch: arch.unwrap_or("amd64"),
        install: steps.install,
        downgrade: steps.downgrade,
        hold: steps.hold,
        enable_kubelet,
        runtime,
        kept: steps.kept,
    })
}

/// The node's package family (apt or dnf; EL 8 or newer), its architecture and the package table's
/// row for `version`, each pushing to `problems` when the node cannot be served.
fn platform(
    installed: &Installed,
    version: &Version,
    problems: &mut Vec<String>,
) -> (
    Option<Family>,
    Option<&'static str>,
    Option<&'static table::MinorRow>,
) {
    let family = installed.family();
    if family.is_none() {
        problems.push(format!(
            "this node runs {:?} (ID_LIKE {:?}): up installs packages on Debian/Ubuntu (apt) and EL 8/9 (dnf); install kubeadm, kubelet and kubectl {version} and a container runtime yourself and set `packages.source: preinstalled`",
            installed.os_id, installed.os_like
        ));
    }
    if family == Some(Family::El) {
        let major: Option<u32> = installed
            .os_version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok());
        if major.is_some_and(|m| m < 8) {
            problems.push(format!(
                "this node runs {} {} (no dnf): up installs packages on EL 8 and 9",
                installed.os_id, installed.os_version
            ));
        }
    }
    let arch = arch_of(&installed.arch);
    if arch.is_none() {
        problems.push(format!(
            "no packages for architecture {:?} (amd64, arm64, ppc64le, s390x)",
            installed.arch
        ));
    }
    let row = table::row(minor_of(version));
    if row.is_none() {
        problems.push(format!(
            "no package table row for Kubernetes {}.{}",
            version.major, version.minor
        ));
    }
    (family, arch, row)
}

/// What the pinned packages (kubeadm, kubelet, kubectl) and their companions need.
struct PackageSteps {
    install: Vec<(String, Option<String>)>,
    hold: Vec<String>,
    kept: Vec<String>,
    downgrade: bool,
}

/// The pinned packages at `version` (installed, kept, replaced with `replaceInstalled`, else a
/// problem) and the extras (installed when missing), all held.
fn package_steps(
    settings: &Settings,
    installed: &Installed,
    version: &Version,
    problems: &mut Vec<String>,
) -> PackageSteps {
    let want = (version.major, version.minor, version.patch);
    let mut install = Vec::new();
    let mut hold = Vec::new();
    let mut kept = Vec::new();
    let mut downgrade = false;
    for p in PINNED {
        match installed.packages.get(p) {
            None => install.push((p.to_string(), Some(version.to_string()))),
            Some(v) if triple(v) == Some(want) => {
                kept.push(format!("{p} {v}"));
                if !installed.held.contains(p) {
                    hold.push(p.to_string());
                }
            }
            Some(v) if settings.replace => {
                downgrade |= triple(v).is_some_and(|t| t > want);
                install.push((p.to_string(), Some(version.to_string())));
            }
            Some(v) => problems.push(mismatch_message(p, v, version)),
        }
    }
    for p in EXTRAS {
        match installed.packages.get(p) {
            None => install.push((p.to_string(), None)),
            Some(v) => {
                kept.push(format!("{p} {v}"));
                if !installed.held.contains(p) {
                    hold.push(p.to_string());
                }
            }
        }
    }
    hold.extend(install.iter().map(|(n, _)| n.clone()));
    PackageSteps {
        install,
        hold,
        kept,
        downgrade,
    }
}

/// The container runtime's step: kept when accepted for `version`, else replaced (with
/// `replaceInstalled`), installed from the distribution or the release archive — or a problem.
fn runtime_step(
    settings: &Settings,
    installed: &Installed,
    version: &Version,
    (family, row): (Option<Family>, Option<&'static table::MinorRow>),
    problems: &mut Vec<String>,
) -> RuntimeStep {
    match (settings.runtime, row) {
        (_, None) => RuntimeStep::Keep(String::new()),
        (RuntimeKind::Containerd, Some(row)) => {
            let min = row.containerd_min.join(", ");
            match installed.containerd() {
                Some(v) if table::containerd_accepted(row, &v) => {
                    RuntimeStep::Keep(format!("containerd {v}"))
                }
                Some(_) if settings.replace => RuntimeStep::ContainerdArchive {
                    containerd: row.containerd_archive.into(),
                    runc: row.runc.into(),
                    remove: ["containerd", "containerd.io"]
                        .iter()
                        .filter(|p| installed.packages.contains_key(**p))
                        .map(|p| p.to_string())
                        .collect(),
                },
                Some(v) => {
                    problems.push(format!(
                        "containerd {v} is installed; Kubernetes {}.{} needs containerd {min} or newer in its line: set `packages.replaceInstalled: true` to replace it with the containerd {} release archive",
                        version.major, version.minor, row.containerd_archive
                    ));
                    RuntimeStep::Keep(format!("containerd {v}"))
                }
                None => {
                    let cand = installed.containerd_candidate.as_str();
                    if family == Some(Family::Debian)
                        && !cand.is_empty()
                        && cand != "(none)"
                        && table::containerd_accepted(row, cand)
                    {
                        RuntimeStep::DistroContainerd(cand.into())
                    } else {
                        RuntimeStep::ContainerdArchive {
                            containerd: row.containerd_archive.into(),
                            runc: row.runc.into(),
                            remove: Vec::new(),
                        }
                    }
                }
            }
        }
        (RuntimeKind::Crio, Some(_)) => match installed.crio() {
            Some(v) if triple(&v).map(|t| (t.0, t.1)) == Some(minor_of(version)) => {
                RuntimeStep::Keep(format!("CRI-O {v}"))
            }
            Some(_) if settings.replace => RuntimeStep::Crio,
            Some(v) => {
                problems.push(format!(
                    "CRI-O {v} is installed; Kubernetes {}.{} runs with CRI-O {}.{}: set `packages.replaceInstalled: true` to replace it",
                    version.major, version.minor, version.major, version.minor
                ));
                RuntimeStep::Keep(format!("CRI-O {v}"))
            }
            None => RuntimeStep::Crio,
        },
    }
}

/// The containerd a node runs once `up`'s `packages` phase is done with it, for rendering its
/// configuration before the phase runs (containerd 1 and 2 read different configuration schemas):
/// `installed` (the `containerd --version` the facts read, empty for none) when it is accepted for
/// `version` or nothing replaces it; else, with a repository source (`upstream`, `mirror`), the
/// distribution's `candidate` (Debian/Ubuntu, when accepted; `apt-cache policy`'s `Candidate:`) or
/// the table's release archive — the same choice as [`decide`]. `None` when nothing is installed and
/// nothing will be (CRI-O, `preinstalled`, `bundle`, a minor without a table row).
pub fn containerd_after(
    settings: &Settings,
    installed: &str,
    family: Option<Family>,
    candidate: &str,
    version: &Version,
) -> Option<String> {
    let have = (!installed.trim().is_empty()).then(|| installed.trim().to_string());
    let row = table::row(minor_of(version));
    let installs =
        settings.runtime == RuntimeKind::Containerd && settings.source.from_repositories();
    let (Some(row), true) = (row, installs) else {
        return have;
    };
    match have {
        Some(v) if table::containerd_accepted(row, &v) || !settings.replace => Some(v),
        Some(_) => Some(row.containerd_archive.to_string()),
        None => {
            let cand = candidate.trim();
            if family == Some(Family::Debian)
                && !cand.is_empty()
                && cand != "(none)"
                && table::containerd_accepted(row, cand)
            {
                Some(cand.to_string())
            } else {
                Some(row.containerd_archive.to_string())
            }
        }
    }
}

/// The refusals of a node for `settings` before anything is changed: for a repository source, what
/// [`decide`] refuses; for the bundle, another version of a pinned package without
/// `replaceInstalled`, an unsupported family, or a family the bundle serves no package for
/// (`bundle_families`: the OS families of the bundle's `.deb`/`.rpm` packages); for `preinstalled`,
/// programs reporting another exact version.
pub fn refusals(
    settings: &Settings,
    installed: &Installed,
    version: &Version,
    bundle_families: &BTreeSet<String>,
) -> Vec<String> {
    match &settings.source {
        Source::Upstream | Source::Mirror { .. } => decide(settings, installed, version)
            .err()
            .unwrap_or_default(),
        Source::Preinstalled => preinstalled_mismatches(installed, version),
        Source::Bundle => {
            let mut out = Vec::new();
            let fam = clusterctl_airgap::node::os_family(&installed.os_id, &installed.os_like);
            if !bundle_families.is_empty() && !bundle_families.contains(fam) {
                out.push(format!(
                    "this node runs {} ({} family), but the bundle carries packages only for {}: add the {} packages to airgap.packages and write the bundle again (or install them yourself and set `packages.source: preinstalled`)",
                    installed.os_id,
                    fam,
                    bundle_families.iter().cloned().collect::<Vec<_>>().join(", "),
                    if fam == "rhel" { ".rpm" } else { ".deb" }
                ));
            }
            if !settings.replace {
                for (p, v) in pinned_mismatches(installed, version) {
                    out.push(mismatch_message(&p, &v, version));
                }
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn debian(extra: &str) -> Installed {
        Installed::parse(&format!(
            "id=debian\nlike=\nversion_id=12\narch=x86_64\nheld=\ncontainerd_candidate=1.6.20~ds1-1+deb12u3\n{extra}"
        ))
    }

    fn settings(replace: bool) -> Settings {
        Settings {
            source: Source::Upstream,
            replace,
            runtime: RuntimeKind::Containerd,
        }
    }

    #[test]
    fn a_bare_debian_node_gets_everything_and_the_archive_runtime() {
        let v = Version::new(1, 34, 4);
        let p = decide(&settings(false), &debian(""), &v).unwrap();
        assert_eq!(
            p.install,
            vec![
                ("kubeadm".into(), Some("1.34.4".into())),
                ("kubelet".into(), Some("1.34.4".into())),
                ("kubectl".into(), Some("1.34.4".into())),
                ("cri-tools".into(), None),
                ("kubernetes-cni".into(), None),
            ]
        );
        assert_eq!(p.hold.len(), 5);
        assert!(p.enable_kubelet);
        // bookworm's containerd 1.6.20 is not accepted for 1.34: the release archive.
        assert_eq!(
            p.runtime,
            RuntimeStep::ContainerdArchive {
                containerd: "2.2.1".into(),
                runc: "1.3.3".into(),
                remove: vec![]
            }
        );
        assert!(!p.is_done());
    }

    #[test]
    fn the_containerd_rendered_for_is_the_one_the_phase_leaves() {
        let v = Version::new(1, 34, 4);
        let up = settings(false);
        let deb = Some(Family::Debian);
        let bookworm = "1.6.20~ds1-1+deb12u3";
        // A bare bookworm node gets the release archive (2.x schema), trixie its own 1.7.
        assert_eq!(
            containerd_after(&up, "", deb, bookworm, &v).as_deref(),
            Some("2.2.1")
        );
        assert_eq!(
            containerd_after(&up, "", deb, "1.7.24~ds1-6", &v).as_deref(),
            Some("1.7.24~ds1-6")
        );
        // What is installed stays, unless replaced.
        assert_eq!(
            containerd_after(&up, "1.6.20~ds1", deb, "", &v).as_deref(),
            Some("1.6.20~ds1")
        );
        assert_eq!(
            containerd_after(&settings(true), "1.6.20~ds1", deb, "", &v).as_deref(),
            Some("2.2.1")
        );
        assert_eq!(
            containerd_after(&settings(true), "v2.2.1", deb, "", &v).as_deref(),
            Some("v2.2.1")
        );
        // Nothing installed by up: what the node has.
        let pre = Settings {
            source: Source::Preinstalled,
            ..settings(false)
        };
        assert_eq!(containerd_after(&pre, "", deb, bookworm, &v), None);
        let crio = Settings {
            runtime: RuntimeKind::Crio,
            ..settings(false)
        };
        assert_eq!(containerd_after(&crio, "", deb, bookworm, &v), None);
    }

    #[test]
    fn trixie_gets_its_own_containerd() {
        let v = Version::new(1, 34, 4);
        let mut i = debian("");
        i.containerd_candidate = "1.7.24~ds1-6".into();
        let p = decide(&settings(false), &i, &v).unwrap();
        assert_eq!(
            p.runtime,
            RuntimeStep::DistroContainerd("1.7.24~ds1-6".into())
        );
    }

    #[test]
    fn exactly_these_versions_held_and_enabled_is_done() {
        let v = Version::new(1, 34, 4);
        let i = debian(
            "pkg=kubeadm 1.34.4-1.1\npkg=kubelet 1.34.4-1.1\npkg=kubectl 1.34.4-1.1\npkg=cri-tools 1.34.0-1.1\npkg=kubernetes-cni 1.7.1-1.1\nheld=kubeadm kubelet kubectl cri-tools kubernetes-cni \nkubelet_enabled=enabled\ncontainerd_bin=v2.2.1\n",
        );
        let p = decide(&settings(false), &i, &v).unwrap();
        assert!(p.is_done(), "{p:?}");
        assert_eq!(p.runtime, RuntimeStep::Keep("containerd v2.2.1".into()));
    }

    #[test]
    fn another_version_is_refused_unless_replaced() {
        let v = Version::new(1, 34, 4);
        let i = debian("pkg=kubeadm 1.33.2-1.1\npkg=containerd 1.6.20~ds1-1+deb12u3\n");
        let e = decide(&settings(false), &i, &v).unwrap_err();
        assert!(
            e[0].contains("kubeadm 1.33.2-1.1 is installed; the cluster file wants 1.34.4"),
            "{e:?}"
        );
        assert!(
            e[1].contains("containerd 1.6.20~ds1-1+deb12u3 is installed"),
            "{e:?}"
        );
        let p = decide(&settings(true), &i, &v).unwrap();
        assert!(p
            .install
            .contains(&("kubeadm".into(), Some("1.34.4".into()))));
        assert!(!p.downgrade);
        assert_eq!(
            p.runtime,
            RuntimeStep::ContainerdArchive {
                containerd: "2.2.1".into(),
                runc: "1.3.3".into(),
                remove: vec!["containerd".into()]
            }
        );
        let newer = debian("pkg=kubelet 1.35.0-1.1\n");
        assert!(decide(&settings(true), &newer, &v).unwrap().downgrade);
    }

    #[test]
    fn unsupported_nodes_are_explained() {
        let v = Version::new(1, 34, 4);
        let i = Installed::parse("id=alpine\nlike=\nversion_id=3.20\narch=riscv64\n");
        let e = decide(&settings(false), &i, &v).unwrap_err();
        assert!(
            e[0].contains("Debian/Ubuntu (apt) and EL 8/9 (dnf)"),
            "{e:?}"
        );
        assert!(e[1].contains("riscv64"), "{e:?}");
        let el7 = Installed::parse("id=centos\nlike=rhel fedora\nversion_id=7\narch=x86_64\n");
        assert!(decide(&settings(false), &el7, &v).unwrap_err()[0].contains("EL 8 and 9"));
    }

    #[test]
    fn crio_follows_the_minor() {
        let v = Version::new(1, 34, 4);
        let s = Settings {
            runtime: RuntimeKind::Crio,
            ..settings(false)
        };
        let el = Installed::parse(
            "id=rocky\nlike=rhel centos fedora\nversion_id=9.6\narch=x86_64\npkg=cri-o 1.34.1-150500.1.1\n",
        );
        assert_eq!(
            decide(&s, &el, &v).unwrap().runtime,
            RuntimeStep::Keep("CRI-O 1.34.1-150500.1.1".into())
        );
        let old = Installed::parse(
            "id=rocky\nlike=rhel centos fedora\nversion_id=9.6\narch=x86_64\npkg=cri-o 1.33.0-150500.1.1\n",
        );
        assert!(decide(&s, &old, &v).unwrap_err()[0].contains("CRI-O 1.33.0"));
        let bare =
            Installed::parse("id=rocky\nlike=rhel centos fedora\nversion_id=9.6\narch=aarch64\n");
        let p = decide(&s, &bare, &v).unwrap();
        assert_eq!(
            (p.family, p.arch, p.runtime),
            (Family::El, "arm64", RuntimeStep::Crio)
        );
    }

    #[test]
    fn preinstalled_programs_of_another_exact_version_are_refused() {
        let v = Version::new(1, 34, 4);
        let i = Installed::parse("kubeadm_bin=v1.33.0\nkubelet_bin=v1.34.4\n");
        let e = preinstalled_mismatches(&i, &v);
        assert_eq!(e.len(), 1);
        assert!(e[0].starts_with("kubeadm v1.33.0 is installed"), "{e:?}");
        // A version the program does not print exactly is not judged.
        let odd = Installed::parse(
            "kubeadm_bin=kubeadm version: &version.Info{GitVersion:\"v1.34.1-x\"}\n",
        );
        assert!(preinstalled_mismatches(&odd, &v).is_empty());
    }

    #[test]
    fn the_bundle_must_serve_the_nodes_family() {
        let v = Version::new(1, 34, 4);
        let s = Settings {
            source: Source::Bundle,
            ..settings(false)
        };
        let el = Installed::parse("id=rhel\nlike=fedora\nversion_id=9.4\narch=x86_64\n");
        let debs: BTreeSet<String> = ["debian".to_string()].into();
        let e = refusals(&s, &el, &v, &debs);
        assert!(
            e[0].contains("the bundle carries packages only for debian"),
            "{e:?}"
        );
        assert!(refusals(&s, &debian(""), &v, &debs).is_empty());
    }
}
