//! `clusterctl up` from an air-gap bundle on the test bed: two systemd node containers (a control plane
//! and a worker, reached over SSH) whose default route is removed, so they reach nothing but the test
//! network; the recording kubeadm/kubelet/kubectl stand-ins of `tests/standins/`. Every image the
//! cluster needs is built here from random bytes and served by a loopback `docker-registry` under its
//! upstream repository path; the bundle is written from it (library call, registry override) with a
//! `.deb` built here with `dpkg-deb`, a static tool of OS family `any` and a `.tgz` with `extractTo`.
//! Checks: `up` verifies the bundle, installs the package and the tool and unpacks the archive before
//! preflight, imports into each node's containerd
//! (name and manifest digest, `ctr -n k8s.io images ls`) after the runtime phase and before `kubeadm
//! init` exactly the images of the current version its role needs — the control plane all of them,
//! the worker pause, kube-proxy and CoreDNS but no kube-apiserver, kube-controller-manager,
//! kube-scheduler or etcd, neither node the images of `airgap.extraVersions` the bundle also carries;
//! `up --dry-run` plans exactly those loads; a second `up` loads and writes nothing; a bundle with one
//! flipped byte, or a cluster file changed since the bundle was written (an image it lacks, an
//! archive unpacked elsewhere), is refused by `airgap/verify` before any node is touched.

use crate::airgap_support;

use std::collections::BTreeMap;
use std::process::Command;

use airgap_support::{
    air_gapped, bundle_images, bundle_served, role_images, untouched, up_args, valid_file,
};
use clusterctl_airgap::plan::list_images;
use clusterctl_testbed::cli::{build_deb, ssh_cluster_yaml, Clusterctl, FileNode, Run};
use clusterctl_testbed::docker::{docker_available, TestCluster, TestNode};
use clusterctl_testbed::registry::{self, Registry};
use clusterctl_testbed::{is_root, require};

/// A preload image (`images.preload`): it travels in the bundle, and `up` must not look for it in
/// this machine's Docker (it is not there).
const PRELOAD: &str = "docker.io/library/cc-airgap-app:v1";

/// Where the test's archive package is unpacked on the nodes (`extractTo`).
const PLUGIN_DIR: &str = "/opt/cc-airgap-probe/bin";

fn sh(node: &TestNode, script: &str) -> String {
    node.sh(script).unwrap_or_else(|e| panic!("{e}"))
}

