//! `clusterctl upgrade` by one minor for real (issue 11 item 6, issue 12 item 3): a real cluster (1
//! control plane + 1 worker, `real_support`) of the upstream v1.34.4 programs built from their Go
//! modules is upgraded to v1.35.4 (built the same way) with `clusterctl upgrade`, its kubeadm, kubelet
//! and kubectl packages coming from a real signed apt repository served from this machine
//! (`clusterctl_testbed::aptrepo`, laid out as pkgs.k8s.io's: `core:/stable:/v1.34/deb/` and
//! `core:/stable:/v1.35/deb/`, `.deb`s built with `dpkg-deb` from the Go-built programs, signed with a
//! key the test makes), named by the file as the package mirror. The images of both versions
//! (`scripts/k8s/images.sh`, no pulls) are served by one registry on the test network's gateway.
//!
//! Before `up`, each node gets the 1.34.4 packages from the v1.34 repository by hand, as a user
//! following the kubeadm install guide would (held); `up` runs with `packages.source: preinstalled`
//! (these node containers carry Debian 12's containerd 1.6.20, which `up` would refuse to keep for
//! 1.34 under `mirror`). The file then says v1.35.4 and `packages.source: mirror`, and `upgrade`
//! switches each node to the v1.35 repository (key, source, apt's signature-checked lists), installs
//! exactly `1.35.4-*` and holds it. Asserted: every node reports kubelet v1.35.4 and is Ready, the
//! control plane runs v1.35.4, the packages are `1.35.4-1.1` and held, the apt source names
//! `/v1.35/deb/`, a Deployment's pods run again behind their Service (its ClusterIP through
//! kube-proxy, its name resolved by CoreDNS), `status` is clean and a second `upgrade` changes nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use clusterctl_testbed::aptrepo::{
    build_deb, publish, DebFile, FileServer, SigningKey, KUBELET_SERVICE,
};
use clusterctl_testbed::k8sbin::{require_programs, K8sBins};
use clusterctl_testbed::k8snode::{cache_root, ImageStore};

use crate::real_support::{self, wait_for, FileOptions, RealCluster};

const FROM: &str = "v1.34.4";
const TO: &str = "v1.35.4";

/// `core:/stable:/v1.MINOR/deb/` under `root` with kubeadm, kubelet, kubectl of `bins` (revision
/// `-1.1`, as upstream's) and kubernetes-cni 1.10.0 (the kubelet depends on it), signed by `key`.
fn minor_repo(root: &Path, bins: &K8sBins, cni: &K8sBins, key: &SigningKey) {
    let v = bins.version().trim_start_matches('v');
    let minor: Vec<&str> = v.split('.').collect();
    let dir = root.join(format!("core:/stable:/v{}.{}/deb", minor[0], minor[1]));
    std::fs::create_dir_all(&dir).expect("repo dir");
    let rev = format!("{v}-1.1");
    let deb = |name: &str, version: &str, depends: Option<&str>, files: &[DebFile]| {
        build_deb(&dir, name, version, "amd64", depends, files).expect("dpkg-deb")
    };
    for p in ["kubeadm", "kubectl"] {
        deb(
            p,
            &rev,
            None,
            &[DebFile::program(bins.path(p), &format!("/usr/bin/{p}"))],
        );
    }
    deb(
        "kubelet",
        &rev,
        Some("kubernetes-cni (>= 1.2.0), mount, util-linux"),
        &[
            DebFile::program(bins.path("kubelet"), "/usr/bin/kubelet"),
            DebFile::text(KUBELET_SERVICE, "/usr/lib/systemd/system/kubelet.service"),
        ],
    );
    let plugins: Vec<DebFile> = ["loopback", "portmap", "bridge", "host-local"]
        .iter()
        .map(|p| {
            DebFile::program(
                &cni.path("cni-plugins").join(p),
                &format!("/opt/cni/bin/{p}"),
            )
        })
        .collect();
    deb("kubernetes-cni", "1.10.0-1.1", None, &plugins);
    publish(&dir, key).expect("publish");
}

