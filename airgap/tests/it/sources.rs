//! `airgap bundle` from a private source registry named in `airgap.sourceRegistries`: Debian's
//! `docker-registry` on loopback serving HTTPS with a certificate of a CA made by the test and asking
//! for HTTP basic credentials (an htpasswd file with a bcrypt entry made by `htpasswd -B`). It holds
//! the file's preload images (fixtures built from random bytes, copied in with skopeo); the
//! Kubernetes images come anonymously from a plain loopback registry (`--source-registry-override`).
//!
//! With the file's entry (CA, variable names) and the variables set, the bundle verifies and carries
//! the preload images with their digests; without the variables the bundle is refused before any pull,
//! naming the registry and both variable names; a wrong password is refused naming the variables;
//! a file whose `caFile` is another CA fails at the TLS handshake naming the registry. The password
//! appears in no error and in no file the runs leave (bundle, cache, cluster files).

use crate::common;

use clusterctl_airgap::bundle::verify_bundle;
use clusterctl_airgap::plan::list_images;
use clusterctl_airgap::registry::{EnvCredentials, RegistryClient};
use clusterctl_airgap::run::{bundle_cluster, source_client_options, BundleOptions};
use clusterctl_airgap::ImageRef;
use clusterctl_spec::ValidCluster;
use clusterctl_testbed::registry::{Registry, TestCa};
use clusterctl_testbed::{require, unique_name};
use common::*;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const USER: &str = "robot-preload";

