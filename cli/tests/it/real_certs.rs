//! `clusterctl certs check-expiration` and `certs renew` on a real 1 + 1 cluster (issue 26 item 5):
//! every kubeadm certificate, kubeconfig and CA of the control plane and both kubelets' certificates
//! listed with sane dates (`-o json` parses); a threshold larger than the residual time warns and
//! exits 3; `renew apiserver` moves that certificate's dates alone; `renew --dry-run` changes nothing;
//! `renew --all` moves the dates of every renewed certificate (compared before and after), the
//! control plane's static pods come back, and the real kubectl on this machine lists the nodes
//! through the refreshed local kubeconfig, whose client certificate is the renewed one.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::real_support::{self, FileOptions, RealCluster};

/// `(node, name) → (notBefore, notAfter)` of `certs check-expiration -o json`.
type Dates = BTreeMap<(String, String), (String, String)>;

fn check(c: &RealCluster, extra: &[&str]) -> (i32, Value) {
    let f = c.file.to_string_lossy().into_owned();
    let mut args = vec!["certs", "check-expiration", "-f", f.as_str(), "-o", "json"];
    args.extend(extra);
    let r = c.clusterctl(&args);
    let v: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("check-expiration -o json: {e}\n{}", r.all()));
    (r.code, v)
}

fn dates(v: &Value) -> Dates {
    v["certificates"]
        .as_array()
        .expect("certificates")
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().expect(k).to_string();
            ((s("node"), s("name")), (s("notBefore"), s("notAfter")))
        })
        .collect()
}

const KUBEADM: [&str; 14] = [
    "admin.conf",
    "apiserver",
    "apiserver-etcd-client",
    "apiserver-kubelet-client",
    "controller-manager.conf",
    "etcd-healthcheck-client",
    "etcd-peer",
    "etcd-server",
    "front-proxy-client",
    "scheduler.conf",
    "super-admin.conf",
    "ca",
    "etcd-ca",
    "front-proxy-ca",
];

/// Every certificate of the control plane and both kubelets listed, with sane dates.
fn assert_complete(c: &RealCluster, v: &Value) {
    let cp = c.roles[0].0.clone();
    let w = c.roles[1].0.clone();
    let d = dates(v);
    let mut want: Vec<(String, String)> = KUBEADM
        .iter()
        .map(|n| (cp.clone(), n.to_string()))
        .collect();
    for n in [&cp, &w] {
        want.push((n.clone(), "kubelet-client".into()));
        want.push((n.clone(), "kubelet-serving".into()));
    }
    want.sort();
    assert_eq!(d.keys().cloned().collect::<Vec<_>>(), want, "{v:#}");
    let now = v["checkedAt"].as_str().expect("checkedAt").to_string();
    const DAY: i64 = 86_400;
    for cert in v["certificates"].as_array().expect("certificates") {
        let (nb, na) = (cert["notBefore"].as_str(), cert["notAfter"].as_str());
        let (nb, na) = (nb.expect("nb").to_string(), na.expect("na").to_string());
        assert!(nb <= now && now < na, "{cert}: {nb} ≤ {now} < {na}");
        let residual = cert["residualSeconds"].as_i64().expect("residual");
        let (lo, hi) = match (cert["kind"].as_str(), cert["name"].as_str()) {
            (Some("authority"), _) => (9 * 365 * DAY, 10 * 366 * DAY),
            (_, Some("kubelet-serving")) => (300 * DAY, 366 * DAY),
            _ => (360 * DAY, 366 * DAY),
        };
        assert!((lo..=hi).contains(&residual), "{cert}: residual {residual}");
        assert_eq!(cert["externallyManaged"], Value::Bool(false), "{cert}");
        assert_eq!(cert["expiring"], Value::Bool(false), "{cert}");
    }
    let ca = |name: &str| {
        v["certificates"]
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|x| x["node"] == cp.as_str() && x["name"] == name)
            })
            .map(|x| x["ca"].clone())
    };
    assert_eq!(ca("apiserver-etcd-client"), Some("etcd-ca".into()));
    assert_eq!(ca("front-proxy-client"), Some("front-proxy-ca".into()));
    assert_eq!(ca("kubelet-serving"), Some("self-signed".into()));
}

/// The base64 client certificate of the `clusterctl-<name>` user in the local kubeconfig.
fn local_client_cert(c: &RealCluster) -> String {
    let text = std::fs::read_to_string(c.cc.kubeconfig()).expect("kubeconfig");
    let v: serde_yaml::Value = serde_yaml::from_str(&text).expect("kubeconfig yaml");
    let user = format!("clusterctl-{}", c.name);
    v["users"]
        .as_sequence()
        .and_then(|s| s.iter().find(|u| u["name"].as_str() == Some(user.as_str())))
        .and_then(|u| u["user"]["client-certificate-data"].as_str())
        .unwrap_or_else(|| panic!("no user {user} in\n{text}"))
        .to_string()
}

