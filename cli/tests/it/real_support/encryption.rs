//! Checks of encryption at rest on a real cluster (issue 27 item 8), used by `real_rollout.rs`: what
//! etcd stores (read with the real `etcdctl` inside the etcd container, with kubeadm's etcd
//! certificates), what the API returns (through the first control plane, or each one's own API server
//! for [`Kept`]), the configuration file's mode, the API server's flag and mount,
//! and that the key appears in none of clusterctl's outputs, its state record or its local cache; and
//! `up --dry-run --diff` of the change against the real node's files (issue 27 item 7).

use clusterctl_testbed::docker::TestNode;

use super::RealCluster;

/// The encryption configuration on the control planes.
pub(crate) const ENC: &str = "/etc/kubernetes/enc/encryption.yaml";

/// The first 400 bytes of `key`'s value in the etcd of `node` (a control plane; unprintable bytes as
/// `.`).
fn etcd_value(node: &TestNode, key: &str) -> String {
    node.sh(&format!(
            "crictl exec $(crictl ps -q --name '^etcd$' | head -n1) etcdctl --endpoints https://127.0.0.1:2379 \
             --cacert /etc/kubernetes/pki/etcd/ca.crt --cert /etc/kubernetes/pki/etcd/server.crt \
             --key /etc/kubernetes/pki/etcd/server.key get {key} --print-value-only | head -c 400 | tr -c '[:print:]' '.'"
        ))
        .unwrap_or_else(|e| panic!("etcdctl get {key}: {e:#}"))
}

/// The plain value of the Secret `name`'s `password` as the API returns it.
fn api_value(c: &RealCluster, name: &str) -> String {
    let b64 = c.kubectl(&format!("get secret {name} -o jsonpath={{.data.password}}"));
    c.first()
        .sh(&format!("echo {} | base64 -d", b64.trim()))
        .expect("base64")
}

/// Two Secrets in `default`: one stored before encryption is on, one created after the first check.
pub(crate) struct Secrets {
    /// The value of `old-secret` (stored before encryption).
    before: String,
    /// The value of `new-secret` (created once encryption is on).
    after: String,
}

impl Secrets {
    /// Creates `old-secret` and asserts etcd holds its value in plain text (so the later check bites).
    pub(crate) fn stored_plain(c: &RealCluster) -> Self {
        let s = Secrets {
            before: clusterctl_testbed::unique_name("plain-before"),
            after: clusterctl_testbed::unique_name("plain-after"),
        };
        c.kubectl(&format!(
            "create secret generic old-secret --from-literal=password={}",
            s.before
        ));
        let plain = etcd_value(c.first(), "/registry/secrets/default/old-secret");
        assert!(
            plain.contains(&s.before) && !plain.starts_with("k8s:enc:"),
            "without encryption etcd holds the plain value: {plain}"
        );
        s
    }

    /// After an `up` (its output `out`) that turned `provider` on: the run said it rewrote the existing
    /// Secrets, both Secrets (`new-secret` created now when missing) are stored encrypted with
    /// `provider`'s first key and read back plain through the API; the file is 0600, the manifest and
    /// the `kubeadm-config` ConfigMap carry the flag and the mount.
    pub(crate) fn check_encrypted(&self, c: &RealCluster, provider: &str, out: &str) {
        assert!(
            out.contains(&format!(
                "encryption at rest ({provider}) on or changed: rewriting the existing secrets"
            )),
            "{out}"
        );
        let exists = c.kubectl("get secret --ignore-not-found -o name new-secret");
        if exists.trim().is_empty() {
            c.kubectl(&format!(
                "create secret generic new-secret --from-literal=password={}",
                self.after
            ));
        }
        for (name, value) in [("old-secret", &self.before), ("new-secret", &self.after)] {
            let stored = etcd_value(c.first(), &format!("/registry/secrets/default/{name}"));
            assert!(
                stored.starts_with(&format!("k8s:enc:{provider}:v1:key1:"))
                    && !stored.contains(value.as_str()),
                "{name} in etcd: {stored}"
            );
            assert_eq!(api_value(c, name).trim(), value, "{name} through the API");
        }
        let node = c.first();
        assert_eq!(
            node.sh(&format!("stat -c %a {ENC}")).expect("stat").trim(),
            "600"
        );
        let manifest = node
            .sh("cat /etc/kubernetes/manifests/kube-apiserver.yaml")
            .expect("manifest");
        assert!(
            manifest.contains(&format!("--encryption-provider-config={ENC}"))
                && manifest.contains("path: /etc/kubernetes/enc"),
            "{manifest}"
        );
        let cm = c.kubectl(
            "-n kube-system get configmap kubeadm-config -o jsonpath={.data.ClusterConfiguration}",
        );
        assert!(
            cm.contains("encryption-provider-config") && cm.contains("/etc/kubernetes/enc"),
            "{cm}"
        );
    }
}

