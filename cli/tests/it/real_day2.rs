//! Day-2 commands on one real 1-control-plane cluster (issue 26 items 4, 5, 6 and 7; `real_support`: the
//! upstream v1.34.4 programs and images built from their Go modules, the etcd image carrying etcd,
//! etcdctl and etcdutl as upstream's does), one cluster for all of them to keep the suite short.
//!
//! Certificates: `certs check-expiration` lists every kubeadm certificate, kubeconfig and CA and the
//! kubelet's client and serving certificates with sane dates (the table and `-o json`); the
//! certificates are then made short-lived on the node by the real kubeadm (`kubeadm certs renew all`
//! with `certificateValidityPeriod: 2h`): the check warns and exits 4, and with `--warn-within 1h` it
//! exits 0. An unknown name is refused (exit 2) and `renew --all --dry-run` changes nothing. `renew
//! --all` is killed (SIGKILL, with its restart script on the node) while it restarts etcd, then run
//! again: it takes the dead process's lock over and finishes — every kubeadm certificate valid for a
//! year again, the CAs unchanged, the API server serving the renewed certificate, the local kubeconfig
//! refreshed and working, the node Ready. The API is probed every 500 ms through the local kubeconfig
//! from before the killed run to the end of the second; the probe's results are printed (one control
//! plane: each API server restart is a gap).
//!
//! etcd: a ConfigMap is created, a snapshot saved (the file 0600, `etcdutl snapshot status` reported
//! and matching what the test bed's own Go-built `etcdutl` reads from the file, the ConfigMap's value
//! nowhere in the output), a second save to the same file refused, the ConfigMap deleted; a copy of the
//! snapshot with bytes flipped is refused before any node changes (manifests in place, no restore
//! directory); a dry run changes nothing; the restore is killed (SIGKILL) while it swaps the data
//! directory and run again: it resumes, the ConfigMap is back, the control plane is the one etcd
//! member, the node Ready, the previous data kept aside; the same restore again changes nothing.
//!
//! Then, on the same cluster, `up`'s rollouts of certSANs, audit, encryption at rest and OIDC
//! (`real_rollout.rs`, whose Keycloak starts before the first `up` and whose node is checked to have no
//! `curl`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::real_cluster::all_ready;
use crate::real_support::{self, wait_for, FileOptions, RealCluster};

mod etcd;

/// `certs check-expiration -f FILE -o json EXTRA`: exit code and document.
fn check(c: &RealCluster, extra: &[&str]) -> (i32, Value) {
    let f = c.file.to_string_lossy().into_owned();
    let mut args = vec!["certs", "check-expiration", "-f", f.as_str(), "-o", "json"];
    args.extend(extra);
    let r = c.clusterctl(&args);
    let v: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("check-expiration -o json: {e}\n{}", r.all()));
    (r.code, v)
}

/// The kubeadm names `check-expiration` lists on a control plane.
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

const CAS: [&str; 3] = ["ca", "etcd-ca", "front-proxy-ca"];
const DAY: i64 = 86_400;

/// `(name, notBefore, notAfter)` of every certificate in a check-expiration document.
fn dates(v: &Value) -> Vec<(String, String, String)> {
    v["certificates"]
        .as_array()
        .expect("certificates")
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().expect(k).to_string();
            (s("name"), s("notBefore"), s("notAfter"))
        })
        .collect()
}

