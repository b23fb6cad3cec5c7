//! Tampered bundles are refused before anything is sent: a flipped byte in a blob, in the bundle
//! manifest or in a package, a truncated file, and entries with unsafe paths or links. Each error
//! names the entry, and the target registry (a real loopback `docker-registry`) receives no write.

use crate::common;

use clusterctl_airgap::bundle::{verify_bundle, write_bundle};
use clusterctl_airgap::run::{import_bundle, ImportOptions};
use clusterctl_airgap::Digest;
use clusterctl_testbed::registry::Registry;
use clusterctl_testbed::require;
use common::*;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A bundle with two images sharing a base layer and one package, written straight from a store.
fn good_bundle(dir: &Path) -> PathBuf {
    let (store, input) = stored_input(
        dir,
        &Stored {
            seed: 7,
            cluster: "t",
            images: 2,
            repo: "tamper",
            name: "t",
            mirror: "mirror.site.test/library",
            layer_sizes: (64 << 10, 16 << 10),
            package: (
                "kubeadm",
                "packages/debian-amd64/kubeadm_1.34.1_amd64.deb",
                "debian",
                10_000,
            ),
        },
    );
    let out = dir.join("good.tar");
    write_bundle(&out, &store, &input).expect("write");
    out
}

fn flip_at(src: &Path, dst: &Path, offset: u64) {
    std::fs::copy(src, dst).expect("copy");
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dst)
        .expect("open");
    f.seek(SeekFrom::Start(offset)).expect("seek");
    let mut b = [0u8; 1];
    std::io::Read::read_exact(&mut f, &mut b).expect("read");
    f.seek(SeekFrom::Start(offset)).expect("seek");
    f.write_all(&[b[0] ^ 0x01]).expect("write");
}

/// A raw tar whose entries are (name bytes, type, link target, data), written with hand-set names
/// so that unsafe names the tar crate would refuse to build still end up in the file.
/// (name, type, link target, data) of one raw tar entry.
type RawEntry<'a> = (&'a [u8], tar::EntryType, &'a [u8], &'a [u8]);

