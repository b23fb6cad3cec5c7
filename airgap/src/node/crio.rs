//! Which of a bundle's images a CRI-O node already holds, under the right manifest digest, read from
//! containers-storage (the store CRI-O serves images from) with `skopeo inspect --raw`, in one remote
//! command for all images.
//!
//! What containers-storage stores (checked on the test bed with skopeo 1.9,
//! `airgap/tests/it/node_crio.rs`): `skopeo copy oci-archive:FILE:NAME containers-storage:NAME` of a
//! plain image manifest stores that manifest as the image's primary manifest, so `skopeo inspect
//! --raw containers-storage:NAME` hashes to the bundle's manifest digest. Of an image index it stores
//! the one child for the node's platform as the primary manifest and keeps the index bytes beside it
//! (a `manifest-sha256:<index digest>` item), so the image is also addressable by the index digest:
//! `containers-storage:NAME` then gives the child, and `containers-storage:REPO@<index digest>` (or a
//! pinned `REPO:TAG@<index digest>` name) gives the index itself. (`skopeo copy --all` cannot be
//! used: skopeo 1.9 refuses it with "destination transport containers-storage does not support
//! copying multiple images as a group"; CRI-O runs only the node's platform anyway.)
//!
//! The check therefore expects, per image: for a reference pinned by digest (`…@sha256:…`, which
//! `skopeo inspect` resolves through that digest), the bundle's digest; for a tagged index, the
//! digest of one of the bundle index's children for `linux/<arch>`; otherwise the bundle's manifest
//! digest.

use crate::bundle::{BundleImage, VerifiedBundle};
use crate::digest::Digest;
use crate::error::{AirgapError, Result};
use crate::oci::{is_index, ImageIndex};
use clusterctl_exec::shell::quote;
use clusterctl_exec::{Cmd, Transport};
use std::collections::{BTreeMap, BTreeSet};

/// The manifest digests `skopeo inspect --raw containers-storage:<image.mirror>` may hash to on a
/// node of architecture `arch` (OCI name, e.g. `amd64`) when `image` was loaded from `bundle` (see
/// the module documentation). Errors: the index is missing from the bundle or is not valid JSON.
pub fn expected_digests(
    bundle: &VerifiedBundle,
    image: &BundleImage,
    arch: &str,
) -> Result<BTreeSet<Digest>> {
    if image.mirror.contains('@') || !is_index(&image.media_type) {
        return Ok(BTreeSet::from([image.digest.clone()]));
    }
    let bytes = bundle.read_blob(&image.digest)?;
    let index: ImageIndex =
        serde_json::from_slice(&bytes).map_err(|source| AirgapError::EntryJson {
            entry: crate::bundle::verify::blob_entry(&image.digest),
            source,
        })?;
    Ok(index
        .manifests
        .into_iter()
        .filter(|d| {
            d.platform
                .as_ref()
                .is_some_and(|p| p.os == "linux" && p.architecture == arch)
        })
        .map(|d| d.digest)
        .collect())
}

/// The read-only shell script printing, for every image of `images` that containers-storage holds,
/// one line `<hex sha256 of its manifest> <mirror reference>` (`skopeo inspect --raw
/// containers-storage:<mirror>` into a temp file, then `sha256sum`); images it does not hold print
/// nothing. Exits 0 unless the temp file cannot be made. Run it as root (the store is root's).
pub fn check_script(images: &[BundleImage]) -> String {
    let names: Vec<String> = images.iter().map(|i| quote(&i.mirror)).collect();
    format!(
        "t=$(mktemp) || exit 1; for n in {}; do \
         if skopeo inspect --raw \"containers-storage:$n\" >\"$t\" 2>/dev/null; then \
         printf '%s %s\\n' \"$(sha256sum <\"$t\" | cut -d' ' -f1)\" \"$n\"; fi; done; rm -f \"$t\"",
        names.join(" ")
    )
}

