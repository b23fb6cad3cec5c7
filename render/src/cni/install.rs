//! What `up` applies for a third-party CNI, as ordered steps of Kubernetes objects — built, without I/O,
//! from the upstream files (already checked against their sha256 by the caller) and the files render
//! wrote for the cluster:
//!
//! * **calico**: `operator-crds.yaml` (every CRD; waited for until Established), then
//!   `tigera-operator.yaml` (namespace, RBAC, the operator Deployment), then the rendered
//!   `cni/calico-installation.yaml` (the `Installation`) and the `APIServer` named `default` that the
//!   release's `custom-resources.yaml` installs beside it (its Goldmane and Whisker observability
//!   resources are left out).
//! * **flannel**: `kube-flannel.yml` with the `kube-flannel-cfg` ConfigMap's `net-conf.json` replaced
//!   by the rendered `cni/flannel-net-conf.json` (never applied on its own).
//! * **kindnet**: kind's default CNI manifest as the node image carries it
//!   (`/kind/manifests/default-cni.yaml`): when it says `would you kindly template this file`, its
//!   `{{ .PodSubnet }}` is filled with podSubnet; when it says `would you kindly patch this file`, the
//!   DaemonSet's first container gets `CONTROL_PLANE_ENDPOINT` — what kind's `installcni` action does.
//!
//! With a registry mirror every container and init container image of every workload is rewritten
//! under it ([`clusterctl_spec::mirror::rewrite`]), as the control plane's images are.
//! Cilium is installed with Helm instead: see [`helm_upgrade_args`].

use clusterctl_spec::mirror;
use serde::Deserialize as _;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Errors building the steps. Messages name the file and never quote more than a key.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// An upstream or rendered file the install needs was not given.
    #[error("{0} is missing")]
    Missing(String),
    /// A file is not multi-document YAML of objects.
    #[error("{file}: not a manifest: {reason}")]
    Manifest {
        /// The file's name.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// The upstream manifest does not hold what clusterctl must change in it.
    #[error("{file}: {what} not found (is it this release's file?)")]
    Shape {
        /// The file's name.
        file: String,
        /// What was looked for.
        what: String,
    },
}

/// What to wait for after a step was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Nothing.
    Nothing,
    /// Every CustomResourceDefinition of the step reports the `Established` condition `True`.
    CrdsEstablished,
}

/// One group of objects applied together, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyStep {
    /// What the step is, for the plan and messages (e.g. `Calico CRDs (operator-crds.yaml)`).
    pub what: String,
    /// The objects, in the order they are applied.
    pub objects: Vec<Value>,
    /// What to wait for afterwards.
    pub wait: Wait,
}

/// Which third-party CNI, with what its steps need from the cluster file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallInput {
    /// `calico`, `flannel` or `kindnet`.
    pub plugin: String,
    /// The mirror prefix (`harbor.example.com/library`) when the cluster has a registry mirror.
    pub mirror_prefix: Option<String>,
    /// podSubnet.
    pub pod_subnet: String,
    /// The control-plane endpoint as the nodes reach it, `host:port`.
    pub endpoint: String,
}

/// The name of the rendered Installation file (without `cni/`).
pub(crate) const CALICO_RENDERED: &str = "calico-installation.yaml";
/// The name of the rendered flannel `net-conf.json` (without `cni/`).
pub(crate) const FLANNEL_RENDERED: &str = "flannel-net-conf.json";
/// Where the kind node image keeps its default CNI manifest.
pub const KINDNET_MANIFEST: &str = "/kind/manifests/default-cni.yaml";

/// The documents of a multi-document YAML file as JSON values, empty documents left out. Errors:
/// not YAML, or a document that is not an object with `apiVersion`, `kind` and `metadata.name`.
pub(crate) fn parse_docs(file: &str, text: &str) -> Result<Vec<Value>, InstallError> {
    let bad = |reason: String| InstallError::Manifest {
        file: file.to_string(),
        reason,
    };
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let v = serde_yaml::Value::deserialize(doc)
            .map_err(|e| bad(format!("document {}: {e}", i + 1)))?;
        if v.is_null() {
            continue;
        }
        let v: Value =
            serde_json::to_value(&v).map_err(|e| bad(format!("document {}: {e}", i + 1)))?;
        let named = v["apiVersion"].is_string()
            && v["kind"].is_string()
            && v["metadata"]["name"].is_string();
        if !named {
            return Err(bad(format!(
                "document {} has no apiVersion, kind or metadata.name",
                i + 1
            )));
        }
        out.push(v);
    }
    Ok(out)
}

