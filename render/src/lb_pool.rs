//! kube-vip-cloud-provider, the allocator of LoadBalancer Service addresses, when the VIP has a
//! `loadBalancerPool`: its ServiceAccount, ClusterRole and binding, the `kubevip` ConfigMap holding the
//! pools (`cidr-global`, `range-global`, `cidr-<namespace>`, `range-<namespace>`), and its Deployment
//! (one replica, preferring control planes, their taints tolerated), in the shape of the project's
//! published manifest (`manifest/kube-vip-cloud-controller.yaml` of v0.0.12). It writes the address it
//! picks to the Service (annotation `kube-vip.io/loadbalancerIPs`); kube-vip (`svc_enable`) announces it.
//! The image comes from the mirror when there is one. `up` applies [`objects`] server-side.

use clusterctl_spec::ValidCluster;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The namespace everything lives in, and the ConfigMap the allocator reads its pools from.
pub const NAMESPACE: &str = "kube-system";
/// The pools' ConfigMap (kube-vip-cloud-provider's default `KUBEVIP_CONFIG_MAP`).
pub const CONFIG_MAP: &str = "kubevip";
/// The Deployment's name.
pub const DEPLOYMENT: &str = "kube-vip-cloud-provider";
const ACCOUNT: &str = "kube-vip-cloud-controller";
const ROLE: &str = "system:kube-vip-cloud-controller-role";

/// The `kubevip` ConfigMap's data for `cluster`'s pool (empty without one): `cidr-global`,
/// `range-global` and `cidr-`/`range-<namespace>`, each as written (comma-separated entries).
pub fn pool_data(cluster: &ValidCluster) -> BTreeMap<String, String> {
    let mut d = BTreeMap::new();
    let Some(pool) = cluster
        .spec()
        .control_plane
        .vip
        .as_ref()
        .and_then(|v| v.load_balancer_pool.as_ref())
    else {
        return d;
    };
    let mut put = |key: String, v: &Option<String>| {
        if let Some(v) = v {
            let entries: Vec<&str> = v.split(',').map(str::trim).collect();
            d.insert(key, entries.join(","));
        }
    };
    put("cidr-global".to_string(), &pool.cidr);
    put("range-global".to_string(), &pool.range);
    for (ns, p) in &pool.namespaces {
        put(format!("cidr-{ns}"), &p.cidr);
        put(format!("range-{ns}"), &p.range);
    }
    d
}

/// The objects to apply, in order (RBAC, ConfigMap, Deployment); empty when the VIP has no
/// `loadBalancerPool`.
pub fn objects(cluster: &ValidCluster) -> Vec<Value> {
    let Some(image) = cluster.kube_vip_cloud_provider_image() else {
        return Vec::new();
    };
    let labels = json!({"app": "kube-vip", "component": DEPLOYMENT});
    let cp_taint = |key: &str| json!({"key": key, "effect": "NoSchedule"});
    let prefer = |key: &str| json!({"weight": 10, "preference": {"matchExpressions": [{"key": key, "operator": "Exists"}]}});
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": ACCOUNT, "namespace": NAMESPACE}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": ROLE},
               "rules": [
                   {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                    "verbs": ["get", "create", "update", "list", "put"]},
                   {"apiGroups": [""],
                    "resources": ["configmaps", "endpoints", "events", "services/status", "leases"],
                    "verbs": ["*"]},
                   {"apiGroups": [""], "resources": ["nodes", "services"],
                    "verbs": ["list", "get", "watch", "update"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "system:kube-vip-cloud-controller-binding"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
               "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
               "data": pool_data(cluster)}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE},
               "spec": {
                   "replicas": 1,
                   "selector": {"matchLabels": labels},
                   "template": {
                       "metadata": {"labels": labels},
                       "spec": {
                           "containers": [{
                               "name": DEPLOYMENT,
                               "image": cluster.image(image),
                               "imagePullPolicy": "IfNotPresent",
                               "command": ["/kube-vip-cloud-provider",
                                           "--leader-elect-resource-name=kube-vip-cloud-controller"]}],
                           "serviceAccountName": ACCOUNT,
                           "tolerations": [cp_taint("node-role.kubernetes.io/master"),
                                           cp_taint("node-role.kubernetes.io/control-plane")],
                           "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
                               [prefer("node-role.kubernetes.io/control-plane"),
                                prefer("node-role.kubernetes.io/master")]}}}}}}),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(name: &str) -> ValidCluster {
        let loaded = clusterctl_spec::from_profile(name)
            .unwrap_or_else(|d| panic!("profile {name}: {}", d.summary()));
        clusterctl_spec::validate(&loaded)
            .unwrap_or_else(|d| panic!("profile {name}: {}", d.summary()))
            .cluster
    }

    #[test]
    fn the_seed_pool_becomes_the_kubevip_config_map_and_a_mirrored_allocator() {
        let c = profile("ha-containerd");
        let o = objects(&c);
        let names: Vec<String> = o.iter().map(crate::cni::install::object_name).collect();
        assert_eq!(
            names,
            [
                "ServiceAccount kube-system/kube-vip-cloud-controller",
                "ClusterRole system:kube-vip-cloud-controller-role",
                "ClusterRoleBinding system:kube-vip-cloud-controller-binding",
                "ConfigMap kube-system/kubevip",
                "Deployment kube-system/kube-vip-cloud-provider",
            ]
        );
        assert_eq!(
            o[3]["data"],
            json!({"range-global": "172.20.6.117-172.20.6.120"})
        );
        let pod = &o[4]["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"][0]["image"],
            "harbor.example.com/library/kube-vip/kube-vip-cloud-provider:v0.0.12"
        );
        assert_eq!(pod["serviceAccountName"], "kube-vip-cloud-controller");
        let listed = crate::images(&c);
        let i = listed
            .iter()
            .find(|i| i.component == "kube-vip-cloud-provider")
            .expect("in the image list (airgap images, bundles)");
        assert_eq!(i.source, "ghcr.io/kube-vip/kube-vip-cloud-provider:v0.0.12");
        assert!(!i.control_plane_only, "its pod may land on a worker");
    }

    #[test]
    fn namespaces_get_their_own_keys_and_no_pool_means_no_objects() {
        let mut loaded = clusterctl_spec::from_profile("ha-containerd").expect("profile");
        loaded.source_text = loaded.source_text.replace(
            "loadBalancerPool: {range: 172.20.6.117-172.20.6.120}",
            "loadBalancerPool: {cidr: '172.20.6.120/30, 172.20.6.124/30', namespaces: {team-a: {range: 172.20.6.130-172.20.6.131}}}",
        );
        let c = clusterctl_spec::validate(&loaded)
            .unwrap_or_else(|d| panic!("{}", d.summary()))
            .cluster;
        assert_eq!(
            pool_data(&c),
            BTreeMap::from([
                (
                    "cidr-global".to_string(),
                    "172.20.6.120/30,172.20.6.124/30".to_string()
                ),
                (
                    "range-team-a".to_string(),
                    "172.20.6.130-172.20.6.131".to_string()
                ),
            ])
        );
        assert!(objects(&profile("builtin")).is_empty());
    }
}
