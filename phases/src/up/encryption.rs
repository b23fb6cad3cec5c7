//! Encryption at rest (`spec.apiServer.encryption`): the key, and the rewrite of what was stored before.
//!
//! The key. Render writes the
//! `EncryptionConfiguration` with a placeholder for the key ([`clusterctl_render::placeholders::ENCRYPTION_KEY`]);
//! before the file is placed (by `files`, and by `rollout/apiserver` when encryption is turned on in an
//! existing cluster) [`fill`] puts in the providers the first control plane's file already has — the
//! one source of truth, so every control plane, a joining one and every later run get the same key — or,
//! when it has none, one 32-byte key generated here once per run (from this machine's `/dev/urandom`)
//! and written first to the first control plane by its own `files` phase.
//!
//! The providers kept from the first control plane's file: the file's provider with its keys (several
//! after a key rotation done by hand, docs/lifecycle.md), then any other key-holding provider it lists
//! (the one used before `provider` changed, so what it encrypted stays readable), then `identity` (what
//! was stored before encryption was on). Every key read or generated joins the run's redaction list; it
//! is never shown, logged or recorded in the state (whose digests are of the rendered file, with the
//! placeholder).

use super::UpData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use clusterctl_exec::Cmd;
use clusterctl_render::apiserver::{ENCRYPTION_CONFIG_PATH, ENCRYPTION_KEY_NAME};
use clusterctl_render::{placeholders, Purpose, RenderedFile};
use clusterctl_spec::ValidNode;
use serde_yaml::{Mapping, Value};
use std::time::Duration;

/// The files with the encryption configuration's providers filled in (other files unchanged).
/// Errors: the first control plane's file cannot be read, the rendered file does not parse, or no
/// random bytes for a new key.
pub(crate) fn fill(
    ctx: &mut NodeCtx,
    data: &UpData,
    files: Vec<RenderedFile>,
) -> Result<Vec<RenderedFile>, PhaseError> {
    files
        .into_iter()
        .map(|mut f| {
            if f.purpose == Purpose::EncryptionConfig {
                let text = f.as_text().into_owned();
                f.content = filled(ctx, data, &text)?.into_bytes();
            }
            Ok(f)
        })
        .collect()
}

/// The rendered configuration `text` with the providers of [`providers`] in every resource entry.
fn filled(ctx: &mut NodeCtx, data: &UpData, text: &str) -> Result<String, PhaseError> {
    let mut doc: Value = serde_yaml::from_str(text)
        .map_err(|e| ctx.local_error_in("reading the rendered encryption configuration", &e))?;
    let wanted = wanted_provider(&doc).ok_or_else(|| {
        ctx.local_error("the rendered encryption configuration names no provider")
    })?;
    let list = providers(ctx, data, &wanted)?;
    if let Some(Value::Sequence(entries)) = doc.get_mut("resources") {
        for e in entries.iter_mut().filter_map(Value::as_mapping_mut) {
            e.insert("providers".into(), Value::Sequence(list.clone()));
        }
    }
    serde_yaml::to_string(&doc)
        .map_err(|e| ctx.local_error_in("writing the encryption configuration", &e))
}

/// The name of the first provider of the rendered configuration (`aescbc`, `secretbox`).
fn wanted_provider(doc: &Value) -> Option<String> {
    doc.get("resources")?
        .as_sequence()?
        .first()?
        .get("providers")?
        .as_sequence()?
        .first()?
        .as_mapping()?
        .keys()
        .next()?
        .as_str()
        .map(str::to_string)
}

/// Digest material of `rollout/encrypt-existing`: the provider and the resources.
pub(crate) fn rewrite_inputs(data: &UpData, _: &ValidNode) -> String {
    data.spec
        .encryption
        .as_ref()
        .map(|e| format!("{} {}", e.provider.as_str(), e.resources.join(",")))
        .unwrap_or_default()
}