/// `kind namespace/name` (or `kind name`) of an object, for messages.
pub fn object_name(v: &Value) -> String {
    let kind = v["kind"].as_str().unwrap_or("?");
    let name = v["metadata"]["name"].as_str().unwrap_or("?");
    match v["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// The pod template's spec of a workload (`spec.template.spec`) or a Pod's `spec`.
fn pod_spec_mut(v: &mut Value) -> Option<&mut Value> {
    let kind = v["kind"].as_str().unwrap_or_default().to_string();
    match kind.as_str() {
        "Pod" => v.get_mut("spec"),
        "CronJob" => v
            .pointer_mut("/spec/jobTemplate/spec/template/spec")
            .filter(|s| s.is_object()),
        "Deployment" | "DaemonSet" | "StatefulSet" | "ReplicaSet" | "Job" => v
            .pointer_mut("/spec/template/spec")
            .filter(|s| s.is_object()),
        _ => None,
    }
}

/// Every image of the workload objects in `objects` (containers and init containers), in order.
pub fn images_of(objects: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for o in objects {
        let mut o = o.clone();
        if let Some(spec) = pod_spec_mut(&mut o) {
            for list in ["initContainers", "containers"] {
                for c in spec[list].as_array().into_iter().flatten() {
                    if let Some(i) = c["image"].as_str() {
                        out.push(i.to_string());
                    }
                }
            }
        }
    }
    out
}

/// Rewrites every container and init container image of a workload object under `prefix`.
pub(crate) fn rewrite_images(v: &mut Value, prefix: &str) {
    if let Some(spec) = pod_spec_mut(v) {
        for list in ["initContainers", "containers"] {
            if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
                for c in cs {
                    if let Some(i) = c["image"].as_str() {
                        let new = mirror::rewrite(prefix, i);
                        c["image"] = Value::String(new);
                    }
                }
            }
        }
    }
}

fn text<'a>(files: &'a BTreeMap<String, Vec<u8>>, name: &str) -> Result<&'a str, InstallError> {
    let b = files
        .get(name)
        .ok_or_else(|| InstallError::Missing(name.to_string()))?;
    std::str::from_utf8(b).map_err(|_| InstallError::Manifest {
        file: name.to_string(),
        reason: "not UTF-8 text".to_string(),
    })
}

fn mirrored(input: &InstallInput, mut objects: Vec<Value>) -> Vec<Value> {
    if let Some(p) = &input.mirror_prefix {
        for o in &mut objects {
            rewrite_images(o, p);
        }
    }
    objects
}

/// The steps for `input.plugin` (calico or flannel) from `upstream` (upstream file name → bytes) and
/// `rendered` (rendered cluster file name without `cni/` → bytes). Errors: a missing file, a file that
/// is not a manifest, or an upstream manifest without the object clusterctl changes.
pub fn manifest_steps(
    input: &InstallInput,
    upstream: &BTreeMap<String, Vec<u8>>,
    rendered: &BTreeMap<String, Vec<u8>>,
) -> Result<Vec<ApplyStep>, InstallError> {
    match input.plugin.as_str() {
        "calico" => {
            let crds = parse_docs("operator-crds.yaml", text(upstream, "operator-crds.yaml")?)?;
            if let Some(o) = crds
                .iter()
                .find(|o| o["kind"] != "CustomResourceDefinition")
            {
                return Err(InstallError::Shape {
                    file: "operator-crds.yaml".into(),
                    what: format!(
                        "only CustomResourceDefinitions ({} is not one)",
                        object_name(o)
                    ),
                });
            }
            let operator = parse_docs(
                "tigera-operator.yaml",
                text(upstream, "tigera-operator.yaml")?,
            )?;
            if !operator
                .iter()
                .any(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "tigera-operator")
            {
                return Err(InstallError::Shape {
                    file: "tigera-operator.yaml".into(),
                    what: "Deployment tigera-operator".into(),
                });
            }
            let mut crs = parse_docs(CALICO_RENDERED, text(rendered, CALICO_RENDERED)?)?;
            crs.push(json!({
                "apiVersion": "operator.tigera.io/v1",
                "kind": "APIServer",
                "metadata": {"name": "default"},
                "spec": {}
            }));
            Ok(vec![
                ApplyStep {
                    what: "Calico CRDs (operator-crds.yaml)".into(),
                    objects: crds,
                    wait: Wait::CrdsEstablished,
                },
                ApplyStep {
                    what: "tigera-operator (tigera-operator.yaml)".into(),
                    objects: mirrored(input, operator),
                    wait: Wait::Nothing,
                },
                ApplyStep {
                    what: format!("Calico Installation and APIServer ({CALICO_RENDERED})"),
                    objects: crs,
                    wait: Wait::Nothing,
                },
            ])
        }
        "flannel" => {
            let mut objects = parse_docs("kube-flannel.yml", text(upstream, "kube-flannel.yml")?)?;
            let net_conf = text(rendered, FLANNEL_RENDERED)?.to_string();
            let cm = objects
                .iter_mut()
                .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "kube-flannel-cfg")
                .ok_or_else(|| InstallError::Shape {
                    file: "kube-flannel.yml".into(),
                    what: "ConfigMap kube-flannel-cfg".into(),
                })?;
            if !cm["data"].is_object() {
                cm["data"] = json!({});
            }
            cm["data"]["net-conf.json"] = Value::String(net_conf);
            Ok(vec![ApplyStep {
                what: format!("flannel (kube-flannel.yml, net-conf.json from {FLANNEL_RENDERED})"),
                objects: mirrored(input, objects),
                wait: Wait::Nothing,
            }])
        }
        other => Err(InstallError::Missing(format!(
            "an install of the {other} CNI from manifests"
        ))),
    }
}

