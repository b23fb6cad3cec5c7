//! Filling secrets into rendered kubeadm configurations, which the renderer leaves without them:
//! `InitConfiguration.bootstrapTokens[0].token` and `.certificateKey`, and in `JoinConfiguration`
//! `discovery.bootstrapToken.{token, caCertHashes, apiServerEndpoint}` and `controlPlane.certificateKey`
//! (kubeadm API v1beta3/v1beta4, same field names in both). Documents other than the patched one are
//! kept byte for byte. Also the bootstrap token and certificate key formats kubeadm accepts, and the
//! fields kubeadm's strict decoding reports in its output ([`dropped_fields`]).

use serde_yaml::{Mapping, Value};

/// The secrets a node needs to join: never printed (registered for redaction), stored only in 0600 files.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JoinSecrets {
    /// Bootstrap token `[a-z0-9]{6}.[a-z0-9]{16}` (kubeadm's format); valid 24 hours.
    pub token: String,
    /// When the token was created, seconds since the Unix epoch.
    pub token_created: u64,
    /// Certificate key: 32 random bytes as 64 hex characters; the uploaded certificates expire 2 hours
    /// after upload.
    pub certificate_key: String,
    /// When the certificates were uploaded with this key, seconds since the Unix epoch.
    pub key_uploaded: u64,
    /// `sha256:<hex>` of the cluster CA's public key (not secret).
    pub ca_cert_hash: String,
}

/// Token lifetime used when creating one (kubeadm's default, 24 h); refreshed an hour before.
pub(crate) const TOKEN_TTL_SECS: u64 = 24 * 3600;
/// Lifetime of uploaded certificates (kubeadm: 2 h); a fresh key is uploaded 10 minutes before.
pub(crate) const KEY_TTL_SECS: u64 = 2 * 3600;

impl JoinSecrets {
    /// True when the token is still valid for at least an hour at `now`.
    pub fn token_fresh(&self, now: u64) -> bool {
        now < self.token_created.saturating_add(TOKEN_TTL_SECS - 3600)
    }
    /// True when the uploaded certificates are still valid for at least 10 minutes at `now`.
    pub fn key_fresh(&self, now: u64) -> bool {
        now < self.key_uploaded.saturating_add(KEY_TTL_SECS - 600)
    }
}

/// A new bootstrap token, `[a-z0-9]{6}.[a-z0-9]{16}`. Errors: no randomness available.
pub(crate) fn new_token() -> std::io::Result<String> {
    Ok(format!(
        "{}.{}",
        crate::util::random_token_chars(6)?,
        crate::util::random_token_chars(16)?
    ))
}

/// A new certificate key: 32 random bytes, hex (what `kubeadm certs certificate-key` prints).
pub(crate) fn new_certificate_key() -> std::io::Result<String> {
    Ok(hex::encode(crate::util::random_bytes(32)?))
}

/// Splits a multi-document YAML text at `---` lines, keeping each document's text.
fn split_docs(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.split_inclusive('\n') {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else if let Some(last) = docs.last_mut() {
            last.push_str(line);
        }
    }
    docs
}

/// Why a rendered kubeadm configuration could not be completed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PatchError {
    /// The configuration has no document of that kind.
    #[error("no {kind} document in the kubeadm configuration")]
    NoDocument {
        /// The document kind looked for (`InitConfiguration`, `JoinConfiguration`).
        kind: &'static str,
    },
    /// The patched document could not be written back as YAML.
    #[error("writing the patched {kind} document: {source}")]
    Yaml {
        /// The document kind.
        kind: &'static str,
        /// serde_yaml's error.
        #[source]
        source: serde_yaml::Error,
    },
}

/// Applies `edit` to the document of `kind` in `text`. Errors: no such document, or YAML errors.
fn patch_kind(
    text: &str,
    kind: &'static str,
    edit: impl FnOnce(&mut Mapping),
) -> Result<String, PatchError> {
    let mut docs = split_docs(text);
    let mut edit = Some(edit);
    let mut found = false;
    for doc in docs.iter_mut() {
        let Ok(Value::Mapping(mut m)) = serde_yaml::from_str::<Value>(doc) else {
            continue;
        };
        if m.get("kind").and_then(Value::as_str) != Some(kind) {
            continue;
        }
        if let Some(f) = edit.take() {
            f(&mut m);
        }
        *doc = serde_yaml::to_string(&Value::Mapping(m))
            .map_err(|source| PatchError::Yaml { kind, source })?;
        found = true;
        break;
    }
    if !found {
        return Err(PatchError::NoDocument { kind });
    }
    let mut out = String::new();
    for (i, d) in docs.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(d);
        if !d.is_empty() && !d.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

fn map_at<'a>(m: &'a mut Mapping, key: &str) -> Option<&'a mut Mapping> {
    let v = m
        .entry(Value::from(key))
        .or_insert_with(|| Value::Mapping(Mapping::new()));
    if !v.is_mapping() {
        *v = Value::Mapping(Mapping::new());
    }
    v.as_mapping_mut()
}

