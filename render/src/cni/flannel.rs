//! flannel's `net-conf.json` (flannel-io/flannel pkg/subnet/config.go): `Network` = podSubnet (IPv4) or
//! `IPv6Network`, VXLAN backend; the user's values are merged first. The manifest applying it (the
//! `kube-flannel-cfg` ConfigMap) is upstream's; its images are pinned in [`super::versions`].

use super::{merge, set, user_values};
use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::yaml;
use serde_yaml::{Mapping, Value};

/// Cluster-relative path of net-conf.json.
pub const NET_CONF_PATH: &str = "cni/flannel-net-conf.json";

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
    let text = yaml::json("flannel net-conf.json", &v)?;
    out.push(RenderedFile::text(
        NET_CONF_PATH,
        0o644,
        text,
        Purpose::ClusterManifest,
    ));
    Ok(())
}
