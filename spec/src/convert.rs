//! A kind `Cluster` config (`apiVersion: kind.x-k8s.io/v1alpha4`) as the equivalent cluster file
//! (`clusterctl convert`): docker provider; kind's node names; kindnet unless `disableDefaultCNI`;
//! pod and service subnets, kube-proxy mode, node labels and port mappings kept. What has no
//! equivalent (extra mounts, kubeadm and containerd patches, feature gates, IPv6) is listed in
//! [`Converted::dropped`] and as a comment at the top of the file, what the conversion chose itself
//! (the Kubernetes version when no node image names one) in [`Converted::notes`] and as a `# note:`
//! comment. Pure: text in, text out.

use std::fmt::Write as _;

use serde_yaml::Value;

/// Why a text is not a kind config that can be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// It is not YAML.
    #[error("not YAML: {0}")]
    NotYaml(#[source] serde_yaml::Error),
    /// It is YAML, but not a kind `Cluster`.
    #[error("not a kind Cluster config (apiVersion {api:?}, kind {kind:?}; expected {KIND_GROUP}v1alpha4 Cluster)")]
    NotKind {
        /// Its `apiVersion` (empty when missing).
        api: String,
        /// Its `kind` (empty when missing).
        kind: String,
    },
}

/// The kind config's API group.
const KIND_GROUP: &str = "kind.x-k8s.io/";

/// The converted file and what could not be carried over.
#[derive(Debug)]
pub struct Converted {
    /// The cluster file.
    pub text: String,
    /// Settings with no equivalent, one line each.
    pub dropped: Vec<String>,
    /// What the conversion chose where the kind config says nothing (the Kubernetes version when no
    /// node image names one), one line each; also a `# note:` comment at the top of the file.
    pub notes: Vec<String>,
}

/// Where a setting of a kind config with no field of its own goes in a cluster file, if anywhere.
fn no_field_hint(key: &str) -> &'static str {
    match key {
        "featureGates" => "no cluster file field sets every component's feature gates; the API server's go in spec.apiServer.extraArgs as `feature-gates: \"Name=true\"` (docs/spec.md, `spec.apiServer`)",
        "runtimeConfig" => "the API server's `runtime-config` goes in spec.apiServer.extraArgs (docs/spec.md, `spec.apiServer`)",
        "containerdConfigPatches" | "containerdConfigPatchesJSON6902" => "no patches of the runtime config; a registry mirror is spec.registry (docs/spec.md, `spec.registry`)",
        _ => "no patches of the kubeadm config; write the setting in the cluster file's own fields (docs/spec.md)",
    }
}

