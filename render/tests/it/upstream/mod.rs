//! Strict upstream types for every format render writes, transcribed from the upstream Go sources (each
//! module names its source), and [`check`]: decode one rendered file strictly by its path and, for YAML,
//! by each document's `apiVersion`/`kind`. Every struct has `deny_unknown_fields`, so an unknown or
//! misplaced field fails the test, as kubeadm's "strict decoding error" would fail the install.

#![allow(dead_code)]

pub(crate) mod audit_v1;
pub(crate) mod authn;
pub(crate) mod cni_formats;
pub(crate) mod core_v1;
pub(crate) mod crictl;
pub(crate) mod encryption;
pub(crate) mod kind_v1alpha4;
pub(crate) mod kubeadm_v1beta3;
pub(crate) mod kubeadm_v1beta4;
pub(crate) mod kubelet_v1beta1;
pub(crate) mod kubeproxy_v1alpha1;
pub(crate) mod meta;
pub(crate) mod toml_formats;

use clusterctl_render::RenderedFile;
use serde::de::DeserializeOwned;
use serde::Deserialize;

fn yaml_strict<T: DeserializeOwned>(what: &str, doc: &serde_yaml::Value) -> Result<T, String> {
    // Round-trip through text so serde reports the field path of the offending key.
    let text = serde_yaml::to_string(doc).map_err(|e| format!("{what}: {e}"))?;
    serde_yaml::from_str::<T>(&text).map_err(|e| format!("{what}: strict decoding error: {e}"))
}

fn toml_strict<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, String> {
    toml::from_str::<T>(text).map_err(|e| format!("{what}: strict decoding error: {e}"))
}

fn json_strict<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, String> {
    serde_json::from_str::<T>(text).map_err(|e| format!("{what}: strict decoding error: {e}"))
}

/// Decodes one YAML document by apiVersion/kind. Returns `apiVersion/kind`.
pub(crate) fn check_yaml_doc(doc: &serde_yaml::Value) -> Result<String, String> {
    let av = doc
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .ok_or("document without apiVersion")?;
    let kind = doc
        .get("kind")
        .and_then(|v| v.as_str())
        .ok_or("document without kind")?;
    let id = format!("{av}/{kind}");
    match (av, kind) {
        ("kubeadm.k8s.io/v1beta4", "InitConfiguration") => {
            yaml_strict::<kubeadm_v1beta4::InitConfiguration>(&id, doc).map(|_| ())
        }
        ("kubeadm.k8s.io/v1beta4", "ClusterConfiguration") => {
            yaml_strict::<kubeadm_v1beta4::ClusterConfiguration>(&id, doc).map(|_| ())
        }
        ("kubeadm.k8s.io/v1beta4", "JoinConfiguration") => {
            yaml_strict::<kubeadm_v1beta4::JoinConfiguration>(&id, doc).map(|_| ())
        }
        ("kubeadm.k8s.io/v1beta4", "ResetConfiguration") => {
            yaml_strict::<kubeadm_v1beta4::ResetConfiguration>(&id, doc).map(|_| ())
        }
        ("kubeadm.k8s.io/v1beta4", "UpgradeConfiguration") => {
            yaml_strict::<kubeadm_v1beta4::UpgradeConfiguration>(&id, doc).map(|_| ())
        }
        ("kubeadm.k8s.io/v1beta3", "InitConfiguration") => {
            yaml_strict::<kubeadm_v1beta3::InitConfiguration>(&id, doc).map(|_| ())
        }
        ("kubeadm.k8s.io/v1beta3", "ClusterConfiguration") => {
            yaml_strict::<kubeadm_v1beta3::ClusterConfiguration>(&id, doc).map(|_| ())
        }
        ("kubeadm.k8s.io/v1beta3", "JoinConfiguration") => {
            yaml_strict::<kubeadm_v1beta3::JoinConfiguration>(&id, doc).map(|_| ())
        }
        ("kubelet.config.k8s.io/v1beta1", "KubeletConfiguration") => {
            yaml_strict::<kubelet_v1beta1::KubeletConfiguration>(&id, doc).map(|_| ())
        }
        ("kubeproxy.config.k8s.io/v1alpha1", "KubeProxyConfiguration") => {
            yaml_strict::<kubeproxy_v1alpha1::KubeProxyConfiguration>(&id, doc).map(|_| ())
        }
        ("audit.k8s.io/v1", "Policy") => yaml_strict::<audit_v1::Policy>(&id, doc).map(|_| ()),
        (
            "apiserver.config.k8s.io/v1beta1" | "apiserver.config.k8s.io/v1",
            "AuthenticationConfiguration",
        ) => yaml_strict::<authn::AuthenticationConfiguration>(&id, doc).map(|_| ()),
        ("apiserver.config.k8s.io/v1", "EncryptionConfiguration") => {
            yaml_strict::<encryption::EncryptionConfiguration>(&id, doc).and_then(|c| {
                match c
                    .resources
                    .iter()
                    .flat_map(|r| &r.providers)
                    .find(|p| p.count() != 1)
                {
                    Some(p) => Err(format!(
                        "{id}: a provider entry sets {} providers",
                        p.count()
                    )),
                    None => Ok(()),
                }
            })
        }
        ("kind.x-k8s.io/v1alpha4", "Cluster") => {
            yaml_strict::<kind_v1alpha4::Cluster>(&id, doc).map(|_| ())
        }
        ("v1", "Pod") => yaml_strict::<core_v1::Pod>(&id, doc).map(|_| ()),
        ("v1", "ServiceAccount") => yaml_strict::<core_v1::ServiceAccount>(&id, doc).map(|_| ()),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            yaml_strict::<core_v1::ClusterRole>(&id, doc).map(|_| ())
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            yaml_strict::<core_v1::ClusterRoleBinding>(&id, doc).map(|_| ())
        }
        ("operator.tigera.io/v1", "Installation") => {
            yaml_strict::<cni_formats::Installation>(&id, doc).map(|_| ())
        }
        _ => Err(format!("no strict upstream type for {id}")),
    }?;
    Ok(id)
}

