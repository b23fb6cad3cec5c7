//! `up`'s day-2 rollout of API server settings on a real cluster (root + Docker + the test bed's
//! Kubernetes build; see `real_cluster.rs` for the set-up): one control plane, the real node image,
//! which has no `curl` (as many real nodes). These checks ([`rollouts`]) run on the cluster of
//! `real_day2.rs`, after its certificate and etcd checks (one 1 + 0 cluster for all of issue 26's
//! single-control-plane day 2, to keep the suite short). After `up` built the cluster, certSANs and an audit policy
//! are added to the file and `up` rolls them out: the certificate the API server serves (read from
//! this machine with `openssl s_client`) carries the new name, the running kube-apiserver has the
//! audit flags and writes the audit log — event by event: a Secret's creation logged at `Metadata` without
//! its value, a Namespace's at `Request` with its body (issue 25) — the `kubeadm-config` ConfigMap holds both (so a later
//! `upgrade` or join keeps them), and a second `up` changes nothing. Then an API server flag the API
//! server refuses: `up` fails, the previous manifest and certificate are put back and the API server
//! serves again with the rolled-out settings; the file set back, `up` converges.
//!
//! Encryption at rest (issue 27 item 8) rides on the same rollouts (`real_support/encryption.rs`
//! holds its checks): a Secret stored before is plain in etcd (read with the real `etcdctl` inside the
//! etcd container — the check bites); `apiServer.encryption: {provider: aescbc}` is part of the first
//! rollout, which rewrites that Secret (`rollout/encrypt-existing`) so that it, like one created after,
//! is stored as `k8s:enc:aescbc:v1:key1:…` while the API reads the plain values; the file is 0600, the
//! manifest and the `kubeadm-config` ConfigMap carry flag and mount, and the key appears in none of
//! clusterctl's outputs, its state record or local cache (`render` writes the placeholder). The final
//! rollout switches to `secretbox`: both Secrets are rewritten as `k8s:enc:secretbox:v1:key1:…`, and
//! the aescbc key is kept, unchanged, behind it. Before the first rollout, `up --dry-run --diff`
//! plans the kubeadm configuration with the new name and the new encryption configuration with its key
//! masked, and before the switch to secretbox it diffs the node's encryption configuration against
//! the new one, the aescbc key masked (issue 27 item 7).

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use clusterctl_testbed::keycloak::{self, Keycloak};

use crate::real_support::encryption as enc;
use crate::real_support::{self, RealCluster};

const SAN: &str = "api.rollout.test";

/// The subject alternative names of the certificate `address:6443` serves, as `openssl` prints them.
fn served_sans(address: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {address}:6443 </dev/null 2>/dev/null | openssl x509 -noout -ext subjectAltName"
        ))
        .output()
        .expect("openssl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The running kube-apiserver's command line on the node.
fn apiserver_args(c: &RealCluster) -> String {
    c.first()
        .sh("ps -eo args | grep '^kube-apiserver ' || true")
        .expect("ps")
}

/// The audit log's events (one JSON object per line) whose text holds `needle`, parsed.
fn audit_lines(c: &RealCluster, needle: &str) -> Result<Vec<serde_json::Value>, String> {
    let out = c
        .first()
        .sh(&format!(
            "grep -F '{needle}' /var/log/kubernetes/audit/audit.log || true"
        ))
        .map_err(|e| format!("{e:#}"))?;
    out.lines()
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{e}: {l}")))
        .collect()
}

/// The `ResponseComplete` event of `verb` on `resource` named `name` among `events`, if any.
fn completed<'a>(
    events: &'a [serde_json::Value],
    verb: &str,
    resource: &str,
    name: &str,
) -> Option<&'a serde_json::Value> {
    events.iter().find(|e| {
        e["stage"] == "ResponseComplete"
            && e["verb"] == verb
            && e["objectRef"]["resource"] == resource
            && e["objectRef"]["name"] == name
    })
}

