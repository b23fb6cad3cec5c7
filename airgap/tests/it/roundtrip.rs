//! End to end against real peers: a loopback `docker-registry` filled (by skopeo) with images built
//! here, bundled through our client, imported into a second registry instance, and read back by
//! skopeo; plus resume and byte-for-byte determinism.

use crate::common;

use clusterctl_airgap::bundle::{verify_bundle, write_bundle, BundleInput};
use clusterctl_airgap::import::{import_to_registry, ImportState, RegistryImportOptions};
use clusterctl_airgap::oci::Platform;
use clusterctl_airgap::pull::{pull_images, ImageRequest, PullOptions};
use clusterctl_airgap::registry::{ClientOptions, RegistryClient};
use clusterctl_airgap::store::BlobStore;
use clusterctl_airgap::{Digest, ImageRef};
use clusterctl_testbed::registry::Registry;
use clusterctl_testbed::require;
use common::*;
use std::path::Path;

const UPSTREAM: &str = "registry.fixture.test";

/// Requests for every fixture image as if it came from `UPSTREAM`, mirrored under `mirror`, plus
/// the multi-platform index pinned by digest.
fn fixture_requests(fx: &Fixture, mirror: &str) -> Vec<ImageRequest> {
    let mut out: Vec<ImageRequest> = fx
        .images
        .iter()
        .map(|(name, _)| {
            let source = ImageRef::parse(&format!("{UPSTREAM}/{name}")).expect("ref");
            ImageRequest {
                mirror: source.under_prefix(mirror).expect("mirror"),
                source,
            }
        })
        .collect();
    let pinned =
        ImageRef::parse(&format!("{UPSTREAM}/fixture/pinned@{}", fx.multi_index)).expect("ref");
    // The pinned reference lives in the registry under fixture/multi; fetch it from there.
    let pinned_src =
        ImageRef::parse(&format!("{UPSTREAM}/fixture/multi@{}", fx.multi_index)).expect("ref");
    out.push(ImageRequest {
        mirror: pinned.under_prefix(mirror).expect("mirror"),
        source: pinned_src,
    });
    out
}

fn pull_opts(reg: &Registry) -> PullOptions {
    PullOptions {
        platforms: vec![Platform::parse("linux/amd64").expect("platform")],
        jobs: 3,
        retries: 1,
        registry_overrides: vec![(UPSTREAM.to_string(), reg.addr().to_string())],
        progress: false,
    }
}

fn input(images: Vec<clusterctl_airgap::pull::PulledImage>) -> BundleInput {
    BundleInput {
        cluster: "fixture".into(),
        kubernetes_version: "v1.34.1".into(),
        extra_versions: vec![],
        platforms: vec!["linux/amd64".into()],
        images,
        packages: vec![],
        binaries: vec![],
        upstream: vec![],
    }
}

fn make_bundle(
    reg: &Registry,
    fx: &Fixture,
    cache: &Path,
    out: &Path,
) -> clusterctl_airgap::bundle::BundleSummary {
    let client = RegistryClient::new(ClientOptions::default()).expect("client");
    let store = BlobStore::open(cache).expect("store");
    let (images, _) = pull_images(
        &client,
        &store,
        &fixture_requests(fx, "mirror.site.test/library"),
        &pull_opts(reg),
    )
    .expect("pull");
    write_bundle(out, &store, &input(images)).expect("write bundle")
}

