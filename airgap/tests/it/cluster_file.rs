//! From a cluster file to a mirror, the way `clusterctl airgap images/bundle/import` run it: the
//! HA air-gap profile with its mirror pointed at a loopback registry B; every image the render plan
//! lists (kubeadm's, kube-vip, Cilium, the extra version's) is built here and served by registry A
//! under its upstream repository path; upstream registries are mapped to A (the
//! `--source-registry-override` path), packages are local files; the Cilium chart and the Helm archive
//! (fixture bytes of our own) come from a loopback HTTP server named by the file's `cni.sources`, and
//! the bundle carries them under `upstream/`.

use crate::common;

use clusterctl_airgap::plan::list_images;
use clusterctl_airgap::registry::{ClientOptions, RegistryClient};
use clusterctl_airgap::run::{
    bundle_cluster, check_matches, import_bundle, BundleOptions, ImportOptions,
};
use clusterctl_airgap::ImageRef;
use clusterctl_testbed::registry::Registry;
use clusterctl_testbed::require;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};

/// Serves `files` (path → bytes) over plain HTTP on loopback from a thread (until the process
/// ends); returns the port.
fn serve_files(files: BTreeMap<String, Vec<u8>>) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let n = c.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split(' ').nth(1).unwrap_or_default();
            match files.get(path) {
                Some(b) => {
                    let _ = write!(
                        c,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        b.len()
                    );
                    let _ = c.write_all(b);
                }
                None => {
                    let _ = c.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
            }
        }
    });
    port
}

/// Pushes a small random image as `repo:tag` into `reg` with our client (monolithic uploads).
fn push_fake(client: &RegistryClient, reg: &Registry, repo: &str, tag: &str, seed: u64) {
    let mut rng = Rng(seed | 1);
    let img = image(&[layer(&mut rng, "x.bin", 4096)], "amd64", repo);
    for b in &img.blobs {
        let bytes = b.bytes.clone();
        client
            .upload_blob(
                reg.addr(),
                repo,
                &b.digest,
                bytes.len() as u64,
                &move || {
                    Ok(Box::new(std::io::Cursor::new(bytes.clone()))
                        as Box<dyn std::io::Read + Send>)
                },
            )
            .expect("upload");
    }
    client
        .put_manifest(
            reg.addr(),
            repo,
            tag,
            &img.manifest.media_type,
            &img.manifest.bytes,
        )
        .expect("manifest");
}