/// The init configuration with `token` as its (first) bootstrap token (ttl 24h, groups and usages of
/// kubeadm's default token) and `certificate_key` as `InitConfiguration.certificateKey`.
/// Errors: no `InitConfiguration` document, or invalid YAML.
pub(crate) fn patch_init(
    text: &str,
    token: &str,
    certificate_key: &str,
) -> Result<String, PatchError> {
    patch_kind(text, "InitConfiguration", |m| {
        let mut t = Mapping::new();
        t.insert("token".into(), token.into());
        t.insert("ttl".into(), "24h0m0s".into());
        t.insert(
            "groups".into(),
            Value::Sequence(vec![
                "system:bootstrappers:kubeadm:default-node-token".into()
            ]),
        );
        t.insert(
            "usages".into(),
            Value::Sequence(vec!["signing".into(), "authentication".into()]),
        );
        m.insert(
            "bootstrapTokens".into(),
            Value::Sequence(vec![Value::Mapping(t)]),
        );
        m.insert("certificateKey".into(), certificate_key.into());
    })
}

/// The placeholders the renderer writes where join secrets go (`clusterctl_render::placeholders`):
/// bootstrap token, CA cert hash, certificate key.
pub(crate) const PLACEHOLDERS: [&str; 3] = [
    "@@CLUSTERCTL_JOIN_TOKEN@@",
    "@@CLUSTERCTL_CA_CERT_HASH@@",
    "@@CLUSTERCTL_CERTIFICATE_KEY@@",
];

/// The join configuration with the discovery token, CA cert hash and (for control planes) certificate
/// key filled in; `endpoint` is set as `discovery.bootstrapToken.apiServerEndpoint` when absent.
/// Errors: no `JoinConfiguration` document, or invalid YAML.
pub(crate) fn patch_join(
    text: &str,
    s: &JoinSecrets,
    control_plane: bool,
    endpoint: &str,
) -> Result<String, PatchError> {
    let text = text
        .replace(PLACEHOLDERS[0], &s.token)
        .replace(PLACEHOLDERS[1], &s.ca_cert_hash)
        .replace(PLACEHOLDERS[2], &s.certificate_key);
    patch_kind(&text, "JoinConfiguration", |m| {
        if let Some(bt) = map_at(m, "discovery").and_then(|d| map_at(d, "bootstrapToken")) {
            bt.insert("token".into(), s.token.as_str().into());
            bt.insert(
                "caCertHashes".into(),
                Value::Sequence(vec![s.ca_cert_hash.as_str().into()]),
            );
            if !bt.contains_key("apiServerEndpoint") {
                bt.insert("apiServerEndpoint".into(), endpoint.into());
            }
        }
        if control_plane {
            if let Some(cp) = map_at(m, "controlPlane") {
                cp.insert("certificateKey".into(), s.certificate_key.as_str().into());
            }
        }
    })
}

/// The fields of a configuration kubeadm reported and dropped while loading it: kubeadm decodes its
/// configuration strictly, but only warns (`W… error unmarshaling configuration
/// schema.GroupVersionKind{…Kind:"InitConfiguration"}: strict decoding error: unknown field
/// "timeouts.bogus"`) and goes on without the field. Each entry names the kind when the line does and
/// the field as kubeadm quotes it, e.g. `InitConfiguration: unknown field "timeouts.bogus"`. Empty when
/// kubeadm reported nothing.
pub(crate) fn dropped_fields(output: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in output.lines() {
        if !line.contains("strict decoding error") && !line.contains("unknown field \"") {
            continue;
        }
        let kind = line
            .split_once("Kind:\"")
            .and_then(|(_, r)| r.split_once('"'))
            .map(|(k, _)| format!("{k}: "))
            .unwrap_or_default();
        let mut found = false;
        for what in ["unknown field \"", "duplicate field \""] {
            let mut rest = line;
            while let Some((_, r)) = rest.split_once(what) {
                let Some((field, after)) = r.split_once('"') else {
                    break;
                };
                let entry = format!("{kind}{}{field}\"", what);
                if !out.contains(&entry) {
                    out.push(entry);
                }
                found = true;
                rest = after;
            }
        }
        if !found {
            let entry = format!(
                "{kind}{}",
                line.split_once("strict decoding error")
                    .map(|(_, r)| format!("strict decoding error{r}"))
                    .unwrap_or_else(|| line.trim().to_string())
            );
            if !out.contains(&entry) {
                out.push(entry);
            }
        }
    }
    out
}

