//! From bare hosts to a working cluster with one `clusterctl up -f` (issue 12, its "done when"): node
//! containers with no Kubernetes package, no container runtime, no runc and no CNI plugin (the test
//! bed's real node image with all of those removed) become a real cluster (1 control plane + 1
//! worker, the upstream v1.34.4 programs built from their Go modules, the builtin CNI) with a file
//! that does not mention packages at all: `packages.source` is `upstream` by default on SSH hosts.
//!
//! What is upstream is served by the test: each node resolves `pkgs.k8s.io` and `github.com` to the
//! test network's gateway (a hosts entry) and trusts a CA made for the test (`update-ca-certificates`),
//! where an HTTPS server on port 443 serves a real signed apt repository laid out as pkgs.k8s.io's
//! (`core:/stable:/v1.34/deb/`, `.deb`s built with `dpkg-deb` from the Go-built kubeadm, kubelet,
//! kubectl, crictl and CNI plugins, signed with a key the test makes:
//! [`clusterctl_testbed::aptrepo::kubernetes_repository`]) and the containerd 2.2.1 and runc 1.3.3
//! release files at their GitHub release paths with their sha256 files (built from their Go modules:
//! [`clusterctl_testbed::aptrepo::release_files`]). So the default URLs of the product's version table
//! are what the nodes' real apt (signature checked with the downloaded key) and the archive step
//! fetch. Debian 12's own containerd 1.6.20 is too old for 1.34, so `up` takes the release archives.
//!
//! Asserted: `up` converges; every node has exactly kubeadm, kubelet, kubectl `1.34.4-1.1` (cri-tools,
//! kubernetes-cni) held, the kubelet enabled, containerd 2.2.1 and runc 1.3.3 from the archives with
//! containerd's version-3 configuration written on the first run; the cluster works (nodes Ready
//! through the builtin CNI, CoreDNS, pods on both nodes, pod-to-pod, ClusterIP, DNS); a second `up`
//! changes nothing, downloads nothing and runs dpkg for nothing; `destroy --purge` then leaves every
//! node's package state exactly as it was before `up` (issue 12 item 3: the packages purged and
//! unheld, the repository source, its key and apt's lists of it gone, containerd and runc from the
//! archives and their unit gone).

use std::path::Path;
use std::time::Instant;

use clusterctl_testbed::aptrepo::{kubernetes_repository, release_files, FileServer, SigningKey};
use clusterctl_testbed::docker::TestNode;
use clusterctl_testbed::k8sbin::require_programs;
use clusterctl_testbed::registry::TestCa;

use crate::real_support::{self, FileOptions, RealCluster, RealEnv, VERSION};

/// The upstream hosts the nodes resolve to the test's server.
const HOSTS: [&str; 2] = ["pkgs.k8s.io", "github.com"];
/// The release archives of the product's version table for 1.34 (`phases/src/packages/table.rs`).
const CONTAINERD: &str = "2.2.1";
const RUNC: &str = "1.3.3";

fn sh(node: &TestNode, script: &str) -> String {
    node.sh(script)
        .unwrap_or_else(|e| panic!("{}: {script}: {e:#}", node.name))
}

/// Makes `node` a bare host: the programs, units and drop-in the test bed's node image places, and
/// Debian's containerd, runc and CNI plugins, removed.
fn make_bare(node: &TestNode) {
    sh(
        node,
        "systemctl disable --now kubelet containerd >/dev/null 2>&1 || true\n\
         rm -f /usr/bin/kubeadm /usr/bin/kubelet /usr/bin/kubectl /usr/bin/crictl \
           /etc/systemd/system/kubelet.service /etc/systemd/system/multi-user.target.wants/kubelet.service\n\
         rm -rf /etc/systemd/system/kubelet.service.d /opt/cni\n\
         dpkg --purge containerd runc containernetworking-plugins >/dev/null\n\
         systemctl daemon-reload",
    );
    assert_eq!(
        sh(
            node,
            "command -v containerd runc kubeadm kubelet kubectl crictl || true; ls /opt/cni 2>/dev/null || true"
        ),
        "",
        "{} is bare",
        node.name
    );
}

