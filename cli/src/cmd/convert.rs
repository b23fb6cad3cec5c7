//! `clusterctl convert -f kind-config.yaml [--name NAME] [--kubernetes-version V]`: a kind `Cluster`
//! config (`apiVersion: kind.x-k8s.io/v1alpha4`) written out as the equivalent cluster file on stdout
//! (docker provider; kind's node names; kindnet unless `disableDefaultCNI`; pod and service subnets,
//! kube-proxy mode, node labels and port mappings kept). What has no equivalent (extra mounts, kubeadm
//! and containerd patches, feature gates, IPv6) is listed as a comment at the top and a warning on
//! stderr. The result is validated; exit 0 when it is valid, 2 when the input is not a kind config or
//! the result does not validate (its diagnostics printed).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_yaml::Value;

/// Arguments of `clusterctl convert`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The kind config (`kind create cluster --config FILE`).
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// The cluster name (default: the config's `name`, else `kind`, as kind does).
    #[arg(long)]
    pub name: Option<String>,
    /// The Kubernetes version (default: the node image's tag, else the newest supported patch).
    #[arg(long)]
    pub kubernetes_version: Option<String>,
}

/// The kind config's API group.
const KIND_GROUP: &str = "kind.x-k8s.io/";

/// Runs the command (exit codes in the module doc).
pub(crate) fn run(args: Args) -> miette::Result<ExitCode> {
    let text = match std::fs::read_to_string(&args.file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("convert: cannot read {}: {e}", args.file.display());
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    let out = match convert(
        &text,
        args.name.as_deref(),
        args.kubernetes_version.as_deref(),
    ) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("convert: {}: {e}", args.file.display());
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    for w in &out.dropped {
        eprintln!("warning: not converted: {w}");
    }
    let loaded = clusterctl_spec::Loaded::from_text("converted cluster file", out.text.clone());
    match clusterctl_spec::validate(&loaded) {
        Ok(_) => {
            print!("{}", out.text);
            Ok(ExitCode::SUCCESS)
        }
        Err(d) => {
            print!("{}", out.text);
            eprintln!("{:?}", miette::Report::new(d));
            Ok(ExitCode::from(crate::EXIT_INVALID))
        }
    }
}

/// The converted file and what could not be carried over.
#[derive(Debug)]
pub(crate) struct Converted {
    /// The cluster file.
    pub text: String,
    /// Settings with no equivalent, one line each.
    pub dropped: Vec<String>,
}

/// Converts a kind config's text. Errors: it is not YAML or not a kind `Cluster`.
pub(crate) fn convert(
    text: &str,
    name: Option<&str>,
    version: Option<&str>,
) -> Result<Converted, String> {
    let v: Value = serde_yaml::from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    let api = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    if !api.starts_with(KIND_GROUP) || kind != "Cluster" {
        return Err(format!(
            "not a kind Cluster config (apiVersion {api:?}, kind {kind:?}; expected {KIND_GROUP}v1alpha4 Cluster)"
        ));
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
            dropped.push(format!(
                "{key} (write the setting in the cluster file's own fields; see docs/spec.md)"
            ));
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
        _ => vec![serde_yaml::from_str("role: control-plane").map_err(|e| e.to_string())?],
    };
    let image_version = nodes.iter().filter_map(|n| s(n, "image")).find_map(|i| {
        let tag = i.split('@').next()?.rsplit_once(':')?.1.to_string();
        tag.starts_with('v').then_some(tag)
    });
    let version = version
        .map(str::to_string)
        .or(image_version)
        .or_else(|| {
            clusterctl_spec::versions::all()
                .last()
                .map(|v| format!("v{v}"))
        })
        .unwrap_or_default();

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
    Ok(Converted {
        text: head + &o,
        dropped,
    })
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
