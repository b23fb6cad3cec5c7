//! `packages` (after `preflight`, before `files` and the runtime configuration): brings every node to
//! exactly the packages the cluster file implies with the machinery of [`crate::packages`] — kubeadm,
//! kubelet and kubectl at `kubernetesVersion` (with cri-tools and kubernetes-cni) from the Kubernetes
//! repository of that minor (or the site mirror of it), held, the kubelet enabled, and the container
//! runtime (`upstream`, the default on SSH hosts, or `mirror`); with `bundle` (the default for a file
//! whose air-gap bundle carries kubeadm), the same from the verified bundle, offline: the node's files
//! placed and installed (`.deb`s, `.rpm`s, static binaries, archives with `extractTo` — the work of
//! `airgap/packages`, which with this source is not a phase of its own), then held, the kubelet
//! enabled and the archive containerd given its unit ([`crate::packages::bundle`]); with
//! `preinstalled` (the docker provider's default, and an air-gapped file's whose bundle carries no
//! kubeadm) it checks that kubeadm and kubelet are there (the check preflight used to make).
//! One read-only probe decides; a node that already has everything is left alone (nothing
//! downloaded, nothing restarted). Offline (`--dry-run` without `--probe`) the plan lists what
//! would be done on a node without packages, per OS family.

use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::packages::probe::{self, Installed, Plan, RuntimeStep};
use crate::packages::{bundle, CONTAINERD_ARCHIVE_UNIT, RECORD_DIR};
use crate::packages::{script, Family, Settings, Source, APT_KEYRING, APT_LIST, APT_MIRROR_CONF};
use crate::packages::{CRIO_APT_KEYRING, EXTRAS, MIRROR_CA, PINNED};
use clusterctl_exec::Cmd;
use semver::Version;
use std::time::Duration;

use super::UpData;

/// How long one install step (a download and `apt-get`/`dnf` run) may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(900);

/// The `packages` phase. Errors: [`PhaseError::Check`] with every reason the node is refused
/// (kubeadm/kubelet missing with `preinstalled`, another version without `replaceInstalled`, an OS it
/// cannot serve), or the failing install command (e.g. apt refusing an unsigned repository).
pub(crate) fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let settings = &data.spec.packages;
    let version = &data.spec.kubernetes_version;
    let Some(out) = ctx.read_labelled(
        probe::PROBE_SCRIPT,
        Some("read the installed packages, holds and the kubelet unit (one query)"),
    )?
    else {
        offline_plan(ctx, settings, version);
        return Ok(());
    };
    let installed = Installed::parse(&out);
    match &settings.source {
        Source::Preinstalled => check_present(ctx, &installed, version),
        Source::Bundle => from_bundle(ctx, data, &installed, version),
        Source::Upstream | Source::Mirror { .. } => {
            let plan = probe::decide(settings, &installed, version)
                .map_err(|problems| ctx.check_error(problems))?;
            if plan.is_done() {
                ctx.info(&format!(
                    "in place: {}, {}; held; kubelet enabled",
                    plan.kept.join(", "),
                    runtime_text(&plan.runtime)
                ));
                return Ok(());
            }
            apply(ctx, settings, &data.spec.proxy, &plan, version)
        }
    }
}

/// `preinstalled`: kubeadm, kubelet and kubectl must be on `PATH` (the programs are not run; `up`'s
/// waits on the nodes use kubectl with admin.conf, never a tool a node may lack such as curl).
fn check_present(
    ctx: &mut NodeCtx,
    installed: &Installed,
    version: &Version,
) -> Result<(), PhaseError> {
    let missing: Vec<&str> = [
        ("kubeadm", &installed.kubeadm_path),
        ("kubelet", &installed.kubelet_path),
        ("kubectl", &installed.kubectl_path),
    ]
    .iter()
    .filter(|(_, v)| v.is_empty())
    .map(|(n, _)| *n)
    .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(ctx.check_error(vec![format!(
        "{} not installed: install kubeadm, kubelet and kubectl {version} yourself, or let up install them with `packages.source: upstream` (or `mirror`) in the cluster file",
        missing.join(", ")
    )]))
}

/// The OS families (`debian`, `rhel`) the bundle's packages are for: their `os`, leaving out files for
/// any OS (release archives, binaries).
fn bundle_families(
    packages: &[clusterctl_airgap::bundle::BundleFile],
) -> std::collections::BTreeSet<String> {
    packages
        .iter()
        .filter_map(|p| p.os.clone())
        .filter(|o| o != "any")
        .collect()
}

