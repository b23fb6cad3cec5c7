//! Cilium Helm values (keys of cilium/cilium install/kubernetes/cilium/values.yaml), as the seed installs
//! it: `ipam.mode: kubernetes` (pod CIDRs come from podSubnet through the controller manager),
//! `k8sServiceHost`/`k8sServicePort` = the control-plane endpoint, `kubeProxyReplacement`,
//! `ipv4NativeRoutingCIDR` = podSubnet. Images are pinned by tag (`useDigest: false`) and taken from the
//! mirror when there is one; Envoy runs inside the agent (`envoy.enabled: false`) so no extra image.

use super::versions::Pins;
use super::{merge, set, user_values};
use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::yaml;
use serde_yaml::{Mapping, Value};

/// Cluster-relative path of the values file.
pub(crate) const VALUES_PATH: &str = "cni/cilium-values.yaml";

fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

pub(crate) fn cluster_files(cx: &Ctx, out: &mut Vec<RenderedFile>) -> Result<(), RenderError> {
    let Some(Pins::Cilium { version }) = &cx.pins else {
        return Ok(());
    };
    let cni = &cx.c.spec().networking.cni;
    let pod = cx.c.pod_subnet();
    let mut v = Value::Mapping(Mapping::new());
    merge(&mut v, &user_values(cx));
    set(&mut v, &["k8sServiceHost"], s(&cx.c.endpoint().host));
    set(
        &mut v,
        &["k8sServicePort"],
        Value::Number(cx.c.endpoint().port.into()),
    );
    set(
        &mut v,
        &["kubeProxyReplacement"],
        Value::Bool(cni.kube_proxy_replacement),
    );
    set(&mut v, &["ipam", "mode"], s("kubernetes"));
    let key = if pod.addr().is_ipv4() {
        "ipv4NativeRoutingCIDR"
    } else {
        "ipv6NativeRoutingCIDR"
    };
    set(&mut v, &[key], s(&pod.to_string()));
    if let Some(mtu) = cni.mtu {
        // The chart's key is `MTU` (values.yaml `MTU: 0`, written to cilium-config's `mtu`); a
        // lowercase `mtu` is silently ignored by the chart.
        set(&mut v, &["MTU"], Value::Number(mtu.into()));
    }
    let repo = |r: &str| match cx.c.mirror() {
        Some(m) => format!("{}/{}", m.prefix, r),
        None => format!("quay.io/{r}"),
    };
    set(&mut v, &["image", "repository"], s(&repo("cilium/cilium")));
    set(&mut v, &["image", "tag"], s(version));
    set(&mut v, &["image", "useDigest"], Value::Bool(false));
    // The chart appends "-generic" to operator.image.repository.
    set(
        &mut v,
        &["operator", "image", "repository"],
        s(&repo("cilium/operator")),
    );
    set(&mut v, &["operator", "image", "tag"], s(version));
    set(
        &mut v,
        &["operator", "image", "useDigest"],
        Value::Bool(false),
    );
    set(&mut v, &["envoy", "enabled"], Value::Bool(false));
    let text = yaml::doc("Cilium values", &v)?;
    out.push(RenderedFile::text(
        VALUES_PATH,
        0o644,
        text,
        Purpose::HelmValues,
    ));
    Ok(())
}