/// Converts a kind config's text into a cluster file for cluster `name` (default: the config's
/// `name`, else `kind`) running Kubernetes `version` (default: the node image's tag, else the newest
/// supported patch). The result is not validated. Errors: it is not YAML or not a kind `Cluster`.
pub fn convert(
    text: &str,
    name: Option<&str>,
    version: Option<&str>,
) -> Result<Converted, ConvertError> {
    let v: Value = serde_yaml::from_str(text).map_err(ConvertError::NotYaml)?;
    let api = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    if !api.starts_with(KIND_GROUP) || kind != "Cluster" {
        return Err(ConvertError::NotKind {
            api: api.to_string(),
            kind: kind.to_string(),
        });
    }
    let mut dropped = Vec::new();
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let name = name
        .map(str::to_string)
        .or_else(|| s(&v, "name"))
        .unwrap_or_else(|| "kind".to_string());
    for key in [
        "featureGates",
        "runtimeConfig",
        "kubeadmConfigPatches",
        "kubeadmConfigPatchesJSON6902",
        "containerdConfigPatches",
        "containerdConfigPatchesJSON6902",
    ] {
        if v.get(key).is_some() {
            dropped.push(format!("{key} ({})", no_field_hint(key)));
        }
    }
    let empty = Value::Mapping(Default::default());
    let net = v.get("networking").unwrap_or(&empty);
    if let Some(f) = s(net, "ipFamily").filter(|f| f != "ipv4") {
        dropped.push(format!("networking.ipFamily {f} (IPv4 only for now)"));
    }
    for key in ["apiServerAddress", "apiServerPort", "dnsSearch"] {
        if net.get(key).is_some() {
            dropped.push(format!(
                "networking.{key} (clusterctl publishes the API server on 127.0.0.1 itself)"
            ));
        }
    }
    let nodes: Vec<Value> = match v.get("nodes") {
        Some(Value::Sequence(n)) if !n.is_empty() => n.clone(),
        // kind's default: one control plane.
        _ => vec![control_plane()],
    };
    let image_version = nodes.iter().filter_map(|n| s(n, "image")).find_map(|i| {
        let tag = crate::image::ImageRef::parse(&i).ok()?.tag?;
        tag.starts_with('v').then_some(tag)
    });
    let mut notes = Vec::new();
    let version = match version.map(str::to_string).or(image_version) {
        Some(v) => v,
        None => {
            let newest = crate::versions::all()
                .last()
                .map(crate::versions::tag)
                .unwrap_or_default();
            notes.push(format!(
                "kubernetesVersion {newest}: no node image names a version, so the newest supported patch (--kubernetes-version V for another)"
            ));
            newest
        }
    };

    let mut o = String::new();
    let _ = writeln!(o, "apiVersion: clusterctl.io/v1alpha1");
    let _ = writeln!(o, "kind: Cluster");
    let _ = writeln!(o, "metadata:\n  name: {}", quote(&name));
    let _ = writeln!(o, "spec:");
    let _ = writeln!(o, "  kubernetesVersion: {}", quote(&version));
    let _ = writeln!(o, "  provider: docker");
    let _ = writeln!(o, "  networking:");
    if let Some(p) = s(net, "podSubnet") {
        let _ = writeln!(o, "    podSubnet: {}", quote(&p));
    }
    if let Some(p) = s(net, "serviceSubnet") {
        let _ = writeln!(o, "    serviceSubnet: {}", quote(&p));
    }
    match s(net, "kubeProxyMode").as_deref() {
        Some("none") => {
            let _ = writeln!(o, "    kubeProxy: disabled");
        }
        Some(m) => {
            let _ = writeln!(o, "    kubeProxy: {}", quote(m));
        }
        None => {}
    }
    let cni = if net.get("disableDefaultCNI").and_then(Value::as_bool) == Some(true) {
        "none"
    } else {
        "kindnet"
    };
    let _ = writeln!(o, "    cni:\n      plugin: {cni}");
    let _ = writeln!(o, "  nodes:");
    let (mut cps, mut workers) = (0, 0);
    for (i, n) in nodes.iter().enumerate() {
        let role = s(n, "role").unwrap_or_else(|| "control-plane".to_string());
        let count = if role == "worker" {
            workers += 1;
            workers
        } else {
            cps += 1;
            cps
        };
        // kind's names, without the cluster prefix (clusterctl adds it to the container name).
        let node_name = if count == 1 {
            role.clone()
        } else {
            format!("{role}{count}")
        };
        let _ = writeln!(o, "    - name: {node_name}\n      role: {}", quote(&role));
        if let Some(Value::Mapping(labels)) = n.get("labels") {
            let _ = writeln!(o, "      labels:");
            for (k, v) in labels {
                let k = scalar(k);
                let _ = writeln!(o, "        {}: {}", quote(&k), quote(&scalar(v)));
            }
        }
        if let Some(Value::Sequence(maps)) = n.get("extraPortMappings") {
            let _ = writeln!(o, "      portMappings:");
            for m in maps {
                let num = |k: &str| m.get(k).map(scalar).unwrap_or_default();
                let _ = writeln!(
                    o,
                    "        - containerPort: {}\n          hostPort: {}",
                    num("containerPort"),
                    num("hostPort")
                );
                if let Some(a) = s(m, "listenAddress") {
                    let _ = writeln!(o, "          listenAddress: {}", quote(&a));
                }
                if let Some(p) = s(m, "protocol") {
                    let _ = writeln!(o, "          protocol: {}", quote(&p));
                }
            }
        }
        for key in [
            "extraMounts",
            "kubeadmConfigPatches",
            "kubeadmConfigPatchesJSON6902",
        ] {
            if n.get(key).is_some() {
                dropped.push(format!("nodes[{i}].{key}"));
            }
        }
        if let Some(img) = s(n, "image") {
            if !img.contains(&version) {
                dropped.push(format!(
                    "nodes[{i}].image {img} (every node runs kindest/node:{version})"
                ));
            }
        }
    }
    let mut head = String::from("# Converted from a kind config by `clusterctl convert`.\n");
    for d in &dropped {
        let _ = writeln!(head, "# not converted: {d}");
    }
    for n in &notes {
        let _ = writeln!(head, "# note: {n}");
    }
    Ok(Converted {
        text: head + &o,
        dropped,
        notes,
    })
}

