//! `clusterctl up` from an air-gap bundle on CRI-O nodes, no mirror: the CRI-O branch of
//! `airgap/images` on the test bed. CRI-O itself is not packaged for Debian bookworm, so each node
//! container gets a stand-in `crio.service` (a unit that only stays active) and containers-storage
//! with the `vfs` driver — the store CRI-O serves images from, which `skopeo` (in the node image)
//! fills and reads. The nodes have no default route; kubeadm/kubelet/kubectl are the recording
//! stand-ins. Checks: `runtime/crio` places CRI-O's drop-ins and (re)starts the unit; `airgap/images`
//! puts exactly each role's images of the current version into containers-storage with the
//! bundle's manifest digests (hashed on the node) — the control plane all of them, the worker no
//! control-plane-only image, neither the `extraVersions` images — under the names the file's nodes
//! pull (the upstream ones: the bundle was written while the file named a mirror the site lacks);
//! a second `up` loads nothing.

use crate::airgap_support;

use std::collections::BTreeMap;

use airgap_support::{air_gapped, bundle_images, bundle_served, role_images, up_args, valid_file};
use clusterctl_testbed::cli::{ssh_cluster_yaml, Clusterctl, FileNode};
use clusterctl_testbed::docker::{docker_available, TestCluster, TestNode};
use clusterctl_testbed::registry::{self, Registry};
use clusterctl_testbed::{is_root, require};

/// containers-storage as CRI-O would use it, with `vfs` (overlay does not mount on the container's
/// own overlay root).
const STORAGE_CONF: &str = "[storage]\ndriver = \"vfs\"\nrunroot = \"/run/containers/storage\"\ngraphroot = \"/var/lib/containers/storage\"\n";

/// A stand-in for CRI-O's unit: active while it runs, nothing else.
const CRIO_UNIT: &str = "[Unit]\nDescription=CRI-O stand-in (clusterctl test bed)\n[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=multi-user.target\n";

fn sh(node: &TestNode, script: &str) -> String {
    node.sh(script).unwrap_or_else(|e| panic!("{e}"))
}

/// Manifest digest (`sha256:<hex>`) of each of `names` held in the node's containers-storage.
fn stored(node: &TestNode, names: &[&String]) -> BTreeMap<String, String> {
    names
        .iter()
        .filter_map(|n| {
            let (st, out, _) = node
                .exec(
                    &format!(
                        "t=$(mktemp) && skopeo inspect --raw 'containers-storage:{n}' >\"$t\" && sha256sum <\"$t\" | cut -d' ' -f1; rc=$?; rm -f \"$t\"; exit $rc"
                    ),
                    b"",
                )
                .ok()?;
            (st == 0).then(|| (n.to_string(), format!("sha256:{}", out.trim())))
        })
        .collect()
}

#[test]
fn up_loads_each_roles_images_into_crio_storage_from_the_bundle() {
    if !require("root", is_root())
        || !require("docker", docker_available())
        || !require("docker-registry", registry::available())
    {
        return;
    }
    let reg = Registry::start().expect("registry");
    let cluster = TestCluster::start("agcrio", 2).expect("node containers");
    let nodes = &cluster.nodes;
    air_gapped(nodes);
    for n in nodes {
        let (st, _, err) = n
            .exec(
                "cat > /etc/systemd/system/crio.service && systemctl daemon-reload",
                CRIO_UNIT.as_bytes(),
            )
            .expect("exec");
        assert_eq!(st, 0, "crio stand-in on {}: {err}", n.name);
        let (st, _, err) = n
            .exec(
                "mkdir -p /etc/containers && cat > /etc/containers/storage.conf",
                STORAGE_CONF.as_bytes(),
            )
            .expect("exec");
        assert_eq!(st, 0, "storage.conf on {}: {err}", n.name);
    }
    let work = tempfile::tempdir().expect("tempdir");
    let yaml = |registry: &str| {
        ssh_cluster_yaml(
            "agcrio",
            &cluster.key.private,
            "none",
            None,
            &format!("{registry}  runtime: {{kind: crio}}\n  airgap:\n    bundle: site.tar\n    extraVersions: [v1.34.2]\n"),
            &[
                FileNode::control_plane(&nodes[0]),
                FileNode::worker(&nodes[1]),
            ],
        )
    };
    // The bundle is written while the file still named a mirror; the site has none, so its nodes
    // pull (and must find) the upstream names: `up` loads under those, not the bundle's.
    let bundled = valid_file(
        &work.path().join("with-mirror.yaml"),
        &yaml("  registry: {mirror: \"mirror.site.test/lib\"}\n"),
    );
    let summary = bundle_served(
        &bundled,
        &reg,
        3000,
        work.path(),
        &work.path().join("site.tar"),
    );
    assert!(summary
        .manifest
        .images
        .iter()
        .all(|i| i.mirror.starts_with("mirror.site.test/lib/")));
    let file = work.path().join("cluster.yaml");
    let valid = valid_file(&file, &yaml(""));
    drop(reg);
    // Upstream source → bundle name, to expect each image under the name the nodes pull.
    let source_of: BTreeMap<String, String> = summary
        .manifest
        .images
        .iter()
        .map(|i| (i.mirror.clone(), i.source.clone()))
        .collect();
    let by_source = |m: BTreeMap<String, String>| -> BTreeMap<String, String> {
        m.into_iter()
            .map(|(name, digest)| (source_of[&name].clone(), digest))
            .collect()
    };
    let all = by_source(bundle_images(&summary));
    let wants = [
        by_source(role_images(&valid, &summary, true)),
        by_source(role_images(&valid, &summary, false)),
    ];
    assert!(
        all.keys().all(|k| k.starts_with("registry.k8s.io/")),
        "{all:?}"
    );
    assert!(wants[1].len() < wants[0].len(), "{wants:?}");

    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), work.path());
    let up = || {
        let args = up_args(&file, &nodes[0].known_hosts, &["-v"]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli.run(&args).expect("run clusterctl up")
    };
    let r = up();
    let out = r.all();
    assert_eq!(r.code, 0, "{out}");
    let names: Vec<&String> = all.keys().collect();
    for (n, want) in nodes.iter().zip(&wants) {
        assert!(
            out.contains(&format!("[{}] runtime/crio:", n.name)),
            "no runtime/crio on {}:\n{out}",
            n.name
        );
        assert_eq!(sh(n, "systemctl is-active crio"), "active");
        let have = stored(n, &names);
        // Exactly the role's images of the current version, each with the bundle's digest.
        assert_eq!(&have, want, "{}: containers-storage", n.name);
    }

    // A second `up` loads nothing.
    let again = up();
    let o = again.all();
    assert_eq!(again.code, 0, "{o}");
    assert!(
        !o.contains("airgap/images: load") && o.contains("is up to date; nothing changed"),
        "second up changed something:\n{o}"
    );
}