/// The file writes of `up --dry-run --diff -o json` with their diffs, as `(text, diff)`.
fn planned_diffs(c: &RealCluster) -> Vec<(String, String)> {
    let f = c.file.to_string_lossy().into_owned();
    let plan = c.clusterctl(&["up", "-f", &f, "--dry-run", "--diff", "-o", "json"]);
    assert_eq!(plan.code, 0, "{}", plan.all());
    let doc: serde_json::Value = serde_json::from_str(&plan.stdout).expect("the plan document");
    doc["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|s| s["kind"] == "write")
        .filter_map(|s| Some((s["text"].as_str()?.into(), s["diff"].as_str()?.into())))
        .collect()
}

/// The diff of the encryption configuration among `writes`, asserting every `secret:` in it masked.
fn encryption_diff(writes: &[(String, String)]) -> String {
    let (_, d) = writes
        .iter()
        .find(|(t, _)| t.contains(ENC))
        .unwrap_or_else(|| panic!("no diff of {ENC}: {writes:#?}"));
    let shown: Vec<&str> = d.split("secret: ").skip(1).collect();
    assert!(
        !shown.is_empty()
            && shown
                .iter()
                .all(|v| v.starts_with("<masked>") || v.starts_with("<redacted>")),
        "{d}"
    );
    d.clone()
}

/// Before the `up` that turns encryption on (with certSANs `san`): `up --dry-run --diff -o json`
/// plans the kubeadm configuration that adds `san` and the new encryption configuration, diffed
/// against `/dev/null` with its key masked, and changes nothing (the node's file is still absent).
pub(crate) fn check_diff(c: &RealCluster, san: &str) {
    let writes = planned_diffs(c);
    assert!(
        writes
            .iter()
            .any(|(t, d)| t.contains("/etc/kubernetes/kubeadm/")
                && d.lines().any(|l| l.starts_with('+') && l.contains(san))),
        "no diff adds {san}: {writes:#?}"
    );
    let enc = encryption_diff(&writes);
    assert!(enc.starts_with("--- /dev/null\n"), "{enc}");
    let absent = c
        .first()
        .sh(&format!("test -e {ENC} && echo present || echo absent"));
    assert_eq!(absent.expect("test").trim(), "absent");
}

/// Before the `up` that switches to secretbox: the diff of the node's encryption configuration (real
/// content, with the aescbc `key`) against the new one adds the secretbox provider first, keeps
/// aescbc, and shows neither key.
pub(crate) fn check_switch_diff(c: &RealCluster, key: &str) {
    let writes = planned_diffs(c);
    let enc = encryption_diff(&writes);
    assert!(
        enc.starts_with(&format!("--- {ENC} (node)\n+++ {ENC} (rendered)\n"))
            && enc.contains("\n+  - secretbox:")
            && enc.contains("aescbc:"),
        "{enc}"
    );
    assert!(!format!("{writes:?}").contains(key), "the key in the diff");
}

/// Creates the Secret `name` (value `value`) on an encrypted cluster and asserts it stored as
/// [`check_stored`] says. Returns the node's keys.
pub(crate) fn store_encrypted(
    c: &RealCluster,
    provider: &str,
    name: &str,
    value: &str,
) -> Vec<String> {
    c.kubectl(&format!(
        "create secret generic {name} --from-literal=password={value}"
    ));
    check_stored(c, provider, name, value);
    keys_on_node(c)
}

/// The Secret `name` is stored as `k8s:enc:<provider>:v1:key1:…` without `value`, the API reads
/// `value`, and the API server's manifest has the flag and the mount.
pub(crate) fn check_stored(c: &RealCluster, provider: &str, name: &str, value: &str) {
    let stored = etcd_value(c.first(), &format!("/registry/secrets/default/{name}"));
    assert!(
        stored.starts_with(&format!("k8s:enc:{provider}:v1:key1:")) && !stored.contains(value),
        "{name} in etcd: {stored}"
    );
    assert_eq!(api_value(c, name).trim(), value, "{name} through the API");
    let manifest = c
        .first()
        .sh("cat /etc/kubernetes/manifests/kube-apiserver.yaml")
        .expect("manifest");
    assert!(
        manifest.contains(&format!("--encryption-provider-config={ENC}"))
            && manifest.contains("path: /etc/kubernetes/enc"),
        "{manifest}"
    );
}

/// The secrets (`secret:` values) of the node's encryption configuration, in file order.
pub(crate) fn keys_on_node(c: &RealCluster) -> Vec<String> {
    let text = c
        .first()
        .sh(&format!("cat {ENC}"))
        .expect("encryption config");
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("secret: "))
        .map(|k| k.trim().trim_matches(['\'', '"']).to_string())
        .collect()
}

