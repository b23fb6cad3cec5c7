//! `clusterctl up` from an air-gap bundle when the cluster file also sets `registry.mirror`: the
//! images go to the mirror once, from this machine (`airgap/mirror`), never into the nodes'
//! runtimes. Two systemd node containers (a control plane and a worker, reached over SSH, no
//! default route) run the recording kubeadm/kubelet/kubectl stand-ins of `tests/standins/`. Every
//! image the cluster needs is built here from random bytes and served by a loopback
//! `docker-registry` under its upstream repository path; the bundle is written from it (library
//! call, registry override). The mirror is a second `docker-registry` on loopback serving HTTPS
//! with a certificate of a CA made by the test (`TestCa`), named in the file with `caFile`. Checks:
//! a bundle with one flipped byte in a blob is refused by `airgap/verify` before anything is pushed
//! (the mirror receives no write, holds no blob); `up --dry-run` plans the push and writes nothing;
//! `up` runs `airgap/mirror` once, on this machine, after the runtime phase and before `kubeadm
//! init`, and pushes every image of the bundle; every pull reference of `airgap images -o json` is
//! then served by the mirror (`HEAD` and `GET`, read with the test bed's own TLS client) with the
//! bundle's manifest digest; there is no `airgap/images` phase and no image in the nodes'
//! containerd; each node's containerd `certs.d` (the mirror's own `hosts.toml` with the CA path,
//! the upstream registries' `hosts.toml` pointing at the mirror, the CA) is byte for byte what
//! `clusterctl render` renders, and containerd's sandbox image and kubeadm's `imageRepository` are
//! on the mirror; a second `up` pushes no image and sends the mirror no write; after the mirror
//! lost one image (its tag removed from storage) a third `up` pushes exactly that one again,
//! uploading no blob. A second test: a bundle written while the file named another mirror is pushed
//! under the file's mirror, and the old one receives no write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::airgap_support;

use airgap_support::{air_gapped, bundle_images, bundle_served, untouched, up_args, valid_file};
use clusterctl_airgap::plan::list_images;
use clusterctl_airgap::ImageRef;
use clusterctl_testbed::cli::{install_standins, ssh_cluster_yaml, Clusterctl, FileNode, Run};
use clusterctl_testbed::docker::{docker_available, TestCluster, TestNode};
use clusterctl_testbed::registry::{self, sha256_digest, Registry, TestCa};
use clusterctl_testbed::{is_root, require, unique_name};

/// containerd's `config_path` as the runtime phase writes it.
const CERTS_D: &str = "/etc/containerd/certs.d";

fn sh(node: &TestNode, script: &str) -> String {
    node.sh(script).unwrap_or_else(|e| panic!("{e}"))
}

/// Indexes of the lines containing every needle.
fn lines_with(out: &str, needles: &[&str]) -> Vec<usize> {
    out.lines()
        .enumerate()
        .filter(|(_, l)| needles.iter().all(|n| l.contains(n)))
        .map(|(i, _)| i)
        .collect()
}

/// Line index of the first line containing every needle.
fn line_of(out: &str, needles: &[&str]) -> usize {
    *lines_with(out, needles)
        .first()
        .unwrap_or_else(|| panic!("no line with {needles:?} in:\n{out}"))
}

/// `text` without whitespace and miette's frame characters (its report wraps long lines).
fn flat(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '│' | '×' | '╰' | '─' | '├'))
        .collect()
}

/// Image names in the node's containerd (`k8s.io` namespace).
fn images_in(node: &TestNode) -> BTreeSet<String> {
    node.ctr_images()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_keys()
        .collect()
}