/// `bundle`: the node's files from the verified bundle placed and installed (what `airgap/packages`
/// does for the other sources), then [`bundle::finish`]'s steps. The node's package state is recorded
/// first (for `destroy --purge`); another version of a pinned package is refused before anything is
/// placed unless `replaceInstalled`.
fn from_bundle(
    ctx: &mut NodeCtx,
    data: &UpData,
    installed: &Installed,
    version: &Version,
) -> Result<(), PhaseError> {
    let settings = &data.spec.packages;
    // Refused before anything is placed: another version of a pinned package (unless
    // `replaceInstalled`), or an OS family the bundle carries no package for.
    let families = data
        .spec
        .airgap
        .as_ref()
        .and_then(|a| a.verified())
        .map(|vb| bundle_families(&vb.manifest.packages))
        .unwrap_or_default();
    let refused = probe::refusals(settings, installed, version, &families);
    if !refused.is_empty() {
        return Err(ctx.check_error(refused));
    }
    if !installed.recorded {
        step(ctx, script::record())?;
    }
    let before = ctx.changes;
    super::airgap::packages(ctx, data)?;
    let now = if ctx.changes > before {
        // Not a change: a dry run installed nothing, so it cannot probe again; it plans the rest.
        if ctx.mode.dry_run {
            ctx.info("then: the Kubernetes packages held, the kubelet enabled, containerd from the bundle's release archive given its unit and enabled");
            return Ok(());
        }
        match ctx.read(probe::PROBE_SCRIPT)? {
            Some(out) => Installed::parse(&out),
            None => return Ok(()),
        }
    } else {
        installed.clone()
    };
    let todo = bundle::finish(settings, &now, version).map_err(|p| ctx.check_error(p))?;
    if todo.containerd_unit {
        ctx.put_file(
            CONTAINERD_ARCHIVE_UNIT,
            0o644,
            script::CONTAINERD_UNIT.as_bytes(),
        )?;
        step(
            ctx,
            format!("mkdir -p {RECORD_DIR} && echo 'containerd from the bundle' > {RECORD_DIR}/containerd-archive && systemctl daemon-reload"),
        )?;
    }
    if todo.enable_containerd {
        step(ctx, "systemctl enable containerd".to_string())?;
    }
    if let Some(h) = script::hold(now.family().unwrap_or(Family::Debian), &todo.hold) {
        step(ctx, h)?;
    }
    if todo.enable_kubelet {
        step(ctx, script::ENABLE_KUBELET.to_string())?;
    }
    Ok(())
}

fn runtime_text(r: &RuntimeStep) -> String {
    match r {
        RuntimeStep::Keep(s) if s.is_empty() => "runtime kept".into(),
        RuntimeStep::Keep(s) => s.clone(),
        RuntimeStep::DistroContainerd(v) => format!("the distribution's containerd {v}"),
        RuntimeStep::ContainerdArchive {
            containerd, runc, ..
        } => {
            format!("the containerd {containerd} and runc {runc} release archives (sha256 checked)")
        }
        RuntimeStep::Crio => "CRI-O from its repository of this minor".into(),
    }
}

fn step(ctx: &mut NodeCtx, script: String) -> Result<(), PhaseError> {
    step_via(ctx, &[], script)
}

/// An install step whose downloads (apt, dnf, curl, wget) go through the proxy of `proxy`.
fn step_via(
    ctx: &mut NodeCtx,
    proxy: &[(String, String)],
    script: String,
) -> Result<(), PhaseError> {
    ctx.run(step_cmd(script, proxy)).map(|_| ())
}

/// The command of one install step: `script` with [`STEP_TIMEOUT`] and the proxy environment.
fn step_cmd(script: String, proxy: &[(String, String)]) -> Cmd {
    let mut cmd = Cmd::new(script);
    cmd.timeout = Some(STEP_TIMEOUT);
    cmd.env.extend(proxy.iter().cloned());
    cmd
}