/// Event-level audit in the cluster's static pod (issue 25): a Secret and a Namespace created with
/// the real kubectl appear in the audit log the rolled-out policy (`audit: {policy: default}`) governs,
/// as `ResponseComplete` events of `kubernetes-admin` answered 201: the Secret at `Metadata` (the
/// default policy's rule for secrets: no request body, and its value nowhere in the log), the
/// Namespace at `Request` (the rule for writes: its body logged).
fn audit_events(c: &RealCluster) {
    let id = clusterctl_testbed::unique_name("audit");
    let secret_value = clusterctl_testbed::unique_name("never-logged");
    c.kubectl(&format!(
        "create secret generic {id} --from-literal=password={secret_value}"
    ));
    c.kubectl(&format!("create namespace {id}"));
    let events = real_support::wait_for("both audit events", Duration::from_secs(60), || {
        let events = audit_lines(c, &id)?;
        let both = completed(&events, "create", "secrets", &id).is_some()
            && completed(&events, "create", "namespaces", &id).is_some();
        both.then_some(events.clone())
            .ok_or(format!("{} events so far", events.len()))
    });
    let secret = completed(&events, "create", "secrets", &id).expect("secret event");
    assert_eq!(secret["level"], "Metadata", "{secret}");
    assert_eq!(secret["user"]["username"], "kubernetes-admin", "{secret}");
    assert_eq!(secret["responseStatus"]["code"], 201, "{secret}");
    assert!(secret.get("requestObject").is_none(), "{secret}");
    // Neither the value nor its base64 form (as a Secret's `data` carries it) is in the log.
    let b64 = c
        .first()
        .sh(&format!("printf %s {secret_value} | base64"))
        .expect("base64");
    for v in [secret_value.as_str(), b64.trim()] {
        let leaked = audit_lines(c, v).expect("audit log");
        assert!(
            leaked.is_empty(),
            "the Secret's value in the audit log: {leaked:?}"
        );
    }
    let ns = completed(&events, "create", "namespaces", &id).expect("namespace event");
    assert_eq!(ns["level"], "Request", "{ns}");
    assert_eq!(ns["requestObject"]["metadata"]["name"], id.as_str(), "{ns}");
    c.kubectl(&format!("delete namespace {id} --wait=false"));
    c.kubectl(&format!("delete secret {id}"));
}

/// The file's `apiServer` lines: certSANs, the default audit policy and OIDC with Keycloak as the
/// issuer and `prefix` on users and groups (when Keycloak runs).
fn api_server(kc: Option<&Keycloak>, prefix: &str) -> String {
    let mut api = format!("  apiServer:\n    certSANs: [{SAN}]\n    audit: {{policy: default}}\n");
    if let Some(kc) = kc {
        api += &format!(
            "    oidc:\n      issuerURL: {}\n      clientID: {}\n      usernameClaim: preferred_username\n      usernamePrefix: \"{prefix}\"\n      groupsClaim: groups\n      groupsPrefix: \"{prefix}\"\n      caFile: kc-ca.crt\n",
            kc.issuer_url(),
            keycloak::CLIENT_ID
        );
    }
    api
}

/// Keycloak on the node network's gateway (started while `up` builds the cluster), its CA beside
/// the cluster file; `None` (the OIDC checks skipped, failed in CI) when it cannot start.
fn keycloak_for(
    c: &RealCluster,
    started: std::thread::JoinHandle<Result<Keycloak, keycloak::KeycloakError>>,
) -> Option<Keycloak> {
    match started.join().expect("the Keycloak thread") {
        Ok(kc) => {
            let dir = c.file.parent().expect("the file's directory");
            std::fs::write(dir.join("kc-ca.crt"), kc.ca_pem()).expect("kc-ca.crt");
            eprintln!(
                "[real] Keycloak ready in {:.1}s",
                kc.started_in().as_secs_f64()
            );
            Some(kc)
        }
        Err(e) => {
            clusterctl_testbed::require(&format!("a real Keycloak: {e}"), false);
            None
        }
    }
}

/// `kubectl auth whoami` on the first control plane (to its own address, which the serving
/// certificate names) with a fresh ID token of Keycloak's user
/// (the kubeconfig 0600 on the node, removed after), retried while the new API server fetches the
/// issuer's keys, until it names `{prefix}alice` in `{prefix}k8s-admins`.
fn whoami_is(c: &RealCluster, kc: &Keycloak, prefix: &str) {
    real_support::wait_for("the OIDC login", Duration::from_secs(90), || {
        let token = kc
            .id_token(keycloak::CLIENT_ID)
            .map_err(|e| e.to_string())?;
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://{}:6443\n    certificate-authority: /etc/kubernetes/pki/ca.crt\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n",
            c.first().address
        );
        let (_, out, err) = c
            .first()
            .exec(
                "umask 077; cat > /root/oidc.kubeconfig; kubectl --kubeconfig /root/oidc.kubeconfig auth whoami; rm -f /root/oidc.kubeconfig",
                kubeconfig.as_bytes(),
            )
            .map_err(|e| e.to_string())?;
        keycloak::whoami_names(&out, prefix)
            .then_some(())
            .ok_or(format!("{out}{err}"))
    });
}

fn with_api_server(c: &RealCluster, base: &str, api_server: &str) {
    let text = base.replace("  nodes:\n", &format!("{api_server}  nodes:\n"));
    std::fs::write(&c.file, text).expect("cluster file");
}

/// Keycloak being started on the node network's gateway (the OIDC issuer for the API server in the
/// node container), in a thread: started before `up` so that `up` and the first rollouts hide its start.
pub(crate) type KeycloakStart = std::thread::JoinHandle<Result<Keycloak, keycloak::KeycloakError>>;

/// Starts Keycloak for `c` ([`KeycloakStart`]) and asserts that the node has no `curl`: nothing of the
/// rollouts may need it.
pub(crate) fn before_up(c: &RealCluster) -> KeycloakStart {
    let gateway: Ipv4Addr = c.nodes.gateway.parse().expect("the gateway's address");
    let kc_started = std::thread::spawn(move || Keycloak::start_on(gateway));
    assert_eq!(
        c.first().sh("command -v curl || echo absent").expect("sh"),
        "absent"
    );
    kc_started
}

