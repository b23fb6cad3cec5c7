//! CRI-O image loading without CRI-O: `load_into_node` with `Runtime::Crio` runs
//! `skopeo copy oci-archive:FILE:NAME containers-storage:NAME` on a real node container (the test
//! bed's node image, over SSH), and containers-storage is exactly the store CRI-O reads. The node's
//! storage uses the `vfs` driver (overlay on the container's own overlay root does not mount).

use crate::common;

use clusterctl_airgap::bundle::{verify_bundle, BundleImage, VerifiedBundle};
use clusterctl_airgap::import::ImportState;
use clusterctl_airgap::node::{
    crio_images_present, load_into_node, oci_arch, NodeLoadOptions, Runtime,
};
use clusterctl_airgap::pull::{pull_images, ImageRequest, PullOptions};
use clusterctl_airgap::registry::{ClientOptions, RegistryClient};
use clusterctl_airgap::store::BlobStore;
use clusterctl_airgap::ImageRef;
use clusterctl_testbed::docker::{docker_available, TestCluster, TestNode};
use clusterctl_testbed::registry::Registry;
use clusterctl_testbed::{is_root, require};
use common::*;
use std::collections::BTreeSet;

const STORAGE_CONF: &str = "[storage]\ndriver = \"vfs\"\nrunroot = \"/run/containers/storage\"\ngraphroot = \"/var/lib/containers/storage\"\n";

/// A bundle of the fixture: every image by tag (the two-platform index narrowed to linux/amd64)
/// plus the index pinned by tag and digest (kept whole, both platforms).
fn fixture_bundle(work: &std::path::Path, reg: &Registry, fx: &Fixture) -> VerifiedBundle {
    let mut refs: Vec<String> = fx
        .images
        .iter()
        .map(|(n, _)| format!("registry.fixture.test/{n}"))
        .collect();
    refs.push(format!(
        "registry.fixture.test/fixture/multi:pinned@{}",
        fx.multi_index
    ));
    let reqs: Vec<ImageRequest> = refs
        .iter()
        .map(|r| {
            let source = ImageRef::parse(r).expect("ref");
            ImageRequest {
                mirror: source
                    .under_prefix("mirror.site.test/library")
                    .expect("mirror"),
                source,
            }
        })
        .collect();
    let client = RegistryClient::new(ClientOptions::default()).expect("client");
    let store = BlobStore::open(work.join("cache")).expect("store");
    let opts = PullOptions {
        registry_overrides: vec![("registry.fixture.test".into(), reg.addr().into())],
        platforms: vec![clusterctl_airgap::oci::Platform::parse("linux/amd64").expect("p")],
        ..Default::default()
    };
    let (images, _) = pull_images(&client, &store, &reqs, &opts).expect("pull");
    let out = work.join("site.tar");
    let input = clusterctl_airgap::bundle::BundleInput {
        cluster: "c".into(),
        kubernetes_version: "v1.34.1".into(),
        extra_versions: vec![],
        platforms: vec!["linux/amd64".into()],
        images,
        packages: vec![],
        binaries: vec![],
        upstream: vec![],
    };
    clusterctl_airgap::bundle::write_bundle(&out, &store, &input).expect("bundle");
    verify_bundle(&out).expect("verify")
}

fn sh(node: &TestNode, script: &str) -> String {
    node.sh(script)
        .unwrap_or_else(|e| panic!("{script} on {}: {e}", node.name))
}