/// kind's default node list's one entry, `role: control-plane`.
fn control_plane() -> Value {
    let mut m = serde_yaml::Mapping::new();
    m.insert("role".into(), "control-plane".into());
    Value::Mapping(m)
}

/// A YAML scalar as text (numbers and booleans as written).
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => String::new(),
    }
}

/// `s` as a YAML scalar: plain when that reads back as the same string, else double-quoted.
fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '/' | '_'))
        && !matches!(
            s,
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "~"
        )
        && s.parse::<f64>().is_err();
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_config_becomes_a_cluster_file_naming_what_is_dropped() {
        let kind = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nname: dev\nnodes:\n- role: control-plane\n  extraMounts: []\n- role: worker\n";
        let c = convert(kind, None, Some("v1.34.1")).expect("converts");
        assert!(c.text.contains("name: dev\n"), "{}", c.text);
        assert!(c.text.contains("kubernetesVersion: v1.34.1\n"));
        assert!(c.text.contains("- name: worker\n      role: worker\n"));
        assert_eq!(c.dropped, vec!["nodes[0].extraMounts".to_string()]);
        assert!(c.notes.is_empty(), "{:?}", c.notes);
    }

    #[test]
    fn a_defaulted_version_is_a_note_and_settings_without_a_field_say_where_they_go() {
        let kind = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nfeatureGates: {Foo: true}\nruntimeConfig: {api/all: \"true\"}\n";
        let c = convert(kind, None, None).expect("converts");
        let newest = crate::versions::tag(crate::versions::all().last().expect("a version"));
        assert!(
            c.text.contains(&format!("kubernetesVersion: {newest}\n")),
            "{}",
            c.text
        );
        assert_eq!(c.notes.len(), 1, "{:?}", c.notes);
        assert!(c.notes[0].contains(&newest) && c.notes[0].contains("--kubernetes-version"));
        assert!(
            c.text.contains(&format!("# note: {}", c.notes[0])),
            "{}",
            c.text
        );
        assert!(
            c.dropped[0].starts_with("featureGates (")
                && c.dropped[0].contains("spec.apiServer.extraArgs")
                && c.dropped[0].contains("feature-gates"),
            "{:?}",
            c.dropped
        );
        assert!(c.dropped[1].contains("runtime-config"), "{:?}", c.dropped);
        // A node image's tag is the version: no note.
        let tagged = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n  image: kindest/node:v1.34.1\n";
        assert!(convert(tagged, None, None)
            .expect("converts")
            .notes
            .is_empty());
    }

    #[test]
    fn other_documents_are_refused_with_their_kind() {
        let e = convert("apiVersion: v1\nkind: Pod\n", None, None).expect_err("refused");
        assert!(matches!(e, ConvertError::NotKind { ref kind, .. } if kind == "Pod"));
        assert!(matches!(
            convert("a: [", None, None),
            Err(ConvertError::NotYaml(_))
        ));
    }
}