#[test]
fn bundle_imports_into_second_registry_with_same_digests() {
    if !require("docker-registry and skopeo", peers_available()) {
        return;
    }
    let a = Registry::start().expect("registry A");
    let b = Registry::start().expect("registry B");
    let fx = fill(&a, 11, 4, 512 << 10, 128 << 10);
    let work = scratch("cc-airgap-rt-");
    let out = work.path().join("site.tar");
    let summary = make_bundle(&a, &fx, &work.path().join("cache"), &out);
    assert_eq!(summary.manifest.images.len(), fx.images.len() + 1);

    // Single-platform images keep their digest; the tag-referenced index is narrowed to amd64; the
    // digest-pinned index is kept whole.
    for img in &summary.manifest.images {
        let expected = fx
            .images
            .iter()
            .find(|(n, _)| img.source.ends_with(n.as_str()))
            .map(|(_, d)| d.clone());
        if img.source.contains("fixture/multi:") {
            assert_ne!(
                img.digest, fx.multi_index,
                "narrowed index gets a new digest"
            );
            assert_eq!(img.source_digest, fx.multi_index);
            assert_eq!(img.platforms, vec!["linux/amd64".to_string()]);
        } else if img.source.contains('@') {
            assert_eq!(img.digest, fx.multi_index, "pinned index kept whole");
            assert_eq!(img.platforms.len(), 2);
        } else {
            assert_eq!(Some(img.digest.clone()), expected, "{}", img.source);
        }
    }

    let vb = verify_bundle(&out).expect("verify");
    let client = RegistryClient::new(ClientOptions::default()).expect("client");
    let prefix = format!("{}/site", b.addr());
    let opts = RegistryImportOptions {
        mirror_prefix: Some(prefix.clone()),
        jobs: 3,
    };
    let mut state = ImportState::default();
    let first = import_to_registry(&client, &vb, &opts, &mut state).expect("import");
    assert_eq!(first.images_pushed, vb.manifest.images.len());
    assert!(first.blobs_uploaded > 0);
    assert!(
        first.blobs_mounted > 0,
        "shared base layer mounted across repositories: {first:?}"
    );

    // Registry B serves every image under the mirror prefix with the bundle's digest, and skopeo
    // (an independent client) agrees.
    for img in &vb.manifest.images {
        let target = ImageRef::parse(&img.source)
            .expect("ref")
            .under_prefix(&prefix)
            .expect("prefix");
        let got = client
            .head_manifest(
                &target.registry,
                &target.repository,
                &target.tag.clone().unwrap_or_else(|| img.digest.to_string()),
            )
            .expect("head");
        assert_eq!(got.as_ref(), Some(&img.digest), "{target}");
        let insp = skopeo(&[
            "inspect",
            "--raw",
            "--tls-verify=false",
            &format!("docker://{target}"),
        ]);
        assert_eq!(
            Digest::of(insp.as_bytes()),
            img.digest,
            "skopeo sees {target}"
        );
    }
    // The pinned index is complete in B (both platforms): skopeo copies all of it.
    let pinned = vb
        .manifest
        .images
        .iter()
        .find(|i| i.source.contains('@'))
        .expect("pinned");
    let target = ImageRef::parse(&pinned.source)
        .expect("ref")
        .under_prefix(&prefix)
        .expect("prefix");
    let dir = work.path().join("pinned-copy");
    skopeo(&[
        "copy",
        "--all",
        "--quiet",
        "--src-tls-verify=false",
        &format!("docker://{target}"),
        &format!("dir:{}", dir.display()),
    ]);
    assert!(
        dir.join(fx.multi_amd64.hex()).exists()
            || std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0) > 4
    );

    // A second import uploads nothing.
    let puts_before = b.count_requests("PUT", "/blobs/uploads/");
    let blobs_before = b.blob_count();
    let second = import_to_registry(&client, &vb, &opts, &mut state).expect("second import");
    assert_eq!(second.blobs_uploaded, 0);
    assert_eq!(second.images_skipped, vb.manifest.images.len());
    assert_eq!(b.count_requests("PUT", "/blobs/uploads/"), puts_before);
    assert_eq!(b.blob_count(), blobs_before);

    // Even without the record, a re-import only HEADs: the registry has every blob.
    let mut fresh = ImportState::default();
    let third = import_to_registry(&client, &vb, &opts, &mut fresh).expect("third import");
    assert_eq!(third.blobs_uploaded, 0);
    assert!(third.blobs_present > 0);
}

