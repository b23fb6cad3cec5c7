//! The user's kubeconfig (`v1.Config`: `clusters`, `users`, `contexts` as named lists): the names
//! clusterctl gives a cluster's entries (cluster, user and context all `clusterctl-<name>`, as kind
//! names its own `kind-<name>`), finding a cluster's context, and removing exactly a cluster's entries.
//! Entries an earlier release merged (context and cluster `<name>`, user `<name>-admin`) are still
//! found and removed. Text in, text out: the caller reads and writes the file (0600).

use serde_yaml::Value;

/// Why a kubeconfig could not be edited.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The text is not YAML (the file is left as it is).
    #[error("kubeconfig is not YAML: {0}")]
    NotYaml(#[source] serde_yaml::Error),
    /// The text is YAML but not a kubeconfig: which part is not as `v1.Config` has it (the text,
    /// which holds credentials, is never quoted).
    #[error("not a kubeconfig: {0}")]
    NotKubeconfig(&'static str),
    /// The edited document could not be written back as YAML.
    #[error("{0}")]
    Serialize(#[source] serde_yaml::Error),
}

/// The kubeconfig `text` as its top-level mapping, checked so that a file clusterctl cannot read as a
/// kubeconfig is refused rather than replaced: an empty (or all-blank) text is an empty kubeconfig;
/// otherwise a YAML mapping whose `clusters`, `users` and `contexts`, where present and not null,
/// are lists of mappings. Errors: [`KubeconfigError::NotYaml`] (with the line and column, no text),
/// [`KubeconfigError::NotKubeconfig`].
pub fn parse(text: &str) -> Result<serde_yaml::Mapping, KubeconfigError> {
    if text.trim().is_empty() {
        return Ok(serde_yaml::Mapping::new());
    }
    let root = match serde_yaml::from_str::<Value>(text).map_err(KubeconfigError::NotYaml)? {
        Value::Mapping(m) => m,
        Value::Null => return Ok(serde_yaml::Mapping::new()),
        _ => {
            return Err(KubeconfigError::NotKubeconfig(
                "the document is not a mapping",
            ))
        }
    };
    for (key, why) in [
        ("clusters", "`clusters` is not a list of entries"),
        ("users", "`users` is not a list of entries"),
        ("contexts", "`contexts` is not a list of entries"),
    ] {
        match root.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Sequence(items)) if items.iter().all(Value::is_mapping) => {}
            Some(_) => return Err(KubeconfigError::NotKubeconfig(why)),
        }
    }
    Ok(root)
}

/// The name of the cluster, user and context clusterctl merges for cluster `cluster`:
/// `clusterctl-<cluster>`.
pub fn entry_name(cluster: &str) -> String {
    format!("clusterctl-{cluster}")
}

/// The context of cluster `cluster` in the kubeconfig `text`: [`entry_name`] when present, else the
/// context an earlier release merged (named `cluster`, naming cluster `cluster` and user
/// `<cluster>-admin`); `None` when there is neither (or `text` is not a kubeconfig).
pub fn cluster_context(text: &str, cluster: &str) -> Option<String> {
    let name = entry_name(cluster);
    if has_context(text, &name) {
        return Some(name);
    }
    legacy_context(text, cluster).then(|| cluster.to_string())
}

/// True when `text` holds the context an earlier release merged for `cluster`: context `cluster`
/// with cluster `cluster` and user `<cluster>-admin`.
fn legacy_context(text: &str, cluster: &str) -> bool {
    let Ok(v) = serde_yaml::from_str::<Value>(text) else {
        return false;
    };
    let user = format!("{cluster}-admin");
    v.get("contexts")
        .and_then(Value::as_sequence)
        .is_some_and(|s| {
            s.iter().any(|c| {
                c.get("name").and_then(Value::as_str) == Some(cluster)
                    && c["context"]["cluster"].as_str() == Some(cluster)
                    && c["context"]["user"].as_str() == Some(user.as_str())
            })
        })
}

/// Removes exactly the entries of cluster `cluster` from the kubeconfig `text`: the context, cluster
/// and user named [`entry_name`] (the cluster and user kept while another context uses them), and an
/// earlier release's context (see [`cluster_context`]) with its cluster and user; `current-context`
/// is unset when it named a removed context. Other entries are kept as they are. Returns the new text
/// and the contexts removed (empty: nothing changed, `text` returned as it was). Errors:
/// [`KubeconfigError::NotYaml`] when `text` is not YAML.
pub fn remove_cluster(text: &str, cluster: &str) -> Result<(String, Vec<String>), KubeconfigError> {
    let name = entry_name(cluster);
    let mut removed = Vec::new();
    let (mut out, changed) = remove_context(text, &name)?;
    if changed {
        removed.push(name.clone());
    }
    if legacy_context(&out, cluster) {
        let (t, _) = remove_context(&out, cluster)?;
        out = t;
        removed.push(cluster.to_string());
    }
    let (out, orphans) = remove_unused(&out, &name)?;
    if orphans && removed.is_empty() {
        removed.push(name);
    }
    Ok((out, removed))
}

