//! Calico's two upstream files in a shape of our own (Calico's own are out of the test bed's reach:
//! docs/cni.md): CRDs of the `operator.tigera.io/v1` kinds `up` touches (`operator-crds.yaml`) and an
//! operator manifest (`tigera-operator.yaml`). Shared by the tests that apply them to a real API
//! server (`tests/tests/it/cni_install.rs`, `cli/tests/it/airgap_calico.rs`).

use serde_json::{json, Value};

/// CRDs of our own shape for the three `operator.tigera.io/v1` kinds `up` touches, with schemas
/// holding the fields render writes (not Calico's files; see docs/cni.md).
pub fn own_calico_crds() -> String {
    let crd = |plural: &str, kind: &str, spec: Value, status: Value| {
        serde_yaml::to_string(&json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.operator.tigera.io")},
            "spec": {
                "group": "operator.tigera.io",
                "scope": "Cluster",
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                          "listKind": format!("{kind}List")},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                        "metadata": {"type": "object"}, "spec": spec, "status": status}}}
                }]
            }
        }))
        .expect("yaml")
    };
    let conditions = json!({"type": "object", "properties": {"conditions": {"type": "array", "items": {
        "type": "object", "required": ["type", "status"], "properties": {
            "type": {"type": "string"}, "status": {"type": "string"},
            "reason": {"type": "string"}, "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"}}}}}});
    let pool = json!({"type": "object", "required": ["cidr"], "properties": {
        "name": {"type": "string"}, "cidr": {"type": "string"},
        "blockSize": {"type": "integer", "format": "int32"},
        "encapsulation": {"type": "string",
            "enum": ["IPIPCrossSubnet", "IPIP", "VXLAN", "VXLANCrossSubnet", "None"]},
        "natOutgoing": {"type": "string", "enum": ["Enabled", "Disabled"]},
        "nodeSelector": {"type": "string"}}});
    let installation = json!({"type": "object", "properties": {
        "registry": {"type": "string"}, "imagePath": {"type": "string"},
        "calicoNetwork": {"type": "object", "properties": {
            "mtu": {"type": "integer", "format": "int32"},
            "ipPools": {"type": "array", "items": pool}}}}});
    [
        crd(
            "installations",
            "Installation",
            installation,
            conditions.clone(),
        ),
        crd(
            "apiservers",
            "APIServer",
            json!({"type": "object"}),
            conditions.clone(),
        ),
        crd(
            "tigerastatuses",
            "TigeraStatus",
            json!({"type": "object"}),
            conditions,
        ),
    ]
    .join("---\n")
}

/// An operator manifest of our own shape: namespace, service account and the operator Deployment
/// with the operator image `quay.io/tigera/operator:<operator>`, on the host's network and tolerating
/// every taint (as an operator that installs the pod network must: it runs on NotReady nodes).
pub fn own_tigera_operator(operator: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: tigera-operator}}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: tigera-operator, namespace: tigera-operator}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: tigera-operator, namespace: tigera-operator}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{name: tigera-operator}}}}\n  template:\n    metadata: {{labels: {{name: tigera-operator}}}}\n    spec:\n      serviceAccountName: tigera-operator\n      hostNetwork: true\n      dnsPolicy: ClusterFirstWithHostNet\n      tolerations:\n      - {{effect: NoExecute, operator: Exists}}\n      - {{effect: NoSchedule, operator: Exists}}\n      containers:\n      - name: tigera-operator\n        image: quay.io/tigera/operator:{operator}\n"
    )
}
