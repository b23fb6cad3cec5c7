//! Test fixtures for the air-gap tests: OCI images built from random bytes by the test bed
//! (`clusterctl_testbed::registry`: gzip'd tar layers, configs with correct `diff_ids`, OCI
//! manifests, a two-platform index; here with typed digests), written as an OCI layout and pushed
//! into a loopback `docker-registry` with `skopeo copy`.

#![allow(dead_code)]

pub(crate) mod containerd;
pub(crate) mod stored;

#[allow(unused_imports)] // not every test binary uses them
pub(crate) use stored::{stored_input, Stored};

use clusterctl_airgap::digest::Digest;
use clusterctl_testbed::registry::Registry;
use std::path::{Path, PathBuf};
use std::process::Command;

use clusterctl_testbed::registry as tb;
pub(crate) use clusterctl_testbed::registry::Rng;

/// A blob with its descriptor facts (the test bed's [`tb::TestBlob`] with typed digests).
#[derive(Clone, Debug)]
pub(crate) struct Blob {
    pub bytes: Vec<u8>,
    pub digest: Digest,
    pub media_type: String,
    /// sha256 of the uncompressed tar (layers only).
    pub diff_id: Option<Digest>,
}

impl Blob {
    pub(crate) fn desc(&self) -> serde_json::Value {
        serde_json::json!({"mediaType": self.media_type, "digest": self.digest.to_string(), "size": self.bytes.len()})
    }
    fn from_tb(b: tb::TestBlob) -> Blob {
        Blob {
            digest: Digest::parse(&b.digest).expect("digest"),
            bytes: b.bytes,
            media_type: b.media_type,
            diff_id: b.diff_id.map(|d| Digest::parse(&d).expect("diff_id")),
        }
    }
    fn to_tb(&self) -> tb::TestBlob {
        tb::TestBlob {
            bytes: self.bytes.clone(),
            digest: self.digest.to_string(),
            media_type: self.media_type.clone(),
            diff_id: self.diff_id.as_ref().map(|d| d.to_string()),
        }
    }
}

/// A gzip'd tar layer holding one file of `size` random bytes.
pub(crate) fn layer(rng: &mut Rng, name: &str, size: usize) -> Blob {
    Blob::from_tb(tb::layer(rng, name, size).expect("layer in memory"))
}

/// An image: manifest bytes and the blobs it needs.
#[derive(Clone, Debug)]
pub(crate) struct Image {
    pub manifest: Blob,
    pub blobs: Vec<Blob>,
    pub arch: String,
}

impl Image {
    fn to_tb(&self) -> tb::TestImage {
        tb::TestImage {
            manifest: self.manifest.to_tb(),
            blobs: self.blobs.iter().map(Blob::to_tb).collect(),
            arch: self.arch.clone(),
        }
    }
}

pub(crate) fn image(layers: &[Blob], arch: &str, label: &str) -> Image {
    let layers: Vec<tb::TestBlob> = layers.iter().map(Blob::to_tb).collect();
    let i = tb::image(&layers, arch, label);
    Image {
        manifest: Blob::from_tb(i.manifest),
        blobs: i.blobs.into_iter().map(Blob::from_tb).collect(),
        arch: i.arch,
    }
}

/// An index over `images` with their platforms.
pub(crate) fn index(images: &[Image]) -> Blob {
    let images: Vec<tb::TestImage> = images.iter().map(Image::to_tb).collect();
    Blob::from_tb(tb::index(&images))
}

/// What the fixture registry holds.
pub(crate) struct Fixture {
    /// (repository:tag, top digest) for every image pushed.
    pub images: Vec<(String, Digest)>,
    /// Digest of the two-platform index `fixture/multi:v1`.
    pub multi_index: Digest,
    /// The amd64 child of the index.
    pub multi_amd64: Digest,
    /// Sum of the sizes of all distinct blobs (manifests, configs, layers, the index).
    pub unique_bytes: u64,
    pub dir: tempfile::TempDir,
}

fn write_blob(dir: &Path, b: &Blob) {
    let p = dir.join("blobs/sha256").join(b.digest.hex());
    std::fs::write(p, &b.bytes).expect("write blob");
}