/// One registry storage holding the images of both versions: hard links of the two stores' files
/// (content-addressed blobs, tags per repository), so nothing is copied.
fn merged_store(a: &ImageStore, b: &ImageStore) -> (ImageStore, tempfile::TempDir) {
    let parent = cache_root().join("registry");
    let dir = tempfile::Builder::new()
        .prefix(".upgrade-")
        .tempdir_in(&parent)
        .expect("merged storage dir");
    for s in [a, b] {
        let st = std::process::Command::new("cp")
            .arg("-alf")
            .arg(format!("{}/.", s.storage.display()))
            .arg(dir.path())
            .status()
            .expect("cp");
        assert!(st.success(), "cp -al {}", s.storage.display());
    }
    (
        ImageStore {
            storage: dir.path().to_path_buf(),
            version: a.version.clone(),
        },
        dir,
    )
}

/// Installs kubeadm, kubelet, kubectl 1.34.4 from the v1.34 repository on `node` by hand, held — what
/// the kubeadm install guide has a user do (the key dearmored into its keyring, `signed-by=`).
fn preinstall(c: &RealCluster, node: &str, url: &str) {
    let v = FROM.trim_start_matches('v');
    let script = format!(
        "set -e\n\
         mkdir -p -m 755 /etc/apt/keyrings\n\
         /usr/lib/apt/apt-helper -qq download-file '{url}/core:/stable:/v1.34/deb/Release.key' /tmp/k8s.key\n\
         gpg --batch --yes --dearmor -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg /tmp/k8s.key 2>/dev/null \
           || {{ sed '1,/^$/d;/^=/,$d' /tmp/k8s.key | base64 -d > /etc/apt/keyrings/kubernetes-apt-keyring.gpg; }}\n\
         echo 'deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] {url}/core:/stable:/v1.34/deb/ /' > /etc/apt/sources.list.d/kubernetes.list\n\
         apt-get update -q -o Dir::Etc::sourcelist=/etc/apt/sources.list.d/kubernetes.list -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 >/dev/null\n\
         DEBIAN_FRONTEND=noninteractive apt-get install -y -q kubeadm='{v}-*' kubelet='{v}-*' kubectl='{v}-*' >/dev/null\n\
         apt-mark hold kubeadm kubelet kubectl >/dev/null\n\
         dpkg-query -W -f='${{Package}}=${{Version}} ' kubeadm kubelet kubectl\n"
    );
    let out = c
        .node(node)
        .sh(&script)
        .unwrap_or_else(|e| panic!("{node}: {e:#}"));
    assert!(out.contains(&format!("kubeadm={v}-1.1")), "{node}: {out}");
}

fn packages_of(c: &RealCluster, node: &str) -> (String, String) {
    let n = c.node(node);
    let v = n
        .sh("dpkg-query -W -f='${Package}=${Version} ' kubeadm kubelet kubectl")
        .expect("dpkg-query");
    let held = n
        .sh("apt-mark showhold | sort | tr '\\n' ' '")
        .expect("holds");
    (v.trim().to_string(), held.trim().to_string())
}

/// A Deployment of two busybox httpd pods (tolerating every taint) and its ClusterIP Service.
fn app(image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: app}}}}\n  template:\n    metadata: {{labels: {{app: app}}}}\n    spec:\n      tolerations: [{{operator: Exists}}]\n      containers:\n      - name: web\n        image: {image}\n        command: [\"sh\", \"-c\", \"echo hello > /tmp/index.html; exec httpd -f -p 8080 -h /tmp\"]\n---\napiVersion: v1\nkind: Service\nmetadata: {{name: app}}\nspec:\n  selector: {{app: app}}\n  ports: [{{port: 80, targetPort: 8080}}]\n"
    )
}