#[test]
fn skopeo_reads_the_bundle_oci_layout() {
    if !require("docker-registry and skopeo", peers_available()) {
        return;
    }
    let a = Registry::start().expect("registry");
    let fx = fill(&a, 22, 2, 64 << 10, 32 << 10);
    let work = scratch("cc-airgap-sk-");
    let out = work.path().join("site.tar");
    let summary = make_bundle(&a, &fx, &work.path().join("cache"), &out);
    let ex = work.path().join("x");
    std::fs::create_dir_all(&ex).expect("mkdir");
    tar::Archive::new(std::fs::File::open(&out).expect("open"))
        .unpack(&ex)
        .expect("unpack");
    let layout = ex.join("oci");
    for img in &summary.manifest.images {
        let name = clusterctl_airgap::bundle::write::layout_name(img);
        let raw = skopeo(&[
            "inspect",
            "--raw",
            &format!("oci:{}:{name}", layout.display()),
        ]);
        assert_eq!(Digest::of(raw.as_bytes()), img.digest, "{name}");
        let dest = work.path().join(format!("copy-{}", img.digest.hex()));
        skopeo(&[
            "copy",
            "--quiet",
            &format!("oci:{}:{name}", layout.display()),
            &format!("dir:{}", dest.display()),
        ]);
        assert!(dest.join("manifest.json").exists());
    }
    // The checksum list is in sha256sum format and holds for the unpacked tree.
    let out = std::process::Command::new("sha256sum")
        .arg("-c")
        .arg("--quiet")
        .arg("SHA256SUMS")
        .current_dir(&ex)
        .output()
        .expect("sha256sum");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn same_inputs_same_bytes_and_interrupted_run_resumes() {
    if !require("docker-registry and skopeo", peers_available()) {
        return;
    }
    let a = Registry::start().expect("registry");
    let fx = fill(&a, 33, 3, 128 << 10, 64 << 10);
    let work = scratch("cc-airgap-res-");
    let clean = work.path().join("clean.tar");
    make_bundle(&a, &fx, &work.path().join("cache-clean"), &clean);

    // Interrupt: one layer disappears from the registry mid-way, so the first run fails naming it.
    let client = RegistryClient::new(ClientOptions::default()).expect("client");
    let cache = work.path().join("cache");
    let store = BlobStore::open(&cache).expect("store");
    let reqs = fixture_requests(&fx, "mirror.site.test/library");
    let vb = verify_bundle(&clean).expect("verify clean");
    let victim = vb
        .manifest
        .images
        .iter()
        .find(|i| i.source.contains("app2"))
        .expect("app2");
    let layers = vb
        .blobs_of(&victim.digest, &victim.media_type)
        .expect("blobs");
    let own = layers.last().expect("a layer").clone();
    let data = a
        .storage()
        .join("docker/registry/v2/blobs/sha256")
        .join(&own.hex()[..2])
        .join(own.hex())
        .join("data");
    let saved = std::fs::read(&data).expect("read victim blob");
    std::fs::remove_file(&data).expect("remove victim");
    let err = pull_images(&client, &store, &reqs, &pull_opts(&a)).expect_err("interrupted");
    assert!(
        err.to_string().contains("blobs/") || err.to_string().contains(own.hex()),
        "{err}"
    );
    assert!(!store.has(&own, None));
    std::fs::write(&data, saved).expect("restore");

    let (images, stats) = pull_images(&client, &store, &reqs, &pull_opts(&a)).expect("resumed");
    assert!(
        stats.blobs_cached > 0,
        "resume reused fetched blobs: {stats:?}"
    );
    assert_eq!(
        stats.blobs_fetched, 1,
        "only the blob that failed is fetched again: {stats:?}"
    );
    let resumed = work.path().join("resumed.tar");
    write_bundle(&resumed, &store, &input(images)).expect("write");
    assert_eq!(
        std::fs::read(&clean).expect("clean"),
        std::fs::read(&resumed).expect("resumed"),
        "same inputs, same bytes"
    );

    // A third run fetches nothing.
    let (_, stats) = pull_images(&client, &store, &reqs, &pull_opts(&a)).expect("third");
    assert_eq!(stats.blobs_fetched, 0);
}