/// Every file under `dir` (recursively), as paths relative to `dir`.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, p: &Path, out: &mut Vec<String>) {
        if let Ok(rd) = std::fs::read_dir(p) {
            for e in rd.flatten() {
                let path = e.path();
                if path.is_dir() {
                    walk(base, &path, out);
                } else if let Ok(rel) = path.strip_prefix(base) {
                    out.push(rel.display().to_string());
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn up_pushes_the_bundle_to_a_tls_mirror_once_and_loads_nothing_into_nodes() {
    if !require("root", is_root())
        || !require("docker", docker_available())
        || !require("docker-registry", registry::available())
    {
        return;
    }
    let source = Registry::start().expect("source registry");
    let ca = TestCa::new(&unique_name("agmr-ca")).expect("CA");
    let mirror = Registry::start_tls(&ca).expect("TLS mirror registry");
    let cluster = TestCluster::start("agmr", 2).expect("node containers");
    let nodes = &cluster.nodes;
    air_gapped(nodes);
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(work.path().join("mirror-ca.crt"), &ca.ca_pem).expect("CA file");
    let prefix = format!("{}/site", mirror.addr());
    let extra = format!(
        "  registry: {{mirror: \"{prefix}\", caFile: mirror-ca.crt}}\n  airgap:\n    bundle: site.tar\n  images:\n    preload: [docker.io/library/cc-airgap-app:v1]\n"
    );
    let name = unique_name("agmr");
    let text = ssh_cluster_yaml(
        &name,
        &cluster.key.private,
        "none",
        None,
        &extra,
        &[
            FileNode::control_plane(&nodes[0]),
            FileNode::worker(&nodes[1]),
        ],
    );
    let file = work.path().join("cluster.yaml");
    let valid = valid_file(&file, &text);
    let list = list_images(&valid);

    // Every image of the plan, built here, served by the source registry under its upstream path.
    let bundle = work.path().join("site.tar");
    let summary = bundle_served(&valid, &source, 3000, work.path(), &bundle);
    let upstreams: BTreeSet<String> = list
        .iter()
        .map(|i| ImageRef::parse(&i.source).expect("ref").registry)
        .collect();
    // Mirror reference → the manifest digest the bundle carries.
    let want = bundle_images(&summary);
    assert_eq!(want.len(), list.len());
    for m in want.keys() {
        assert!(
            m.starts_with(&format!("{prefix}/")),
            "{m} not under {prefix}"
        );
    }
    drop(source);

    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), work.path());
    let file_s = file.display().to_string();
    let up = |extra: &[&str]| -> Run {
        let args = up_args(&file, &nodes[0].known_hosts, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli.run(&args).expect("run clusterctl up")
    };
    let record = work.path().join("site.tar.imported.json");

    // A bundle with one flipped byte in a blob is refused by airgap/verify, naming the entry, before
    // anything is pushed or any node is touched.
    let good = std::fs::read(&bundle).expect("bundle");
    let vb = clusterctl_airgap::bundle::verify_bundle(&bundle).expect("verifies");
    let (victim, loc) = vb
        .entries
        .iter()
        .filter(|(n, l)| n.starts_with("oci/blobs/sha256/") && l.size > 100)
        .max_by_key(|(_, l)| l.size)
        .map(|(n, l)| (n.clone(), l.clone()))
        .expect("a blob entry");
    let mut bad = good.clone();
    bad[loc.offset as usize + (loc.size as usize) / 2] ^= 0x01;
    std::fs::write(&bundle, &bad).expect("tamper");
    let r = up(&["-v"]);
    assert_ne!(r.code, 0, "{}", r.all());
    let o = r.all();
    assert!(
        flat(&o).contains(&victim) && o.contains("airgap/verify"),
        "{o}"
    );
    assert!(lines_with(&o, &["airgap/mirror"]).is_empty(), "{o}");
    assert_eq!(mirror.write_requests(), 0, "{}", mirror.log());
    assert_eq!(mirror.blob_count(), 0);
    for m in want.keys() {
        let r = ImageRef::parse(m).expect("ref");
        let reply = mirror
            .manifest(
                "HEAD",
                &r.repository,
                r.tag.as_deref().expect("tag"),
                Some(&ca),
            )
            .expect("HEAD");
        assert_eq!(
            reply.status, 404,
            "{m} is on the mirror after a refused bundle"
        );
    }
    assert!(
        !record.exists(),
        "import record written for a refused bundle"
    );
    untouched(nodes);
    std::fs::write(&bundle, &good).expect("restore");

    // A dry run plans the push and sends the mirror nothing.
    let dry = up(&["--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.all());
    assert!(
        dry.stdout
            .contains(&format!("push {} image(s) of ", want.len())),
        "{}",
        dry.all()
    );
    assert_eq!(mirror.write_requests(), 0, "{}", mirror.log());
    assert!(!record.exists(), "import record written by a dry run");

    // `up` from the bundle with the mirror.
    let r = up(&["-v"]);
    assert_eq!(r.code, 0, "{}", r.all());
    let out = r.all();
    let cp = &nodes[0].name;
    // airgap/mirror ran once, on this machine, after the runtime was configured, before kubeadm init;
    // it pushed every image of the bundle.
    let ran = lines_with(&out, &["[local] airgap/mirror: done"]);
    assert_eq!(ran.len(), 1, "{out}");
    for n in nodes {
        assert!(
            lines_with(&out, &[&format!("[{}] airgap/mirror", n.name)]).is_empty(),
            "{out}"
        );
    }
    let pushed = line_of(
        &out,
        &[&format!(
            "[local] airgap/mirror: pushed {} image(s) to the mirror",
            want.len()
        )],
    );
    // The engine's barrier: every node's runtime phase ended before airgap/mirror started.
    for n in nodes {
        let rt = line_of(
            &out,
            &[&format!(
                "[{}] runtime/containerd: run: systemctl restart containerd",
                n.name
            )],
        );
        assert!(rt < pushed, "order:\n{out}");
    }
    let init = line_of(&out, &[&format!("[{cp}] init: run: kubeadm init")]);
    assert!(pushed < init, "order:\n{out}");
    // No image went into any node.
    assert!(lines_with(&out, &["airgap/images"]).is_empty(), "{out}");
    assert_eq!(
        mirror.count_requests("PUT", "/manifests/"),
        want.len(),
        "{}",
        mirror.log()
    );
    assert!(record.exists(), "no import record");

    // Every pull reference of `airgap images -o json` is served by the mirror with the bundle's digest.
    let listed = cli
        .run(&["airgap", "images", "-f", &file_s, "-o", "json"])
        .expect("airgap images");
    assert_eq!(listed.code, 0, "{}", listed.all());
    let listed: serde_json::Value = serde_json::from_str(&listed.stdout).expect("json");
    let pulls: BTreeSet<String> = listed
        .as_array()
        .expect("array")
        .iter()
        .map(|i| i["pull"].as_str().expect("pull").to_string())
        .collect();
    assert_eq!(pulls, want.keys().cloned().collect::<BTreeSet<_>>());
    for pull in &pulls {
        let r = ImageRef::parse(pull).expect("ref");
        assert_eq!(r.registry, mirror.addr(), "{pull}");
        let tag = r.tag.as_deref().expect("tag");
        let head = mirror
            .manifest("HEAD", &r.repository, tag, Some(&ca))
            .expect("HEAD over TLS");
        assert_eq!(head.status, 200, "{pull}");
        assert_eq!(head.digest.as_ref(), want.get(pull), "{pull}");
        let get = mirror
            .manifest("GET", &r.repository, tag, Some(&ca))
            .expect("GET over TLS");
        assert_eq!(get.status, 200, "{pull}");
        assert_eq!(get.digest.as_ref(), want.get(pull), "{pull}");
        assert_eq!(Some(&sha256_digest(&get.body)), want.get(pull), "{pull}");
    }

    // The nodes' containerd holds none of the bundle's images (nor anything else).
    for n in nodes {
        let have = images_in(n);
        assert!(
            have.is_empty(),
            "{}: images in containerd: {have:?}",
            n.name
        );
        assert_eq!(
            sh(
                n,
                "ls /var/lib/clusterctl/airgap 2>/dev/null | grep -c '^images-' || true"
            ),
            "0"
        );
    }

    // Each node's containerd registry configuration is what the runtime phase renders: the mirror's
    // own hosts.toml with the CA path, the upstream registries' hosts.toml pointing at the mirror.
    let rendered = work.path().join("rendered");
    let rr = cli
        .run(&[
            "render",
            "-f",
            &file_s,
            "--output-dir",
            &rendered.display().to_string(),
        ])
        .expect("render");
    assert_eq!(rr.code, 0, "{}", rr.all());
    let host = mirror.addr();
    let pause = pulls
        .iter()
        .find(|p| p.contains("/pause:"))
        .expect("a pause image");
    let ca_path = format!("{CERTS_D}/{host}/ca.crt");
    for n in nodes {
        let local = rendered.join(&n.name).join(CERTS_D.trim_start_matches('/'));
        let files = files_under(&local);
        let own = format!("{host}/hosts.toml");
        assert!(files.contains(&own), "{files:?}");
        assert!(files.contains(&format!("{host}/ca.crt")), "{files:?}");
        for u in &upstreams {
            assert!(files.contains(&format!("{u}/hosts.toml")), "{files:?}");
        }
        for f in &files {
            let want_text = std::fs::read_to_string(local.join(f)).expect("rendered file");
            let have = sh(n, &format!("cat '{CERTS_D}/{f}'"));
            assert_eq!(have, want_text.trim_end(), "{}: {CERTS_D}/{f}", n.name);
        }
        let own_text = sh(n, &format!("cat '{CERTS_D}/{own}'"));
        assert!(
            own_text.contains(&format!("server = \"https://{host}\""))
                && own_text.contains(&format!("ca = \"{ca_path}\"")),
            "{}: {own_text}",
            n.name
        );
        for u in &upstreams {
            let t = sh(n, &format!("cat '{CERTS_D}/{u}/hosts.toml'"));
            assert!(
                t.contains(&format!("[host.\"https://{host}/v2/site\"]"))
                    && t.contains(&format!("ca = \"{ca_path}\"")),
                "{}: {u}: {t}",
                n.name
            );
        }
        assert_eq!(sh(n, &format!("cat '{ca_path}'")), ca.ca_pem.trim_end());
        let config = sh(n, "cat /etc/containerd/config.toml");
        assert!(
            config.contains(&format!("config_path = \"{CERTS_D}\""))
                && config.contains(&format!("\"{pause}\"")),
            "{}: sandbox image {pause} and config_path {CERTS_D} in:\n{config}",
            n.name
        );
    }

    // kubeadm is told to pull from the mirror (every config the stand-in received).
    let repos = sh(
        &nodes[0],
        "grep -h 'imageRepository:' /var/log/clusterctl-standin/*-kubeadm.yaml",
    );
    assert!(!repos.is_empty(), "no kubeadm config with imageRepository");
    let values: Vec<&str> = repos
        .lines()
        .filter_map(|l| l.split_once("imageRepository:"))
        .map(|(_, v)| v.trim().trim_matches('"'))
        .collect();
    assert!(values.contains(&prefix.as_str()), "{repos}");
    for v in &values {
        // CoreDNS's own imageRepository is `<mirror>/coredns`.
        assert!(
            *v == prefix || v.starts_with(&format!("{prefix}/")),
            "{repos}"
        );
    }

    // A second `up` pushes no image and sends the mirror no write.
    let writes = mirror.write_requests();
    let blobs = mirror.blob_count();
    let again = up(&["-v"]);
    assert_eq!(again.code, 0, "{}", again.all());
    let o = again.all();
    assert!(!o.contains("airgap/mirror: pushed"), "{o}");
    assert_eq!(
        lines_with(&o, &["[local] airgap/mirror: done"]).len(),
        1,
        "{o}"
    );
    assert!(
        !o.contains(": write ") && !o.contains(": run: "),
        "second up changed something:\n{o}"
    );
    assert!(o.contains("is up to date; nothing changed"), "{o}");
    assert_eq!(mirror.write_requests(), writes, "{}", mirror.log());
    assert_eq!(mirror.blob_count(), blobs);
    for n in nodes {
        assert!(images_in(n).is_empty(), "{}", n.name);
    }

    // The mirror lost one image (its tag removed from the registry's storage) although the import
    // record lists it: the next `up` asks the mirror, pushes exactly that image again, and uploads no
    // blob (the registry still holds them).
    let lost = want.keys().next().expect("an image");
    let lr = ImageRef::parse(lost).expect("ref");
    let ltag = lr.tag.as_deref().expect("tag");
    let tag_dir = mirror.storage().join(format!(
        "docker/registry/v2/repositories/{}/_manifests/tags/{ltag}",
        lr.repository
    ));
    std::fs::remove_dir_all(&tag_dir).expect("remove the tag");
    let gone = mirror
        .manifest("HEAD", &lr.repository, ltag, Some(&ca))
        .expect("HEAD");
    assert_eq!(gone.status, 404, "{lost} still served");
    let uploads = mirror.count_requests("PUT", "/blobs/uploads/");
    let third = up(&["-v"]);
    assert_eq!(third.code, 0, "{}", third.all());
    let o = third.all();
    line_of(
        &o,
        &["[local] airgap/mirror: pushed 1 image(s) to the mirror (0 blobs"],
    );
    assert_eq!(mirror.count_requests("PUT", "/blobs/uploads/"), uploads);
    let back = mirror
        .manifest("HEAD", &lr.repository, ltag, Some(&ca))
        .expect("HEAD");
    assert_eq!(
        (back.status, back.digest.as_ref()),
        (200, want.get(lost)),
        "{lost}"
    );
}

/// A bundle written while the cluster file named another mirror: the nodes pull from the mirror the
/// file names now (kubeadm `imageRepository`, containerd `hosts.toml`), so `up` pushes there (under
/// the file's prefix), not to the references recorded in the bundle, and the old mirror receives no
/// write.
#[test]
fn up_pushes_to_the_files_mirror_when_the_bundle_recorded_another() {
    if !require("root", is_root())
        || !require("docker", docker_available())
        || !require("docker-registry", registry::available())
    {
        return;
    }
    let source = Registry::start().expect("source registry");
    let ca = TestCa::new(&unique_name("agmo-ca")).expect("CA");
    let old = Registry::start_tls(&ca).expect("old mirror");
    let new = Registry::start_tls(&ca).expect("new mirror");
    let cluster = TestCluster::start("agmo", 1).expect("node container");
    let node = &cluster.nodes[0];
    install_standins(node).expect("stand-ins");
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(work.path().join("mirror-ca.crt"), &ca.ca_pem).expect("CA file");
    let name = unique_name("agmo");
    let file_for = |reg: &Registry| {
        ssh_cluster_yaml(
            &name,
            &cluster.key.private,
            "none",
            None,
            &format!(
                "  registry: {{mirror: \"{}/site\", caFile: mirror-ca.crt}}\n  airgap:\n    bundle: site.tar\n",
                reg.addr()
            ),
            &[FileNode::control_plane(node)],
        )
    };
    let file = work.path().join("cluster.yaml");
    let valid = valid_file(&file, &file_for(&old));
    let summary = bundle_served(
        &valid,
        &source,
        5000,
        work.path(),
        &work.path().join("site.tar"),
    );
    // Source reference → the manifest digest the bundle carries.
    let want: BTreeMap<String, String> = summary
        .manifest
        .images
        .iter()
        .map(|i| (i.source.clone(), i.digest.to_string()))
        .collect();
    drop(source);

    // The site's mirror is another registry: the file now names it.
    std::fs::write(&file, file_for(&new)).expect("cluster file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), work.path());
    let file_s = file.display().to_string();
    let known_hosts = node.known_hosts.display().to_string();
    let r = cli
        .run(&[
            "up",
            "-f",
            &file_s,
            "--known-hosts",
            &known_hosts,
            "--ignore-preflight",
            "time-sync,module/br_netfilter,node-environment,resolv-conf",
            "--only",
            "airgap",
            "-v",
        ])
        .expect("run clusterctl up");
    assert_eq!(r.code, 0, "{}", r.all());
    let listed = cli
        .run(&["airgap", "images", "-f", &file_s, "-o", "json"])
        .expect("airgap images");
    assert_eq!(listed.code, 0, "{}", listed.all());
    let listed: serde_json::Value = serde_json::from_str(&listed.stdout).expect("json");
    let listed = listed.as_array().expect("array");
    assert_eq!(listed.len(), want.len());
    for i in listed {
        let (src, pull) = (
            i["source"].as_str().expect("source"),
            i["pull"].as_str().expect("pull"),
        );
        let r = ImageRef::parse(pull).expect("ref");
        assert_eq!(r.registry, new.addr(), "{pull}");
        let head = new
            .manifest(
                "HEAD",
                &r.repository,
                r.tag.as_deref().expect("tag"),
                Some(&ca),
            )
            .expect("HEAD over TLS");
        assert_eq!(
            (head.status, head.digest.as_ref()),
            (200, want.get(src)),
            "{pull} not on the file's mirror; old mirror's writes: {}",
            old.write_requests()
        );
    }
    assert_eq!(old.write_requests(), 0, "the old mirror was written to");
}