/// The app's pods Running and Ready, its Service answering on its ClusterIP (kube-proxy) and its name
/// resolved to that address through CoreDNS (busybox's own resolver: `nslookup`). No `wget -T`: the
/// static busybox's wget crashes with it (exit 139).
fn app_serves(c: &RealCluster) -> Result<(), String> {
    crate::real_cluster::pods_ready(c, "kube-system", "k8s-app=kube-dns", 2)?;
    crate::real_cluster::pods_ready(c, "default", "app=app", 2)?;
    let exec = |cmd: &str| {
        c.first()
            .sh(&format!(
                "kubectl --kubeconfig /etc/kubernetes/admin.conf exec deploy/app -- {cmd}"
            ))
            .map_err(|e| format!("{cmd}: {e:#}"))
    };
    let ip = c.kubectl("get service app -o jsonpath='{.spec.clusterIP}'");
    let page = exec(&format!("wget -q -O- http://{ip}/index.html"))?;
    if page.trim() != "hello" {
        return Err(format!("ClusterIP {ip} answered {page:?}"));
    }
    let ns = exec("nslookup app.default.svc.cluster.local")?;
    if !ns.contains(&ip) {
        return Err(format!("nslookup: {ns}"));
    }
    Ok(())
}

#[test]
#[ignore = "fails on this test bed: with CAP_SYS_PTRACE on the nodes `kubeadm upgrade plan` and its \
health-check Job pass, then `kubeadm upgrade apply` fails in kubeadm's system verification (exact \
error not yet captured; likely the cgroup v1 check); see docs/testing.md"]
fn upgrade_one_minor_for_real_with_packages_from_a_signed_apt_repository() {
    if !clusterctl_testbed::require(
        "dpkg-deb, apt-ftparchive and gpg (scripts/packages/packages.list)",
        clusterctl_testbed::have("dpkg-deb")
            && clusterctl_testbed::have("apt-ftparchive")
            && clusterctl_testbed::have("gpg"),
    ) {
        return;
    }
    let Some((image, old_store)) = real_support::available() else {
        return;
    };
    let programs = ["kubeadm", "kubelet", "kubectl"];
    let Some(old_bins) = require_programs(FROM, &programs) else {
        return;
    };
    let Some(new_bins) = require_programs(TO, &programs) else {
        return;
    };
    let Some(cni) = require_programs(FROM, &["cni-plugins"]) else {
        return;
    };
    let new_store = match ImageStore::ensure(TO) {
        Ok(s) => s,
        Err(e) => {
            clusterctl_testbed::require(&format!("the {TO} images: {e:#}"), false);
            return;
        }
    };
    let t = Instant::now();
    let (store, _merged) = merged_store(&old_store, &new_store);
    let c = real_support::start("rupg", 1, 1, FileOptions::default(), &(image, store));

    // The repository: both minors, one key, served on the test network's gateway.
    let www = tempfile::tempdir().expect("repo dir");
    let key = SigningKey::generate().expect("gpg key");
    let tr = Instant::now();
    minor_repo(www.path(), &old_bins, &cni, &key);
    minor_repo(www.path(), &new_bins, &cni, &key);
    eprintln!(
        "[real] repository (v1.34 and v1.35) built and signed in {:.1}s",
        tr.elapsed().as_secs_f64()
    );
    let server = FileServer::start(&c.nodes.gateway, www.path()).expect("file server");
    let url = server.url();
    let names: Vec<String> = c.roles.iter().map(|(n, _)| n.clone()).collect();
    for n in &names {
        preinstall(&c, n, &url);
    }

    // Kubernetes 1.35 kubelets refuse cgroup v1 unless failCgroupV1 is false (this host's
    // /sys/fs/cgroup decides); the kubelet configuration kubeadm uploads at init is what `kubeadm
    // upgrade` keeps, so the file says it from the start.
    let v1 = std::process::Command::new("stat")
        .args(["-fc", "%T", "/sys/fs/cgroup"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() != "cgroup2fs")
        .unwrap_or(false);
    let mut text = std::fs::read_to_string(&c.file).expect("file");
    if v1 {
        text = text.replace(
            "kubelet: {resolvConf",
            "kubelet: {failCgroupV1: false, resolvConf",
        );
    }
    std::fs::write(&c.file, &text).expect("file");
    let up = c.up(&[]);
    assert!(up.all().contains("converged"), "{}", up.all());
    c.apply(&app(&c.busybox()));
    wait_for(
        "the app serving before the upgrade",
        Duration::from_secs(240),
        || app_serves(&c),
    );

    // The file now says v1.35.4, packages from the repository (the mirror of pkgs.k8s.io).
    let text = text
        .replace(
            &format!("kubernetesVersion: {FROM}"),
            &format!("kubernetesVersion: {TO}"),
        )
        .replace(
            "packages: {source: preinstalled}",
            &format!("packages: {{source: mirror, mirror: {{url: \"{url}\"}}}}"),
        );
    assert!(text.contains("source: mirror"), "{text}");
    std::fs::write(&c.file, &text).expect("file");
    server.clear();
    let f = c.file.to_string_lossy().into_owned();
    let to = TO.trim_start_matches('v');
    let tu = Instant::now();
    let r = c.clusterctl(&["upgrade", "-f", &f, "--to", to]);
    let out = r.all();
    eprintln!("{out}");
    if r.code != 0 {
        // What kubeadm's health-check Job and its pod went through (the first failure seen here).
        let diag = c.first().sh(
            "kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get jobs,pods -o wide; \
             kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system describe pods -l job-name 2>&1 | tail -40; \
             kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes -o wide; \
             kubectl --kubeconfig /etc/kubernetes/admin.conf get events -A --sort-by=.lastTimestamp | tail -25",
        );
        eprintln!("[real] after the failed upgrade:\n{diag:?}");
    }
    assert_eq!(r.code, 0, "upgrade failed:\n{out}");
    assert!(out.contains(&format!("upgraded to {TO}")), "{out}");
    eprintln!(
        "[real] upgrade {FROM} -> {TO} took {:.1}s",
        tu.elapsed().as_secs_f64()
    );
    // The packages came from the v1.35 repository, its signed index fetched.
    let asked = server.requests();
    assert!(
        asked.iter().any(|p| p.contains("/v1.35/deb/InRelease")),
        "{asked:?}"
    );
    assert!(
        asked
            .iter()
            .any(|p| p.contains("/v1.35/deb/kubelet_1.35.4-1.1_amd64.deb")),
        "{asked:?}"
    );

    // Every node: kubelet v1.35.4, Ready; packages 1.35.4-1.1, held; the source names v1.35.
    let versions = c.kubectl(
        "get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion}{\"\\n\"}{end}'",
    );
    for n in &names {
        assert!(
            versions.lines().any(|l| l.trim() == format!("{n} {TO}")),
            "{versions}"
        );
        let (pkgs, held) = packages_of(&c, n);
        assert_eq!(
            pkgs,
            format!("kubeadm={to}-1.1 kubelet={to}-1.1 kubectl={to}-1.1"),
            "{n}"
        );
        for p in ["kubeadm", "kubectl", "kubelet"] {
            assert!(held.split(' ').any(|h| h == p), "{n}: {p} not held: {held}");
        }
        let list = c
            .node(n)
            .sh("cat /etc/apt/sources.list.d/kubernetes.list")
            .expect("list");
        assert!(list.contains("/core:/stable:/v1.35/deb/ /"), "{n}: {list}");
        let kubeadm = c.node(n).sh("kubeadm version -o short").expect("kubeadm");
        assert_eq!(kubeadm.trim(), TO, "{n}");
    }
    wait_for("every node Ready", Duration::from_secs(180), || {
        crate::real_cluster::all_ready(&c)
    });
    let api = c.kubectl("version -o json");
    assert!(api.contains(&format!("\"gitVersion\": \"{TO}\"")), "{api}");
    let cp = &names[0];
    let image = c.kubectl(&format!(
        "-n kube-system get pod kube-apiserver-{cp} -o jsonpath='{{.spec.containers[0].image}}'"
    ));
    assert!(image.ends_with(&format!("kube-apiserver:{TO}")), "{image}");
    wait_for(
        "the app serving after the upgrade",
        Duration::from_secs(240),
        || app_serves(&c),
    );
    let status = c.clusterctl(&["status", "-f", &f]);
    let s = status.all();
    assert_eq!(status.code, 0, "status:\n{s}");
    assert!(
        s.contains("; 2 of 2 registered node(s) Ready")
            && s.contains("no stuck pods")
            && !s.contains("not registered")
            && !s.contains("missing on the node"),
        "status:\n{s}"
    );
    // Run again: already there, nothing changes.
    let again = c.clusterctl(&["upgrade", "-f", &f, "--to", to]);
    assert_eq!(again.code, 0, "{}", again.all());
    eprintln!(
        "[real] upgrade test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    drop(server);
}