/// With aescbc on: the one key (32 bytes) appears in none of `outs` (earlier `up` outputs), `up
/// --dry-run --probe -o json`, `render` (which writes the placeholder), the node's state record or the
/// local cache. Returns the key.
pub(crate) fn check_key_kept_secret(c: &RealCluster, outs: &[String]) -> String {
    let keys = keys_on_node(c);
    assert_eq!(keys.len(), 1, "one key");
    let key = keys[0].clone();
    assert_eq!(key.len(), 44, "the key is 32 bytes in base64");
    let f = c.file.to_string_lossy().into_owned();
    let plan = c.clusterctl(&["up", "-f", &f, "--dry-run", "--probe", "-o", "json"]);
    assert_eq!(plan.code, 0, "{}", plan.all().replace(&key, "<key>"));
    let dir = c.file.parent().expect("dir");
    let render_dir = dir.join("rendered");
    let r =
        c.cc.run(&[
            "render",
            "-f",
            &f,
            "--output-dir",
            &render_dir.to_string_lossy(),
        ])
        .expect("render");
    assert_eq!(r.code, 0, "{}", r.all());
    let rendered = std::fs::read_to_string(render_dir.join(format!("{}{ENC}", c.roles[0].0)))
        .expect("rendered encryption config");
    assert!(
        rendered.contains("@@CLUSTERCTL_ENCRYPTION_KEY@@"),
        "{rendered}"
    );
    let mut haystacks: Vec<(String, String)> = outs
        .iter()
        .enumerate()
        .map(|(i, o)| (format!("up output {i}"), o.clone()))
        .collect();
    haystacks.push(("dry run".into(), plan.all()));
    haystacks.push(("render".into(), r.all() + &rendered));
    let state = c.first().sh("cat /var/lib/clusterctl/state.json");
    haystacks.push(("state".into(), state.expect("state")));
    for entry in walk(&dir.join(".cache/clusterctl").join(&c.name)) {
        let text =
            String::from_utf8_lossy(&std::fs::read(&entry).expect("cache file")).into_owned();
        haystacks.push((entry.display().to_string(), text));
    }
    for (what, text) in &haystacks {
        assert!(!text.contains(&key), "the key appears in {what}");
    }
    key
}

/// After the switch to secretbox (the run's output `out`): the file holds a new secretbox key first
/// and the aescbc `key` kept behind it; neither appears in `out`.
pub(crate) fn check_switched(c: &RealCluster, key: &str, out: &str) {
    let keys = keys_on_node(c);
    assert_eq!(keys.len(), 2, "secretbox's key, then aescbc's");
    assert_eq!(keys[1], key, "the aescbc key is kept");
    assert_ne!(keys[0], key);
    for k in &keys {
        assert!(!out.contains(k.as_str()), "a key appears in the up output");
    }
}

/// Every regular file under `dir` (none when it does not exist).
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A Secret written while the cluster's first control planes held the key, checked again once the set
/// of control planes has changed (joins, removals, a removed one joined again): issue 27 item 8's "kept
/// across the re-creation of a node".
pub(crate) struct Kept {
    name: String,
    value: String,
}

impl Kept {
    /// Creates Secret `kept-secret` in `default` with a unique value.
    pub(crate) fn create(c: &RealCluster) -> Self {
        let k = Kept {
            name: "kept-secret".into(),
            value: clusterctl_testbed::unique_name("kept"),
        };
        c.kubectl(&format!(
            "create secret generic {} --from-literal=password={}",
            k.name, k.value
        ));
        k
    }

    /// On every control plane: its etcd holds the Secret as `k8s:enc:aescbc:v1:key1:…` (not the plain
    /// value), its own API server (its address, not the VIP) returns the plain value, and its
    /// encryption configuration is 0600 and byte-identical to the others' (compared by sha256, the key
    /// never printed).
    pub(crate) fn check_on_every_control_plane(&self, c: &RealCluster) {
        let mut digests = Vec::new();
        for node in c.control_planes() {
            let stored = etcd_value(node, &format!("/registry/secrets/default/{}", self.name));
            assert!(
                stored.starts_with("k8s:enc:aescbc:v1:key1:") && !stored.contains(&self.value),
                "{} in the etcd of {}: {stored}",
                self.name,
                node.name
            );
            let plain = node
                .sh(&format!(
                    "kubectl --kubeconfig /etc/kubernetes/admin.conf --server https://{}:6443 \
                     get secret {} -o jsonpath={{.data.password}} | base64 -d",
                    node.address, self.name
                ))
                .unwrap_or_else(|e| panic!("{} through {}: {e:#}", self.name, node.name));
            assert_eq!(
                plain.trim(),
                self.value,
                "{} through {}'s API server",
                self.name,
                node.name
            );
            let file = node
                .sh(&format!("stat -c %a {ENC} && sha256sum {ENC} | cut -c1-64"))
                .unwrap_or_else(|e| panic!("{ENC} on {}: {e:#}", node.name));
            let (mode, digest) = file.trim().split_once('\n').expect("mode and digest");
            assert_eq!(mode, "600", "{ENC} on {}", node.name);
            digests.push((node.name.clone(), digest.to_string()));
        }
        assert!(
            digests.windows(2).all(|w| w[0].1 == w[1].1),
            "one encryption configuration on every control plane: {digests:?}"
        );
    }
}