/// `rollout/encrypt-existing` (first control plane, once per provider and resource list): the objects
/// of the encrypted resources stored before are read and written back (`kubectl get … -o json |
/// kubectl replace -f -`, as the Kubernetes documentation does it), so that they are stored encrypted
/// too — the API server encrypts only what it writes. Wildcard entries (`*.apps`) are left to the user
/// (docs/lifecycle.md), and said so.
pub(crate) fn rewrite(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let Some(enc) = &data.spec.encryption else {
        return Ok(());
    };
    let (named, wildcards): (Vec<&String>, Vec<&String>) =
        enc.resources.iter().partition(|r| !r.contains('*'));
    if !wildcards.is_empty() {
        ctx.info(&format!(
            "objects stored before encryption was turned on under {} are not rewritten here: run `kubectl get <resource> -A -o json | kubectl replace -f -` for each (docs/lifecycle.md)",
            wildcards.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    if named.is_empty() {
        return Ok(());
    }
    let list = named
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(",");
    ctx.announce(&format!(
        "encryption at rest ({}) on or changed: rewriting the existing {list} so they are stored encrypted",
        enc.provider.as_str()
    ));
    let kubectl = super::KUBECTL;
    let mut c = Cmd::new(format!(
        "{kubectl} get {} -A -o json | {kubectl} replace -f - >/dev/null",
        clusterctl_exec::shell::quote_word(&list)
    ));
    c.timeout = Some(Duration::from_secs(300));
    ctx.run(c)?;
    Ok(())
}

/// The providers every control plane gets in this run: computed once (under the lock, so parallel
/// control planes agree) from the first control plane's file, then shared.
fn providers(ctx: &mut NodeCtx, data: &UpData, wanted: &str) -> Result<Vec<Value>, PhaseError> {
    let mut slot = data
        .encryption
        .lock()
        .map_err(|_| ctx.local_error("the encryption key's lock was poisoned"))?;
    if let Some(list) = slot.as_ref() {
        return Ok(list.clone());
    }
    let phase = ctx.phase.clone();
    let existing = super::on_first_cp(ctx, data, phase, |_, cp| {
        cp.read_file(ENCRYPTION_CONFIG_PATH)
    })?;
    let existing = existing
        .flatten()
        .and_then(|b| serde_yaml::from_slice::<Value>(&b).ok())
        .map(|d| existing_providers(&d))
        .unwrap_or_default();
    let new_key = || -> Result<String, PhaseError> {
        use base64::Engine as _;
        let bytes = crate::util::random_bytes(32)
            .map_err(|e| ctx.local_error_in("generating the encryption key", &e))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    };
    let list = merge(existing, wanted, new_key)?;
    for s in secrets_of(&list) {
        data.secrets.add(&s);
    }
    *slot = Some(list.clone());
    Ok(list)
}

/// The providers of the first resource entry of an EncryptionConfiguration (empty when it has none).
fn existing_providers(doc: &Value) -> Vec<Value> {
    doc.get("resources")
        .and_then(Value::as_sequence)
        .and_then(|r| r.first())
        .and_then(|e| e.get("providers"))
        .and_then(Value::as_sequence)
        .cloned()
        .unwrap_or_default()
}

/// The name of a provider entry (`{aescbc: {...}}` → `aescbc`).
fn kind_of(entry: &Value) -> Option<&str> {
    entry.as_mapping()?.keys().next()?.as_str()
}

/// `wanted` as found in `existing` (else with one key from `new_key`), the other key-holding providers
/// of `existing` in their order, then `identity`.
fn merge<E>(
    existing: Vec<Value>,
    wanted: &str,
    new_key: impl FnOnce() -> Result<String, E>,
) -> Result<Vec<Value>, E> {
    let first = match existing.iter().find(|e| kind_of(e) == Some(wanted)) {
        Some(e) => e.clone(),
        None => provider(wanted, &new_key()?),
    };
    let mut list = vec![first];
    list.extend(
        existing
            .into_iter()
            .filter(|e| !matches!(kind_of(e), Some(k) if k == wanted || k == "identity")),
    );
    let mut identity = Mapping::new();
    identity.insert("identity".into(), Value::Mapping(Mapping::new()));
    list.push(Value::Mapping(identity));
    Ok(list)
}

/// `{<kind>: {keys: [{name: key1, secret: <secret>}]}}`.
fn provider(kind: &str, secret: &str) -> Value {
    let mut key = Mapping::new();
    key.insert("name".into(), ENCRYPTION_KEY_NAME.into());
    key.insert("secret".into(), secret.into());
    let mut keys = Mapping::new();
    keys.insert("keys".into(), Value::Sequence(vec![Value::Mapping(key)]));
    let mut entry = Mapping::new();
    entry.insert(kind.into(), Value::Mapping(keys));
    Value::Mapping(entry)
}

/// Every `secret` of every provider's keys (for the redaction list).
fn secrets_of(list: &[Value]) -> Vec<String> {
    list.iter()
        .filter_map(Value::as_mapping)
        .flat_map(|m| m.values())
        .filter_map(|p| p.get("keys").and_then(Value::as_sequence))
        .flatten()
        .filter_map(|k| k.get("secret").and_then(Value::as_str))
        .filter(|s| *s != placeholders::ENCRYPTION_KEY)
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Vec<Value> {
        existing_providers(&serde_yaml::from_str(text).expect("yaml"))
    }

    const ROTATED: &str = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n      - {name: key2, secret: bmV3}\n      - {name: key1, secret: b2xk}\n  - identity: {}\n";

    #[test]
    fn a_new_cluster_gets_one_generated_key_then_identity() {
        let list = merge(Vec::new(), "secretbox", || Ok::<_, ()>("S3CRET".into())).expect("ok");
        let text = serde_yaml::to_string(&list).expect("yaml");
        assert_eq!(
            text,
            "- secretbox:\n    keys:\n    - name: key1\n      secret: S3CRET\n- identity: {}\n"
        );
        assert_eq!(secrets_of(&list), vec!["S3CRET".to_string()]);
    }

    #[test]
    fn the_first_control_planes_keys_are_kept_and_nothing_is_generated() {
        let list = merge(doc(ROTATED), "aescbc", || Err("must not generate")).expect("ok");
        assert_eq!(list.len(), 2);
        assert_eq!(
            secrets_of(&list),
            vec!["bmV3".to_string(), "b2xk".to_string()]
        );
    }

    #[test]
    fn a_changed_provider_keeps_the_old_one_for_reading() {
        let list = merge(doc(ROTATED), "secretbox", || Ok::<_, ()>("NEWKEY".into())).expect("ok");
        let kinds: Vec<_> = list.iter().filter_map(kind_of).collect();
        assert_eq!(kinds, vec!["secretbox", "aescbc", "identity"]);
    }
}