/// Splits a YAML stream into documents (each must be a mapping).
pub(crate) fn yaml_docs(text: &str) -> Result<Vec<serde_yaml::Value>, String> {
    let mut out = Vec::new();
    for d in serde_yaml::Deserializer::from_str(text) {
        let v = serde_yaml::Value::deserialize(d).map_err(|e| format!("YAML: {e}"))?;
        out.push(v);
    }
    Ok(out)
}

#[derive(Deserialize)]
struct VersionProbe {
    version: i64,
}

fn check_sysctl(text: &str) -> Result<(), String> {
    for l in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let (k, v) = l
            .split_once(" = ")
            .ok_or(format!("sysctl line {l:?} is not `key = value`"))?;
        let key_ok = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
        if !key_ok || v.trim().is_empty() {
            return Err(format!("bad sysctl line {l:?}"));
        }
    }
    Ok(())
}

fn check_modules(text: &str) -> Result<(), String> {
    for l in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        if !l
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("bad module name {l:?}"));
        }
    }
    Ok(())
}

fn check_unit(text: &str) -> Result<(), String> {
    let mut section = String::new();
    let mut sections = Vec::new();
    for l in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        if l.starts_with('[') {
            section = l.trim_matches(|c| c == '[' || c == ']').to_string();
            sections.push(section.clone());
            continue;
        }
        let (k, _) = l
            .split_once('=')
            .ok_or(format!("unit line {l:?} is not key=value"))?;
        let known: &[&str] = match section.as_str() {
            "Unit" => &[
                "Description",
                "Documentation",
                "After",
                "Wants",
                "Requires",
                "Before",
            ],
            "Service" => &[
                "Type",
                "ExecStart",
                "Restart",
                "RestartSec",
                "Environment",
                "RemainAfterExit",
            ],
            "Install" => &["WantedBy"],
            s => return Err(format!("unknown unit section [{s}]")),
        };
        if !known.contains(&k) {
            return Err(format!("unknown key {k} in [{section}]"));
        }
    }
    if sections != ["Unit", "Service", "Install"] {
        return Err(format!("unit sections {sections:?}"));
    }
    Ok(())
}

/// A systemd drop-in (systemd.unit(5), systemd.exec(5)): only `[Service]`, only whole-quoted
/// `Environment="NAME=VALUE"` lines of the proxy variables, with no `%` specifier, quote or space in
/// the value.
fn check_drop_in(text: &str) -> Result<(), String> {
    let mut sections = Vec::new();
    for l in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        if l.starts_with('[') {
            sections.push(l.to_string());
            continue;
        }
        let quoted = l
            .strip_prefix("Environment=\"")
            .and_then(|r| r.strip_suffix('"'))
            .ok_or(format!(
                "drop-in line {l:?} is not Environment=\"NAME=VALUE\""
            ))?;
        let (k, v) = quoted
            .split_once('=')
            .ok_or(format!("{l:?} has no NAME=VALUE"))?;
        if !["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"].contains(&k) {
            return Err(format!("unexpected variable {k}"));
        }
        if v.is_empty() || v.contains(['%', '"', '\\', ' ']) {
            return Err(format!("value of {k} needs quoting or escaping: {v:?}"));
        }
    }
    if sections != ["[Service]"] {
        return Err(format!("drop-in sections {sections:?}"));
    }
    Ok(())
}