/// The rollouts on `c`, a converged 1 + 0 cluster built from the file text `base` (which stays the
/// base of every change): the module's checks in order, Keycloak joined from `kc_started` for the
/// OIDC steps. Panics on the first failed check.
pub(crate) fn rollouts(c: &RealCluster, base: &str, kc_started: KeycloakStart) {
    let t = Instant::now();
    let address = c.first().address.clone();
    assert!(!served_sans(&address).contains(SAN));
    let secrets = enc::Secrets::stored_plain(c);

    // certSANs, the audit policy and encryption at rest added: rolled out.
    let api = api_server(None, "");
    let rolled = format!("{api}    encryption: {{provider: aescbc}}\n");
    with_api_server(c, base, &rolled);
    enc::check_diff(c, SAN);
    let r = c.up(&[]);
    let out = r.all();
    secrets.check_encrypted(c, "aescbc", &out);
    assert!(
        out.contains("rollout/apiserver: API server healthy"),
        "{out}"
    );
    let sans = served_sans(&address);
    assert!(sans.contains(&format!("DNS:{SAN}")), "served: {sans}");
    assert!(
        sans.contains(&format!("IP Address:{address}")),
        "served: {sans}"
    );
    let args = apiserver_args(c);
    assert!(
        args.contains("--audit-policy-file=/etc/kubernetes/audit/policy.yaml")
            && args.contains("--audit-log-path=/var/log/kubernetes/audit/audit.log"),
        "running: {args}"
    );
    let cfg = c.kubectl(
        "-n kube-system get configmap kubeadm-config -o jsonpath='{.data.ClusterConfiguration}'",
    );
    assert!(
        cfg.contains(SAN) && cfg.contains("audit-policy-file"),
        "kubeadm-config: {cfg}"
    );
    real_support::wait_for(
        "the audit log written",
        std::time::Duration::from_secs(60),
        || {
            let n = c
                .first()
                .sh("wc -c < /var/log/kubernetes/audit/audit.log 2>/dev/null || echo 0")
                .map_err(|e| e.to_string())?;
            (n.trim().parse::<u64>().unwrap_or(0) > 0)
                .then_some(())
                .ok_or(n)
        },
    );
    audit_events(c);
    // The staging directory with the CA copies is gone; the backup is private.
    assert_eq!(
        c.first()
            .sh("ls /etc/kubernetes/kubeadm/rollout-pki 2>/dev/null | wc -l; stat -c %a /etc/kubernetes/kubeadm/rollout-backup")
            .expect("sh"),
        "0\n700"
    );
    let again = c.up(&[]);
    assert!(
        again.all().contains("is up to date; nothing changed"),
        "{}",
        again.all()
    );
    let key = enc::check_key_kept_secret(c, &[out, again.all()]);

    // A flag the API server refuses: the rollout fails and puts the previous manifest back.
    let bad = format!("{rolled}    extraArgs: {{request-timeout: not-a-duration}}\n");
    with_api_server(c, base, &bad);
    let f = c.file.to_string_lossy().into_owned();
    let r = c.clusterctl(&["up", "-f", &f, "--ready-timeout", "60"]);
    let out = r.all();
    assert_eq!(r.code, 1, "{out}");
    assert!(
        out.contains("previous manifest and certificate were put back")
            && out.contains("serves again"),
        "{out}"
    );
    let args = apiserver_args(c);
    assert!(
        !args.contains("not-a-duration") && args.contains("--audit-policy-file"),
        "running: {args}"
    );
    assert!(served_sans(&address).contains(SAN));
    // Set back, with OIDC added (Keycloak had the rollouts above to start) and the provider
    // switched to secretbox: the login works and the Secrets are rewritten with secretbox.
    let kc = keycloak_for(c, kc_started);
    let api = api_server(kc.as_ref(), "a:");
    with_api_server(
        c,
        base,
        &format!("{api}    encryption: {{provider: secretbox}}\n"),
    );
    enc::check_switch_diff(c, &key);
    let r = c.up(&[]);
    secrets.check_encrypted(c, "secretbox", &r.all());
    enc::check_switched(c, &key, &r.all());
    if let Some(kc) = &kc {
        whoami_is(c, kc, "a:");
        let cfg = c.kubectl(
            "-n kube-system get configmap kubeadm-config -o jsonpath='{.data.ClusterConfiguration}'",
        );
        assert!(cfg.contains(&kc.issuer_url()), "kubeadm-config: {cfg}");
        // The prefix changed in the file: rolled out, in effect.
        with_api_server(
            c,
            base,
            &format!(
                "{}    encryption: {{provider: secretbox}}\n",
                api_server(Some(kc), "b:")
            ),
        );
        c.up(&[]);
        whoami_is(c, kc, "b:");
    }
    eprintln!("[real] rollouts done in {:.1}s", t.elapsed().as_secs_f64());
}
