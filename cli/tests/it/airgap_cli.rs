//! The `clusterctl airgap` commands driven through the binary, end to end, against two loopback
//! `docker-registry` instances: A plays every upstream registry (images built here from random bytes
//! under their upstream repository paths), B is the site's mirror named in the cluster file.
//! `airgap images -o json` lists what the render plan pulls (under the mirror); `airgap bundle` writes
//! `site.tar` from A (`--source-registry-override`); `airgap import` pushes it into B, where every
//! pull reference is then served with the bundle's manifest digest; a second import uploads nothing;
//! a bundle with one flipped byte in a layer is refused with exit code 1 and a message naming the
//! entry, and B receives no write; an invalid cluster file exits 2.

use std::collections::BTreeSet;

use clusterctl_airgap::registry::{ClientOptions, RegistryClient};
use clusterctl_airgap::ImageRef;
use clusterctl_testbed::cli::{ssh_cluster_yaml, Clusterctl, FileNode};
use clusterctl_testbed::registry::{self, image, layer, Registry, Rng};
use clusterctl_testbed::require;

/// `text` without whitespace and miette's frame characters (its report wraps long lines).
fn flat(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '│' | '×' | '╰' | '─' | '├'))
        .collect()
}

fn writes(reg: &Registry) -> usize {
    ["POST", "PUT", "PATCH", "DELETE"]
        .iter()
        .map(|m| reg.count_requests(m, "/v2/"))
        .sum()
}

/// `airgap bundle -f cluster.yaml -o OUT --no-self` with one `--source-registry-override` per
/// entry of `overrides`.
fn bundle_args<'a>(out: &'a str, overrides: &'a [String]) -> Vec<&'a str> {
    let mut args = vec![
        "airgap",
        "bundle",
        "-f",
        "cluster.yaml",
        "--bundle-file",
        out,
        "--no-self",
    ];
    for o in overrides {
        args.push("--source-registry-override");
        args.push(o);
    }
    args
}

