//! Host preparation files every node gets: `/etc/sysctl.d/99-kubernetes.conf` (bridge netfilter and
//! forwarding) and `/etc/modules-load.d/kubernetes.conf` (`overlay`, `br_netfilter`, plus the IPVS
//! modules in ipvs mode and `vxlan` for the builtin CNI).

use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::templates;
use clusterctl_spec::model::{CniPlugin, KubeProxyMode};
use clusterctl_spec::ValidNode;
use minijinja::context;

/// sysctl file path.
pub const SYSCTL_PATH: &str = "/etc/sysctl.d/99-kubernetes.conf";
/// modules-load file path.
pub const MODULES_PATH: &str = "/etc/modules-load.d/kubernetes.conf";

/// The kernel modules `cluster` needs loaded at boot, in load order.
pub(crate) fn modules(cx: &Ctx) -> Vec<&'static str> {
    let spec = cx.c.spec();
    let mut m = vec!["overlay", "br_netfilter"];
    if spec.networking.kube_proxy == KubeProxyMode::Ipvs {
        m.extend(["ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "nf_conntrack"]);
    }
    if spec.networking.cni.plugin == CniPlugin::Builtin {
        m.push("vxlan");
    }
    m
}

pub(crate) fn node_files(
    cx: &Ctx,
    _node: &ValidNode,
    out: &mut Vec<RenderedFile>,
) -> Result<(), RenderError> {
    out.extend(cx.cached("host", || files(cx))?);
    Ok(())
}

fn files(cx: &Ctx) -> Result<Vec<RenderedFile>, RenderError> {
    let mut out = Vec::new();
    let ipv6 = cx.c.pod_subnet().addr().is_ipv6() || cx.c.service_subnet().addr().is_ipv6();
    let sysctl = templates::render("sysctl.conf.j2", context! { ipv6 })?;
    out.push(RenderedFile::text(
        SYSCTL_PATH,
        0o644,
        sysctl,
        Purpose::Sysctl,
    ));
    let mods = templates::render("modules-load.conf.j2", context! { modules => modules(cx) })?;
    out.push(RenderedFile::text(
        MODULES_PATH,
        0o644,
        mods,
        Purpose::KernelModules,
    ));
    Ok(out)
}
