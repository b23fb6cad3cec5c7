//! How `upgrade` moves a node's `kubeadm` (`upgrade/kubeadm`), or `kubelet` and `kubectl`
//! (`upgrade/kubelet`), to exactly the target version — with the machinery `up`'s `packages` phase
//! uses ([`crate::packages`]), not scripts of its own. One read-only probe
//! ([`probe::PROBE_SCRIPT`]) says the node's OS family; then, by where the packages come from:
//!
//! - `upstream` / `mirror`: the Kubernetes repository of the TARGET minor put in place exactly as `up`
//!   writes it ([`script::apt_key`] downloading and dearmoring its key, [`script::kubernetes_repo_file`]:
//!   the apt source, or the yum repository with `exclude=`; the mirror's CA), apt's lists of that
//!   source refreshed ([`script::apt_update`]: a repository whose signature does not verify fails the
//!   step), the packages installed with exact pins ([`script::install`]: `kubeadm='1.35.4-*'`) and held
//!   again ([`script::hold`]; on EL the repository's `exclude=` is the hold);
//! - `preinstalled` (installed by the user from the Kubernetes repository, as the kubeadm upgrade guide
//!   has it): the node's own repository switched to the target minor in place
//!   ([`script::switch_repository`]), then the same pinned install and hold;
//! - an air-gap bundle (the file names one): its package files uploaded to [`BUNDLE_DIR`] and installed
//!   from there ([`script::bundle_install`]: `dpkg -i` / `rpm -U`, the holds moved with them).

use std::time::Duration;

use clusterctl_exec::Cmd;

use super::UpgradeData;
use crate::ctx::{Change, NodeCtx, PlanKind};
use crate::error::PhaseError;
use crate::packages::probe::{self, Installed};
use crate::packages::{script, Family, Source, APT_KEYRING, APT_LIST, APT_MIRROR_CONF, MIRROR_CA};

/// Where the air-gap bundle's package files are uploaded on a node (`packages/` under it), the
/// directory `clusterctl_airgap::node::upload_packages` is given.
pub(crate) const BUNDLE_DIR: &str = "/var/lib/clusterctl/bundle";

/// How long one package step (a download, `apt-get`/`dnf` run) may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(900);

fn step(ctx: &mut NodeCtx, script: String) -> Result<(), PhaseError> {
    let mut cmd = Cmd::new(script);
    cmd.timeout = Some(STEP_TIMEOUT);
    ctx.run(cmd).map(|_| ())
}

/// Where the upgrade's packages come from: an air-gap bundle named by the file wins (as before the
/// `packages` setting existed), else `packages.source`.
fn source_of(data: &UpgradeData) -> Source {
    if data.bundle.is_some() {
        Source::Bundle
    } else {
        data.spec.packages.source.clone()
    }
}

/// Installs exactly the target version of `names` (e.g. `["kubeadm"]`) on the node, holding them
/// afterwards (see the module documentation for the steps per source). Errors: an OS family the
/// packages machinery does not serve ([`PhaseError::Check`]), the bundle upload, or the failing
/// command (a repository whose signature does not verify, a version the repository lacks).
pub(crate) fn install(
    ctx: &mut NodeCtx,
    data: &UpgradeData,
    names: &[&str],
) -> Result<(), PhaseError> {
    let version = &data.spec.to;
    let source = source_of(data);
    let Some(out) = ctx.read_labelled(
        probe::PROBE_SCRIPT,
        Some("read the node's OS family and installed packages (one query)"),
    )?
    else {
        ctx.info(&format!(
            "install {} {version} ({}), held",
            names.join(", "),
            source.name()
        ));
        return Ok(());
    };
    let installed = Installed::parse(&out);
    let Some(family) = installed.family() else {
        return Err(ctx.check_error(vec![format!(
            "OS {:?} (ID_LIKE {:?}) is neither Debian/Ubuntu nor EL 8/9: install {} {version} by hand",
            installed.os_id,
            installed.os_like,
            names.join(", ")
        )]));
    };
    if source == Source::Bundle {
        return from_bundle(ctx, data, family, names);
    }
    let minor = crate::packages::minor_of(version);
    match &source {
        Source::Upstream | Source::Mirror { .. } => {
            let mirror = source.mirror();
            let ca_pem = match &source {
                Source::Mirror { ca_pem, .. } => ca_pem.as_deref(),
                _ => None,
            };
            if let (Some(pem), Some(m)) = (ca_pem, mirror) {
                ctx.put_file(MIRROR_CA, 0o644, pem.as_bytes())?;
                if family == Family::Debian {
                    let conf = script::apt_mirror_conf(m);
                    ctx.put_file(APT_MIRROR_CONF, 0o644, conf.as_bytes())?;
                }
            }
            let ca = ca_pem.is_some();
            let (path, text) = script::kubernetes_repo_file(minor, family, mirror, ca);
            if family == Family::Debian {
                let repo = script::kubernetes_repo(minor, family, mirror);
                step(ctx, script::apt_key(&repo, APT_KEYRING, ca))?;
            }
            ctx.put_file(path, 0o644, text.as_bytes())?;
            if family == Family::Debian {
                step(ctx, script::apt_update(APT_LIST))?;
            }
        }
        Source::Preinstalled | Source::Bundle => {
            step(ctx, script::switch_repository(family, minor))?;
        }
    }
    let pins: Vec<(String, Option<String>)> = names
        .iter()
        .map(|n| (n.to_string(), Some(version.to_string())))
        .collect();
    step(ctx, script::install(family, &pins, false))?;
    let held: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    if let Some(h) = script::hold(family, &held) {
        step(ctx, h)?;
    }
    Ok(())
}

