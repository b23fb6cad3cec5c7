//! The rendered kind config through kind's own code (issue 15 item 5): `scripts/k8s/kind-check.sh`
//! builds a small program of the test bed inside a copy of the `sigs.k8s.io/kind` module
//! ([`clusterctl_render::kind::KIND_VERSION`]) that loads the file with kind's loader
//! (`encoding.Load`, strict decoding) and validation (`Cluster.Validate`) and generates, per node, the
//! kubeadm config kind writes to `/kind/kubeadm.conf` with our `kubeadmConfigPatches` applied by kind's
//! patcher. For every docker input re-targeted to every supported minor:
//!
//! * kind loads and validates it, and every kubeadm document kind generated has the API version the
//!   table gives ([`clusterctl_render::kind::kubeadm_api`]), as has every versioned patch we wrote;
//! * for `docker-kind-settings`, the merged configs carry the file's settings: certSANs (next to
//!   kind's own), the API server flags (audit to stdout, OIDC, `profiling`) and volumes, the timeouts,
//!   the worker's taint, and the control planes mount the audit policy and the OIDC CA;
//! * each node's merged config goes through the real `kubeadm config validate` of that minor when the
//!   test bed has it built (no build is started here: `real_kubeadm.rs` owns those builds): exit 0,
//!   `ok`, no strict-decoding warning. A canary (an unknown field patched in) proves that check bites.

use crate::common;
use clusterctl_render::kind::{kubeadm_api, KIND_CONFIG_PATH, KIND_VERSION};
use clusterctl_render::{render, Facts};
use clusterctl_spec::model::Provider;
use clusterctl_spec::KubeadmApi;
use serde::Deserialize;
use serde_json::Value as Json;
use serde_yaml::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kind-check program (built and cached by its script), or `None` after a SKIP line outside CI.
fn kind_check() -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/k8s/kind-check.sh");
    let out = Command::new("bash").arg(&script).output();
    let path = match out {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        Ok(o) => {
            eprintln!("{}", String::from_utf8_lossy(&o.stderr));
            PathBuf::new()
        }
        Err(e) => {
            eprintln!("cannot run {}: {e}", script.display());
            PathBuf::new()
        }
    };
    let text = std::fs::read_to_string(&script).unwrap_or_default();
    assert!(
        text.contains(&format!("KIND_VERSION=${{KIND_VERSION:-{KIND_VERSION}}}")),
        "scripts/k8s/kind-check.sh must build against render's KIND_VERSION {KIND_VERSION}"
    );
    clusterctl_testbed::require(
        "kind's loader built from sigs.k8s.io/kind (scripts/k8s/kind-check.sh)",
        path.is_file(),
    )
    .then_some(path)
}

/// The kubeadm of `minor` the test bed has built, without building one.
fn cached_kubeadm(minor: u64) -> Option<PathBuf> {
    let v = crate::real_kubeadm::KUBEADMS
        .iter()
        .map(|(v, _)| *v)
        .find(|v| v.starts_with(&format!("v1.{minor}.")))?;
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/k8s/paths.sh"))
        .args([v, "kubeadm"])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && p.is_file()).then_some(p)
}

struct Node {
    name: String,
    bootstrap: bool,
    role: String,
    file: PathBuf,
    mounts: Vec<String>,
}

/// Runs kind-check on `config` for Kubernetes `version`; Err with kind's message when kind refuses it.
fn load(bin: &Path, config: &Path, version: &str, out: &Path) -> Result<Vec<Node>, String> {
    let o = Command::new(bin)
        .arg(config)
        .arg(version)
        .arg(out)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    let j: Json = serde_json::from_slice(&o.stdout).map_err(|e| e.to_string())?;
    Ok(j["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|n| Node {
            name: n["name"].as_str().unwrap_or_default().to_string(),
            bootstrap: n["bootstrap"].as_bool().unwrap_or(false),
            role: n["role"].as_str().unwrap_or_default().to_string(),
            file: PathBuf::from(n["file"].as_str().unwrap_or_default()),
            mounts: n["mounts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|m| {
                    format!(
                        "{}:{}",
                        m["hostPath"].as_str().unwrap_or_default(),
                        m["containerPath"].as_str().unwrap_or_default()
                    )
                })
                .collect(),
        })
        .collect())
}

/// The documents of a kubeadm config file.
fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("generated config");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("generated YAML"))
        .collect()
}

fn doc<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("no {kind} in {docs:?}"))
}