/// kindnet's step from the node image's default CNI manifest `template`, as kind's `installcni` action
/// fills and patches it (see the module doc). Errors: not a manifest, or a patch request without the
/// DaemonSet to patch.
pub fn kindnet_steps(input: &InstallInput, template: &str) -> Result<Vec<ApplyStep>, InstallError> {
    let file = KINDNET_MANIFEST;
    let mut manifest = template.to_string();
    if manifest.contains("would you kindly template this file") {
        for pat in [
            "{{ .PodSubnet }}",
            "{{.PodSubnet}}",
            "{{ .PodSubnet}}",
            "{{.PodSubnet }}",
        ] {
            manifest = manifest.replace(pat, &input.pod_subnet);
        }
        if manifest.contains("{{") {
            return Err(InstallError::Shape {
                file: file.into(),
                what: "only {{ .PodSubnet }} as a template value".into(),
            });
        }
    }
    let mut objects = parse_docs(file, &manifest)?;
    if manifest.contains("would you kindly patch this file") {
        let ds = objects
            .iter_mut()
            .find(|o| o["kind"] == "DaemonSet")
            .ok_or_else(|| InstallError::Shape {
                file: file.into(),
                what: "a DaemonSet to patch".into(),
            })?;
        let c = ds
            .pointer_mut("/spec/template/spec/containers/0")
            .filter(|c| c.is_object())
            .ok_or_else(|| InstallError::Shape {
                file: file.into(),
                what: "the DaemonSet's first container".into(),
            })?;
        if !c["env"].is_array() {
            c["env"] = json!([]);
        }
        if let Some(env) = c["env"].as_array_mut() {
            env.push(json!({"name": "CONTROL_PLANE_ENDPOINT", "value": input.endpoint}));
        }
    }
    Ok(vec![ApplyStep {
        what: format!("kindnet ({file} of the node image)"),
        objects: mirrored(input, objects),
        wait: Wait::Nothing,
    }])
}

/// Cilium's Helm release: name, namespace and chart name.
pub const CILIUM_RELEASE: &str = "cilium";