/// True when `script` runs kubeadm: a word `kubeadm` or a path ending in `/kubeadm`, as in `kubeadm
/// init …`, `timeout 600 kubeadm …` or `/usr/bin/kubeadm …`.
pub(crate) fn runs_kubeadm(script: &str) -> bool {
    script
        .split_whitespace()
        .any(|w| w == "kubeadm" || w.ends_with("/kubeadm"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INIT: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  name: c1\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncontrolPlaneEndpoint: 10.0.0.10:6443\n";

    #[test]
    fn init_gets_token_and_key_and_keeps_other_documents() {
        let out =
            patch_init(INIT, "abcdef.0123456789abcdef", "k".repeat(64).as_str()).expect("patch");
        let docs: Vec<Value> = out
            .split("---\n")
            .map(|d| serde_yaml::from_str(d).expect("yaml"))
            .collect();
        assert_eq!(
            docs[0]["bootstrapTokens"][0]["token"],
            Value::from("abcdef.0123456789abcdef")
        );
        assert_eq!(docs[0]["certificateKey"], Value::from("k".repeat(64)));
        assert_eq!(docs[0]["nodeRegistration"]["name"], Value::from("c1"));
        assert!(out.ends_with("kind: ClusterConfiguration\ncontrolPlaneEndpoint: 10.0.0.10:6443\n"));
    }

    #[test]
    fn join_gets_discovery_and_control_plane_key() {
        let join = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\nnodeRegistration:\n  name: c2\n";
        let s = JoinSecrets {
            token: "abcdef.0123456789abcdef".into(),
            token_created: 0,
            certificate_key: "ff".repeat(32),
            key_uploaded: 0,
            ca_cert_hash: "sha256:00".into(),
        };
        let v: Value =
            serde_yaml::from_str(&patch_join(join, &s, true, "10.0.0.10:6443").expect("patch"))
                .expect("yaml");
        assert_eq!(
            v["discovery"]["bootstrapToken"]["token"],
            Value::from(s.token.as_str())
        );
        assert_eq!(
            v["discovery"]["bootstrapToken"]["caCertHashes"][0],
            Value::from("sha256:00")
        );
        assert_eq!(
            v["discovery"]["bootstrapToken"]["apiServerEndpoint"],
            Value::from("10.0.0.10:6443")
        );
        assert_eq!(
            v["controlPlane"]["certificateKey"],
            Value::from(s.certificate_key.as_str())
        );
        let with_placeholders = "kind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: '@@CLUSTERCTL_JOIN_TOKEN@@'\n    caCertHashes: ['@@CLUSTERCTL_CA_CERT_HASH@@']\n";
        let out = patch_join(with_placeholders, &s, false, "e:1").expect("patch");
        assert!(
            !out.contains("@@") && out.contains(&s.token) && out.contains("sha256:00"),
            "{out}"
        );
        let w: Value = serde_yaml::from_str(&patch_join(join, &s, false, "e:1").expect("patch"))
            .expect("yaml");
        assert!(w.get("controlPlane").is_none());
        assert!(patch_join("kind: Other\n", &s, false, "e:1").is_err());
    }

    #[test]
    fn freshness_windows() {
        let s = JoinSecrets {
            token: String::new(),
            token_created: 1000,
            certificate_key: String::new(),
            key_uploaded: 1000,
            ca_cert_hash: String::new(),
        };
        assert!(s.token_fresh(1000 + 22 * 3600));
        assert!(!s.token_fresh(1000 + 23 * 3600));
        assert!(s.key_fresh(1000 + 3600));
        assert!(!s.key_fresh(1000 + 2 * 3600 - 600));
        let t = new_token().expect("token");
        assert_eq!(t.len(), 23);
        assert_eq!(new_certificate_key().expect("key").len(), 64);
    }

    #[test]
    fn strict_decoding_warnings_name_the_kind_and_field() {
        // As kubeadm v1.34.4 prints it (the real line, with the field the test added).
        let out = "W1202 02:27:24.967504    3010 initconfiguration.go:332] error unmarshaling configuration schema.GroupVersionKind{Group:\"kubeadm.k8s.io\", Version:\"v1beta4\", Kind:\"InitConfiguration\"}: strict decoding error: unknown field \"timeouts.bogusTimeout\", unknown field \"other\"\n[init] Using Kubernetes version: v1.34.1\n";
        assert_eq!(
            super::dropped_fields(out),
            [
                "InitConfiguration: unknown field \"timeouts.bogusTimeout\"",
                "InitConfiguration: unknown field \"other\""
            ]
        );
        assert_eq!(
            super::dropped_fields("W… strict decoding error: yaml: duplicate field \"a\""),
            ["duplicate field \"a\""]
        );
        assert!(super::dropped_fields("[preflight] Running pre-flight checks\n").is_empty());
        assert!(super::runs_kubeadm("timeout 600 kubeadm init --config x"));
        assert!(super::runs_kubeadm("/usr/bin/kubeadm join --config x"));
        assert!(!super::runs_kubeadm("kubectl apply -f kubeadm.yaml"));
    }
}
