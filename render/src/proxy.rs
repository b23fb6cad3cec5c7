//! `spec.proxy` as systemd drop-ins: the container runtime's unit ([`RUNTIME_DROP_IN`] for
//! containerd, [`CRIO_DROP_IN`] for CRI-O: image pulls) and the kubelet's ([`KUBELET_DROP_IN`]) get
//! `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` (the file's `noProxy` completed with the cluster's own
//! addresses, [`clusterctl_spec::ProxyEnv`]). Nothing without `spec.proxy`.

use crate::ctx::Ctx;
use crate::output::{Purpose, RenderedFile};
use clusterctl_spec::model::RuntimeKind;
use clusterctl_spec::ProxyEnv;

/// containerd's proxy drop-in.
pub const RUNTIME_DROP_IN: &str = "/etc/systemd/system/containerd.service.d/http-proxy.conf";
/// CRI-O's proxy drop-in.
pub const CRIO_DROP_IN: &str = "/etc/systemd/system/crio.service.d/http-proxy.conf";
/// The kubelet's proxy drop-in.
pub const KUBELET_DROP_IN: &str = "/etc/systemd/system/kubelet.service.d/20-clusterctl-proxy.conf";

/// The drop-ins of a cluster with `spec.proxy` (none without).
pub(crate) fn node_files(cx: &Ctx, out: &mut Vec<RenderedFile>) {
    let Some(env) = ProxyEnv::of(cx.c) else {
        return;
    };
    let text = drop_in(&env);
    let runtime = match cx.c.spec().runtime.kind {
        RuntimeKind::Containerd => RUNTIME_DROP_IN,
        RuntimeKind::Crio => CRIO_DROP_IN,
    };
    out.push(RenderedFile::text(
        runtime,
        0o644,
        text.clone(),
        Purpose::RuntimeProxy,
    ));
    out.push(RenderedFile::text(
        KUBELET_DROP_IN,
        0o644,
        text,
        Purpose::KubeletProxy,
    ));
}

/// The `[Service]` drop-in: one `Environment=` line per variable, each quoted whole.
fn drop_in(env: &ProxyEnv) -> String {
    let mut s = String::from(
        "# The cluster file's spec.proxy (written by clusterctl); NO_PROXY keeps node-to-node and\n# in-cluster traffic direct.\n[Service]\n",
    );
    for (k, v) in env.upper() {
        s.push_str(&format!("Environment=\"{k}={v}\"\n"));
    }
    s
}