fn raw_tar(dst: &Path, entries: &[RawEntry]) {
    let mut out = Vec::new();
    for (name, kind, link, data) in entries {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(*kind);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.extend_from_slice(&[0u8; 1024]);
    std::fs::write(dst, out).expect("write tar");
}

fn assert_refused(reg: &Registry, bundle: &Path, must_name: &str) {
    let opts = ImportOptions {
        mirror_prefix: Some(format!("{}/site", reg.addr())),
        state: Some(bundle.with_extension("state.json")),
        ..Default::default()
    };
    let err = import_bundle(bundle, &opts).expect_err("tampered bundle must be refused");
    let msg = err.to_string();
    assert!(
        msg.contains(must_name),
        "error {msg:?} should name {must_name:?}"
    );
    assert!(is_bundle_refusal(&err), "{err:?}");
    assert_eq!(reg.blob_count(), 0, "nothing stored");
    for m in ["PUT", "POST", "PATCH"] {
        assert_eq!(
            reg.count_requests(m, "/v2/"),
            0,
            "no {m} reached the registry"
        );
    }
}

#[test]
fn tampered_bundles_change_nothing() {
    if !require("docker-registry", clusterctl_testbed::registry::available()) {
        return;
    }
    let reg = Registry::start().expect("registry");
    let work = scratch("cc-airgap-tamper-");
    let good = good_bundle(work.path());
    let vb = verify_bundle(&good).expect("the untampered bundle verifies");
    assert_eq!(vb.manifest.packages.len(), 1);

    // A flipped byte in a layer blob.
    let (blob_name, blob) = vb
        .entries
        .iter()
        .filter(|(n, _)| n.starts_with("oci/blobs/"))
        .max_by_key(|(_, l)| l.size)
        .expect("a blob");
    let t = work.path().join("blob.tar");
    flip_at(&good, &t, blob.offset + blob.size / 2);
    assert_refused(&reg, &t, blob_name);

    // In the bundle manifest.
    let m = &vb.entries["manifest.json"];
    let t = work.path().join("manifest.tar");
    flip_at(&good, &t, m.offset + 3);
    assert_refused(&reg, &t, "manifest.json");

    // In a package.
    let p = &vb.manifest.packages[0].path;
    let t = work.path().join("package.tar");
    flip_at(&good, &t, vb.entries[p].offset + 100);
    assert_refused(&reg, &t, p);

    // Truncated in the middle of the largest blob.
    let t = work.path().join("truncated.tar");
    std::fs::copy(&good, &t).expect("copy");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&t)
        .expect("open")
        .set_len(blob.offset + blob.size / 3)
        .expect("truncate");
    assert_refused(&reg, &t, blob_name);

    // Truncated at an entry boundary (whole entries missing).
    let t = work.path().join("short.tar");
    std::fs::copy(&good, &t).expect("copy");
    let last_start = vb
        .entries
        .values()
        .map(|l| l.offset)
        .max()
        .expect("entries")
        - 512;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&t)
        .expect("open")
        .set_len(last_start)
        .expect("truncate");
    assert_refused(&reg, &t, "missing");

    // Path traversal, absolute paths and links, each listed correctly in SHA256SUMS.
    let data = b"evil";
    let hex = Digest::of(data).hex().to_string();
    for (name, kind, link) in [
        (&b"../evil"[..], tar::EntryType::Regular, &b""[..]),
        (&b"/etc/evil"[..], tar::EntryType::Regular, &b""[..]),
        (
            &b"oci/x/../../../evil"[..],
            tar::EntryType::Regular,
            &b""[..],
        ),
        (
            &b"oci/link"[..],
            tar::EntryType::Symlink,
            &b"/etc/passwd"[..],
        ),
        (
            &b"oci/hard"[..],
            tar::EntryType::Link,
            &b"../../etc/passwd"[..],
        ),
    ] {
        let shown = String::from_utf8_lossy(name).into_owned();
        let sums = format!("{hex}  oci/ok\n");
        let t = work.path().join("unsafe.tar");
        raw_tar(
            &t,
            &[
                (b"SHA256SUMS", tar::EntryType::Regular, b"", sums.as_bytes()),
                (name, kind, link, data),
            ],
        );
        assert_refused(&reg, &t, &shown);
    }
    // An unsafe path inside the checksum list itself.
    let t = work.path().join("unsafe-sums.tar");
    let sums = format!("{hex}  ../../evil\n");
    raw_tar(
        &t,
        &[(b"SHA256SUMS", tar::EntryType::Regular, b"", sums.as_bytes())],
    );
    assert_refused(&reg, &t, "../../evil");

    // And the good bundle does import afterwards.
    let opts = ImportOptions {
        mirror_prefix: Some(format!("{}/site", reg.addr())),
        state: Some(work.path().join("good.state")),
        ..Default::default()
    };
    let (_, report) = import_bundle(&good, &opts).expect("good import");
    assert_eq!(report.images_pushed, 2);
    assert!(reg.blob_count() > 0);

    // Importing the same unchanged file again: the record's full verification of this very file
    // holds, the registry serves both images, nothing is written.
    let writes = |reg: &Registry| -> usize {
        ["PUT", "POST", "PATCH"]
            .iter()
            .map(|m| reg.count_requests(m, "/v2/"))
            .sum()
    };
    let before = writes(&reg);
    let (_, again) = import_bundle(&good, &opts).expect("second import");
    assert_eq!((again.images_skipped, again.images_pushed), (2, 0));
    assert_eq!(writes(&reg), before);

    // The same file changed in place (same size, mtime set back): verified in full again and
    // refused, naming the entry; still nothing written.
    let vb = clusterctl_airgap::bundle::verify_bundle(&good).expect("verifies");
    let (name, loc) = vb
        .entries
        .iter()
        .filter(|(n, _)| n.starts_with("oci/blobs/"))
        .max_by_key(|(_, l)| l.size)
        .map(|(n, l)| (n.clone(), l.clone()))
        .expect("a blob");
    let mtime = std::fs::metadata(&good)
        .and_then(|m| m.modified())
        .expect("mtime")
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    let mut bytes = std::fs::read(&good).expect("read");
    bytes[loc.offset as usize + 3] ^= 0x08;
    std::fs::write(&good, &bytes).expect("write in place");
    let st = std::process::Command::new("touch")
        .arg("-d")
        .arg(format!("@{}.{:09}", mtime.as_secs(), mtime.subsec_nanos()))
        .arg(&good)
        .status()
        .expect("touch");
    assert!(st.success());
    let err = import_bundle(&good, &opts).expect_err("changed bundle must be verified again");
    assert!(err.to_string().contains(&name), "{err}");
    assert_eq!(writes(&reg), before);
}
