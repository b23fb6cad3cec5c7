//! Host preparation files every node gets: `/etc/sysctl.d/99-kubernetes.conf` (bridge netfilter and
//! forwarding) and `/etc/modules-load.d/kubernetes.conf` (`overlay`, `br_netfilter`, plus the IPVS
//! modules in ipvs mode and `vxlan` for the builtin CNI), [`CRICTL_CONFIG_PATH`] (`crictl` pointed at
//! the file's runtime, which it cannot guess when several runtimes' sockets exist); with `nodeEnvironment:
//! unprivileged-container` also [`KMSG_TMPFILES_PATH`], [`NODE_ENV_SCRIPT`] and [`NODE_ENV_UNIT`]
//! (`/proc/sys/net` made writable, the kernel values of [`KUBELET_SYSCTLS`] shown read-only).

use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::templates;
use clusterctl_spec::model::{CniPlugin, KubeProxyMode, NodeEnvironment};
use clusterctl_spec::ValidNode;
use minijinja::context;

/// sysctl file path.
pub(crate) const SYSCTL_PATH: &str = "/etc/sysctl.d/99-kubernetes.conf";
/// modules-load file path.
pub(crate) const MODULES_PATH: &str = "/etc/modules-load.d/kubernetes.conf";
/// crictl's configuration (cri-tools reads `/etc/crictl.yaml` unless `--config` is given).
pub(crate) const CRICTL_CONFIG_PATH: &str = "/etc/crictl.yaml";
/// The `/dev/kmsg` → `/dev/null` tmpfiles entry (unprivileged-container nodes).
pub const KMSG_TMPFILES_PATH: &str = "/etc/tmpfiles.d/clusterctl-kmsg.conf";
/// The script an unprivileged node container runs at boot (unprivileged-container nodes): makes
/// `/proc/sys/net` writable (per-netns values the CNI sets) and shows the kubelet its kernel values.
pub const NODE_ENV_SCRIPT: &str = "/usr/local/lib/clusterctl/node-environment.sh";
/// The oneshot unit running [`NODE_ENV_SCRIPT`] before containerd and the kubelet.
pub const NODE_ENV_UNIT: &str = "/etc/systemd/system/clusterctl-node-environment.service";
/// The kernel values the kubelet's container manager checks and would set (kubelet
/// `setupKernelTunables`), as `/proc/sys` paths and values.
pub(crate) const KUBELET_SYSCTLS: &[(&str, &str)] = &[
    ("vm/overcommit_memory", "1"),
    ("vm/panic_on_oom", "0"),
    ("kernel/panic", "10"),
    ("kernel/panic_on_oops", "1"),
    ("kernel/keys/root_maxkeys", "1000000"),
    ("kernel/keys/root_maxbytes", "25000000"),
];

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
    // Without it crictl tries its default endpoints in turn and warns; with two runtimes installed it
    // may talk to the other one.
    out.push(RenderedFile::text(
        CRICTL_CONFIG_PATH,
        0o644,
        format!(
            "# crictl talks to the runtime the cluster uses (written by clusterctl).\nruntime-endpoint: {s}\nimage-endpoint: {s}\ntimeout: 10\n",
            s = cx.cri_socket
        ),
        Purpose::CrictlConfig,
    ));
    if cx.c.spec().node_environment == NodeEnvironment::UnprivilegedContainer {
        out.push(RenderedFile::text(
            KMSG_TMPFILES_PATH,
            0o644,
            templates::render("kmsg-tmpfiles.conf.j2", context! {})?,
            Purpose::NodeEnvironment,
        ));
        out.push(RenderedFile::text(
            NODE_ENV_SCRIPT,
            0o755,
            templates::render(
                "node-environment.sh.j2",
                context! { values => KUBELET_SYSCTLS },
            )?,
            Purpose::NodeEnvironment,
        ));
        out.push(RenderedFile::text(
            NODE_ENV_UNIT,
            0o644,
            templates::render(
                "clusterctl-node-environment.service.j2",
                context! { script => NODE_ENV_SCRIPT },
            )?,
            Purpose::NodeEnvironment,
        ));
    }
    Ok(out)
}
