//! Calico through the tigera-operator: the `operator.tigera.io/v1` `Installation` named `default`
//! (tigera/operator api/v1/installation_types.go) with one IP pool whose `cidr` is podSubnet. With a
//! mirror, `registry` is the mirror host and `imagePath` its path plus `/calico`, so the operator pulls
//! `<mirror>/calico/<component>` — exactly where import stores `docker.io/calico/<component>`.

use super::{merge, set, user_values};
use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::yaml;
use serde_yaml::{Mapping, Value};

/// Cluster-relative path of the Installation manifest.
pub(crate) const INSTALLATION_PATH: &str = "cni/calico-installation.yaml";

fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

pub(crate) fn cluster_files(cx: &Ctx, out: &mut Vec<RenderedFile>) -> Result<(), RenderError> {
    let pod = cx.c.pod_subnet();
    let mut pool = Mapping::new();
    pool.insert(
        s("name"),
        s(if pod.addr().is_ipv4() {
            "default-ipv4-ippool"
        } else {
            "default-ipv6-ippool"
        }),
    );
    pool.insert(s("cidr"), s(&pod.to_string()));
    pool.insert(
        s("blockSize"),
        Value::Number(if pod.addr().is_ipv4() { 26 } else { 122 }.into()),
    );
    pool.insert(s("encapsulation"), s("VXLANCrossSubnet"));
    pool.insert(s("natOutgoing"), s("Enabled"));
    pool.insert(s("nodeSelector"), s("all()"));
    let mut spec = Value::Mapping(Mapping::new());
    merge(&mut spec, &user_values(cx));
    set(
        &mut spec,
        &["calicoNetwork", "ipPools"],
        Value::Sequence(vec![Value::Mapping(pool)]),
    );
    if let Some(mtu) = cx.c.spec().networking.cni.mtu {
        set(
            &mut spec,
            &["calicoNetwork", "mtu"],
            Value::Number(mtu.into()),
        );
    }
    if let Some(m) = cx.c.mirror() {
        set(&mut spec, &["registry"], s(&format!("{}/", m.host)));
        let path = if m.path.is_empty() {
            "calico".to_string()
        } else {
            format!("{}/calico", m.path)
        };
        set(&mut spec, &["imagePath"], s(&path));
    }
    let mut doc = Mapping::new();
    doc.insert(s("apiVersion"), s("operator.tigera.io/v1"));
    doc.insert(s("kind"), s("Installation"));
    let mut meta = Mapping::new();
    meta.insert(s("name"), s("default"));
    doc.insert(s("metadata"), Value::Mapping(meta));
    doc.insert(s("spec"), spec);
    let text = yaml::doc("Calico Installation", &Value::Mapping(doc))?;
    out.push(RenderedFile::text(
        INSTALLATION_PATH,
        0o644,
        text,
        Purpose::ClusterManifest,
    ));
    Ok(())
}