/// The row of certificate `name` in a check-expiration document.
fn row<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["certificates"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {v:#}"))
}

/// Every certificate listed once with dates around the check time; the residual times within
/// `leaf` (kubeadm's leaf certificates), kubelet ones within a year, CAs nine to ten years.
fn assert_listed(v: &Value, leaf: std::ops::RangeInclusive<i64>) {
    let mut names: Vec<&str> = v["certificates"]
        .as_array()
        .expect("certificates")
        .iter()
        .map(|c| c["name"].as_str().expect("name"))
        .collect();
    names.sort_unstable();
    let mut want: Vec<&str> = KUBEADM.to_vec();
    want.extend(["kubelet-client", "kubelet-serving"]);
    want.sort_unstable();
    assert_eq!(names, want, "{v:#}");
    let now = v["checkedAt"].as_str().expect("checkedAt");
    for cert in v["certificates"].as_array().expect("certificates") {
        let nb = cert["notBefore"].as_str().expect("notBefore");
        let na = cert["notAfter"].as_str().expect("notAfter");
        assert!(nb <= now && now < na, "{cert}: {nb} ≤ {now} < {na}");
        let residual = cert["residualSeconds"].as_i64().expect("residual");
        let name = cert["name"].as_str().expect("name");
        let range = match name {
            n if CAS.contains(&n) => 9 * 365 * DAY..=10 * 366 * DAY,
            n if n.starts_with("kubelet-") => 300 * DAY..=366 * DAY,
            _ => leaf.clone(),
        };
        assert!(range.contains(&residual), "{cert}: residual {residual}");
        assert_eq!(cert["externallyManaged"], Value::Bool(false), "{cert}");
    }
    assert_eq!(row(v, "apiserver-etcd-client")["ca"], "etcd-ca");
    assert_eq!(row(v, "front-proxy-client")["ca"], "front-proxy-ca");
    assert_eq!(row(v, "kubelet-serving")["ca"], "self-signed");
}

/// The API probed every 500 ms (`kubectl get --raw /readyz` through the local kubeconfig) until
/// stopped; the results say how many answered and the longest run of failures. Also run by
/// `real_cluster::control_planes` around control-plane joins and removals (its kubeconfig names the VIP).
pub(crate) struct ApiProbe {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<(f64, bool)>>,
}

impl ApiProbe {
    /// Starts probing with the host's `kubectl` and the cluster's local kubeconfig.
    pub(crate) fn start(c: &RealCluster, kubectl: std::path::PathBuf) -> ApiProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let (kubeconfig, context) = (c.cc.kubeconfig(), format!("clusterctl-{}", c.name));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let t = Instant::now();
            let mut seen = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let ok = Command::new(&kubectl)
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(["--context", &context, "--request-timeout=2s"])
                    .args(["get", "--raw", "/readyz"])
                    .output()
                    .is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"ok"));
                seen.push((t.elapsed().as_secs_f64(), ok));
                std::thread::sleep(Duration::from_millis(500));
            }
            seen
        });
        ApiProbe { stop, handle }
    }

    /// Stops the probe; returns its summary line and the longest gap in seconds.
    pub(crate) fn finish(self) -> (String, f64) {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.handle.join().expect("probe");
        let failed = seen.iter().filter(|(_, ok)| !ok).count();
        let (mut longest, mut gap_start): (f64, Option<f64>) = (0.0, None);
        let mut gaps = Vec::new();
        for (at, ok) in &seen {
            match (ok, gap_start) {
                (false, None) => gap_start = Some(*at),
                (true, Some(s)) => {
                    gaps.push(format!("{s:.0}-{at:.0}s"));
                    longest = longest.max(at - s);
                    gap_start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = gap_start {
            let end = seen.last().map_or(s, |l| l.0);
            gaps.push(format!("{s:.0}-{end:.0}s (at the end)"));
            longest = longest.max(end - s);
        }
        let line = format!(
            "{} probes over {:.0}s, {} answered, {failed} failed; gaps: {}; longest {longest:.1}s",
            seen.len(),
            seen.last().map_or(0.0, |l| l.0),
            seen.len() - failed,
            if gaps.is_empty() {
                "none".to_string()
            } else {
                gaps.join(", ")
            }
        );
        (line, longest)
    }
}

/// `clusterctl ARGS --known-hosts …` in the background, its output collected; killed `after` once
/// `when` holds for the output so far (polled every 200 ms). Returns the output. Panics when it ends
/// first.
pub(super) fn killed_when(
    c: &RealCluster,
    args: &[&str],
    when: impl Fn(&str) -> bool,
    after: Duration,
) -> String {
    let mut child: Child = Command::new(&c.cc.bin)
        .args(args)
        .arg("--known-hosts")
        .arg(c.nodes.dir().join("known_hosts"))
        .current_dir(&c.cc.dir)
        .env("HOME", &c.cc.dir)
        .env_remove("XDG_CACHE_HOME")
        .env("KUBECONFIG", c.cc.kubeconfig())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clusterctl starts");
    let lines = Arc::new(Mutex::new(String::new()));
    let err = child.stderr.take().expect("stderr");
    let l = lines.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let mut all = l.lock().unwrap_or_else(|e| e.into_inner());
            all.push_str(&line);
            all.push('\n');
        }
    });
    let t = Instant::now();
    let out = || lines.lock().unwrap_or_else(|e| e.into_inner()).clone();
    while !when(&out()) {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("{args:?} ended ({st}) before the kill point:\n{}", out());
        }
        assert!(t.elapsed() < Duration::from_secs(300), "{}", out());
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(after);
    if let Ok(Some(st)) = child.try_wait() {
        panic!("{args:?} ended ({st}) before the kill:\n{}", out());
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    eprintln!(
        "[real] {args:?} killed after {:.1}s",
        t.elapsed().as_secs_f64()
    );
    out()
}