/// Builds `n_apps` images sharing one base layer (`base_size` bytes, each app adding `app_size`),
/// plus `fixture/multi:v1` (amd64 + arm64), as an OCI layout; pushes them into `reg` with skopeo.
pub(crate) fn fill(
    reg: &Registry,
    seed: u64,
    n_apps: usize,
    base_size: usize,
    app_size: usize,
) -> Fixture {
    let dir = tempfile::Builder::new()
        .prefix("cc-fixture-")
        .tempdir()
        .expect("tempdir");
    let layout = dir.path().join("layout");
    std::fs::create_dir_all(layout.join("blobs/sha256")).expect("mkdir");
    std::fs::write(
        layout.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .expect("write");
    let mut rng = Rng(seed | 1);
    let base = layer(&mut rng, "base/lib.bin", base_size);
    let mut entries = Vec::new();
    let mut all: std::collections::BTreeMap<Digest, u64> = Default::default();
    let mut record = |b: &Blob| {
        all.insert(b.digest.clone(), b.bytes.len() as u64);
        write_blob(&layout, b);
    };
    let mut pushed = Vec::new();
    for i in 0..n_apps {
        let own = layer(&mut rng, &format!("app/{i}.bin"), app_size);
        let img = image(&[base.clone(), own], "amd64", &format!("app{i}"));
        record(&img.manifest);
        img.blobs.iter().for_each(&mut record);
        let name = format!("fixture/app{i}:v1");
        entries.push(serde_json::json!({"mediaType": img.manifest.media_type, "digest": img.manifest.digest.to_string(), "size": img.manifest.bytes.len(), "annotations": {"org.opencontainers.image.ref.name": name}}));
        pushed.push((name, img.manifest.digest.clone()));
    }
    let amd = image(
        &[base.clone(), layer(&mut rng, "multi/amd64.bin", app_size)],
        "amd64",
        "multi-amd64",
    );
    let arm = image(
        &[
            layer(&mut rng, "multi/arm64-base.bin", app_size),
            layer(&mut rng, "multi/arm64.bin", app_size),
        ],
        "arm64",
        "multi-arm64",
    );
    for img in [&amd, &arm] {
        record(&img.manifest);
        img.blobs.iter().for_each(&mut record);
    }
    let idx = index(&[amd.clone(), arm.clone()]);
    record(&idx);
    entries.push(serde_json::json!({"mediaType": idx.media_type, "digest": idx.digest.to_string(), "size": idx.bytes.len(), "annotations": {"org.opencontainers.image.ref.name": "fixture/multi:v1"}}));
    pushed.push(("fixture/multi:v1".to_string(), idx.digest.clone()));
    std::fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "manifests": entries}))
            .expect("json"),
    )
    .expect("write");
    for (name, _) in &pushed {
        skopeo(&[
            "copy",
            "--all",
            "--preserve-digests",
            "--quiet",
            "--dest-tls-verify=false",
            &format!("oci:{}:{name}", layout.display()),
            &format!("docker://{}/{name}", reg.addr()),
        ]);
    }
    Fixture {
        images: pushed,
        multi_index: idx.digest,
        multi_amd64: amd.manifest.digest,
        unique_bytes: all.values().sum(),
        dir,
    }
}

/// Runs skopeo with `args`, panicking with its stderr on failure; returns stdout.
pub(crate) fn skopeo(args: &[&str]) -> String {
    let out = Command::new("skopeo")
        .args(args)
        .output()
        .expect("skopeo runs");
    assert!(
        out.status.success(),
        "skopeo {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// True when skopeo and docker-registry are installed.
pub(crate) fn peers_available() -> bool {
    clusterctl_testbed::registry::available() && Path::new("/usr/bin/skopeo").exists()
}

/// A scratch directory for a test.
pub(crate) fn scratch(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("tempdir")
}

pub(crate) fn path_str(p: &Path) -> String {
    p.display().to_string()
}

pub(crate) fn unused(_: PathBuf) {}

/// Whether `err` refuses the bundle itself or one of its entries (unreadable, malformed or not what
/// the manifest says): how a damaged or lying bundle must fail.
pub(crate) fn is_bundle_refusal(err: &clusterctl_airgap::AirgapError) -> bool {
    use clusterctl_airgap::AirgapError as E;
    matches!(
        err,
        E::Entry { .. }
            | E::EntryRead { .. }
            | E::EntryJson { .. }
            | E::Bundle { .. }
            | E::BundleRead { .. }
    )
}
