//! Archives among `airgap.packages` with `extractTo`, unpacked on a real node container (the test
//! bed's systemd node image, reached over SSH with the exec crate's `SshTransport`) the way the
//! `airgap/packages` phase does it: each file streamed from the bundle (`upload_file`), each
//! `install_step` check run on the node, and `install_script` run for what the checks found missing.
//! Shown: the archive lands in its directory (root-owned, modes kept), a second run unpacks nothing,
//! a changed archive is unpacked again, and an archive with `../`, absolute, and through-a-symlink
//! members fails the step and leaves nothing outside its directory.

use crate::common;

use clusterctl_airgap::bundle::{
    verify_bundle, write_bundle, BundleInput, PreparedFile, VerifiedBundle,
};
use clusterctl_airgap::node::{
    extract_marker, files_for, install_script, install_step, upload_file, InstallKind, NodeFile,
};
use clusterctl_airgap::store::BlobStore;
use clusterctl_exec::{Cmd, Transport};
use clusterctl_testbed::docker::{docker_available, TestCluster, TestNode};
use clusterctl_testbed::{is_root, require};
use std::collections::BTreeMap;
use std::path::Path;

const REMOTE: &str = "/var/lib/clusterctl/airgap";

/// One tar member: name (written raw, so `../` and `/` names are possible), content or symlink
/// target, mode, and whether it is a directory.
enum Member<'a> {
    File(&'a str, &'a [u8], u32),
    Dir(&'a str),
    Link(&'a str, &'a str),
}

/// A tar archive of `members` (uid/gid 4242, so `--no-same-owner` is visible), gzip'd with the
/// system `gzip -n` unless `plain`.
fn archive(path: &Path, members: &[Member], plain: bool) {
    let mut b = tar::Builder::new(Vec::new());
    for m in members {
        let mut h = tar::Header::new_gnu();
        let (name, data, mode): (&str, &[u8], u32) = match m {
            Member::File(n, d, mode) => {
                h.set_entry_type(tar::EntryType::Regular);
                (n, d, *mode)
            }
            Member::Dir(n) => {
                h.set_entry_type(tar::EntryType::Directory);
                (n, b"", 0o755)
            }
            Member::Link(n, target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_link_name(target).expect("link name");
                (n, b"", 0o777)
            }
        };
        {
            let gnu = h.as_gnu_mut().expect("gnu header");
            gnu.name = [0; 100];
            gnu.name[..name.len()].copy_from_slice(name.as_bytes());
        }
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_uid(4242);
        h.set_gid(4242);
        h.set_mtime(1_700_000_000);
        h.set_cksum();
        b.append(&h, data).expect("append");
    }
    let raw = b.into_inner().expect("tar");
    if plain {
        std::fs::write(path, raw).expect("write tar");
        return;
    }
    let mut child = std::process::Command::new("gzip")
        .args(["-n", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("gzip");
    let mut stdin = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(&raw).expect("feed gzip");
    });
    let out = child.wait_with_output().expect("gzip output");
    feeder.join().expect("feeder");
    assert!(out.status.success(), "gzip failed");
    std::fs::write(path, out.stdout).expect("write tgz");
}

/// A bundle holding `packages` (name, local file, extractTo), no images.
fn bundle(dir: &Path, name: &str, packages: &[(&str, &Path, Option<&str>)]) -> VerifiedBundle {
    let store = BlobStore::open(dir.join("cache")).expect("store");
    let packages = packages
        .iter()
        .map(|(n, p, to)| {
            let file = p.file_name().expect("name").to_string_lossy().into_owned();
            let mut f = PreparedFile::from_path(
                n,
                &format!("packages/any-amd64/{file}"),
                p,
                0o644,
                Some("any".into()),
                Some("amd64".into()),
            )
            .expect("prepare");
            f.entry.extract_to = to.map(String::from);
            f
        })
        .collect();
    let out = dir.join(name);
    let input = BundleInput {
        cluster: "c".into(),
        kubernetes_version: "v1.34.1".into(),
        extra_versions: vec![],
        platforms: vec![],
        images: vec![],
        packages,
        binaries: vec![],
        upstream: vec![],
    };
    write_bundle(&out, &store, &input).expect("bundle");
    verify_bundle(&out).expect("verify")
}