/// `HOSTS` resolve to `gateway` on `node`, which trusts `ca_pem` (as a site's own CA store would).
fn point_upstream_at(node: &TestNode, gateway: &str, ca_pem: &str) {
    sh(
        node,
        &format!("echo '{gateway} {}' >> /etc/hosts", HOSTS.join(" ")),
    );
    let (st, out, err) = node
        .exec(
            "cat > /usr/local/share/ca-certificates/clusterctl-test-upstream.crt && update-ca-certificates >/dev/null 2>&1",
            ca_pem.as_bytes(),
        )
        .expect("docker exec");
    assert_eq!(st, 0, "{}: update-ca-certificates: {out}{err}", node.name);
}

/// What `dpkg-query` says of the Kubernetes packages, and the held ones.
fn packages(node: &TestNode) -> (String, String) {
    (
        sh(
            node,
            "dpkg-query -W -f='${Package}=${Version} ' kubeadm kubelet kubectl cri-tools kubernetes-cni",
        ),
        sh(node, "apt-mark showhold | sort | tr '\\n' ' '"),
    )
}

/// A node's package state, as `destroy --purge` must leave it: the installed packages of those `up`
/// may install, the holds, which of the files `up` may place exist, the programs on `PATH`, apt's
/// lists of the upstream repository, containerd's unit.
fn package_state(node: &TestNode) -> String {
    sh(
        node,
        "dpkg-query -W -f='${db:Status-Abbrev}${Package}=${Version}\\n' kubeadm kubelet kubectl cri-tools \
           kubernetes-cni containerd containerd.io runc cri-o 2>/dev/null | grep '^ii' || true\n\
         echo \"held: $(apt-mark showhold | tr '\\n' ' ')\"\n\
         for f in /etc/apt/sources.list.d/kubernetes.list /etc/apt/keyrings/kubernetes-apt-keyring.gpg \
           /etc/apt/apt.conf.d/90clusterctl-package-mirror /etc/clusterctl-packages \
           /usr/local/bin/containerd /usr/local/bin/containerd-shim-runc-v2 /usr/local/bin/ctr \
           /usr/local/sbin/runc /usr/local/lib/systemd/system/containerd.service \
           /var/lib/clusterctl-packages; do [ ! -e $f ] || echo \"present: $f\"; done\n\
         echo \"programs: $(command -v containerd runc kubeadm kubelet kubectl crictl | tr '\\n' ' ')\"\n\
         echo \"apt lists: $(ls /var/lib/apt/lists | grep -c pkgs.k8s.io)\"\n\
         echo \"containerd unit: $(systemctl show -P LoadState containerd)\"",
    )
}

/// `destroy --purge` of `c` (file `f`), then each node's [`package_state`] as `before` (taken before
/// `up`, in node order): nothing installed, held, placed or listed by apt for the upstream repository.
fn purge_to(c: &RealCluster, f: &str, before: &[String]) {
    let purge = c.clusterctl(&["destroy", "-f", f, "--yes", "--purge"]);
    let out = purge.all();
    assert_eq!(purge.code, 0, "destroy --purge:\n{out}");
    for (n, before) in c.nodes.nodes.iter().zip(before) {
        assert!(
            out.contains(&format!("{}: packages: as before up:", n.name)),
            "{}: {out}",
            n.name
        );
        let after = package_state(n);
        assert_eq!(
            &after, before,
            "{}: package state after destroy --purge",
            n.name
        );
        assert!(!after.contains("present: "), "{}: {after}", n.name);
        assert!(after.contains("apt lists: 0"), "{}: {after}", n.name);
    }
}

/// What both tests need first: the repository tools, the real node image and image store, and a
/// directory holding the upstream-shaped repository and release files (the key lives as long as the
/// tuple). `None` when a capability is missing outside CI (`require` panics in CI).
fn prepare() -> Option<(RealEnv, tempfile::TempDir, SigningKey)> {
    if !clusterctl_testbed::require(
        "dpkg-deb, apt-ftparchive and gpg (scripts/packages/packages.list)",
        clusterctl_testbed::have("dpkg-deb")
            && clusterctl_testbed::have("apt-ftparchive")
            && clusterctl_testbed::have("gpg"),
    ) {
        return None;
    }
    let env = real_support::available()?;
    let www = tempfile::tempdir().expect("repository dir");
    let key = build_upstream(www.path())?;
    Some((env, www, key))
}

