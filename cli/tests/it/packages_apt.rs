//! The `packages` phase of `up` (issue 12) with real parts: a systemd Debian node container from which
//! containerd, runc and the CNI plugins are purged (a bare host), a real signed apt repository laid out
//! as pkgs.k8s.io's (`core:/stable:/v1.34/deb/`, `clusterctl_testbed::aptrepo::kubernetes_repository`:
//! kubeadm with its kubelet drop-in) holding `.deb` packages built in the test with `dpkg-deb` from the
//! real kubeadm, kubelet, kubectl v1.34.4, crictl and the CNI reference plugins (Go-built, test-bed
//! cache), signed with a key the test generates, and the containerd 2.2.1 and runc
//! 1.3.3 release files with their sha256 files, all served over HTTP from this machine on the test
//! network. The cluster file names that server as the package mirror (`packages.source: mirror`), so
//! nothing upstream is contacted. The node's own apt (signature checked with the downloaded key), dpkg
//! and systemd do the work.

use std::path::{Path, PathBuf};

use clusterctl_testbed::aptrepo::{
    build_deb, kubernetes_repository, release_files, DebFile, FileServer, SigningKey,
};
use clusterctl_testbed::cli::{ssh_cluster_yaml, Clusterctl, FileNode, Run};
use clusterctl_testbed::docker::{docker, docker_available, TestCluster, TestNode};

const K8S: &str = "v1.34.4";
const OLD_KUBEADM: &str = "v1.33.13";