fn host_arch() -> String {
    let out = Command::new("dpkg")
        .arg("--print-architecture")
        .output()
        .expect("dpkg");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Line index of the first line containing every needle.
fn line_of(out: &str, needles: &[&str]) -> usize {
    out.lines()
        .position(|l| needles.iter().all(|n| l.contains(n)))
        .unwrap_or_else(|| panic!("no line with {needles:?} in:\n{out}"))
}

fn images_in(node: &TestNode) -> BTreeMap<String, String> {
    node.ctr_images().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn up_installs_from_the_bundle_on_nodes_without_a_route_out() {
    if !require("root", is_root())
        || !require("docker", docker_available())
        || !require("docker-registry", registry::available())
    {
        return;
    }
    let reg = Registry::start().expect("registry");
    let cluster = TestCluster::start("agup", 2).expect("node containers");
    let nodes = &cluster.nodes;
    air_gapped(nodes);
    let work = tempfile::tempdir().expect("tempdir");
    let deb = build_deb(work.path(), "cc-airgap-probe", "1.0", None).expect("deb");
    // A package of the upgrade target (`kubernetesVersion: v1.34.2`): carried, not placed by `up`.
    let next = build_deb(work.path(), "cc-airgap-next", "2.0", None).expect("deb");
    std::fs::write(
        work.path().join("probe-tool"),
        "#!/bin/sh\necho probe-tool from the bundle\n",
    )
    .expect("tool");
    // An archive unpacked on the node (as the CNI plugins' .tgz is into /opt/cni/bin).
    let plugins = work.path().join("plugins");
    std::fs::create_dir(&plugins).expect("plugins dir");
    std::fs::write(
        plugins.join("probe-plugin"),
        "#!/bin/sh\necho probe-plugin from the archive\n",
    )
    .expect("plugin");
    let st = Command::new("sh")
        .arg("-c")
        .arg(
            "chmod 0755 plugins/probe-plugin && tar -czf probe-plugins.tgz -C plugins probe-plugin",
        )
        .current_dir(work.path())
        .status()
        .expect("tar");
    assert!(st.success(), "tar -czf");
    let arch = host_arch();
    let airgap = format!(
        "  airgap:\n    bundle: site.tar\n    extraVersions: [v1.34.2]\n    packages:\n      - {{name: cc-airgap-probe, osFamily: debian, arch: {arch}, path: {deb}}}\n      - {{name: cc-airgap-next, osFamily: debian, arch: {arch}, kubernetesVersion: v1.34.2, path: {next}}}\n      - {{name: probe-tool, osFamily: any, arch: {arch}, path: probe-tool}}\n      - {{name: probe-plugins, osFamily: any, arch: {arch}, path: probe-plugins.tgz, extractTo: {PLUGIN_DIR}}}\n  images:\n    preload: [{PRELOAD}]\n"
    );
    let yaml = |extra: &str| {
        ssh_cluster_yaml(
            "agup",
            &cluster.key.private,
            "none",
            None,
            extra,
            &[
                FileNode::control_plane(&nodes[0]),
                FileNode::worker(&nodes[1]),
            ],
        )
    };
    let text = yaml(&airgap);
    let file = work.path().join("cluster.yaml");
    let valid = valid_file(&file, &text);

    // Every image of the plan, built here, served by the loopback registry under its upstream path.
    let bundle = work.path().join("site.tar");
    let summary = bundle_served(&valid, &reg, 1000, work.path(), &bundle);
    let all = bundle_images(&summary);
    assert_eq!(all.len(), list_images(&valid).len());
    // What each role needs (current version only), as names and digests in the bundle.
    let (want_cp, want_worker) = (
        role_images(&valid, &summary, true),
        role_images(&valid, &summary, false),
    );
    let named = |m: &BTreeMap<String, String>, part: &str| m.keys().any(|k| k.contains(part));
    for part in [
        "/pause:",
        "/kube-proxy:",
        "/coredns/coredns:",
        "/cc-airgap-app:",
    ] {
        assert!(
            named(&want_worker, part),
            "{part} for the worker: {want_worker:?}"
        );
    }
    for part in [
        "/kube-apiserver:",
        "/etcd:",
        "/kube-scheduler:",
        "/kube-controller-manager:",
    ] {
        assert!(named(&want_cp, part), "{part} for the control plane");
        assert!(
            !named(&want_worker, part),
            "{part} for the worker: {want_worker:?}"
        );
    }
    // The extra version's images are in the bundle, for a later upgrade, but for no node now.
    let extra: Vec<&String> = all.keys().filter(|k| k.ends_with(":v1.34.2")).collect();
    assert!(
        extra.len() >= 4,
        "extraVersions images in the bundle: {all:?}"
    );
    assert!(extra.iter().all(|k| !want_cp.contains_key(*k)));
    // The registry is not needed any more: the nodes could not reach it anyway.
    drop(reg);

    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), work.path());
    let up = |extra: &[&str]| -> Run {
        let args = up_args(&file, &nodes[0].known_hosts, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli.run(&args).expect("run clusterctl up")
    };

    // A bundle with one flipped byte is refused, naming the entry, before any node is touched.
    let good = std::fs::read(&bundle).expect("bundle");
    let vb = clusterctl_airgap::bundle::verify_bundle(&bundle).expect("verifies");
    let (victim, loc) = vb
        .entries
        .iter()
        .find(|(n, _)| n.starts_with("packages/"))
        .map(|(n, l)| (n.clone(), l.clone()))
        .expect("a package entry");
    let mut bad = good.clone();
    bad[loc.offset as usize + 10] ^= 0x01;
    std::fs::write(&bundle, &bad).expect("tamper");
    let r = up(&[]);
    assert_ne!(r.code, 0, "{}", r.all());
    assert!(
        r.all().contains(&victim) && r.all().contains("airgap/verify"),
        "{}",
        r.all()
    );
    untouched(nodes);
    std::fs::write(&bundle, &good).expect("restore");

    // A cluster file changed after the bundle was written is refused by airgap/verify, before any
    // node is touched: an image the bundle lacks, an archive unpacked elsewhere.
    let not_bundled = "registry.example.com/cc/not-bundled:1.0";
    for (changed, needle) in [
        (
            airgap.replace(
                &format!("preload: [{PRELOAD}]"),
                &format!("preload: [{PRELOAD}, \"{not_bundled}\"]"),
            ),
            not_bundled.to_string(),
        ),
        (
            airgap.replace(PLUGIN_DIR, "/opt/cc-airgap-elsewhere"),
            "/opt/cc-airgap-elsewhere".to_string(),
        ),
    ] {
        std::fs::write(&file, yaml(&changed)).expect("changed cluster file");
        let r = up(&[]);
        assert_ne!(r.code, 0, "{}", r.all());
        assert!(
            r.all().contains("airgap/verify") && r.all().contains(&needle),
            "{}",
            r.all()
        );
        untouched(nodes);
    }
    std::fs::write(&file, &text).expect("cluster file restored");

    // The dry run (offline) plans exactly each role's loads.
    let dry = up(&["--dry-run", "--verbose"]);
    assert_eq!(dry.code, 0, "{}", dry.all());
    for (n, want) in nodes.iter().zip([&want_cp, &want_worker]) {
        let section = dry
            .stdout
            .split("\nnode ")
            .find(|s| s.starts_with(&format!("{} (", n.name)))
            .unwrap_or_else(|| panic!("no plan for {}:\n{}", n.name, dry.stdout));
        let load = section
            .lines()
            .find(|l| l.contains("image(s) from the bundle into containerd"))
            .unwrap_or_else(|| panic!("no image load planned for {}:\n{section}", n.name));
        assert!(
            load.contains(&format!("load {} image(s)", want.len())),
            "{}: {load}",
            n.name
        );
        for name in all.keys() {
            assert_eq!(
                load.contains(&format!(" {name}")),
                want.contains_key(name),
                "{}: {name} in {load}",
                n.name
            );
        }
    }

    // `up` from the bundle.
    let r = up(&["-v"]);
    assert_eq!(r.code, 0, "{}", r.all());
    let out = r.all();
    let cp = &nodes[0].name;
    let pkg = line_of(&out, &[&format!("[{cp}] airgap/packages: run: dpkg -i")]);
    let pre = line_of(&out, &[&format!("[{cp}] preflight:")]);
    let rt = line_of(
        &out,
        &[&format!(
            "[{cp}] runtime/containerd: run: systemctl restart containerd"
        )],
    );
    let load = line_of(&out, &[&format!("[{cp}] airgap/images: load ")]);
    let init = line_of(&out, &[&format!("[{cp}] init: run: kubeadm init")]);
    assert!(pkg < pre && rt < load && load < init, "order:\n{out}");
    for (n, want) in nodes.iter().zip([&want_cp, &want_worker]) {
        let have = images_in(n);
        for (name, digest) in want {
            assert_eq!(
                have.get(name),
                Some(digest),
                "{}: {name} not in containerd with its digest: {have:?}",
                n.name
            );
        }
        // Nothing of the bundle beyond what the role needs: no control-plane-only image on the
        // worker, no extraVersions image anywhere.
        for name in all.keys().filter(|k| !want.contains_key(*k)) {
            assert!(
                !have.contains_key(name),
                "{}: {name} loaded but not needed: {have:?}",
                n.name
            );
        }
        assert_eq!(
            sh(n, "dpkg-query -W -f='${Status} ${Version}' cc-airgap-probe"),
            "install ok installed 1.0"
        );
        assert_eq!(
            sh(n, "cat /usr/share/cc-airgap-probe/marker"),
            "from the bundle"
        );
        assert_eq!(sh(n, "probe-tool"), "probe-tool from the bundle");
        assert_eq!(sh(n, "stat -c %a /usr/local/bin/probe-tool"), "755");
        assert_ne!(
            sh(
                n,
                "dpkg-query -W -f='${Status}' cc-airgap-next 2>/dev/null || true"
            ),
            "install ok installed",
            "{}: the upgrade target's package was installed by up",
            n.name
        );
        assert_eq!(
            sh(n, "ls /var/lib/clusterctl/airgap/packages | sort"),
            format!("{deb}\nprobe-plugins.tgz\nprobe-tool")
        );
        // The archive is unpacked into its extractTo directory, owned by root, mode kept.
        assert_eq!(
            sh(n, &format!("{PLUGIN_DIR}/probe-plugin")),
            "probe-plugin from the archive"
        );
        assert_eq!(
            sh(n, &format!("stat -c '%a %U' {PLUGIN_DIR}/probe-plugin")),
            "755 root"
        );
        assert_eq!(
            sh(
                n,
                "ls /var/lib/clusterctl/airgap | grep -c '^images-' || true"
            ),
            "0",
            "temporary archive left on {}",
            n.name
        );
    }

    // A second `up` loads and writes nothing.
    let before: Vec<_> = nodes.iter().map(images_in).collect();
    let again = up(&["-v"]);
    assert_eq!(again.code, 0, "{}", again.all());
    let o = again.all();
    assert!(
        !o.contains("airgap/images: load") && !o.contains(": write ") && !o.contains(": run: "),
        "second up changed something:\n{o}"
    );
    assert!(o.contains("is up to date; nothing changed"), "{o}");
    assert_eq!(before, nodes.iter().map(images_in).collect::<Vec<_>>());
}