/// An htpasswd line for `user` with a bcrypt hash of `password` (given on stdin, not argv).
fn htpasswd(user: &str, password: &str) -> String {
    let mut child = Command::new("htpasswd")
        .args(["-B", "-n", "-i", user])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("htpasswd runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(password.as_bytes())
        .expect("password to htpasswd");
    let out = child.wait_with_output().expect("htpasswd output");
    assert!(
        out.status.success(),
        "htpasswd: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(line.starts_with(&format!("{USER}:$2")), "bcrypt entry");
    format!("{line}\n")
}

/// Loads and validates a cluster file.
fn valid(file: &Path) -> ValidCluster {
    let loaded = clusterctl_spec::load(file).expect("load");
    clusterctl_spec::validate(&loaded)
        .map_err(|d| d.to_string())
        .expect("valid")
        .cluster
}

/// Every file under `dir` (recursively).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Unsets the test's variables when dropped, also on failure.
struct EnvGuard(Vec<String>);

impl Drop for EnvGuard {
    fn drop(&mut self) {
        for v in &self.0 {
            std::env::remove_var(v);
        }
    }
}

#[test]
fn bundle_from_a_private_source_registry_with_basic_auth_and_its_ca() {
    let htpasswd_bin = Path::new("/usr/bin/htpasswd").exists();
    if !require(
        "docker-registry, skopeo and htpasswd (apache2-utils)",
        peers_available() && htpasswd_bin,
    ) {
        return;
    }
    let id = unique_name("").to_uppercase();
    let (user_var, pass_var) = (format!("CC_SRC_USER_{id}"), format!("CC_SRC_PASS_{id}"));
    let _env = EnvGuard(vec![user_var.clone(), pass_var.clone()]);
    let password = format!("pw-{}-{}", unique_name("s"), std::process::id());

    let ca = TestCa::new("clusterctl source registry CA").expect("CA");
    let other = TestCa::new("some other CA").expect("CA");
    let private = Registry::start_tls_basic_auth(&ca, &htpasswd(USER, &password))
        .expect("TLS registry with basic auth");
    let public = Registry::start().expect("plain registry");
    let fx = fill(&public, 41, 1, 6000, 3000);

    // The private registry holds the preload images (pushed with the credentials and the CA).
    let work = scratch("cc-airgap-src-");
    let certs = work.path().join("skopeo-certs");
    std::fs::create_dir_all(&certs).expect("mkdir");
    std::fs::write(certs.join("ca.crt"), &ca.ca_pem).expect("ca");
    let creds = format!("{USER}:{password}");
    for (name, _) in &fx.images {
        skopeo(&[
            "copy",
            "--all",
            "--preserve-digests",
            "--quiet",
            "--src-tls-verify=false",
            &format!("--dest-cert-dir={}", certs.display()),
            &format!("--dest-creds={creds}"),
            &format!("docker://{}/{name}", public.addr()),
            &format!("docker://{}/{name}", private.addr()),
        ]);
    }
    std::fs::remove_dir_all(&certs).expect("rm certs");

    std::fs::write(work.path().join("source-ca.crt"), &ca.ca_pem).expect("ca");
    std::fs::write(work.path().join("other-ca.crt"), &other.ca_pem).expect("ca");
    let text = |ca_file: &str| {
        format!(
            "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: sources}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  networking: {{podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/16, cni: {{plugin: none}}}}\n  ssh: {{user: root}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: 10.88.0.11}}\n  images:\n    preload: [\"{p}/fixture/app0:v1\", \"{p}/fixture/multi:v1\"]\n  airgap:\n    bundle: site.tar\n    sourceRegistries:\n      - registry: \"{p}\"\n        usernameEnv: {user_var}\n        passwordEnv: {pass_var}\n        caFile: {ca_file}\n",
            p = private.addr()
        )
    };
    let file = work.path().join("cluster.yaml");
    std::fs::write(&file, text("source-ca.crt")).expect("cluster file");
    let cluster = valid(&file);

    // The Kubernetes images come anonymously from the plain registry, under their upstream paths.
    let list = list_images(&cluster);
    let mut upstreams = BTreeSet::new();
    for i in &list {
        let r = ImageRef::parse(&i.source).expect("ref");
        if r.registry == private.addr() {
            continue;
        }
        skopeo(&[
            "copy",
            "--quiet",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
            &format!("docker://{}/fixture/app0:v1", public.addr()),
            &format!(
                "docker://{}/{}:{}",
                public.addr(),
                r.repository,
                r.tag.as_deref().expect("tagged")
            ),
        ]);
        upstreams.insert(r.registry.clone());
    }
    let bundle = |cluster: &ValidCluster, out: &str| {
        let mut opts = BundleOptions {
            out: work.path().join(out),
            base_dir: work.path().to_path_buf(),
            client: source_client_options(cluster),
            ..Default::default()
        };
        opts.pull.registry_overrides = upstreams
            .iter()
            .map(|u| (u.clone(), public.addr().to_string()))
            .collect();
        bundle_cluster(cluster, &opts)
    };
    let mut errors = Vec::new();

    // Without the variables: refused before any pull, naming the registry and both variables.
    let before = private.count_requests("GET", "/v2/");
    let err = bundle(&cluster, "none.tar")
        .expect_err("no credentials")
        .to_string();
    for want in [private.addr(), &user_var, &pass_var] {
        assert!(err.contains(want), "{want} not named: {err}");
    }
    assert_eq!(private.count_requests("GET", "/v2/"), before, "no request");
    errors.push(err);

    // A wrong password: the registry refuses it, the error names the variables.
    std::env::set_var(&user_var, USER);
    std::env::set_var(&pass_var, format!("{password}-wrong"));
    let err = bundle(&cluster, "wrong.tar")
        .expect_err("wrong password")
        .to_string();
    assert!(err.contains(private.addr()), "{err}");
    assert!(
        err.contains("refused") && err.contains(&pass_var),
        "names the variables: {err}"
    );
    errors.push(err);

    // The file's entry with the variables set: the bundle verifies and carries the images.
    std::env::set_var(&pass_var, &password);
    let (summary, stats) = bundle(&cluster, "site.tar").expect("bundle");
    assert!(stats.blobs_fetched > 0);
    assert_eq!(summary.manifest.images.len(), list.len());
    let vb = verify_bundle(&work.path().join("site.tar")).expect("bundle verifies");
    let app0 = &fx
        .images
        .iter()
        .find(|(n, _)| n == "fixture/app0:v1")
        .expect("app0")
        .1;
    let carried = |source: &str| {
        vb.manifest
            .images
            .iter()
            .find(|i| i.source == source)
            .unwrap_or_else(|| panic!("{source} not in the bundle"))
    };
    let a = carried(&format!("{}/fixture/app0:v1", private.addr()));
    assert_eq!(&a.digest, app0);
    let m = carried(&format!("{}/fixture/multi:v1", private.addr()));
    assert_eq!(m.source_digest, fx.multi_index);
    assert_eq!(m.platforms, vec!["linux/amd64".to_string()]);
    assert!(
        private.count_requests("GET", "/manifests/") >= 2,
        "pulled from the private registry"
    );

    // Another CA in the file: the TLS handshake fails, naming the registry.
    let wrong_file = work.path().join("cluster-wrong-ca.yaml");
    std::fs::write(&wrong_file, text("other-ca.crt")).expect("cluster file");
    let err = bundle(&valid(&wrong_file), "wrong-ca.tar")
        .expect_err("wrong CA")
        .to_string();
    assert!(err.contains(private.addr()), "{err}");
    assert!(
        err.contains("UnknownIssuer") || err.contains("certificate"),
        "a TLS error: {err}"
    );
    errors.push(err);

    // The CA is trusted for its registry only: the same server under another name (`localhost`,
    // also on its certificate) is trusted with the CA given for that name, and not otherwise.
    let port = private.addr().rsplit_once(':').expect("port").1;
    let localhost = format!("localhost:{port}");
    let mut o = source_client_options(&cluster);
    o.host_cas = vec![(localhost.clone(), ca.ca_pem.clone())];
    o.tls_hosts = vec![private.addr().to_string(), localhost.clone()];
    o.credentials.push(EnvCredentials {
        registry: localhost.clone(),
        username_var: user_var.clone(),
        password_var: pass_var.clone(),
    });
    let client = RegistryClient::new(o).expect("client");
    assert_eq!(
        client
            .head_manifest(&localhost, "fixture/app0", "v1")
            .expect("trusted under the name the CA is given for"),
        Some(app0.clone())
    );
    let err = client
        .head_manifest(private.addr(), "fixture/app0", "v1")
        .expect_err("not trusted for another host")
        .to_string();
    assert!(err.contains("UnknownIssuer"), "{err}");
    errors.push(err);

    // The password is in no error and no file the runs left.
    for e in &errors {
        assert!(!e.contains(&password), "password printed: {e}");
    }
    let mut scanned = 0;
    for f in files(work.path()) {
        let bytes = std::fs::read(&f).expect("read");
        assert!(
            !bytes
                .windows(password.len())
                .any(|w| w == password.as_bytes()),
            "password stored in {}",
            f.display()
        );
        scanned += 1;
    }
    assert!(scanned > 5, "bundle and cache scanned ({scanned} files)");
}