#[test]
fn certs_are_checked_and_renewed_on_a_real_cluster() {
    let Some(env) = real_support::available() else {
        return;
    };
    let Some(bins) =
        clusterctl_testbed::k8sbin::require_programs(real_support::VERSION, &["kubectl"])
    else {
        return;
    };
    let t = Instant::now();
    let c = real_support::start("rcrt", 1, 1, FileOptions::default(), &env);
    c.up(&[]);
    let f = c.file.to_string_lossy().into_owned();
    let t_checks = Instant::now();
    // The table, then the same as JSON: everything listed, nothing within the default 30 days.
    let text = c.clusterctl(&["certs", "check-expiration", "-f", &f]);
    assert_eq!(text.code, 0, "{}", text.all());
    eprintln!("[real] check-expiration:\n{}", text.stdout);
    assert!(
        text.stdout.starts_with("NODE ") && text.stdout.contains("EXTERNALLY MANAGED"),
        "{}",
        text.all()
    );
    assert!(
        text.stdout.contains("none expires within 30d"),
        "{}",
        text.stdout
    );
    let (code, before) = check(&c, &[]);
    assert_eq!(
        (code, &before["result"]),
        (0, &Value::from("ok")),
        "{before:#}"
    );
    assert_complete(&c, &before);
    let before = dates(&before);
    // A threshold beyond every leaf certificate's residual time: the warning and exit 3.
    let warn = c.clusterctl(&[
        "certs",
        "check-expiration",
        "-f",
        &f,
        "--warn-within",
        "400d",
    ]);
    assert_eq!(warn.code, 3, "{}", warn.all());
    eprintln!(
        "[real] check-expiration --warn-within 400d:\n{}",
        warn.stdout
    );
    assert!(warn.stdout.contains("WARNING: "), "{}", warn.stdout);
    assert!(
        warn.stdout
            .contains(&format!("{}/apiserver (", c.roles[0].0)),
        "{}",
        warn.stdout
    );
    let (code, warned) = check(&c, &["--warn-within", "400d"]);
    assert_eq!((code, &warned["result"]), (3, &Value::from("degraded")));
    assert!(warned["expiring"].as_u64() >= Some(13), "{warned:#}");
    eprintln!(
        "[real] checks took {:.1}s",
        t_checks.elapsed().as_secs_f64()
    );
    // notAfter has a one-second resolution: let the clock move past `up`'s certificates.
    std::thread::sleep(Duration::from_secs(2));
    // Unknown names are refused; a dry run changes nothing.
    let bad = c.clusterctl(&["certs", "renew", "-f", &f, "ca"]);
    assert_eq!(bad.code, 2, "{}", bad.all());
    let dry = c.clusterctl(&["certs", "renew", "-f", &f, "--all", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.all());
    eprintln!("[real] renew --all --dry-run:\n{}", dry.stdout);
    assert!(
        dry.stdout.contains("kubeadm certs renew all"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout
            .contains("sh /var/lib/clusterctl/certs/restart-kube-apiserver.sh"),
        "{}",
        dry.stdout
    );
    assert_eq!(
        dates(&check(&c, &[]).1),
        before,
        "the dry run renewed nothing"
    );
    // One certificate by name: only its dates move.
    let cp = c.roles[0].0.clone();
    let key = |n: &str| (cp.clone(), n.to_string());
    let one = c.clusterctl(&["certs", "renew", "-f", &f, "apiserver"]);
    assert_eq!(one.code, 0, "{}", one.all());
    let after_one = dates(&check(&c, &[]).1);
    assert!(after_one[&key("apiserver")].1 > before[&key("apiserver")].1);
    for (k, d) in &before {
        if *k != key("apiserver") && !k.1.starts_with("kubelet-") {
            assert_eq!(&after_one[k], d, "{k:?} changed by `renew apiserver`");
        }
    }
    // Everything: every kubeadm certificate moves, the CAs do not; the local kubeconfig follows.
    let local_before = local_client_cert(&c);
    std::thread::sleep(Duration::from_secs(1));
    let t_renew = Instant::now();
    let all = c.clusterctl(&["certs", "renew", "-f", &f, "--all"]);
    assert_eq!(all.code, 0, "{}", all.all());
    eprintln!("[real] renew --all:\n{}", all.all());
    eprintln!(
        "[real] renew --all took {:.1}s",
        t_renew.elapsed().as_secs_f64()
    );
    for component in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        assert!(
            all.stderr
                .contains(&format!("{component} restarted, API server ready")),
            "{component}: {}",
            all.stderr
        );
    }
    let (code, after) = check(&c, &[]);
    assert_eq!(code, 0, "{after:#}");
    assert_complete(&c, &after);
    let after = dates(&after);
    for name in KUBEADM {
        let (b, a) = (&after_one[&key(name)], &after[&key(name)]);
        if ["ca", "etcd-ca", "front-proxy-ca"].contains(&name) {
            assert_eq!(a, b, "{name}: a CA is not renewed");
        } else {
            assert!(a.1 > b.1 && a.0 >= b.0, "{name}: {b:?} → {a:?}");
            eprintln!(
                "[real] {name}: notBefore {} → {}, notAfter {} → {}",
                b.0, a.0, b.1, a.1
            );
        }
    }
    assert_ne!(
        local_client_cert(&c),
        local_before,
        "the local kubeconfig was refreshed"
    );
    // The cluster serves through the refreshed local kubeconfig (the real kubectl on this machine).
    let out = std::process::Command::new(bins.path("kubectl"))
        .args(["--kubeconfig"])
        .arg(c.cc.kubeconfig())
        .args([
            "--context",
            &format!("clusterctl-{}", c.name),
            "get",
            "nodes",
            "-o",
            "name",
        ])
        .output()
        .expect("kubectl");
    let nodes = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{nodes}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (n, _) in &c.roles {
        assert!(nodes.contains(&format!("node/{n}")), "{nodes}");
    }
    crate::real_cluster::all_ready(&c).expect("nodes Ready after the renewal");
    eprintln!(
        "[real] certs test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