/// Parses [`check_script`]'s output into mirror reference → manifest digest. Lines that do not
/// parse are left out.
pub fn parse_check(out: &str) -> BTreeMap<String, Digest> {
    out.lines()
        .filter_map(|l| {
            let (hex, name) = l.trim().split_once(' ')?;
            Some((name.to_string(), Digest::from_hex(hex)?))
        })
        .collect()
}

/// The mirror references of `images` whose manifest digest in `listing` (from [`parse_check`]) is
/// one of their [`expected_digests`] for `arch`. Errors: as [`expected_digests`].
pub fn present_in(
    bundle: &VerifiedBundle,
    images: &[BundleImage],
    arch: &str,
    listing: &BTreeMap<String, Digest>,
) -> Result<BTreeSet<String>> {
    let mut present = BTreeSet::new();
    for img in images {
        if let Some(d) = listing.get(&img.mirror) {
            if expected_digests(bundle, img, arch)?.contains(d) {
                present.insert(img.mirror.clone());
            }
        }
    }
    Ok(present)
}

/// Lists which of `images` the CRI-O node behind `transport` already holds under the right manifest
/// digest: the mirror references (as in the bundle manifest) of those present. `arch` is the node's
/// OCI architecture (`oci_arch(uname -m)`), which decides the child of a tagged index. One remote
/// command ([`check_script`], run with sudo) for all images.
///
/// Why `skopeo inspect` on containers-storage rather than `crictl images --digests -o json`: it
/// reads the very store CRI-O serves images from (the same `storage.conf`), so it sees exactly what
/// `skopeo copy` loaded; it needs no running CRI-O or CRI socket (it works before `crio` is started
/// and while it restarts); skopeo is already required on the node for loading; and it yields the
/// stored manifest's exact bytes, whose sha256 is the manifest digest, instead of CRI-O's derived
/// `repoDigests` list. It was exercised against real containers-storage on the test bed (CRI-O
/// itself is not packaged for Debian bookworm). If CRI-O is configured with another storage root
/// in `crio.conf` than `storage.conf` gives, both loading and this check use `storage.conf`'s.
///
/// Errors: the command cannot run (`AirgapError::NodeTransport`) or fails (`NodeCommand`), or an index in the bundle does not
/// parse.
pub fn images_present(
    transport: &dyn Transport,
    bundle: &VerifiedBundle,
    images: &[BundleImage],
    arch: &str,
) -> Result<BTreeSet<String>> {
    if images.is_empty() {
        return Ok(BTreeSet::new());
    }
    let out = transport
        .run(&Cmd::new(check_script(images)).sudo())
        .map_err(|source| AirgapError::NodeTransport {
            node: transport.node().to_string(),
            what: None,
            source: Box::new(source),
        })?;
    if !out.success() {
        return Err(AirgapError::NodeCommand {
            node: transport.node().to_string(),
            what: "listing containers-storage",
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    present_in(
        bundle,
        images,
        arch,
        &parse_check(&String::from_utf8_lossy(&out.stdout)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_script_and_its_output() {
        let img = |m: &str| BundleImage {
            source: "registry.k8s.io/pause:3.10.1".into(),
            mirror: m.into(),
            digest: Digest::of(b"x"),
            source_digest: Digest::of(b"x"),
            media_type: crate::oci::OCI_MANIFEST.into(),
            size: 1,
            platforms: vec![],
        };
        let s = check_script(&[img("m.test/a:1"), img("m.test/b'c:2")]);
        assert!(
            s.contains("for n in 'm.test/a:1' 'm.test/b'\\''c:2'; do"),
            "{s}"
        );
        assert!(s.contains("skopeo inspect --raw \"containers-storage:$n\""));
        let d = Digest::of(b"m");
        let out = format!("{} m.test/a:1\ngarbage\nzz m.test/b:2\n", d.hex());
        let parsed = parse_check(&out);
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed.get("m.test/a:1"), Some(&d));
    }
}