/// `kubeadm config validate` on one merged config: Err with its output unless it is clean.
fn kubeadm_validate(kubeadm: &Path, file: &Path) -> Result<(), String> {
    let o = Command::new(kubeadm)
        .args(["config", "validate", "--config"])
        .arg(file)
        .output()
        .map_err(|e| e.to_string())?;
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    let strict = ["strict decoding error", "unknown field", "duplicate field"];
    if o.status.success() && out.trim() == "ok" && !strict.iter().any(|s| err.contains(s)) {
        Ok(())
    } else {
        Err(format!("exit {:?}: {out}{err}", o.status.code()))
    }
}

#[test]
fn kind_loads_every_rendered_kind_config_and_keeps_the_kubeadm_settings() {
    let Some(bin) = kind_check() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut failures = Vec::new();
    let (mut loaded, mut validated) = (0, 0);
    for (label, input) in common::inputs() {
        for version in common::supported_minors() {
            let l = common::with_version(&input, &version);
            let c = common::valid(&label, &l);
            if c.spec().provider != Provider::Docker {
                continue;
            }
            let r = render(&c, &Facts::assumed(&c)).expect("render");
            let f = r
                .cluster
                .iter()
                .find(|f| f.path == KIND_CONFIG_PATH)
                .expect("kind config");
            let text = String::from_utf8_lossy(&f.content).into_owned();
            let tag = format!("{label}@{version}");
            let base = dir.path().join(tag.replace([':', '@'], "_"));
            std::fs::create_dir_all(&base).expect("dir");
            let config = base.join("kind-config.yaml");
            std::fs::write(&config, &text).expect("write");
            let nodes = match load(&bin, &config, &version, &base.join("kubeadm")) {
                Ok(n) => n,
                Err(e) => {
                    failures.push(format!("{tag}: kind refuses the config: {e}\n{text}"));
                    continue;
                }
            };
            loaded += 1;
            let api = kubeadm_api(c.kubernetes_version());
            // every versioned patch is for the API kind generates
            let cfg: Value = serde_yaml::from_str(&text).expect("kind config YAML");
            let mut patches: Vec<&Value> = cfg["kubeadmConfigPatches"]
                .as_sequence()
                .map(|s| s.iter().collect())
                .unwrap_or_default();
            for n in cfg["nodes"].as_sequence().into_iter().flatten() {
                patches.extend(
                    n["kubeadmConfigPatches"]
                        .as_sequence()
                        .into_iter()
                        .flatten(),
                );
            }
            for p in patches {
                let p: Value = serde_yaml::from_str(p.as_str().unwrap_or_default()).expect("patch");
                if let Some(v) = p["apiVersion"].as_str() {
                    if v != api.api_version() {
                        failures.push(format!(
                            "{tag}: patch for {v}, kind generates {}",
                            api.api_version()
                        ));
                    }
                }
            }
            let kubeadm = cached_kubeadm(c.kubernetes_version().minor);
            for n in &nodes {
                let d = docs(&n.file);
                for x in &d {
                    let v = x["apiVersion"].as_str().unwrap_or_default();
                    if v.starts_with("kubeadm.k8s.io/") && v != api.api_version() {
                        failures.push(format!(
                            "{tag} {}: kind generated {v}, table says {}",
                            n.name,
                            api.api_version()
                        ));
                    }
                }
                if let Some(k) = &kubeadm {
                    match kubeadm_validate(k, &n.file) {
                        Ok(()) => validated += 1,
                        Err(e) => {
                            failures.push(format!("{tag} {}: kubeadm config validate: {e}", n.name))
                        }
                    }
                }
            }
            if label == "fixture:docker-kind-settings" {
                if let Err(e) = settings_kept(&nodes, api) {
                    failures.push(format!("{tag}: {e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(loaded > 0, "no docker input was loaded");
    eprintln!("kind loaded {loaded} rendered kind configs; real kubeadm validated {validated} merged node configs");
}

/// The merged configs of `docker-kind-settings` carry what the file sets.
fn settings_kept(nodes: &[Node], api: KubeadmApi) -> Result<(), String> {
    let first = nodes
        .iter()
        .find(|n| n.bootstrap)
        .ok_or("no bootstrap node")?;
    let d = docs(&first.file);
    let cc = doc(&d, "ClusterConfiguration");
    let a = &cc["apiServer"];
    let sans: Vec<&str> = a["certSANs"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for s in ["k8s.lab.example", "10.0.0.50", "localhost", "127.0.0.1"] {
        if !sans.contains(&s) {
            return Err(format!("certSANs {sans:?} lack {s}"));
        }
    }
    let arg = |name: &str| -> Option<String> {
        match api {
            KubeadmApi::V1beta3 => a["extraArgs"][name].as_str().map(str::to_string),
            KubeadmApi::V1beta4 => a["extraArgs"]
                .as_sequence()
                .into_iter()
                .flatten()
                .find(|x| x["name"].as_str() == Some(name))
                .and_then(|x| x["value"].as_str().map(str::to_string)),
        }
    };
    for (k, v) in [
        ("audit-log-path", "-"),
        ("audit-policy-file", "/etc/kubernetes/audit/policy.yaml"),
        ("oidc-issuer-url", "https://sso.example.com/realms/k8s"),
        ("oidc-ca-file", "/etc/kubernetes/oidc/ca.crt"),
        ("profiling", "false"),
        ("runtime-config", ""),
    ] {
        if arg(k).as_deref() != Some(v) {
            return Err(format!(
                "apiServer flag {k}: {:?}, want {v:?}\n{cc:?}",
                arg(k)
            ));
        }
    }
    let vols: Vec<&str> = a["extraVolumes"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    if !vols.contains(&"audit-policy") || !vols.contains(&"oidc-ca") || vols.contains(&"audit-log")
    {
        return Err(format!("extraVolumes {vols:?}"));
    }
    let init = doc(&d, "InitConfiguration");
    let cp_timeout = match api {
        KubeadmApi::V1beta3 => a["timeoutForControlPlane"].as_str(),
        KubeadmApi::V1beta4 => init["timeouts"]["controlPlaneComponentHealthCheck"].as_str(),
    };
    if cp_timeout != Some("10m0s") {
        return Err(format!("control-plane timeout {cp_timeout:?}"));
    }
    for n in nodes.iter().filter(|n| !n.bootstrap) {
        let d = docs(&n.file);
        let j = doc(&d, "JoinConfiguration");
        let disc = match api {
            KubeadmApi::V1beta3 => j["discovery"]["timeout"].as_str(),
            KubeadmApi::V1beta4 => j["timeouts"]["discovery"].as_str(),
        };
        if disc != Some("7m0s") {
            return Err(format!("{}: discovery timeout {disc:?}", n.name));
        }
        if n.role == "worker" {
            let t = &j["nodeRegistration"]["taints"][0];
            if t["key"].as_str() != Some("dedicated") || t["effect"].as_str() != Some("NoSchedule")
            {
                return Err(format!(
                    "{}: taints {:?}",
                    n.name, j["nodeRegistration"]["taints"]
                ));
            }
        }
    }
    for n in nodes.iter().filter(|n| n.role == "control-plane") {
        for p in [
            "/etc/kubernetes/audit/policy.yaml",
            "/etc/kubernetes/oidc/ca.crt",
        ] {
            if !n.mounts.iter().any(|m| m.ends_with(&format!("{p}:{p}"))) {
                return Err(format!("{}: no mount of {p} in {:?}", n.name, n.mounts));
            }
        }
    }
    Ok(())
}

/// The check bites: a patch with a field kubeadm does not know, applied by kind, is reported by the
/// real kubeadm (when the test bed has one for kind's default API).
#[test]
fn an_unknown_field_patched_in_is_caught_by_the_real_kubeadm() {
    let Some(bin) = kind_check() else { return };
    let Some(kubeadm) = cached_kubeadm(34) else {
        clusterctl_testbed::require("kubeadm v1.34 built by scripts/k8s/build.sh", false);
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("kind.yaml");
    std::fs::write(
        &config,
        "apiVersion: kind.x-k8s.io/v1alpha4\nkind: Cluster\nname: canary\nkubeadmConfigPatches:\n- |\n  kind: ClusterConfiguration\n  apiServer:\n    bogusField: 1\nnodes:\n- role: control-plane\n",
    )
    .expect("write");
    let nodes = load(&bin, &config, "v1.34.4", &dir.path().join("out")).expect("kind loads it");
    let e = kubeadm_validate(&kubeadm, &nodes[0].file).expect_err("kubeadm must report bogusField");
    assert!(e.contains("bogusField"), "{e}");
    // and kind's loader refuses a field of its own schema it does not know
    std::fs::write(
        &config,
        "apiVersion: kind.x-k8s.io/v1alpha4\nkind: Cluster\nbogus: 1\n",
    )
    .expect("write");
    let e = load(&bin, &config, "v1.34.4", &dir.path().join("out2"))
        .err()
        .expect("kind refuses it");
    assert!(e.contains("bogus"), "{e}");
}