/// Every process on the node running a `certs renew` restart script, SIGKILLed (the node's own pids;
/// `[r]` keeps the pattern from matching this shell's own command line).
const KILL_RESTART_SCRIPTS: &str = "for d in /proc/[0-9]*; do [ \"${d#/proc/}\" = $$ ] && continue; \
    { tr '\\0' ' ' < $d/cmdline; } 2>/dev/null | grep -q 'clusterctl/certs/[r]estart-' && kill -9 ${d#/proc/} && echo \"killed ${d#/proc/}\"; done; true";

/// The certificate `address:6443` serves: its notAfter as `openssl x509 -enddate` prints it.
fn served_not_after(address: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {address}:6443 </dev/null 2>/dev/null | openssl x509 -noout -enddate"
        ))
        .output()
        .expect("openssl");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `Dec  7 07:12:01 2027 GMT` of an RFC 3339 `2027-12-07T07:12:01Z` (openssl's `-enddate` form).
fn openssl_date(rfc: &str) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, m, d, hms) = (&rfc[0..4], &rfc[5..7], &rfc[8..10], &rfc[11..19]);
    let month = MONTHS[m.parse::<usize>().expect("month") - 1];
    let day: u32 = d.parse().expect("day");
    format!("notAfter={month} {day:>2} {hms} {y} GMT")
}

/// Makes every kubeadm certificate on the node valid for two hours, with the real kubeadm: the
/// cluster's own ClusterConfiguration with `certificateValidityPeriod: 2h0m0s`.
const SHORT_LIVED: &str = "set -e; k='kubectl --kubeconfig /etc/kubernetes/admin.conf'; \
    $k -n kube-system get cm kubeadm-config -o jsonpath='{.data.ClusterConfiguration}' > /root/short.yaml; \
    sed -i '/^certificateValidityPeriod:/d' /root/short.yaml; \
    echo 'certificateValidityPeriod: 2h0m0s' >> /root/short.yaml; \
    kubeadm certs renew all --config /root/short.yaml 2>&1 | tail -n 3";