/// tmpfiles.d(5): `Type Path Mode User Group Age Argument`, each line with a known type and seven
/// fields at most (missing trailing fields default to `-`).
fn check_tmpfiles(text: &str) -> Result<(), String> {
    const TYPES: &[&str] = &[
        "f", "f+", "w", "w+", "d", "D", "e", "v", "q", "Q", "p", "p+", "L", "L+", "c", "c+", "b",
        "b+", "C", "C+", "x", "X", "r", "R", "z", "Z", "t", "T", "h", "H", "a", "a+", "A", "A+",
    ];
    for l in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let fields: Vec<&str> = l.split_whitespace().collect();
        if fields.len() < 2 || fields.len() > 7 {
            return Err(format!("tmpfiles line {l:?} has {} fields", fields.len()));
        }
        if !TYPES.contains(&fields[0].trim_end_matches('!')) {
            return Err(format!("tmpfiles type {:?} is not known", fields[0]));
        }
        if !fields[1].starts_with('/') {
            return Err(format!("tmpfiles path {:?} is not absolute", fields[1]));
        }
    }
    Ok(())
}

/// A POSIX shell script: `#!/bin/sh` and `sh -n` accepts it.
fn check_sh(text: &str) -> Result<(), String> {
    if !text.starts_with("#!/bin/sh\n") {
        return Err("script does not start with #!/bin/sh".into());
    }
    let out = std::process::Command::new("sh")
        .args(["-n", "-c", text])
        .output()
        .map_err(|e| format!("running sh -n: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sh -n: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

fn check_pem(text: &str) -> Result<(), String> {
    if text.contains("-----BEGIN CERTIFICATE-----") && text.contains("-----END CERTIFICATE-----") {
        Ok(())
    } else {
        Err("not a PEM certificate".into())
    }
}

/// Strictly checks one rendered file. Returns what it was checked as (one entry per document).
pub(crate) fn check(f: &RenderedFile) -> Result<Vec<String>, String> {
    let text =
        std::str::from_utf8(&f.content).map_err(|e| format!("{}: not UTF-8: {e}", f.path))?;
    let p = f.path.as_str();
    let r: Result<Vec<String>, String> =
        if p.ends_with(".yaml") && p.ends_with("cilium-values.yaml") {
            let v: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
            yaml_strict::<cni_formats::CiliumValues>("cilium values", &v)
                .map(|_| vec!["cilium/values".into()])
        } else if p == "/etc/crictl.yaml" {
            let v: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
            yaml_strict::<crictl::CrictlConfig>("crictl.yaml", &v).map(|_| vec!["crictl".into()])
        } else if p.ends_with(".yaml") {
            yaml_docs(text)?.iter().map(check_yaml_doc).collect()
        } else if p == "/etc/containerd/config.toml" {
            let probe: VersionProbe = toml::from_str(text).map_err(|e| e.to_string())?;
            match probe.version {
                2 => toml_strict::<toml_formats::ContainerdV2>("containerd v2", text)
                    .map(|_| vec!["containerd/v2".into()]),
                3 => toml_strict::<toml_formats::ContainerdV3>("containerd v3", text)
                    .map(|_| vec!["containerd/v3".into()]),
                v => Err(format!("containerd config version {v}")),
            }
        } else if p.starts_with("/etc/containerd/certs.d/") && p.ends_with("/hosts.toml") {
            toml_strict::<toml_formats::HostsToml>("hosts.toml", text)
                .map(|_| vec!["containerd/hosts.toml".into()])
        } else if p.starts_with("/etc/crio/crio.conf.d/") {
            toml_strict::<toml_formats::CrioDropIn>("crio.conf", text)
                .map(|_| vec!["crio/crio.conf".into()])
        } else if p.starts_with("/etc/containers/registries.conf.d/") {
            toml_strict::<toml_formats::RegistriesConf>("registries.conf", text)
                .map(|_| vec!["containers/registries.conf".into()])
        } else if p.ends_with(".crt") {
            check_pem(text).map(|_| vec!["pem".into()])
        } else if p.starts_with("/etc/sysctl.d/") {
            check_sysctl(text).map(|_| vec!["sysctl".into()])
        } else if p.starts_with("/etc/modules-load.d/") {
            check_modules(text).map(|_| vec!["modules-load".into()])
        } else if p.ends_with(".conflist") {
            json_strict::<cni_formats::NetConfList>("conflist", text)
                .map(|_| vec!["cni/conflist".into()])
        } else if p.ends_with("flannel-net-conf.json") {
            json_strict::<cni_formats::FlannelNetConf>("net-conf.json", text)
                .map(|_| vec!["flannel/net-conf".into()])
        } else if p.ends_with("/agent.json") {
            json_strict::<clusterctl_render::cni::builtin::AgentConfig>("agent.json", text)
                .map(|_| vec!["clusterctl/agent".into()])
        } else if p.ends_with(".service") {
            check_unit(text).map(|_| vec!["systemd/unit".into()])
        } else if p.contains(".service.d/") && p.ends_with(".conf") {
            check_drop_in(text).map(|_| vec!["systemd/drop-in".into()])
        } else if p.starts_with("/etc/tmpfiles.d/") {
            check_tmpfiles(text).map(|_| vec!["tmpfiles.d".into()])
        } else if p.ends_with(".sh") {
            check_sh(text).map(|_| vec!["sh".into()])
        } else {
            Err("no strict check for this path".into())
        };
    r.map_err(|e| format!("{}: {e}", f.path))
}
