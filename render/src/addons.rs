//! The lab's cluster objects (issue 27), rendered here rather than downloaded: local-path-provisioner
//! ([`local_path`], the objects of upstream's `deploy/local-path-storage.yaml` at
//! [`LOCAL_PATH_VERSION`], its StorageClass marked the cluster's default, its image through the mirror
//! when there is one) and the KEP-1755 `local-registry-hosting` ConfigMap in `kube-public`
//! ([`registry_hosting`]) that tells tools such as Tilt where the lab's local registry is. `up`'s
//! `addons` phase applies [`steps`] through the API (server-side apply).

use crate::cni::install::{ApplyStep, Wait};
use clusterctl_spec::lab::{LabRegistry, LOCAL_PATH_DIR, LOCAL_PATH_IMAGE, LOCAL_PATH_VERSION};
use clusterctl_spec::ValidCluster;
use serde_json::{json, Value};

/// The namespace local-path-provisioner runs in (upstream's).
pub const LOCAL_PATH_NAMESPACE: &str = "local-path-storage";
/// The StorageClass's name (upstream's), the cluster's default.
pub const LOCAL_PATH_CLASS: &str = "local-path";
/// The KEP-1755 ConfigMap's namespace and name.
pub const REGISTRY_HOSTING: (&str, &str) = ("kube-public", "local-registry-hosting");

/// What `up`'s `addons` phase applies for `cluster`, in order: local-path-provisioner when
/// [`ValidCluster::local_path`], the registry's ConfigMap when there is a local registry. Empty when
/// neither is on.
pub fn steps(cluster: &ValidCluster) -> Vec<ApplyStep> {
    let mut out = Vec::new();
    if cluster.local_path() {
        out.push(ApplyStep {
            what: format!("local-path-provisioner {LOCAL_PATH_VERSION} (default StorageClass {LOCAL_PATH_CLASS})"),
            objects: local_path(&cluster.image(LOCAL_PATH_IMAGE)),
            wait: Wait::Nothing,
        });
    }
    if let Some(r) = cluster.local_registry() {
        out.push(ApplyStep {
            what: format!(
                "the local registry's {} ConfigMap (KEP-1755)",
                REGISTRY_HOSTING.1
            ),
            objects: vec![registry_hosting(&r)],
            wait: Wait::Nothing,
        });
    }
    out
}

/// The KEP-1755 ConfigMap (`localRegistryHosting.v1`): the registry as this machine and every node's
/// runtime name it, `localhost:<port>`.
pub fn registry_hosting(r: &LabRegistry) -> Value {
    let host = r.host();
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": REGISTRY_HOSTING.1, "namespace": REGISTRY_HOSTING.0},
        "data": {
            "localRegistryHosting.v1": format!("host: \"{host}\"\nhostFromContainerRuntime: \"{host}\"\n"),
        }
    })
}

/// local-path-provisioner's objects, as upstream's manifest gives them, with `image` (the pinned image
/// or its mirror reference) for the provisioner and its helper pods, the StorageClass annotated as
/// the default, and the control-plane taint tolerated (a one-node lab schedules it there).
pub fn local_path(image: &str) -> Vec<Value> {
    let ns = LOCAL_PATH_NAMESPACE;
    let sa = "local-path-provisioner-service-account";
    let role = "local-path-provisioner-role";
    let bind = "local-path-provisioner-bind";
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| json!({"apiGroups": groups, "resources": resources, "verbs": verbs});
    let subjects = json!([{"kind": "ServiceAccount", "name": sa, "namespace": ns}]);
    let tolerations = json!([
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
    ]);
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": role, "namespace": ns},
            "rules": [rule(&[""], &["pods"], &["get", "list", "watch", "create", "patch", "update", "delete"])]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role},
        "rules": [
            rule(&[""], &["nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"], &["get", "list", "watch"]),
            rule(&[""], &["persistentvolumes"], &["get", "list", "watch", "create", "patch", "update", "delete"]),
            rule(&[""], &["events"], &["create", "patch"]),
            rule(&["storage.k8s.io"], &["storageclasses"], &["get", "list", "watch"]),
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": bind, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": subjects}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": bind},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subjects}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "local-path-config", "namespace": ns},
            "data": local_path_config(image)}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "local-path-provisioner", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "local-path-provisioner"}},
            "template": {
                "metadata": {"labels": {"app": "local-path-provisioner"}},
                "spec": {
                    "serviceAccountName": sa,
                    "tolerations": tolerations,
                    "containers": [{
                        "name": "local-path-provisioner",
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["local-path-provisioner", "--debug", "start", "--config", "/etc/config/config.json"],
                        "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/config/"}],
                        "env": [
                            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                            {"name": "CONFIG_MOUNT_PATH", "value": "/etc/config/"},
                        ],
                    }],
                    "volumes": [{"name": "config-volume", "configMap": {"name": "local-path-config"}}],
                }
            }
        }}),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": LOCAL_PATH_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete"}),
    ]
}

/// The `local-path-config` ConfigMap's data: upstream's `config.json` (every node's volumes under
/// [`LOCAL_PATH_DIR`]), `setup` and `teardown` scripts, and `helperPod.yaml` with `image`.
fn local_path_config(image: &str) -> Value {
    let config = json!({"nodePathMap": [
        {"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [LOCAL_PATH_DIR]},
    ]});
    let helper = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: helper-pod\nspec:\n  priorityClassName: system-node-critical\n  tolerations:\n    - key: node.kubernetes.io/disk-pressure\n      operator: Exists\n      effect: NoSchedule\n    - key: node-role.kubernetes.io/control-plane\n      operator: Exists\n      effect: NoSchedule\n  containers:\n  - name: helper-pod\n    image: {image}\n    imagePullPolicy: IfNotPresent\n"
    );
    json!({
        "config.json": serde_json::to_string_pretty(&config).unwrap_or_default(),
        "setup": "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"",
        "teardown": "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"",
        "helperPod.yaml": helper,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_storage_class_is_the_default_and_every_image_is_the_given_one() {
        let objs = local_path("m.example/rancher/local-path-provisioner:v0.0.30");
        let sc = objs
            .iter()
            .find(|o| o["kind"] == "StorageClass")
            .expect("sc");
        assert_eq!(
            sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"],
            "true"
        );
        assert_eq!(sc["provisioner"], "rancher.io/local-path");
        let text = serde_json::to_string(&objs).expect("json");
        assert_eq!(
            text.matches("local-path-provisioner:v0.0.30").count(),
            2,
            "{text}"
        );
        assert!(!text.contains("busybox"), "{text}");
        let cm = objs.iter().find(|o| o["kind"] == "ConfigMap").expect("cm");
        let helper: serde_yaml::Value =
            serde_yaml::from_str(cm["data"]["helperPod.yaml"].as_str().expect("helper"))
                .expect("yaml");
        assert_eq!(helper["kind"].as_str(), Some("Pod"));
        assert!(cm["data"]["config.json"]
            .as_str()
            .expect("config")
            .contains(LOCAL_PATH_DIR));
    }

    #[test]
    fn the_hosting_configmap_names_localhost_and_the_port() {
        let r = LabRegistry {
            port: 5999,
            image: "registry:2".into(),
            container: "lab-registry".into(),
        };
        let cm = registry_hosting(&r);
        assert_eq!(cm["metadata"]["namespace"], "kube-public");
        let v: serde_yaml::Value = serde_yaml::from_str(
            cm["data"]["localRegistryHosting.v1"]
                .as_str()
                .expect("data"),
        )
        .expect("yaml");
        assert_eq!(v["host"].as_str(), Some("localhost:5999"));
    }
}