/// The certificates part: see the module documentation.
fn certificates(c: &RealCluster, kubectl: std::path::PathBuf) {
    let f = c.file.to_string_lossy().into_owned();
    let t = Instant::now();
    let text = c.clusterctl(&["certs", "check-expiration", "-f", &f]);
    assert_eq!(text.code, 0, "{}", text.all());
    eprintln!("[real] check-expiration:\n{}", text.stdout);
    assert!(
        text.stdout.starts_with("NODE ")
            && text.stdout.contains("EXTERNALLY MANAGED")
            && text.stdout.contains("none expires within 30d"),
        "{}",
        text.all()
    );
    let (code, v) = check(c, &[]);
    assert_eq!((code, &v["result"]), (0, &Value::from("ok")), "{v:#}");
    assert_listed(&v, 360 * DAY..=366 * DAY);
    let cas: Vec<Value> = CAS.iter().map(|n| row(&v, n)["notAfter"].clone()).collect();

    // Short-lived: the warning and exit 4; under a smaller threshold, ok.
    let said = c.first().sh(SHORT_LIVED).expect("kubeadm certs renew (2h)");
    eprintln!("[real] made short-lived with kubeadm: {said}");
    let warn = c.clusterctl(&["certs", "check-expiration", "-f", &f]);
    eprintln!(
        "[real] check-expiration (2h certificates):\n{}",
        warn.stdout
    );
    assert_eq!(warn.code, 4, "{}", warn.all());
    let cp = &c.roles[0].0;
    assert!(
        warn.stdout
            .contains("WARNING: 11 certificate(s) expire within 30d: ")
            && warn.stdout.contains(&format!("{cp}/apiserver (11"))
            && warn.stdout.contains("clusterctl certs renew -f FILE --all"),
        "{}",
        warn.stdout
    );
    let (code, short) = check(c, &[]);
    assert_eq!((code, &short["result"]), (4, &Value::from("degraded")));
    assert_eq!(short["expiring"], 11, "{short:#}");
    assert_listed(&short, 6000..=2 * 3600);
    let (code, under) = check(c, &["--warn-within", "1h"]);
    assert_eq!(
        (code, &under["result"]),
        (0, &Value::from("ok")),
        "{under:#}"
    );
    eprintln!("[real] checks took {:.1}s", t.elapsed().as_secs_f64());

    // Refusals and a dry run change nothing.
    let bad = c.clusterctl(&["certs", "renew", "-f", &f, "ca"]);
    assert_eq!(bad.code, 2, "{}", bad.all());
    assert!(bad
        .all()
        .contains("`ca` is not a certificate kubeadm renews"));
    let dry = c.clusterctl(&["certs", "renew", "-f", &f, "--all", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.all());
    assert!(
        dry.stdout.contains("kubeadm certs renew all")
            && dry
                .stdout
                .contains("sh /var/lib/clusterctl/certs/restart-kube-apiserver.sh"),
        "{}",
        dry.stdout
    );
    assert_eq!(
        dates(&check(c, &[]).1),
        dates(&short),
        "the dry run renewed nothing"
    );

    // renew --all killed while it restarts etcd, then run again; the API probed throughout.
    let local_before = std::fs::read_to_string(c.cc.kubeconfig()).expect("kubeconfig");
    let probe = ApiProbe::start(c, kubectl.clone());
    let tr = Instant::now();
    let killed = killed_when(
        c,
        &["certs", "renew", "-f", &f, "--all"],
        |o| o.contains("certs/restart") && o.contains("restart-etcd.sh"),
        Duration::from_secs(3),
    );
    let on_node = c.first().sh(KILL_RESTART_SCRIPTS).expect("kill the script");
    eprintln!("[real] the killed renew said:\n{killed}[real] on the node: {on_node}");
    let all = c.clusterctl(&["certs", "renew", "-f", &f, "--all"]);
    let renew_secs = tr.elapsed().as_secs_f64();
    let (probed, longest) = probe.finish();
    eprintln!("[real] renew --all (after the killed one):\n{}", all.all());
    eprintln!("[real] API probe during both renewals ({renew_secs:.1}s): {probed}");
    assert_eq!(all.code, 0, "{}", all.all());
    assert!(
        all.stderr.contains("took over the lock of cluster"),
        "{}",
        all.stderr
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
    assert!(longest < 120.0, "the API was away {longest:.1}s: {probed}");

    let (code, after) = check(c, &[]);
    assert_eq!(code, 0, "{after:#}");
    assert_listed(&after, 360 * DAY..=366 * DAY);
    for (n, before) in CAS.iter().zip(&cas) {
        assert_eq!(
            &row(&after, n)["notAfter"],
            before,
            "{n}: a CA is not renewed"
        );
    }
    for n in KUBEADM.iter().filter(|n| !CAS.contains(n)) {
        eprintln!(
            "[real] {n}: notAfter {} (2h) → {}",
            row(&short, n)["notAfter"],
            row(&after, n)["notAfter"]
        );
    }
    let served = served_not_after(&c.first().address);
    let file = row(&after, "apiserver")["notAfter"]
        .as_str()
        .expect("notAfter");
    assert_eq!(
        served,
        openssl_date(file),
        "the API server serves the renewed certificate"
    );
    let local_after = std::fs::read_to_string(c.cc.kubeconfig()).expect("kubeconfig");
    assert_ne!(
        local_after, local_before,
        "the local kubeconfig was refreshed"
    );
    let nodes = Command::new(&kubectl)
        .arg("--kubeconfig")
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
    assert!(
        nodes.status.success() && String::from_utf8_lossy(&nodes.stdout).contains(cp.as_str()),
        "{nodes:?}"
    );
    wait_for(
        "the node Ready after the renewal",
        Duration::from_secs(120),
        || all_ready(c),
    );
    eprintln!(
        "[real] certificates part: {:.1}s",
        t.elapsed().as_secs_f64()
    );
}

#[test]
fn day2_certificates_etcd_and_rollouts_on_a_real_cluster() {
    let Some(env) = real_support::available() else {
        return;
    };
    let Some(bins) = clusterctl_testbed::k8sbin::require_programs(
        real_support::VERSION,
        &["kubectl", "etcdutl"],
    ) else {
        return;
    };
    let t = Instant::now();
    let c = real_support::start("rday2", 1, 0, FileOptions::default(), &env);
    let base = std::fs::read_to_string(&c.file).expect("cluster file");
    let keycloak = crate::real_rollout::before_up(&c);
    c.up(&[]);
    wait_for("the node Ready", Duration::from_secs(180), || all_ready(&c));
    certificates(&c, bins.path("kubectl").to_path_buf());
    etcd::backup_and_restore(&c, bins.path("etcdutl"));
    crate::real_rollout::rollouts(&c, &base, keycloak);
    eprintln!(
        "[real] day-2 test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