/// Removes the cluster and the user named `name` when no context refers to them (left by a context
/// removed by hand). Returns the text and whether anything changed.
fn remove_unused(text: &str, name: &str) -> Result<(String, bool), KubeconfigError> {
    let mut root: Value = serde_yaml::from_str(text).map_err(KubeconfigError::NotYaml)?;
    let Some(map) = root.as_mapping_mut() else {
        return Ok((text.to_string(), false));
    };
    let contexts = map
        .get("contexts")
        .and_then(Value::as_sequence)
        .cloned()
        .unwrap_or_default();
    let mut changed = false;
    for (list, key) in [("clusters", "cluster"), ("users", "user")] {
        if contexts
            .iter()
            .any(|c| c["context"][key].as_str() == Some(name))
        {
            continue;
        }
        if let Some(seq) = map.get_mut(list).and_then(Value::as_sequence_mut) {
            let before = seq.len();
            seq.retain(|e| e.get("name").and_then(Value::as_str) != Some(name));
            changed |= seq.len() != before;
        }
    }
    if !changed {
        return Ok((text.to_string(), false));
    }
    serde_yaml::to_string(&root)
        .map(|t| (t, true))
        .map_err(KubeconfigError::Serialize)
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
    fn parse_refuses_what_is_not_a_kubeconfig_without_quoting_it() {
        assert!(parse("").expect("empty").is_empty());
        assert!(parse("  \n").expect("blank").is_empty());
        assert!(parse("apiVersion: v1\nclusters:\nusers: []\n").is_ok());
        for (text, want) in [
            ("users: \"x\"\n", "`users` is not a list"),
            ("clusters: [a]\n", "`clusters` is not a list"),
            ("- a\n- b\n", "not a mapping"),
            (
                "users:\n- name: u\n  user: {token: SECRET-T}\n bad: [\n",
                "not YAML",
            ),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains("SECRET"), "{e}");
        }
    }

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

    /// As `up` merges cluster `lab` beside another cluster's entries (current-context: lab).
    const MERGED: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: clusterctl-lab\n  cluster: {server: 'https://127.0.0.1:6443'}\n- name: other\n  cluster: {server: 'https://10.0.0.1:6443'}\nusers:\n- name: clusterctl-lab\n  user: {token: x}\n- name: me\n  user: {token: y}\ncontexts:\n- name: clusterctl-lab\n  context: {cluster: clusterctl-lab, user: clusterctl-lab}\n- name: other\n  context: {cluster: other, user: me}\ncurrent-context: clusterctl-lab\n";

    #[test]
    fn a_clusters_entries_are_found_and_removed_exactly() {
        assert_eq!(entry_name("lab"), "clusterctl-lab");
        assert_eq!(
            cluster_context(MERGED, "lab").as_deref(),
            Some("clusterctl-lab")
        );
        assert_eq!(
            cluster_context(MERGED, "other"),
            None,
            "the user's own context"
        );
        let (out, removed) = remove_cluster(MERGED, "lab").expect("removed");
        assert_eq!(removed, ["clusterctl-lab"]);
        let v: Value = serde_yaml::from_str(&out).expect("yaml");
        for list in ["clusters", "users", "contexts"] {
            assert_eq!(
                v[list].as_sequence().map(Vec::len),
                Some(1),
                "{list}: {out}"
            );
        }
        assert_eq!(v["contexts"][0]["name"].as_str(), Some("other"));
        assert_eq!(v["current-context"].as_str(), Some(""));
        // Another current context is kept; nothing left to remove changes nothing.
        let other = MERGED.replace("current-context: clusterctl-lab", "current-context: other");
        let (out, _) = remove_cluster(&other, "lab").expect("removed");
        assert!(out.contains("current-context: other"), "{out}");
        let (again, removed) = remove_cluster(&out, "lab").expect("idempotent");
        assert!(removed.is_empty());
        assert_eq!(again, out);
    }

    #[test]
    fn an_earlier_releases_entries_are_found_and_removed() {
        assert_eq!(cluster_context(TEXT, "lab").as_deref(), Some("lab"));
        let (out, removed) = remove_cluster(TEXT, "lab").expect("removed");
        assert_eq!(removed, ["lab"]);
        assert!(
            !has_context(&out, "lab") && has_context(&out, "other"),
            "{out}"
        );
        // A context `lab` of another shape is the user's own: left alone.
        let own = TEXT.replace(
            "context: {cluster: lab, user: lab-admin}",
            "context: {cluster: lab, user: me}",
        );
        assert_eq!(cluster_context(&own, "lab"), None);
        let (kept, removed) = remove_cluster(&own, "lab").expect("no-op");
        assert!(removed.is_empty());
        assert_eq!(kept, own);
    }

    #[test]
    fn a_shared_user_is_kept() {
        let t = TEXT.replace("user: other-admin", "user: lab-admin");
        let (out, _) = remove_context(&t, "lab").expect("removed");
        let v: Value = serde_yaml::from_str(&out).expect("yaml");
        assert_eq!(v["users"].as_sequence().map(Vec::len), Some(2));
    }
}