fn build_upstream(www: &Path) -> Option<SigningKey> {
    let bins = require_programs(
        VERSION,
        &[
            "kubeadm",
            "kubelet",
            "kubectl",
            "crictl",
            "cni-plugins",
            "containerd",
            "containerd-shim-runc-v2",
            "ctr",
            "runc",
        ],
    )?;
    let t = Instant::now();
    let key = SigningKey::generate().expect("gpg key");
    kubernetes_repository(www, &bins, &key).expect("the v1.34 repository");
    release_files(www, &bins, CONTAINERD, RUNC).expect("containerd and runc release files");
    eprintln!(
        "[real] repository and release files built and signed in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    Some(key)
}

fn per_node_checks(c: &RealCluster) {
    let v = VERSION.trim_start_matches('v');
    for n in &c.nodes.nodes {
        let (pkgs, held) = packages(n);
        assert_eq!(
            pkgs.trim(),
            format!(
                "cri-tools=1.34.0-1.1 kubeadm={v}-1.1 kubectl={v}-1.1 kubelet={v}-1.1 kubernetes-cni=1.10.0-1.1"
            ),
            "{}",
            n.name
        );
        assert_eq!(
            held.trim(),
            "cri-tools kubeadm kubectl kubelet kubernetes-cni",
            "{}",
            n.name
        );
        assert_eq!(sh(n, "systemctl is-enabled kubelet"), "enabled");
        assert_eq!(sh(n, "kubeadm version -o short"), VERSION);
        assert_eq!(
            sh(n, "cat /etc/apt/sources.list.d/kubernetes.list"),
            "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://pkgs.k8s.io/core:/stable:/v1.34/deb/ /",
            "{}: the default repository URL",
            n.name
        );
        assert!(
            sh(n, "command -v containerd && containerd --version")
                .starts_with(&format!("/usr/local/bin/containerd\ncontainerd github.com/containerd/containerd/v2 v{CONTAINERD} ")),
            "{}: containerd from the release archive",
            n.name
        );
        assert!(
            sh(n, "runc --version").starts_with(&format!("runc version {RUNC}")),
            "{}",
            n.name
        );
        // Rendered for the containerd `packages` installed, on the first run already.
        assert_eq!(
            sh(n, "grep -m1 '^version' /etc/containerd/config.toml"),
            "version = 3",
            "{}",
            n.name
        );
    }
}

#[test]
fn bare_hosts_become_a_cluster_with_one_up_from_the_default_upstream_urls() {
    let Some((env, www, _key)) = prepare() else {
        return;
    };
    let t = Instant::now();
    // runc 1.2+ (the archive's 1.3.3) needs CAP_SYS_PTRACE in an unprivileged node container, which
    // every test-bed node has (docs/testbed-kubernetes.md).
    let c = real_support::start("bare", 1, 1, FileOptions::default(), &env);
    let gateway: std::net::IpAddr = c.nodes.gateway.parse().expect("gateway address");
    let ca = TestCa::for_names("clusterctl test upstream", &HOSTS, &[gateway]).expect("test CA");
    let server = FileServer::start_tls(&c.nodes.gateway, 443, www.path(), &ca)
        .expect("HTTPS server on the gateway");
    let mut before = Vec::new();
    for n in &c.nodes.nodes {
        make_bare(n);
        point_upstream_at(n, &c.nodes.gateway, &ca.ca_pem);
        before.push(package_state(n));
    }
    // The file says nothing about packages: `upstream` is the default on SSH hosts.
    let text = std::fs::read_to_string(&c.file).expect("cluster file");
    let text = text.replace("  packages: {source: preinstalled}\n", "");
    assert!(!text.contains("packages"), "{text}");
    std::fs::write(&c.file, &text).expect("cluster file");
    let f = c.file.to_string_lossy().into_owned();

    // One command.
    let tu = Instant::now();
    let up = c.up(&[]);
    let out = up.all();
    assert!(out.contains("converged"), "{out}");
    eprintln!(
        "[real] up from bare hosts converged in {:.1}s",
        tu.elapsed().as_secs_f64()
    );
    let asked = server.requests();
    for want in [
        "/core:/stable:/v1.34/deb/Release.key",
        "/core:/stable:/v1.34/deb/InRelease",
        "/core:/stable:/v1.34/deb/kubeadm_1.34.4-1.1_amd64.deb",
        "/core:/stable:/v1.34/deb/kubelet_1.34.4-1.1_amd64.deb",
        "/containerd/containerd/releases/download/v2.2.1/containerd-2.2.1-linux-amd64.tar.gz",
        "/containerd/containerd/releases/download/v2.2.1/containerd-2.2.1-linux-amd64.tar.gz.sha256sum",
        "/opencontainers/runc/releases/download/v1.3.3/runc.amd64",
        "/opencontainers/runc/releases/download/v1.3.3/runc.sha256sum",
    ] {
        // apt asks for a flat repository's packages as `<repo>/./<file>`.
        assert!(
            asked.iter().any(|a| a.replace("/./", "/") == want),
            "{want} not asked for: {asked:?}"
        );
    }
    per_node_checks(&c);
    crate::real_cluster::check_cluster_on(
        &c,
        &c.roles.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
    );

    // Again: nothing downloaded, nothing installed, nothing changed.
    server.clear();
    let dpkg_logs: Vec<String> = c
        .nodes
        .nodes
        .iter()
        .map(|n| sh(n, "wc -l < /var/log/dpkg.log"))
        .collect();
    let again = c.up(&[]);
    assert!(
        again.all().contains("is up to date; nothing changed"),
        "{}",
        again.all()
    );
    assert_eq!(server.requests(), Vec::<String>::new(), "{}", again.all());
    for (n, before) in c.nodes.nodes.iter().zip(&dpkg_logs) {
        assert_eq!(&sh(n, "wc -l < /var/log/dpkg.log"), before, "{}", n.name);
    }
    let status = c.clusterctl(&["status", "-f", &f]);
    assert_eq!(status.code, 0, "status:\n{}", status.all());

    // destroy --purge: each node's package state as before `up`.
    purge_to(&c, &f, &before);
    eprintln!(
        "[real] bare-hosts test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    drop(server);
}

/// The `airgap.packages` entries of the bundle: the repository's `.deb`s (kubeadm, kubelet, kubectl
/// tagged with the file's version; cri-tools, kubernetes-cni), containerd's release archive unpacked
/// into `/usr/local`, runc as a static binary.
fn bundle_packages(www: &Path) -> String {
    let debs = www.join("core:/stable:/v1.34/deb");
    let v = VERSION.trim_start_matches('v');
    let mut s = String::from("    packages:\n");
    for (name, version, tagged) in [
        ("kubeadm", format!("{v}-1.1"), true),
        ("kubelet", format!("{v}-1.1"), true),
        ("kubectl", format!("{v}-1.1"), true),
        ("cri-tools", "1.34.0-1.1".to_string(), false),
        ("kubernetes-cni", "1.10.0-1.1".to_string(), false),
    ] {
        s.push_str(&format!(
            "      - {{name: {name}, osFamily: debian, arch: amd64, path: \"{}\"{}}}\n",
            debs.join(format!("{name}_{version}_amd64.deb")).display(),
            if tagged {
                format!(", kubernetesVersion: {VERSION}")
            } else {
                String::new()
            }
        ));
    }
    s.push_str(&format!(
        "      - {{name: containerd, osFamily: any, arch: amd64, path: \"{}\", extractTo: /usr/local}}\n",
        www.join(format!(
            "containerd/containerd/releases/download/v{CONTAINERD}/containerd-{CONTAINERD}-linux-amd64.tar.gz"
        ))
        .display()
    ));
    s.push_str(&format!(
        "      - {{name: runc, osFamily: any, arch: amd64, path: \"{}\"}}\n",
        www.join(format!(
            "opencontainers/runc/releases/download/v{RUNC}/runc.amd64"
        ))
        .display()
    ));
    s
}

#[test]
fn bare_hosts_become_a_cluster_offline_from_a_bundle() {
    let Some((env, www, _key)) = prepare() else {
        return;
    };
    let t = Instant::now();
    let c = real_support::start("obare", 1, 0, FileOptions::default(), &env);
    let mut before = Vec::new();
    for n in &c.nodes.nodes {
        make_bare(n);
        // Offline: the upstream hosts lead nowhere.
        sh(
            n,
            &format!("echo '127.0.0.9 {}' >> /etc/hosts", HOSTS.join(" ")),
        );
        before.push(package_state(n));
    }
    // The file: no registry mirror (the images come from the bundle into each node's containerd),
    // the bundle carrying the packages; `packages.source` unset: `bundle`, as the bundle carries
    // kubeadm.
    let text = std::fs::read_to_string(&c.file).expect("cluster file");
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("  registry:") && !l.starts_with("  packages:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let text = text.replace(
        "  nodes:\n",
        &format!(
            "  images:\n    preload: [clusterctl.test/busybox:1]\n  airgap:\n    bundle: site.tar\n{}  nodes:\n",
            bundle_packages(www.path())
        ),
    );
    std::fs::write(&c.file, &text).expect("cluster file");
    let f = c.file.to_string_lossy().into_owned();
    let source = clusterctl_testbed::registry::Registry::serve_readonly(&env.1.storage)
        .expect("source registry");
    let tb = Instant::now();
    real_support::airgap_bundle(&c.cc, &f, &source, &["registry.k8s.io", "clusterctl.test"]);
    drop(source);
    eprintln!(
        "[real] bundle written in {:.1}s",
        tb.elapsed().as_secs_f64()
    );

    let tu = Instant::now();
    let up = c.up(&[]);
    let out = up.all();
    assert!(out.contains("converged"), "{out}");
    assert!(
        !out.contains("] airgap/packages"),
        "the bundle is the packages phase's source, not a phase of its own: {out}"
    );
    eprintln!(
        "[real] up from bare hosts and a bundle converged in {:.1}s",
        tu.elapsed().as_secs_f64()
    );
    let v = VERSION.trim_start_matches('v');
    let n = c.first();
    let (pkgs, held) = packages(n);
    assert_eq!(
        pkgs.trim(),
        format!("cri-tools=1.34.0-1.1 kubeadm={v}-1.1 kubectl={v}-1.1 kubelet={v}-1.1 kubernetes-cni=1.10.0-1.1")
    );
    assert_eq!(
        held.trim(),
        "cri-tools kubeadm kubectl kubelet kubernetes-cni"
    );
    assert_eq!(
        sh(n, "systemctl is-enabled kubelet containerd"),
        "enabled\nenabled"
    );
    assert!(
        sh(n, "command -v containerd && containerd --version").starts_with(&format!(
            "/usr/local/bin/containerd\ncontainerd github.com/containerd/containerd/v2 v{CONTAINERD} "
        )),
        "containerd from the bundle's release archive"
    );
    assert!(sh(n, "runc --version").starts_with(&format!("runc version {RUNC}")));
    assert_eq!(
        sh(n, "grep -m1 '^version' /etc/containerd/config.toml"),
        "version = 3"
    );
    assert_eq!(
        sh(
            n,
            "ls /etc/apt/sources.list.d/kubernetes.list 2>/dev/null || echo none"
        ),
        "none",
        "no repository"
    );
    crate::real_support::wait_for(
        "every node Ready",
        std::time::Duration::from_secs(180),
        || crate::real_cluster::all_ready(&c),
    );
    crate::real_support::wait_for("CoreDNS Ready", std::time::Duration::from_secs(240), || {
        crate::real_cluster::pods_ready(&c, "kube-system", "k8s-app=kube-dns", 2)
    });
    c.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: probe, labels: {app: probe}}\nspec:\n  containers:\n  - name: probe\n    image: clusterctl.test/busybox:1\n    imagePullPolicy: Never\n    command: [\"sleep\", \"3600\"]\n");
    crate::real_support::wait_for(
        "the workload pod Ready",
        std::time::Duration::from_secs(120),
        || crate::real_cluster::pods_ready(&c, "default", "app=probe", 1),
    );
    let ns = c.kubectl("exec probe -- nslookup kubernetes.default.svc.cluster.local");
    assert!(ns.contains("10.96.0.1"), "{ns}");

    // Again: nothing changes.
    let dpkg_log = sh(n, "wc -l < /var/log/dpkg.log");
    let again = c.up(&[]);
    assert!(
        again.all().contains("is up to date; nothing changed"),
        "{}",
        again.all()
    );
    assert_eq!(sh(n, "wc -l < /var/log/dpkg.log"), dpkg_log);

    // destroy --purge: the node's package state as before `up`, the bundle's files included.
    purge_to(&c, &f, &before);
    eprintln!(
        "[real] offline bare-hosts test done in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}
