//! Loading images into a node runtime through the `Transport` contract: the exec crate's
//! `LocalTransport` against a real containerd started here (temp root, state and socket), with the
//! archive streamed by `upload_stream` and imported by `ctr -n k8s.io images import`.

use crate::common;

use clusterctl_airgap::bundle::verify_bundle;
use clusterctl_airgap::import::ImportState;
use clusterctl_airgap::node::{load_into_node, NodeLoadOptions, Runtime};
use clusterctl_airgap::pull::{pull_images, ImageRequest, PullOptions};
use clusterctl_airgap::registry::{ClientOptions, RegistryClient};
use clusterctl_airgap::store::BlobStore;
use clusterctl_airgap::ImageRef;
use clusterctl_exec::LocalTransport;
use clusterctl_testbed::registry::Registry;
use clusterctl_testbed::require;
use common::containerd::Containerd;
use common::*;

#[test]
fn ctr_imports_images_streamed_over_the_transport() {
    if !require(
        "docker-registry, skopeo, containerd and root",
        peers_available() && common::containerd::available(),
    ) {
        return;
    }
    let reg = Registry::start().expect("registry");
    let fx = fill(&reg, 44, 2, 64 << 10, 32 << 10);
    let ctrd = Containerd::start();
    let work = scratch("cc-airgap-ctr-");
    let reqs: Vec<ImageRequest> = fx
        .images
        .iter()
        .map(|(n, _)| {
            let source = ImageRef::parse(&format!("registry.fixture.test/{n}")).expect("ref");
            ImageRequest {
                mirror: source
                    .under_prefix("mirror.site.test/library")
                    .expect("mirror"),
                source,
            }
        })
        .collect();
    let client = RegistryClient::new(ClientOptions::default()).expect("client");
    let store = BlobStore::open(work.path().join("cache")).expect("store");
    let opts = PullOptions {
        registry_overrides: vec![("registry.fixture.test".into(), reg.addr().into())],
        platforms: vec![clusterctl_airgap::oci::Platform::parse("linux/amd64").expect("p")],
        ..Default::default()
    };
    let (images, _) = pull_images(&client, &store, &reqs, &opts).expect("pull");
    std::fs::write(work.path().join("kubeadm.deb"), b"kubeadm package bytes").expect("pkg");
    std::fs::write(
        work.path().join("clusterctl"),
        b"#!/bin/sh\necho clusterctl\n",
    )
    .expect("bin");
    let pkg = clusterctl_airgap::bundle::PreparedFile::from_path(
        "kubeadm",
        "packages/debian-amd64/kubeadm.deb",
        &work.path().join("kubeadm.deb"),
        0o644,
        Some("debian".into()),
        Some("amd64".into()),
    )
    .expect("pkg");
    let bin =
        clusterctl_airgap::packages::self_binary(&work.path().join("clusterctl")).expect("bin");
    let out = work.path().join("site.tar");
    let input = clusterctl_airgap::bundle::BundleInput {
        cluster: "c".into(),
        kubernetes_version: "v1.34.1".into(),
        extra_versions: vec![],
        platforms: vec![],
        images,
        packages: vec![pkg],
        binaries: vec![bin],
        upstream: vec![],
    };
    clusterctl_airgap::bundle::write_bundle(&out, &store, &input).expect("bundle");
    let vb = verify_bundle(&out).expect("verify");

    let node = LocalTransport::new("n1");
    let remote_dir = work.path().join("node-dir");
    let lopts = NodeLoadOptions {
        runtime: Runtime::Containerd { ctr: ctrd.ctr() },
        remote_dir: remote_dir.display().to_string(),
    };
    let mut state = ImportState::default();
    let r = load_into_node(&node, &vb, &vb.manifest.images, &lopts, &mut state).expect("load");
    assert_eq!(r.loaded, vb.manifest.images.len());
    assert!(r.bytes > 0);
    let listed = std::process::Command::new("ctr")
        .args(["--address", &ctrd.socket(), "-n", "k8s.io", "images", "ls"])
        .output()
        .expect("ctr ls");
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    for img in &vb.manifest.images {
        let line = listed
            .lines()
            .find(|l| l.starts_with(&format!("{} ", img.mirror)))
            .unwrap_or_else(|| panic!("{} not in ctr images ls:\n{listed}", img.mirror));
        assert!(line.contains(&img.digest.to_string()), "{line}");
    }
    // The archive was removed from the node, and a second run loads nothing.
    assert_eq!(
        std::fs::read_dir(&remote_dir)
            .map(|d| d.count())
            .unwrap_or(0),
        0
    );
    let again =
        load_into_node(&node, &vb, &vb.manifest.images, &lopts, &mut state).expect("second load");
    assert_eq!((again.loaded, again.skipped), (0, vb.manifest.images.len()));

    // Packages and binaries for this node's OS family and arch are streamed to it as files.
    let dir = work.path().join("node-files");
    let written = clusterctl_airgap::node::upload_packages(
        &node,
        &vb,
        "debian",
        "amd64",
        &dir.display().to_string(),
        "v1.34.1",
    )
    .expect("packages");
    assert_eq!(written.len(), 2, "{written:?}");
    assert_eq!(
        std::fs::read(dir.join("packages/kubeadm.deb")).expect("package on node"),
        b"kubeadm package bytes"
    );
    assert_eq!(
        std::fs::read(dir.join("bin/clusterctl")).expect("binary on node"),
        b"#!/bin/sh\necho clusterctl\n"
    );
    let none = clusterctl_airgap::node::upload_packages(
        &node,
        &vb,
        "rhel",
        "amd64",
        &work.path().join("rhel").display().to_string(),
        "v1.34.1",
    )
    .expect("rhel");
    assert_eq!(
        none.len(),
        1,
        "only the binary for another OS family: {none:?}"
    );
}
