//! `up`'s day-2 rollout of API server settings on a real cluster (root + Docker + the test bed's
//! Kubernetes build; see `real_cluster.rs` for the set-up): one control plane, the real node image,
//! which has no `curl` (as many real nodes). After `up` built the cluster, certSANs and an audit policy
//! are added to the file and `up` rolls them out: the certificate the API server serves (read from
//! this machine with `openssl s_client`) carries the new name, the running kube-apiserver has the
//! audit flags and writes the audit log, the `kubeadm-config` ConfigMap holds both (so a later
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

use std::process::Command;
use std::time::Instant;

use crate::real_support::encryption as enc;
use crate::real_support::{self, FileOptions, RealCluster};

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

fn with_api_server(c: &RealCluster, base: &str, api_server: &str) {
    let text = base.replace("  nodes:\n", &format!("{api_server}  nodes:\n"));
    std::fs::write(&c.file, text).expect("cluster file");
}

#[test]
fn certsans_and_audit_roll_out_on_a_node_without_curl() {
    let Some(env) = real_support::available() else {
        return;
    };
    let t = Instant::now();
    let c = real_support::start("rro", 1, 0, FileOptions::default(), &env);
    let address = c.first().address.clone();
    let base = std::fs::read_to_string(&c.file).expect("cluster file");
    // The real node image has no curl: nothing of the rollout may need it.
    assert_eq!(
        c.first().sh("command -v curl || echo absent").expect("sh"),
        "absent"
    );
    c.up(&[]);
    assert!(!served_sans(&address).contains(SAN));
    let secrets = enc::Secrets::stored_plain(&c);

    // certSANs, the audit policy and encryption at rest added: rolled out.
    let api = format!("  apiServer:\n    certSANs: [{SAN}]\n    audit: {{policy: default}}\n");
    let rolled = format!("{api}    encryption: {{provider: aescbc}}\n");
    with_api_server(&c, &base, &rolled);
    enc::check_diff(&c, SAN);
    let r = c.up(&[]);
    let out = r.all();
    secrets.check_encrypted(&c, "aescbc", &out);
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
    let args = apiserver_args(&c);
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
    let key = enc::check_key_kept_secret(&c, &[out, again.all()]);

    // A flag the API server refuses: the rollout fails and puts the previous manifest back.
    let bad = format!("{rolled}    extraArgs: {{request-timeout: not-a-duration}}\n");
    with_api_server(&c, &base, &bad);
    let f = c.file.to_string_lossy().into_owned();
    let r = c.clusterctl(&["up", "-f", &f, "--ready-timeout", "60"]);
    let out = r.all();
    assert_eq!(r.code, 1, "{out}");
    assert!(
        out.contains("previous manifest and certificate were put back")
            && out.contains("serves again"),
        "{out}"
    );
    let args = apiserver_args(&c);
    assert!(
        !args.contains("not-a-duration") && args.contains("--audit-policy-file"),
        "running: {args}"
    );
    assert!(served_sans(&address).contains(SAN));
    // Set back, with the provider switched to secretbox: the Secrets are rewritten with it.
    with_api_server(
        &c,
        &base,
        &format!("{api}    encryption: {{provider: secretbox}}\n"),
    );
    enc::check_switch_diff(&c, &key);
    let r = c.up(&[]);
    secrets.check_encrypted(&c, "secretbox", &r.all());
    enc::check_switched(&c, &key, &r.all());
    eprintln!(
        "[real] rollout test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
