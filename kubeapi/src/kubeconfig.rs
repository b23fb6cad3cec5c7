//! The user's kubeconfig (`v1.Config`: `clusters`, `users`, `contexts` as named lists): whether it holds
//! the context clusterctl adds for a cluster, and removing that context with the cluster and user it
//! names (`<name>`, `<name>-admin`, `<name>` as `clusterctl up` merges them). Text in, text out: the
//! caller reads and writes the file (0600).

use serde_yaml::Value;

/// Why a kubeconfig could not be edited.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The text is not YAML (the file is left as it is).
    #[error("kubeconfig is not YAML: {0}")]
    NotYaml(#[source] serde_yaml::Error),
    /// The edited document could not be written back as YAML.
    #[error("{0}")]
    Serialize(#[source] serde_yaml::Error),
}

/// True when `text` is a kubeconfig with a context named `context`.
pub fn has_context(text: &str, context: &str) -> bool {
    let Ok(v) = serde_yaml::from_str::<Value>(text) else {
        return false;
    };
    v.get("contexts")
        .and_then(Value::as_sequence)
        .is_some_and(|s| {
            s.iter()
                .any(|c| c.get("name").and_then(Value::as_str) == Some(context))
        })
}

/// Removes the context `context` from the kubeconfig `text`, and the cluster and user it refers to when
/// no other context uses them; clears `current-context` when it was this one. Returns the new text and
/// whether anything changed. Errors: [`KubeconfigError::NotYaml`] when `text` is not YAML.
pub fn remove_context(text: &str, context: &str) -> Result<(String, bool), KubeconfigError> {
    let mut root: Value = serde_yaml::from_str(text).map_err(KubeconfigError::NotYaml)?;
    let Some(map) = root.as_mapping_mut() else {
        return Ok((text.to_string(), false));
    };
    let entry = |v: &Value, key: &str| -> Option<String> {
        v.get("context")
            .and_then(|c| c.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut cluster = None;
    let mut user = None;
    let mut changed = false;
    if let Some(seq) = map.get_mut("contexts").and_then(Value::as_sequence_mut) {
        if let Some(c) = seq
            .iter()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(context))
        {
            cluster = entry(c, "cluster");
            user = entry(c, "user");
        }
        let before = seq.len();
        seq.retain(|c| c.get("name").and_then(Value::as_str) != Some(context));
        changed |= seq.len() != before;
    }
    let remaining: Vec<Value> = map
        .get("contexts")
        .and_then(Value::as_sequence)
        .cloned()
        .unwrap_or_default();
    for (list, key, name) in [("clusters", "cluster", cluster), ("users", "user", user)] {
        let Some(name) = name else { continue };
        if remaining
            .iter()
            .any(|c| entry(c, key).as_deref() == Some(name.as_str()))
        {
            continue;
        }
        if let Some(seq) = map.get_mut(list).and_then(Value::as_sequence_mut) {
            let before = seq.len();
            seq.retain(|e| e.get("name").and_then(Value::as_str) != Some(name.as_str()));
            changed |= seq.len() != before;
        }
    }
    if map.get("current-context").and_then(Value::as_str) == Some(context) {
        map.insert("current-context".into(), Value::String(String::new()));
        changed = true;
    }
    if !changed {
        return Ok((text.to_string(), false));
    }
    serde_yaml::to_string(&root)
        .map(|t| (t, true))
        .map_err(KubeconfigError::Serialize)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster: {server: 'https://127.0.0.1:6443'}\n- name: other\n  cluster: {server: 'https://10.0.0.1:6443'}\nusers:\n- name: lab-admin\n  user: {token: x}\n- name: other-admin\n  user: {token: y}\ncontexts:\n- name: lab\n  context: {cluster: lab, user: lab-admin}\n- name: other\n  context: {cluster: other, user: other-admin}\ncurrent-context: lab\n";

    #[test]
    fn removes_only_the_clusters_entries() {
        assert!(has_context(TEXT, "lab"));
        let (out, changed) = remove_context(TEXT, "lab").expect("removed");
        assert!(changed);
        assert!(!has_context(&out, "lab"));
        assert!(has_context(&out, "other"));
        let v: Value = serde_yaml::from_str(&out).expect("yaml");
        assert_eq!(v["clusters"].as_sequence().map(Vec::len), Some(1));
        assert_eq!(v["users"][0]["name"].as_str(), Some("other-admin"));
        assert_eq!(v["current-context"].as_str(), Some(""));
        let (again, changed) = remove_context(&out, "lab").expect("idempotent");
        assert!(!changed);
        assert_eq!(again, out);
    }

    #[test]
    fn a_shared_user_is_kept() {
        let t = TEXT.replace("user: other-admin", "user: lab-admin");
        let (out, _) = remove_context(&t, "lab").expect("removed");
        let v: Value = serde_yaml::from_str(&out).expect("yaml");
        assert_eq!(v["users"].as_sequence().map(Vec::len), Some(2));
    }
}