/// What the `airgap/packages` phase does on one node: place every file, run every check, run the
/// install script of each kind for what is missing. Returns the files each kind installed, or the
/// first failing script's exit status and stderr.
fn packages_step(
    t: &dyn Transport,
    vb: &VerifiedBundle,
) -> Result<BTreeMap<InstallKind, Vec<String>>, String> {
    let files = files_for(vb, "debian", "amd64", REMOTE);
    for f in &files {
        upload_file(t, vb, f, &mut |_| {}).expect("upload");
    }
    let mut todo: BTreeMap<InstallKind, Vec<&NodeFile>> = BTreeMap::new();
    for f in &files {
        if let Some((kind, check)) = install_step(f) {
            let out = t.run(&Cmd::new(check)).expect("check runs");
            if !out.success() {
                todo.entry(kind).or_default().push(f);
            }
        }
    }
    let mut done = BTreeMap::new();
    for (kind, list) in todo {
        let out = t
            .run(&Cmd::new(install_script(kind, &list)))
            .expect("script runs");
        if !out.success() {
            return Err(format!(
                "exit {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        done.insert(kind, list.iter().map(|f| f.file.name.clone()).collect());
    }
    Ok(done)
}

fn sh(node: &TestNode, script: &str) -> String {
    node.sh(script)
        .unwrap_or_else(|e| panic!("{script} on {}: {e}", node.name))
}

#[test]
fn archives_are_extracted_once_again_when_changed_and_never_outside() {
    if !require("docker and root", docker_available() && is_root()) {
        return;
    }
    let cluster = TestCluster::start("narc", 1).expect("node container");
    let node = &cluster.nodes[0];
    let t = node.transport().expect("ssh");
    let work = common::scratch("cc-airgap-arc-");
    let w = work.path();

    let cni = w.join("v1/cni-plugins-linux-amd64-v1.6.2.tgz");
    let crictl = w.join("v1/crictl-v1.34.0-linux-amd64.tar");
    std::fs::create_dir_all(w.join("v1")).expect("mkdir");
    archive(
        &cni,
        &[
            Member::Dir("./"),
            Member::File("./bridge", b"#!/bin/sh\necho bridge v1\n", 0o755),
            Member::File("./host-local", b"#!/bin/sh\necho host-local\n", 0o755),
            Member::File("./README", b"plugins\n", 0o644),
        ],
        false,
    );
    archive(
        &crictl,
        &[Member::File("crictl", b"#!/bin/sh\necho crictl\n", 0o755)],
        true,
    );
    let extras = w.join("v1/extras.tgz");
    archive(
        &extras,
        &[Member::File("extras-only-carried", b"x\n", 0o644)],
        false,
    );
    let v1 = bundle(
        w,
        "v1.tar",
        &[
            ("cni-plugins", &cni, Some("/opt/test-cni/bin")),
            ("crictl", &crictl, Some("/usr/local/test-bin")),
            ("extras", &extras, None),
        ],
    );
    // manifest.json carries extractTo (read back by the verifier).
    let dirs: Vec<(String, Option<String>)> = v1
        .manifest
        .packages
        .iter()
        .map(|p| (p.name.clone(), p.extract_to.clone()))
        .collect();
    assert_eq!(
        dirs,
        [
            (
                "cni-plugins".to_string(),
                Some("/opt/test-cni/bin".to_string())
            ),
            (
                "crictl".to_string(),
                Some("/usr/local/test-bin".to_string())
            ),
            ("extras".to_string(), None),
        ]
    );

    // First run: both archives unpacked, the plain file only carried.
    let done = packages_step(&t, &v1).expect("first run");
    assert_eq!(
        done.get(&InstallKind::Extract).cloned().unwrap_or_default(),
        ["cni-plugins", "crictl"],
        "{done:?}"
    );
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(
        sh(
            node,
            "/opt/test-cni/bin/bridge; /opt/test-cni/bin/host-local; /usr/local/test-bin/crictl"
        ),
        "bridge v1\nhost-local\ncrictl"
    );
    assert_eq!(
        sh(
            node,
            "stat -c '%a %u %g %n' /opt/test-cni/bin/bridge /opt/test-cni/bin/README /usr/local/test-bin/crictl"
        ),
        "755 0 0 /opt/test-cni/bin/bridge\n644 0 0 /opt/test-cni/bin/README\n755 0 0 /usr/local/test-bin/crictl",
        "root-owned (--no-same-owner), modes kept"
    );
    let cni_file = files_for(&v1, "debian", "amd64", REMOTE)
        .into_iter()
        .find(|f| f.file.name == "cni-plugins")
        .expect("cni entry");
    let marker = extract_marker(&cni_file).expect("marker");
    assert_eq!(
        marker,
        "/var/lib/clusterctl/airgap/extracted/cni-plugins-linux-amd64-v1.6.2.tgz"
    );
    assert_eq!(
        sh(node, &format!("cat '{marker}'")),
        format!("{} /opt/test-cni/bin", cni_file.file.sha256)
    );
    assert_eq!(
        sh(
            node,
            "ls /var/lib/clusterctl/airgap/packages/extras.tgz; find / -xdev -name extras-only-carried | wc -l"
        ),
        "/var/lib/clusterctl/airgap/packages/extras.tgz\n0",
        "an archive without extractTo is only carried"
    );

    // Second run: every check passes, nothing is unpacked (a local edit survives).
    sh(node, "echo 'edited on the node' > /opt/test-cni/bin/README");
    let again = packages_step(&t, &v1).expect("second run");
    assert!(again.is_empty(), "second run unpacked {again:?}");
    assert_eq!(
        sh(node, "cat /opt/test-cni/bin/README"),
        "edited on the node"
    );

    // A changed archive is unpacked again; the unchanged one is not.
    let cni2 = w.join("v2/cni-plugins-linux-amd64-v1.6.2.tgz");
    std::fs::create_dir_all(w.join("v2")).expect("mkdir");
    archive(
        &cni2,
        &[
            Member::Dir("./"),
            Member::File("./bridge", b"#!/bin/sh\necho bridge v2\n", 0o755),
            Member::File("./README", b"plugins v2\n", 0o644),
        ],
        false,
    );
    let v2 = bundle(
        w,
        "v2.tar",
        &[
            ("cni-plugins", &cni2, Some("/opt/test-cni/bin")),
            ("crictl", &crictl, Some("/usr/local/test-bin")),
        ],
    );
    let changed = packages_step(&t, &v2).expect("changed archive");
    assert_eq!(
        changed
            .get(&InstallKind::Extract)
            .cloned()
            .unwrap_or_default(),
        ["cni-plugins"],
        "{changed:?}"
    );
    assert_eq!(
        sh(
            node,
            "/opt/test-cni/bin/bridge; cat /opt/test-cni/bin/README"
        ),
        "bridge v2\nplugins v2"
    );
    let sha2 = files_for(&v2, "debian", "amd64", REMOTE)
        .into_iter()
        .find(|f| f.file.name == "cni-plugins")
        .map(|f| f.file.sha256.to_string())
        .expect("cni v2");
    assert_ne!(sha2, cni_file.file.sha256.to_string());
    assert_eq!(
        sh(node, &format!("cat '{marker}'")),
        format!("{sha2} /opt/test-cni/bin")
    );

    // Hostile members: `../x`, `sub/../../y`, `/abs-evil`, and a symlink to /etc written through.
    // tar refuses them (exit 2), the step fails, nothing lands outside the directory, no marker.
    sh(node, "mkdir -p /opt/evil");
    let evil = w.join("evil/evil.tgz");
    std::fs::create_dir_all(w.join("evil")).expect("mkdir");
    archive(
        &evil,
        &[
            Member::File("good", b"good\n", 0o644),
            Member::File("../x", b"escaped\n", 0o644),
            Member::File("sub/../../y", b"escaped\n", 0o644),
            Member::File("/abs-evil", b"escaped\n", 0o644),
            Member::Link("etc-link", "/etc"),
            Member::File("etc-link/clusterctl-pwned", b"escaped\n", 0o644),
        ],
        false,
    );
    let ev = bundle(w, "evil.tar", &[("evil", &evil, Some("/opt/evil/in"))]);
    let err = packages_step(&t, &ev).expect_err("hostile archive must fail the step");
    assert!(err.contains("exit 2"), "{err}");
    assert!(err.contains("Member name contains '..'"), "{err}");
    assert_eq!(
        sh(
            node,
            "ls -A /opt/evil; ls -A / | grep -c -e '^abs-evil$' -e '^x$' -e '^y$' || true; ls /etc | grep -c clusterctl-pwned || true"
        ),
        "in\n0\n0",
        "nothing outside /opt/evil/in"
    );
    assert_eq!(
        sh(node, "find /opt/evil/in -type f | sort"),
        "/opt/evil/in/abs-evil\n/opt/evil/in/good",
        "a leading / is stripped into the directory"
    );
    assert_eq!(
        sh(node, "ls /var/lib/clusterctl/airgap/extracted | sort"),
        "cni-plugins-linux-amd64-v1.6.2.tgz\ncrictl-v1.34.0-linux-amd64.tar",
        "no marker for the refused archive"
    );
}
