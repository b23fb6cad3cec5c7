//! flannel's `net-conf.json` (flannel-io/flannel pkg/subnet/config.go): `Network` = podSubnet (IPv4) or
//! `IPv6Network`, VXLAN backend; the user's values are merged first. With `cni.mtu` and the VXLAN backend,
//! `Backend.mtu` is the pod MTU + 50 (flannel makes its `flannel.1` device, whose MTU the pods get,
//! 50 bytes smaller than `Backend.mtu`: pkg/backend/vxlan/device.go). This file is never applied on its
//! own: it becomes the `net-conf.json` of upstream's `kube-flannel-cfg` ConfigMap ([`super::install`]).

use super::{merge, set, user_values};
use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::yaml;
use serde_yaml::{Mapping, Value};

/// Cluster-relative path of net-conf.json.
pub(crate) const NET_CONF_PATH: &str = "cni/flannel-net-conf.json";

pub(crate) fn cluster_files(cx: &Ctx, out: &mut Vec<RenderedFile>) -> Result<(), RenderError> {
    let pod = cx.c.pod_subnet();
    let mut v = Value::Mapping(Mapping::new());
    merge(&mut v, &user_values(cx));
    if pod.addr().is_ipv4() {
        set(&mut v, &["EnableIPv4"], Value::Bool(true));
        set(&mut v, &["Network"], Value::String(pod.to_string()));
    } else {
        set(&mut v, &["EnableIPv4"], Value::Bool(false));
        set(&mut v, &["EnableIPv6"], Value::Bool(true));
        set(&mut v, &["IPv6Network"], Value::String(pod.to_string()));
    }
    let backend_missing = matches!(&v, Value::Mapping(m) if !m.contains_key("Backend"));
    if backend_missing {
        set(
            &mut v,
            &["Backend", "Type"],
            Value::String("vxlan".to_string()),
        );
    }
    let vxlan = v
        .get("Backend")
        .and_then(|b| b.get("Type"))
        .and_then(Value::as_str)
        .is_some_and(|t| t.eq_ignore_ascii_case("vxlan"));
    if let (Some(mtu), true) = (cx.c.spec().networking.cni.mtu, vxlan) {
        set(
            &mut v,
            &["Backend", "mtu"],
            Value::Number((u64::from(mtu) + 50).into()),
        );
    }
    let text = yaml::json("flannel net-conf.json", &v)?;
    out.push(RenderedFile::text(
        NET_CONF_PATH,
        0o644,
        text,
        Purpose::ClusterManifest,
    ));
    Ok(())
}