#[test]
fn airgap_images_bundle_import_and_a_tampered_bundle_through_the_binary() {
    if !require("docker-registry", registry::available()) {
        return;
    }
    let a = Registry::start().expect("registry A");
    let b = Registry::start().expect("registry B");
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(work.path().join("tool"), "#!/bin/sh\necho tool\n").expect("package");
    let node = FileNode {
        name: "cp1".into(),
        role: "control-plane",
        address: "10.88.0.11".into(),
        labels: Vec::new(),
        taints: Vec::new(),
    };
    let extra = format!(
        "  registry: {{mirror: \"{}/site\"}}\n  airgap:\n    bundle: site.tar\n    packages:\n      - {{name: tool, osFamily: any, arch: amd64, path: tool}}\n",
        b.addr()
    );
    let text = ssh_cluster_yaml(
        "agcli",
        std::path::Path::new("/nonexistent/key"),
        "none",
        None,
        &extra,
        &[node],
    );
    std::fs::write(work.path().join("cluster.yaml"), text).expect("cluster file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), work.path());

    // `airgap images -o json`: the plan's images, each pulled from the mirror; text output agrees.
    let r = cli
        .run(&["airgap", "images", "-f", "cluster.yaml", "-o", "json"])
        .expect("run");
    assert_eq!(r.code, 0, "{}", r.all());
    let list: Vec<serde_json::Value> = serde_json::from_str(&r.stdout).expect("json");
    let sources: BTreeSet<&str> = list.iter().filter_map(|i| i["source"].as_str()).collect();
    for want in [
        "registry.k8s.io/kube-apiserver:v1.34.1",
        "registry.k8s.io/etcd:",
        "registry.k8s.io/coredns/coredns:",
        "registry.k8s.io/pause:",
    ] {
        assert!(
            sources.iter().any(|s| s.starts_with(want)),
            "{want} missing: {sources:?}"
        );
    }
    let pulls: Vec<&str> = list.iter().filter_map(|i| i["pull"].as_str()).collect();
    assert_eq!(pulls.len(), list.len());
    for p in &pulls {
        assert!(p.starts_with(&format!("{}/site/", b.addr())), "{p}");
    }
    let text = cli
        .run(&["airgap", "images", "-f", "cluster.yaml"])
        .expect("run");
    assert_eq!(text.stdout.lines().collect::<Vec<_>>(), pulls);

    // Registry A serves every source image under its upstream path.
    let mut overrides = BTreeSet::new();
    for (i, s) in sources.iter().enumerate() {
        let r = ImageRef::parse(s).expect("ref");
        let mut rng = Rng(500 + i as u64);
        let l = layer(&mut rng, "payload.bin", 3000).expect("layer");
        a.push(
            &r.repository,
            r.tag.as_deref().expect("tag"),
            &image(&[l], "amd64", s),
        )
        .expect("push");
        overrides.insert(format!("{}={}", r.registry, a.addr()));
    }

    // An override that names no registry of the plan (a scheme, a typo) or is not FROM=TO is refused
    // (exit 2) before anything is fetched: it would otherwise pull from the internet.
    for bad in ["http://registry.k8s.io=127.0.0.1:1", "registry.k8s.io"] {
        let r = cli
            .run(&[
                "airgap",
                "bundle",
                "-f",
                "cluster.yaml",
                "--bundle-file",
                "never.tar",
                "--source-registry-override",
                bad,
            ])
            .expect("run");
        assert_eq!(r.code, 2, "{}", r.all());
        assert!(r.stderr.contains(bad), "{}", r.stderr);
        assert!(!work.path().join("never.tar").exists());
    }

    // Every image that cannot be fetched is named, with the override it went through (B is still
    // empty here), not only the first; exit 1.
    let b_overrides: Vec<String> = overrides
        .iter()
        .map(|o| format!("{}={}", o.split('=').next().unwrap_or_default(), b.addr()))
        .collect();
    let r = cli
        .run(&bundle_args("never.tar", &b_overrides))
        .expect("run");
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stderr
            .contains(&format!("{} image(s) could not be fetched", list.len())),
        "{}",
        r.stderr
    );
    for i in &list {
        let source = clusterctl_airgap::ImageRef::parse(i["source"].as_str().expect("source"))
            .expect("reference")
            .to_string();
        assert!(
            r.stderr.contains(&source),
            "{source} not named:\n{}",
            r.stderr
        );
    }
    assert!(
        r.stderr.contains(&format!(
            "(from {} by --source-registry-override)",
            b.addr()
        )),
        "{}",
        r.stderr
    );
    assert!(!work.path().join("never.tar").exists());

    // A package file the cluster file names but that is missing is reported before any image is
    // fetched (the registry sees no manifest request).
    std::fs::rename(work.path().join("tool"), work.path().join("tool.away")).expect("move");
    let gets_before = a.count_requests("GET", "/manifests/");
    // (Overridden to A, so nothing would leave loopback even if the check were gone.)
    let overrides: Vec<String> = overrides.iter().cloned().collect();
    let r = cli.run(&bundle_args("never.tar", &overrides)).expect("run");
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stderr.contains("not found, nothing was fetched") && r.stderr.contains("tool"),
        "{}",
        r.stderr
    );
    assert_eq!(a.count_requests("GET", "/manifests/"), gets_before);
    std::fs::rename(work.path().join("tool.away"), work.path().join("tool")).expect("move back");

    // `airgap bundle`.
    let r = cli.run(&bundle_args("site.tar", &overrides)).expect("run");
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stderr.contains(&format!("{} image(s)", list.len())),
        "{}",
        r.stderr
    );
    let bundle = work.path().join("site.tar");
    let vb = clusterctl_airgap::bundle::verify_bundle(&bundle).expect("a valid bundle");
    assert_eq!(vb.manifest.packages.len(), 1);

    // `airgap import` into B: every pull reference served with the bundle's digest.
    let r = cli
        .run(&["airgap", "import", "site.tar", "-f", "cluster.yaml"])
        .expect("run");
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stderr
            .contains(&format!("{} images pushed, 0 already there", list.len())),
        "{}",
        r.stderr
    );
    let client = RegistryClient::new(ClientOptions::default()).expect("client");
    for img in &vb.manifest.images {
        let r = ImageRef::parse(&img.mirror).expect("ref");
        assert!(pulls.contains(&img.mirror.as_str()), "{}", img.mirror);
        let got = client
            .head_manifest(&r.registry, &r.repository, r.tag.as_deref().expect("tag"))
            .expect("head");
        assert_eq!(got.as_ref(), Some(&img.digest), "{}", img.mirror);
    }

    // A second import uploads nothing.
    let uploads = b.count_requests("PUT", "/blobs/uploads/");
    let r = cli
        .run(&["airgap", "import", "site.tar", "-f", "cluster.yaml"])
        .expect("run");
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stderr
            .contains(&format!("0 images pushed, {} already there", list.len())),
        "{}",
        r.stderr
    );
    assert_eq!(b.count_requests("PUT", "/blobs/uploads/"), uploads);

    // One flipped byte in a layer: refused, naming the entry, exit 1, B not written to.
    let layer_entry = vb
        .entries
        .iter()
        .filter(|(n, _)| n.starts_with("oci/blobs/sha256/"))
        .max_by_key(|(_, l)| l.size)
        .map(|(n, l)| (n.clone(), l.clone()))
        .expect("a blob");
    let mut bytes = std::fs::read(&bundle).expect("read");
    bytes[layer_entry.1.offset as usize + 100] ^= 0x20;
    std::fs::write(work.path().join("bad.tar"), &bytes).expect("write");
    let before = writes(&b);
    let r = cli
        .run(&[
            "airgap",
            "import",
            "bad.tar",
            "-f",
            "cluster.yaml",
            "--mirror",
            &format!("{}/fresh", b.addr()),
        ])
        .expect("run");
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        flat(&r.stderr).contains(&layer_entry.0) && flat(&r.stderr).contains("sha256mismatch"),
        "{}",
        r.stderr
    );
    assert_eq!(
        writes(&b),
        before,
        "registry written after a refused bundle"
    );
    let r = cli
        .run(&[
            "airgap",
            "import",
            "bad.tar",
            "-f",
            "cluster.yaml",
            "--verify-only",
        ])
        .expect("run");
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(flat(&r.stderr).contains(&layer_entry.0), "{}", r.stderr);

    // An invalid cluster file is invalid input.
    std::fs::write(work.path().join("broken.yaml"), "apiVersion: nope\n").expect("write");
    let r = cli
        .run(&["airgap", "images", "-f", "broken.yaml"])
        .expect("run");
    assert_eq!(r.code, 2, "{}", r.all());
}
