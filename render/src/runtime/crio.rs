//! CRI-O: a `crio.conf.d` drop-in (cri-o docs/crio.conf.5.md: `[crio.runtime] cgroup_manager`,
//! `conmon_cgroup`; `[crio.image] pause_image`, `global_auth_file`) and a containers-registries.conf v2
//! drop-in mirroring every source registry to the mirror prefix, with the mirror's CA under
//! `/etc/containers/certs.d/<host>/ca.crt`. The auth file itself holds credentials and is written by the
//! phases from the environment variables the cluster file names; render only names its path.

use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::templates;
use clusterctl_spec::model::CgroupDriver;
use minijinja::context;

/// The CRI-O drop-in.
pub(crate) const CRIO_DROPIN_PATH: &str = "/etc/crio/crio.conf.d/10-clusterctl.conf";
/// The registries.conf drop-in.
pub(crate) const REGISTRIES_PATH: &str = "/etc/containers/registries.conf.d/10-clusterctl.conf";
/// The registry auth file CRI-O reads (written by the phases, mode 0600).
pub(crate) const AUTH_FILE: &str = "/etc/crio/auth.json";

pub(crate) fn node_files(cx: &Ctx, out: &mut Vec<RenderedFile>) -> Result<(), RenderError> {
    out.extend(cx.cached("crio", || files(cx))?);
    Ok(())
}

fn files(cx: &Ctx) -> Result<Vec<RenderedFile>, RenderError> {
    let mut out = Vec::new();
    let mirror = cx.c.mirror();
    let has_auth = mirror.is_some_and(|m| m.username_env.is_some() || m.password_env.is_some());
    let (cgroup_manager, conmon_cgroup) = match cx.c.spec().runtime.cgroup_driver {
        CgroupDriver::Systemd => ("systemd", "pod"),
        CgroupDriver::Cgroupfs => ("cgroupfs", "pod"),
    };
    let conf = templates::render(
        "crio.conf.j2",
        context! {
            cgroup_manager, conmon_cgroup, pause_image => cx.kimg.pause_image(),
            auth_file => if has_auth { AUTH_FILE } else { "" },
        },
    )?;
    out.push(RenderedFile::text(
        CRIO_DROPIN_PATH,
        0o644,
        conf,
        Purpose::CrioConfig,
    ));
    let Some(m) = mirror else { return Ok(out) };
    let regs = templates::render(
        "registries.conf.j2",
        context! { registries => cx.registries.clone(), mirror => m.prefix.clone() },
    )?;
    out.push(RenderedFile::text(
        REGISTRIES_PATH,
        0o644,
        regs,
        Purpose::RegistriesConf,
    ));
    if let Some(pem) = &m.ca_pem {
        let mut t = pem.clone();
        if !t.ends_with('\n') {
            t.push('\n');
        }
        out.push(RenderedFile::text(
            format!("/etc/containers/certs.d/{}/ca.crt", m.host),
            0o644,
            t,
            Purpose::RegistryCa,
        ));
    }
    Ok(out)
}