/// The bundle's package files uploaded to [`BUNDLE_DIR`]`/packages`, then installed from there.
fn from_bundle(
    ctx: &mut NodeCtx,
    data: &UpgradeData,
    family: Family,
    names: &[&str],
) -> Result<(), PhaseError> {
    if let Some(b) = &data.bundle {
        // Not counted: the install step that follows is the change the plan counts.
        let upload = Change::new(
            PlanKind::Info,
            format!("upload the bundle's packages to {BUNDLE_DIR}"),
        )
        .reported_as("upload the bundle's packages")
        .uncounted();
        ctx.change(upload, |ctx| {
            let t = ctx.connection("upload the bundle's packages")?;
            b.upload(t.as_ref()).map_err(|e| ctx.local_error_from(&e))
        })?;
    }
    let dir = format!("{BUNDLE_DIR}/packages");
    step(
        ctx,
        script::bundle_install(family, &dir, names, &data.spec.to.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use crate::packages::{script, Family};

    #[test]
    fn preinstalled_switches_the_nodes_own_repository_to_the_target_minor() {
        let s = script::switch_repository(Family::Debian, (1, 35));
        assert!(s.contains("s#/v1\\.[0-9]+/deb/#/v1.35/deb/#"), "{s}");
        assert!(s.contains("/etc/apt/sources.list.d/kubernetes.list"), "{s}");
        assert!(s.ends_with("apt-get update -q"), "{s}");
        let s = script::switch_repository(Family::El, (1, 35));
        assert!(s.contains("s#/v1\\.[0-9]+/rpm/#/v1.35/rpm/#"), "{s}");
        assert!(s.contains("/etc/yum.repos.d/kubernetes.repo"), "{s}");
    }

    #[test]
    fn target_minor_repository_and_exact_pins() {
        let (path, text) = script::kubernetes_repo_file((1, 35), Family::Debian, None, false);
        assert_eq!(path, "/etc/apt/sources.list.d/kubernetes.list");
        assert!(
            text.contains("https://pkgs.k8s.io/core:/stable:/v1.35/deb/ /"),
            "{text}"
        );
        let pins = vec![
            ("kubelet".to_string(), Some("1.35.4".to_string())),
            ("kubectl".to_string(), Some("1.35.4".to_string())),
        ];
        let s = script::install(Family::Debian, &pins, false);
        assert!(
            s.contains("--allow-change-held-packages kubelet='1.35.4-*' kubectl='1.35.4-*'"),
            "{s}"
        );
        let s = script::install(Family::El, &pins, false);
        assert!(
            s.contains(
                "dnf install -y --disableexcludes=kubernetes kubelet-'1.35.4-*' kubectl-'1.35.4-*'"
            ),
            "{s}"
        );
    }

    #[test]
    fn bundle_installs_the_uploaded_files_and_moves_the_holds() {
        let s = script::bundle_install(
            Family::Debian,
            "/var/lib/clusterctl/bundle/packages",
            &["kubeadm"],
            "1.35.0",
        );
        assert!(
            s.contains("dpkg -i /var/lib/clusterctl/bundle/packages/kubeadm_1.35.0-*.deb"),
            "{s}"
        );
        assert!(s.contains("apt-mark unhold kubeadm"), "{s}");
        assert!(s.ends_with("apt-mark hold kubeadm"), "{s}");
        let s = script::bundle_install(Family::El, "/b", &["kubelet", "kubectl"], "1.35.0");
        assert!(
            s.contains(
                "rpm -U --oldpackage --replacepkgs /b/kubelet-1.35.0-*.rpm /b/kubectl-1.35.0-*.rpm"
            ),
            "{s}"
        );
    }
}