#[test]
fn ha_profile_images_bundle_and_import_to_mirror() {
    if !require("docker-registry and skopeo", peers_available()) {
        return;
    }
    let a = Registry::start().expect("registry A");
    let b = Registry::start().expect("registry B");
    let work = scratch("cc-airgap-cf-");
    let profile = include_str!("../../../profiles/ha-airgap.yaml");
    let text: String = profile
        .lines()
        .filter(|l| {
            !l.contains("caFile:") && !l.contains("usernameEnv:") && !l.contains("passwordEnv:")
        })
        .map(|l| {
            l.replace(
                "harbor.example.com/library",
                &format!("{}/library", b.addr()),
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    // The CNI's upstream files, from a loopback server the file names (fixture bytes, digests given).
    let chart = Rng(11).bytes(20_000);
    let helm = Rng(12).bytes(30_000);
    let port = serve_files(BTreeMap::from([
        ("/cilium.tgz".to_string(), chart.clone()),
        ("/helm.tar.gz".to_string(), helm.clone()),
    ]));
    let sources = format!(
        "      sources:\n        - {{name: cilium.tgz, url: \"http://127.0.0.1:{port}/cilium.tgz\", sha256: {}}}\n        - {{name: helm-linux-amd64.tar.gz, url: \"http://127.0.0.1:{port}/helm.tar.gz\", sha256: {}}}",
        clusterctl_airgap::Digest::of(&chart).hex(),
        clusterctl_airgap::Digest::of(&helm).hex()
    );
    let text = text.replace(
        "      kubeProxyReplacement: true",
        &format!("      kubeProxyReplacement: true\n{sources}"),
    );
    std::fs::create_dir_all(work.path().join("packages")).expect("mkdir");
    let mut rng = Rng(5);
    for l in text.lines().filter(|l| l.contains("path: packages/")) {
        let p = l
            .split("path: ")
            .nth(1)
            .expect("path")
            .trim_end_matches('}')
            .trim();
        std::fs::write(work.path().join(p), rng.bytes(3000)).expect("package");
    }
    let file = work.path().join("cluster.yaml");
    std::fs::write(&file, &text).expect("cluster file");
    let loaded = clusterctl_spec::load(&file).expect("load");
    let cluster = clusterctl_spec::validate(&loaded)
        .map_err(|d| d.to_string())
        .expect("valid")
        .cluster;

    // `airgap images`: the plan's list, with kubeadm's images of both versions and no kube-proxy.
    let list = list_images(&cluster);
    let sources: BTreeSet<&str> = list.iter().map(|i| i.source.as_str()).collect();
    assert!(
        sources.contains("registry.k8s.io/kube-apiserver:v1.34.1"),
        "{sources:?}"
    );
    assert!(
        sources.contains("registry.k8s.io/kube-apiserver:v1.34.2"),
        "extra version: {sources:?}"
    );
    assert!(sources
        .iter()
        .any(|s| s.starts_with("registry.k8s.io/coredns/coredns:")));
    assert!(sources.contains("ghcr.io/kube-vip/kube-vip:v1.0.1"));
    assert!(
        !sources.iter().any(|s| s.contains("kube-proxy")),
        "kubeProxy: disabled"
    );
    for i in &list {
        assert!(
            i.pull.starts_with(&format!("{}/library/", b.addr())),
            "{} pulls {}",
            i.source,
            i.pull
        );
    }

    // Registry A plays every upstream registry.
    let client = RegistryClient::new(ClientOptions::default()).expect("client");
    let mut upstreams = BTreeSet::new();
    for (n, i) in list.iter().enumerate() {
        let r = ImageRef::parse(&i.source).expect("ref");
        push_fake(
            &client,
            &a,
            &r.repository,
            r.tag.as_deref().expect("tagged"),
            n as u64 + 100,
        );
        upstreams.insert(r.registry.clone());
    }

    // `airgap bundle`.
    let out = work.path().join("k8s-v1.34.1.tar");
    let mut opts = BundleOptions {
        out: out.clone(),
        base_dir: work.path().to_path_buf(),
        self_binary: std::env::current_exe().ok(),
        ..Default::default()
    };
    opts.pull.registry_overrides = upstreams
        .iter()
        .map(|u| (u.clone(), a.addr().to_string()))
        .collect();
    let (summary, stats) = bundle_cluster(&cluster, &opts).expect("bundle");
    assert_eq!(summary.manifest.images.len(), list.len());
    assert_eq!(summary.manifest.packages.len(), 7);
    let upstream: Vec<(&str, &str)> = summary
        .manifest
        .upstream
        .iter()
        .map(|f| (f.name.as_str(), f.path.as_str()))
        .collect();
    assert_eq!(
        upstream,
        [
            ("cilium.tgz", "upstream/cilium.tgz"),
            (
                "helm-linux-amd64.tar.gz",
                "upstream/helm-linux-amd64.tar.gz"
            )
        ]
    );
    assert_eq!(
        summary.manifest.upstream[0].sha256,
        clusterctl_airgap::Digest::of(&chart)
    );
    // kubeadm/kubelet/kubectl of v1.34.1 and of v1.34.2 carry their version; cri-o carries none.
    let tagged = |v: &str| {
        summary
            .manifest
            .packages
            .iter()
            .filter(|p| p.kubernetes_version.as_deref() == Some(v))
            .count()
    };
    assert_eq!((tagged("v1.34.1"), tagged("v1.34.2")), (3, 3));
    assert_eq!(summary.manifest.binaries.len(), 1);
    assert_eq!(summary.manifest.extra_versions, vec!["v1.34.2".to_string()]);
    assert!(stats.blobs_fetched > 0);

    // `airgap import`: verify, check it is this cluster's, push to the mirror recorded in the bundle.
    let (vb, report) = import_bundle(&out, &ImportOptions::default()).expect("import");
    check_matches(&vb, &cluster).expect("bundle made for this cluster");
    // Once an upgrade moved the file to the extra version the bundle carries, it still matches
    // (as `up` accepts it); a version it does not carry does not.
    let moved = |version: &str| {
        let f = work.path().join(format!("cluster-{version}.yaml"));
        // The spec's version moved on; packages tagged with the old version leave the file.
        let moved: String = text
            .lines()
            .filter(|l| !l.contains("kubernetesVersion: v1.34.1,"))
            .map(|l| {
                if l == "  kubernetesVersion: v1.34.1" {
                    format!("  kubernetesVersion: {version}")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(&f, moved).expect("moved file");
        let loaded = clusterctl_spec::load(&f).expect("load");
        clusterctl_spec::validate(&loaded)
            .map_err(|d| d.to_string())
            .expect("valid")
            .cluster
    };
    check_matches(&vb, &moved("v1.34.2")).expect("the extra version matches");
    let err = check_matches(&vb, &moved("v1.34.3")).expect_err("a version not carried");
    assert!(err.to_string().contains("v1.34.3"), "{err}");
    assert_eq!(report.images_pushed, list.len());
    for i in &list {
        let r = ImageRef::parse(&i.pull).expect("ref");
        let want = vb
            .manifest
            .images
            .iter()
            .find(|x| x.source == ImageRef::parse(&i.source).expect("ref").to_string())
            .expect("in bundle");
        let got = client
            .head_manifest(&r.registry, &r.repository, r.tag.as_deref().expect("tag"))
            .expect("head");
        assert_eq!(got.as_ref(), Some(&want.digest), "{}", i.pull);
    }
    // The record makes the second import skip every image.
    let (_, again) = import_bundle(&out, &ImportOptions::default()).expect("again");
    assert_eq!(
        (again.images_skipped, again.blobs_uploaded),
        (list.len(), 0)
    );
}