fn sh(node: &TestNode, script: &str) -> String {
    node.sh(script).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The repository tree served to the node: `core:/stable:/v1.34/deb/` and the release files.
struct Repo {
    root: PathBuf,
    debs: PathBuf,
    old_kubeadm: PathBuf,
    _key: SigningKey,
}

fn build_repo(dir: &Path, bins: &clusterctl_testbed::k8sbin::K8sBins, old: &Path) -> Repo {
    let root = dir.join("www");
    let t = std::time::Instant::now();
    let key = SigningKey::generate().expect("gpg key");
    let debs = kubernetes_repository(&root, bins, &key).expect("the v1.34 repository");
    // The other version a node may carry: kubeadm of the previous minor, not in this repository.
    let old_dir = dir.join("old");
    std::fs::create_dir_all(&old_dir).expect("old dir");
    let old_kubeadm = build_deb(
        &old_dir,
        "kubeadm",
        "1.33.13-1.1",
        "amd64",
        None,
        &[DebFile::program(old, "/usr/bin/kubeadm")],
    )
    .expect("old kubeadm deb");
    // The containerd release archive and runc, at their upstream paths, with their sha256 files.
    release_files(&root, bins, "2.2.1", "1.3.3").expect("containerd and runc release files");
    eprintln!("repository built and signed in {:?}", t.elapsed());
    Repo {
        root,
        debs,
        old_kubeadm,
        _key: key,
    }
}

fn cluster_file(dir: &Path, node: &TestNode, key: &Path, mirror: &str, replace: bool) -> PathBuf {
    let extra = format!(
        "  packages:\n    source: mirror\n    mirror: {{url: \"{mirror}\"}}\n{}",
        if replace {
            "    replaceInstalled: true\n"
        } else {
            ""
        }
    );
    let text = ssh_cluster_yaml(
        "pkgs",
        key,
        "builtin",
        None,
        &extra,
        &[FileNode::control_plane(node)],
    )
    .replace(
        "kubernetesVersion: v1.34.1",
        &format!("kubernetesVersion: {K8S}"),
    );
    let file = dir.join(if replace {
        "replace.yaml"
    } else {
        "cluster.yaml"
    });
    std::fs::write(&file, text).expect("cluster file");
    file
}

fn up(cli: &Clusterctl, file: &Path, node: &TestNode) -> Run {
    let t = std::time::Instant::now();
    let r = cli
        .run(&[
            "up",
            "-f",
            &file.display().to_string(),
            "--known-hosts",
            &node.known_hosts.display().to_string(),
            "--only",
            "packages",
            "-v",
        ])
        .expect("run clusterctl up");
    eprintln!("up --only packages: exit {} in {:?}", r.code, t.elapsed());
    r
}

fn versions(node: &TestNode) -> String {
    sh(
        node,
        "dpkg-query -W -f='${Package}=${Version} ' kubeadm kubelet kubectl cri-tools kubernetes-cni",
    )
}

#[test]
fn up_installs_exact_held_kubernetes_packages_from_a_signed_apt_repository() {
    if !clusterctl_testbed::require(
        "root, a Docker engine, dpkg-deb, apt-ftparchive and gpg (scripts/packages/packages.list)",
        clusterctl_testbed::is_root()
            && docker_available()
            && clusterctl_testbed::have("dpkg-deb")
            && clusterctl_testbed::have("apt-ftparchive")
            && clusterctl_testbed::have("gpg"),
    ) {
        return;
    }
    let Some(bins) = clusterctl_testbed::k8sbin::require_programs(
        K8S,
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
    ) else {
        return;
    };
    let Some(old) = clusterctl_testbed::k8sbin::require_programs(OLD_KUBEADM, &["kubeadm"]) else {
        return;
    };
    let cluster = TestCluster::start("pkg", 1).expect("node container");
    let node = &cluster.nodes[0];
    // A bare host: no runtime, no runc, no CNI plugins, no Kubernetes packages.
    sh(
        node,
        "systemctl disable --now containerd >/dev/null 2>&1 || true; dpkg --purge containerd runc containernetworking-plugins >/dev/null; rm -rf /opt/cni",
    );
    assert_eq!(
        sh(node, "command -v containerd runc kubeadm kubelet || true"),
        ""
    );
    let repo = build_repo(cluster.dir(), &bins, old.path("kubeadm"));
    let server = FileServer::start(&cluster.gateway, &repo.root).expect("file server");
    let home = cluster.dir().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), &home);
    let file = cluster_file(
        cluster.dir(),
        node,
        &cluster.key.private,
        &server.url(),
        false,
    );

    // 0. A dry run changes nothing and downloads nothing. Offline it says what a node without the
    // packages gets, per OS family; with --probe it lists this node's commands.
    let file_s = file.display().to_string();
    let kh = node.known_hosts.display().to_string();
    let r = cli
        .run(&[
            "up",
            "-f",
            &file_s,
            "--dry-run",
            "--verbose",
            "--known-hosts",
            &kh,
        ])
        .expect("dry run");
    assert_eq!(r.code, 0, "{}", r.all());
    for want in [
        format!("on Debian/Ubuntu (apt) nodes without them: kubeadm 1.34.4, kubelet 1.34.4, kubectl 1.34.4 and cri-tools, kubernetes-cni from {}/core:/stable:/v1.34/deb/, held; kubelet enabled", server.url()),
        format!("on EL 8/9 (dnf) nodes without them: kubeadm 1.34.4, kubelet 1.34.4, kubectl 1.34.4 and cri-tools, kubernetes-cni from {}/core:/stable:/v1.34/rpm/", server.url()),
    ] {
        assert!(r.stdout.contains(&want), "{want}\nnot in:\n{}", r.stdout);
    }
    let r = cli
        .run(&[
            "up",
            "-f",
            &file_s,
            "--dry-run",
            "--verbose",
            "--probe",
            "--only",
            "packages",
            "--known-hosts",
            &kh,
        ])
        .expect("dry run --probe");
    assert_eq!(r.code, 0, "{}", r.all());
    for want in [
        "kubeadm='1.34.4-*' kubelet='1.34.4-*' kubectl='1.34.4-*' cri-tools kubernetes-cni",
        "containerd-2.2.1-linux-amd64.tar.gz",
        "apt-mark hold kubeadm kubelet kubectl cri-tools kubernetes-cni",
        "systemctl enable kubelet",
    ] {
        assert!(r.stdout.contains(want), "{want}\nnot in:\n{}", r.stdout);
    }
    assert_eq!(
        server.requests(),
        Vec::<String>::new(),
        "a dry run downloads nothing"
    );
    assert_eq!(sh(node, "command -v kubeadm || true"), "");

    // 1. From nothing: everything installed from the repository through the node's apt.
    let r = up(&cli, &file, node);
    assert_eq!(r.code, 0, "{}", r.all());
    assert_eq!(
        versions(node),
        "cri-tools=1.34.0-1.1 kubeadm=1.34.4-1.1 kubectl=1.34.4-1.1 kubelet=1.34.4-1.1 kubernetes-cni=1.10.0-1.1"
    );
    let mut held: Vec<String> = sh(node, "apt-mark showhold")
        .lines()
        .map(String::from)
        .collect();
    held.sort();
    assert_eq!(
        held,
        [
            "cri-tools",
            "kubeadm",
            "kubectl",
            "kubelet",
            "kubernetes-cni"
        ]
    );
    assert_eq!(sh(node, "systemctl is-enabled kubelet"), "enabled");
    assert_eq!(sh(node, "kubeadm version -o short"), K8S);
    assert!(
        sh(node, "/usr/local/bin/containerd --version").contains(" v2.2.1 "),
        "containerd from the release archive"
    );
    assert_eq!(sh(node, "systemctl is-enabled containerd"), "enabled");
    assert!(sh(node, "/usr/local/sbin/runc --version").starts_with("runc version 1.3.3"));
    assert_eq!(
        sh(node, "cat /etc/apt/sources.list.d/kubernetes.list"),
        format!(
            "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] {}/core:/stable:/v1.34/deb/ /",
            server.url()
        )
    );
    // The repository's key was fetched and dearmored on the node: the keyring apt checked with holds
    // exactly the test key.
    let want_key = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "gpg --dearmor < '{}' | sha256sum | cut -d' ' -f1",
            repo.debs.join("Release.key").display()
        ))
        .output()
        .expect("gpg --dearmor");
    assert_eq!(
        sh(
            node,
            "sha256sum < /etc/apt/keyrings/kubernetes-apt-keyring.gpg | cut -d' ' -f1"
        ),
        String::from_utf8_lossy(&want_key.stdout).trim()
    );
    let asked = server.requests();
    for want in [
        "/core:/stable:/v1.34/deb/Release.key",
        "/core:/stable:/v1.34/deb/InRelease",
        "/kubeadm_1.34.4-1.1_amd64.deb",
        "/containerd/containerd/releases/download/v2.2.1/containerd-2.2.1-linux-amd64.tar.gz.sha256sum",
        "/opencontainers/runc/releases/download/v1.3.3/runc.sha256sum",
    ] {
        assert!(asked.iter().any(|a| a.ends_with(want)), "{want} not asked for: {asked:?}");
    }

    // 2. Again: nothing downloaded, nothing installed, nothing restarted.
    server.clear();
    let dpkg_log = sh(node, "wc -l < /var/log/dpkg.log");
    let r = up(&cli, &file, node);
    assert_eq!(r.code, 0, "{}", r.all());
    assert_eq!(server.requests(), Vec::<String>::new(), "{}", r.all());
    assert_eq!(
        sh(node, "wc -l < /var/log/dpkg.log"),
        dpkg_log,
        "{}",
        r.all()
    );
    assert!(
        !r.all().contains("run: "),
        "no command changed the node: {}",
        r.all()
    );

    // 3. Another kubeadm on the node: refused, naming what it has and what the file wants.
    docker(&[
        "cp",
        &repo.old_kubeadm.display().to_string(),
        &format!("{}:/root/old-kubeadm.deb", node.name),
    ])
    .expect("docker cp");
    sh(
        node,
        "apt-mark unhold kubeadm >/dev/null && dpkg -i /root/old-kubeadm.deb >/dev/null && apt-mark hold kubeadm >/dev/null",
    );
    server.clear();
    let r = up(&cli, &file, node);
    assert_ne!(r.code, 0, "{}", r.all());
    eprintln!("refused as expected:\n{}", r.stderr);
    assert!(
        r.all()
            .contains("kubeadm 1.33.13-1.1 is installed; the cluster file wants 1.34.4"),
        "{}",
        r.all()
    );
    assert!(r.all().contains(&node.name), "names the node: {}", r.all());
    assert_eq!(
        server.requests(),
        Vec::<String>::new(),
        "refused before any download"
    );
    assert!(
        versions(node).contains(" kubeadm=1.33.13-1.1 "),
        "{}",
        versions(node)
    );

    // 4. With replaceInstalled: replaced by the file's version, held again.
    let replace = cluster_file(
        cluster.dir(),
        node,
        &cluster.key.private,
        &server.url(),
        true,
    );
    let r = up(&cli, &replace, node);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        versions(node).contains(" kubeadm=1.34.4-1.1 "),
        "{}",
        versions(node)
    );
    assert!(sh(node, "apt-mark showhold")
        .lines()
        .any(|l| l == "kubeadm"));

    // 5. A tampered repository: the Release file changed after signing is refused by apt, and up says
    // which node and why.
    sh(
        node,
        "apt-mark unhold kubectl >/dev/null && dpkg --purge kubectl >/dev/null",
    );
    let inrelease = repo.debs.join("InRelease");
    let text = std::fs::read_to_string(&inrelease).expect("InRelease");
    std::fs::write(
        &inrelease,
        text.replacen("Origin: clusterctl-test", "Origin: clusterctl-evil", 1),
    )
    .expect("tamper");
    let r = up(&cli, &file, node);
    assert_ne!(r.code, 0, "{}", r.all());
    eprintln!("refused as expected:\n{}", r.stderr);
    let all = r.all();
    assert!(all.contains(&node.name), "{all}");
    assert!(
        all.contains("BADSIG")
            || all.contains("signatures were invalid")
            || all.contains("is not signed"),
        "apt's reason: {all}"
    );
    assert!(
        !sh(
            node,
            "dpkg-query -W -f='${Status}' kubectl 2>/dev/null || true"
        )
        .contains(" ok installed"),
        "nothing installed from the tampered repository"
    );
}
