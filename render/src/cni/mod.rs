//! CNI files, every pool taken from podSubnet: Calico's `Installation` (`ipPools[].cidr`), Cilium's Helm
//! values (`ipam.mode: kubernetes`, `k8sServiceHost/Port` = the endpoint, `kubeProxyReplacement`,
//! `ipv4NativeRoutingCIDR` = podSubnet), flannel's `net-conf.json` (`Network`), and for the builtin CNI
//! the conflist template, the agent's settings and systemd unit per node plus its RBAC. The user's
//! pass-through `cni.values` are deep-merged first, then the pool keys are set, so they always win.

pub mod builtin;
pub(crate) mod calico;
pub(crate) mod cilium;
pub(crate) mod flannel;
pub mod install;
pub mod masq;
pub mod netpol;
pub mod versions;

use crate::ctx::Ctx;
use crate::output::{RenderError, RenderedFile};
use clusterctl_spec::model::CniPlugin;
use clusterctl_spec::ValidNode;
use serde_yaml::{Mapping, Value};

pub(crate) fn node_files(
    cx: &Ctx,
    node: &ValidNode,
    out: &mut Vec<RenderedFile>,
) -> Result<(), RenderError> {
    if cx.c.spec().networking.cni.plugin == CniPlugin::Builtin {
        builtin::node_files(cx, node, out)?;
    }
    Ok(())
}

pub(crate) fn cluster_files(cx: &Ctx, out: &mut Vec<RenderedFile>) -> Result<(), RenderError> {
    match cx.c.spec().networking.cni.plugin {
        CniPlugin::Builtin => builtin::cluster_files(cx, out),
        CniPlugin::Calico => calico::cluster_files(cx, out),
        CniPlugin::Cilium => cilium::cluster_files(cx, out),
        CniPlugin::Flannel => flannel::cluster_files(cx, out),
        CniPlugin::Kindnet | CniPlugin::None => Ok(()),
    }
}

/// Deep-merges `over` into `base`: mappings merge key by key, anything else in `over` replaces.
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Mapping(b), Value::Mapping(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// Sets `path` (mapping keys) in `v` to `value`, creating mappings on the way.
pub fn set(v: &mut Value, path: &[&str], value: Value) {
    let Some((last, head)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for k in head {
        if !cur.is_mapping() {
            *cur = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(m) = cur else { return };
        cur = m
            .entry(Value::String((*k).to_string()))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
    }
    if !cur.is_mapping() {
        *cur = Value::Mapping(Mapping::new());
    }
    if let Value::Mapping(m) = cur {
        m.insert(Value::String((*last).to_string()), value);
    }
}

/// The user's pass-through values as a YAML value.
pub(crate) fn user_values(cx: &Ctx) -> Value {
    Value::Mapping(cx.c.spec().networking.cni.values.clone())
}