/// The arguments of `helm` installing or upgrading the Cilium release as upstream and the seed do —
/// `upgrade --install cilium <chart> --namespace kube-system -f <values>` — with `--kubeconfig`, and
/// `--description` recording the chart's and the values' sha256 (what [`helm_release_current`] compares).
pub fn helm_upgrade_args(
    chart: &str,
    values: &str,
    kubeconfig: &str,
    chart_sha256: &str,
    values_sha256: &str,
) -> Vec<String> {
    [
        "upgrade",
        "--install",
        CILIUM_RELEASE,
        chart,
        "--namespace",
        "kube-system",
        "-f",
        values,
        "--kubeconfig",
        kubeconfig,
        "--description",
        &helm_description(chart_sha256, values_sha256),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The release description `up` records: `clusterctl chart=<sha256> values=<sha256>`.
pub(crate) fn helm_description(chart_sha256: &str, values_sha256: &str) -> String {
    format!("clusterctl chart={chart_sha256} values={values_sha256}")
}

/// True when `status_json` (`helm status cilium -n kube-system -o json`) shows a `deployed` release
/// whose description records exactly these digests, so installing again would change nothing.
pub fn helm_release_current(status_json: &str, chart_sha256: &str, values_sha256: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(status_json) else {
        return false;
    };
    v["info"]["status"] == "deployed"
        && v["info"]["description"] == helm_description(chart_sha256, values_sha256).as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(plugin: &str, mirror: Option<&str>) -> InstallInput {
        InstallInput {
            plugin: plugin.into(),
            mirror_prefix: mirror.map(str::to_string),
            pod_subnet: "10.244.0.0/16".into(),
            endpoint: "10.0.0.10:6443".into(),
        }
    }

    const FLANNEL: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: kube-flannel}\n---\nkind: ConfigMap\napiVersion: v1\nmetadata: {name: kube-flannel-cfg, namespace: kube-flannel}\ndata:\n  net-conf.json: '{\"Network\": \"10.244.0.0/16\"}'\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: kube-flannel-ds, namespace: kube-flannel}\nspec:\n  template:\n    spec:\n      initContainers: [{name: a, image: ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel1}]\n      containers: [{name: b, image: ghcr.io/flannel-io/flannel:v0.28.4}]\n";

    #[test]
    fn flannel_gets_the_rendered_net_conf_and_the_mirror() {
        let up = BTreeMap::from([("kube-flannel.yml".to_string(), FLANNEL.as_bytes().to_vec())]);
        let r = BTreeMap::from([(
            FLANNEL_RENDERED.to_string(),
            b"{\"Network\": \"10.1.0.0/16\"}\n".to_vec(),
        )]);
        let steps = manifest_steps(&input("flannel", Some("harbor.example.com/lib")), &up, &r)
            .expect("steps");
        assert_eq!(steps.len(), 1);
        let o = &steps[0].objects;
        assert_eq!(o[0]["kind"], "Namespace", "upstream order kept");
        assert_eq!(
            o[1]["data"]["net-conf.json"],
            "{\"Network\": \"10.1.0.0/16\"}\n"
        );
        assert_eq!(
            images_of(o),
            [
                "harbor.example.com/lib/flannel-io/flannel-cni-plugin:v1.9.1-flannel1",
                "harbor.example.com/lib/flannel-io/flannel:v0.28.4"
            ]
        );
        let no_cm = FLANNEL.replace("kube-flannel-cfg", "other");
        let up = BTreeMap::from([("kube-flannel.yml".to_string(), no_cm.into_bytes())]);
        let e = manifest_steps(&input("flannel", None), &up, &r).expect_err("shape");
        assert!(e.to_string().contains("ConfigMap kube-flannel-cfg"), "{e}");
    }

    #[test]
    fn kindnet_is_templated_and_patched_as_kind_does() {
        let t = "# would you kindly template this file\n# would you kindly patch this file\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: kindnet, namespace: kube-system}\nspec:\n  template:\n    spec:\n      containers:\n      - name: kindnet-cni\n        image: docker.io/kindest/kindnetd:v20250512-df8de77b\n        env:\n        - name: POD_SUBNET\n          value: {{ .PodSubnet }}\n";
        let s = kindnet_steps(&input("kindnet", None), t).expect("steps");
        let env = &s[0].objects[0]["spec"]["template"]["spec"]["containers"][0]["env"];
        assert_eq!(env[0]["value"], "10.244.0.0/16");
        assert_eq!(
            env[1],
            json!({"name": "CONTROL_PLANE_ENDPOINT", "value": "10.0.0.10:6443"})
        );
        assert!(
            kindnet_steps(&input("kindnet", None), &t.replace(".PodSubnet", ".Other")).is_err()
        );
    }

    #[test]
    fn the_release_is_current_only_when_deployed_with_the_same_digests() {
        let d = helm_description("aa", "bb");
        let st = format!(r#"{{"info":{{"status":"deployed","description":"{d}"}}}}"#);
        assert!(helm_release_current(&st, "aa", "bb"));
        assert!(!helm_release_current(&st, "aa", "cc"));
        assert!(!helm_release_current(
            &st.replace("deployed", "failed"),
            "aa",
            "bb"
        ));
        assert!(!helm_release_current(
            "Error: release: not found",
            "aa",
            "bb"
        ));
        let args = helm_upgrade_args("c.tgz", "v.yaml", "/k", "aa", "bb");
        assert_eq!(&args[..3], ["upgrade", "--install", "cilium"]);
        assert_eq!(args.last().map(String::as_str), Some(d.as_str()));
    }
}