/// Runs `plan`'s steps in order (in a dry run with `--probe` each is only listed), each with the
/// proxy environment `proxy` (`spec.proxy`; empty: none).
fn apply(
    ctx: &mut NodeCtx,
    settings: &Settings,
    proxy: &[(String, String)],
    plan: &Plan,
    version: &Version,
) -> Result<(), PhaseError> {
    let minor = crate::packages::minor_of(version);
    let family = plan.family;
    let mirror = settings.source.mirror();
    let ca_pem = match &settings.source {
        Source::Mirror { ca_pem, .. } => ca_pem.as_deref(),
        _ => None,
    };
    let ca = ca_pem.is_some();
    if !plan.kept.is_empty() {
        ctx.info(&format!("in place: {}", plan.kept.join(", ")));
    }
    step_via(ctx, proxy, script::record())?;
    if let (Some(pem), Some(m)) = (ca_pem, mirror) {
        ctx.put_file(MIRROR_CA, 0o644, pem.as_bytes())?;
        if family == Family::Debian {
            ctx.put_file(
                APT_MIRROR_CONF,
                0o644,
                script::apt_mirror_conf(m).as_bytes(),
            )?;
        }
    }
    if plan.needs_kubernetes_repo() {
        let (path, text) = script::kubernetes_repo_file(minor, family, mirror, ca);
        if family == Family::Debian {
            step_via(
                ctx,
                proxy,
                script::apt_key(
                    &script::kubernetes_repo(minor, family, mirror),
                    APT_KEYRING,
                    ca,
                ),
            )?;
        }
        ctx.put_file(path, 0o644, text.as_bytes())?;
        if family == Family::Debian {
            step_via(ctx, proxy, script::apt_update(APT_LIST))?;
        }
        step_via(
            ctx,
            proxy,
            script::install(family, &plan.install, plan.downgrade),
        )?;
    }
    match &plan.runtime {
        RuntimeStep::Keep(_) => {}
        RuntimeStep::DistroContainerd(v) => step_via(ctx, proxy, script::distro_containerd(v))?,
        RuntimeStep::ContainerdArchive {
            containerd,
            runc,
            remove,
        } => step_via(
            ctx,
            proxy,
            script::containerd_archive(containerd, runc, plan.arch, mirror, ca, family, remove),
        )?,
        RuntimeStep::Crio => {
            let Some((path, text)) = script::crio_repo_file(minor, family, mirror, ca) else {
                return Err(ctx.local_error(format!(
                    "no CRI-O repository in the package table for {}.{}",
                    minor.0, minor.1
                )));
            };
            if family == Family::Debian {
                let repo = script::crio_repo(minor, family, mirror).unwrap_or_default();
                step_via(ctx, proxy, script::apt_key(&repo, CRIO_APT_KEYRING, ca))?;
            }
            ctx.put_file(path, 0o644, text.as_bytes())?;
            step_via(ctx, proxy, script::crio_install(family, settings.replace))?;
        }
    }
    if let Some(h) = script::hold(family, &plan.hold) {
        step_via(ctx, proxy, h)?;
    }
    if plan.enable_kubelet {
        step_via(ctx, proxy, script::ENABLE_KUBELET.to_string())?;
    }
    Ok(())
}

/// Offline: what `up` would do on a node without any of the packages, per OS family it serves.
fn offline_plan(ctx: &mut NodeCtx, settings: &Settings, version: &Version) {
    match &settings.source {
        Source::Preinstalled => ctx.info(&format!(
            "check: kubeadm and kubelet {version} installed (packages.source: preinstalled)"
        )),
        Source::Bundle => ctx.info(&format!(
            "from the bundle: its packages for the node's OS family and architecture installed (kubeadm, kubelet, kubectl {version}), held; kubelet enabled; containerd from the bundle's release archive given its unit and enabled"
        )),
        Source::Upstream | Source::Mirror { .. } => {
            for family in [Family::Debian, Family::El] {
                let minor = crate::packages::minor_of(version);
                let repo = script::kubernetes_repo(minor, family, settings.source.mirror());
                let pinned: Vec<String> = PINNED.iter().map(|p| format!("{p} {version}")).collect();
                ctx.info(&format!(
                    "on {} nodes without them: {} and {} from {repo}, held; kubelet enabled; {}",
                    family.label(),
                    pinned.join(", "),
                    EXTRAS.join(", "),
                    match settings.runtime {
                        clusterctl_spec::model::RuntimeKind::Containerd => format!(
                            "containerd: kept when installed at a version Kubernetes {}.{} supports, else {}",
                            minor.0,
                            minor.1,
                            if family == Family::Debian {
                                "the distribution's when supported, else the release archives (sha256 checked)"
                            } else {
                                "the release archives (sha256 checked)"
                            }
                        ),
                        clusterctl_spec::model::RuntimeKind::Crio => format!(
                            "CRI-O from {}",
                            script::crio_repo(minor, family, settings.source.mirror())
                                .unwrap_or_else(|| "(no table row)".into())
                        ),
                    }
                ));
            }
            ctx.info(&format!(
                "nodes with other versions are refused unless packages.replaceInstalled is true (it is {}); --probe shows each node's actions",
                settings.replace
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clusterctl_airgap::bundle::BundleFile;

    #[test]
    fn install_steps_carry_the_proxy_environment() {
        let proxy = vec![
            ("http_proxy".to_string(), "http://p:3128".to_string()),
            ("NO_PROXY".to_string(), "localhost,10.0.0.1".to_string()),
        ];
        let cmd = step_cmd("apt-get update -q".into(), &proxy);
        assert_eq!(cmd.env, proxy);
        assert_eq!(cmd.timeout, Some(STEP_TIMEOUT));
        assert!(step_cmd("true".into(), &[]).env.is_empty());
    }

    #[test]
    fn the_bundle_families_are_those_of_its_os_specific_packages() {
        let file = |os: Option<&str>| BundleFile {
            name: "x".into(),
            path: "packages/x".into(),
            os: os.map(str::to_string),
            arch: None,
            size: 1,
            sha256: clusterctl_airgap::Digest::of(b"x"),
            extract_to: None,
            kubernetes_version: None,
        };
        let got = bundle_families(&[file(Some("debian")), file(Some("any")), file(None)]);
        assert_eq!(got.into_iter().collect::<Vec<_>>(), ["debian"]);
        assert!(bundle_families(&[file(Some("any"))]).is_empty());
    }
}
