//! A bundle input written straight from a blob store, without a registry: images sharing one base
//! layer and one package, for the tests that damage or lie about a bundle (`tamper.rs`, `hostile.rs`).

use super::{image, layer, Rng};
use clusterctl_airgap::bundle::{BundleInput, PreparedFile};
use clusterctl_airgap::pull::PulledImage;
use clusterctl_airgap::store::BlobStore;
use clusterctl_airgap::ImageRef;
use std::path::Path;

/// What [`stored_input`] builds.
pub(crate) struct Stored<'a> {
    /// Seed of the random bytes.
    pub seed: u64,
    /// Cluster name in the manifest.
    pub cluster: &'a str,
    /// Number of images; image `i` is `registry.fixture.test/<repo>/<tag_prefix><i>:v1`.
    pub images: usize,
    /// Repository path under the fixture registry, e.g. `tamper`.
    pub repo: &'a str,
    /// Image name prefix, e.g. `t`.
    pub name: &'a str,
    /// Mirror prefix, e.g. `mirror.site.test/library`.
    pub mirror: &'a str,
    /// Size of the shared base layer's file and of each image's own layer file, in bytes.
    pub layer_sizes: (usize, usize),
    /// The package: (name, path in the bundle, OS family, size in bytes).
    pub package: (&'a str, &'a str, &'a str, usize),
}

/// The store (at `<dir>/cache`) and the bundle input `s` describes; the package file is written to
/// `dir` under its file name. Panics on I/O errors (tests only).
pub(crate) fn stored_input(dir: &Path, s: &Stored) -> (BlobStore, BundleInput) {
    let store = BlobStore::open(dir.join("cache")).expect("store");
    let mut rng = Rng(s.seed);
    let base = layer(&mut rng, "base.bin", s.layer_sizes.0);
    let mut images = Vec::new();
    for i in 0..s.images {
        let img = image(
            &[base.clone(), layer(&mut rng, "own.bin", s.layer_sizes.1)],
            "amd64",
            &format!("{}{i}", s.name),
        );
        store.put(&img.manifest.bytes).expect("put");
        let mut blobs = vec![img.manifest.digest.clone()];
        for b in &img.blobs {
            store.put(&b.bytes).expect("put");
            blobs.push(b.digest.clone());
        }
        blobs.sort();
        let source = ImageRef::parse(&format!(
            "registry.fixture.test/{}/{}{i}:v1",
            s.repo, s.name
        ))
        .expect("ref");
        images.push(PulledImage {
            mirror: source.under_prefix(s.mirror).expect("mirror"),
            source,
            digest: img.manifest.digest.clone(),
            source_digest: img.manifest.digest.clone(),
            media_type: img.manifest.media_type.clone(),
            size: img.manifest.bytes.len() as u64,
            platforms: vec![],
            blobs,
        });
    }
    let (name, path, os, size) = s.package;
    let file = path.rsplit('/').next().unwrap_or(path);
    let pkg = dir.join(file);
    std::fs::write(&pkg, rng.bytes(size)).expect("pkg");
    let prepared = PreparedFile::from_path(
        name,
        path,
        &pkg,
        0o644,
        Some(os.into()),
        Some("amd64".into()),
    )
    .expect("prep");
    let input = BundleInput {
        cluster: s.cluster.into(),
        kubernetes_version: "v1.34.1".into(),
        extra_versions: vec![],
        platforms: vec![],
        images,
        packages: vec![prepared],
        binaries: vec![],
        upstream: vec![],
    };
    (store, input)
}