#[test]
fn skopeo_loads_every_image_into_containers_storage_with_its_digest() {
    if !require(
        "docker, docker-registry, skopeo and root",
        docker_available() && peers_available() && is_root(),
    ) {
        return;
    }
    let cluster = TestCluster::start("ncrio", 1).expect("node container");
    let node = &cluster.nodes[0];
    sh(
        node,
        &format!("mkdir -p /etc/containers && printf '%s' '{STORAGE_CONF}' > /etc/containers/storage.conf"),
    );
    let reg = Registry::start().expect("registry");
    let fx = fill(&reg, 45, 2, 64 << 10, 32 << 10);
    let work = scratch("cc-airgap-crio-");
    let vb = fixture_bundle(work.path(), &reg, &fx);
    let t = node.transport().expect("ssh");
    let arch = oci_arch(&sh(node, "uname -m"));
    let all: BTreeSet<String> = vb
        .manifest
        .images
        .iter()
        .map(|i| i.mirror.clone())
        .collect();
    assert_eq!(all.len(), 4, "{all:?}");
    assert!(
        crio_images_present(&t, &vb, &vb.manifest.images, &arch)
            .expect("check")
            .is_empty(),
        "nothing loaded yet"
    );

    let lopts = NodeLoadOptions {
        runtime: Runtime::Crio,
        ..Default::default()
    };
    let mut state = ImportState::default();
    let r = load_into_node(&t, &vb, &vb.manifest.images, &lopts, &mut state).expect("load");
    assert_eq!(r.loaded, 4);
    assert_eq!(
        sh(node, "ls -A /var/lib/clusterctl/airgap | wc -l"),
        "0",
        "the archive is removed from the node"
    );

    // Checked independently of the code under test: the manifest containers-storage serves for each
    // name, hashed on the node, against the fixture's digests.
    let raw = |r: &str| {
        sh(
            node,
            &format!("skopeo inspect --raw 'containers-storage:{r}' | sha256sum | cut -d' ' -f1"),
        )
    };
    let by_name = |n: &str| {
        vb.manifest
            .images
            .iter()
            .find(|i| i.mirror == format!("mirror.site.test/library/{n}"))
            .unwrap_or_else(|| panic!("{n} in bundle"))
    };
    for (n, d) in &fx.images {
        let img = by_name(n);
        if n == "fixture/multi:v1" {
            // A tagged index: narrowed to linux/amd64 in the bundle; containers-storage holds the
            // amd64 child as the image's manifest, and keeps the (narrowed) index by its digest.
            assert_ne!(&img.digest, d, "the narrowed index has a new digest");
            assert_eq!(
                raw(&img.mirror),
                fx.multi_amd64.hex(),
                "{n}: the amd64 child"
            );
            assert_eq!(
                raw(&format!(
                    "mirror.site.test/library/fixture/multi@{}",
                    img.digest
                )),
                img.digest.hex(),
                "{n}: the narrowed index is kept under its digest"
            );
        } else {
            assert_eq!(&img.digest, d);
            assert_eq!(raw(&img.mirror), d.hex(), "{n}");
        }
    }
    let pinned = by_name(&format!("fixture/multi:pinned@{}", fx.multi_index));
    assert_eq!(pinned.platforms.len(), 2, "the pinned index is kept whole");
    assert_eq!(
        raw(&pinned.mirror),
        fx.multi_index.hex(),
        "the pinned index is served under its own digest"
    );

    // The presence check agrees: every image is there with the right digest.
    assert_eq!(
        crio_images_present(&t, &vb, &vb.manifest.images, &arch).expect("check"),
        all
    );

    // app0:v1 retagged to app1's image (wrong digest), app1 deleted: both reported missing.
    sh(
        node,
        "skopeo copy --quiet containers-storage:mirror.site.test/library/fixture/app1:v1 containers-storage:mirror.site.test/library/fixture/app0:v1 \
         && skopeo delete containers-storage:mirror.site.test/library/fixture/app1:v1",
    );
    let present = crio_images_present(&t, &vb, &vb.manifest.images, &arch).expect("check");
    let missing: Vec<&String> = all.difference(&present).collect();
    assert_eq!(
        missing,
        [
            "mirror.site.test/library/fixture/app0:v1",
            "mirror.site.test/library/fixture/app1:v1"
        ],
        "{present:?}"
    );

    // Loading exactly what is missing (as `airgap/images` does, with no record) restores both.
    let todo: Vec<BundleImage> = vb
        .manifest
        .images
        .iter()
        .filter(|i| !present.contains(&i.mirror))
        .cloned()
        .collect();
    let again =
        load_into_node(&t, &vb, &todo, &lopts, &mut ImportState::default()).expect("reload");
    assert_eq!(again.loaded, 2);
    assert_eq!(
        crio_images_present(&t, &vb, &vb.manifest.images, &arch).expect("check"),
        all
    );
    assert_eq!(
        raw("mirror.site.test/library/fixture/app0:v1"),
        by_name("fixture/app0:v1").digest.hex()
    );
}
