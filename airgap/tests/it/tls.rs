//! A registry mirror behind TLS with a CA made by the test (rcgen): Debian's `docker-registry` serving
//! HTTPS on loopback with a certificate of that CA. The cluster file names the mirror and its CA
//! (`registry.caFile`); the client built from the file (`run::client_options`) speaks HTTPS to it
//! even on loopback, uploads an image and reads it back by digest. A client trusting another CA is
//! refused at the TLS handshake (an unknown issuer) and stores nothing.

use clusterctl_airgap::registry::{ClientOptions, RegistryClient};
use clusterctl_airgap::run::client_options;
use clusterctl_airgap::Digest;
use clusterctl_testbed::registry::{self, image, layer, Registry, Rng, TestCa, TestImage};
use clusterctl_testbed::require;

fn push(client: &RegistryClient, host: &str, repo: &str, tag: &str, img: &TestImage) {
    for b in &img.blobs {
        let bytes = b.bytes.clone();
        client
            .upload_blob(
                host,
                repo,
                &Digest::parse(&b.digest).expect("digest"),
                bytes.len() as u64,
                &move || {
                    Ok(Box::new(std::io::Cursor::new(bytes.clone()))
                        as Box<dyn std::io::Read + Send>)
                },
            )
            .expect("upload over TLS");
    }
    client
        .put_manifest(
            host,
            repo,
            tag,
            &img.manifest.media_type,
            &img.manifest.bytes,
        )
        .expect("manifest over TLS");
}

#[test]
fn mirror_with_the_files_ca_is_reached_and_a_wrong_ca_is_refused() {
    if !require("docker-registry", registry::available()) {
        return;
    }
    let ca = TestCa::new("clusterctl air-gap test CA").expect("CA");
    let other = TestCa::new("some other CA").expect("CA");
    let reg = Registry::start_tls(&ca).expect("TLS registry");
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(work.path().join("mirror-ca.crt"), &ca.ca_pem).expect("ca");
    let file = work.path().join("cluster.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: tls}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  networking: {{podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/16, cni: {{plugin: none}}}}\n  registry: {{mirror: \"{}/library\", caFile: mirror-ca.crt}}\n  ssh: {{user: root}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: 10.88.0.11}}\n",
            reg.addr()
        ),
    )
    .expect("cluster file");
    let loaded = clusterctl_spec::load(&file).expect("load");
    let cluster = clusterctl_spec::validate(&loaded)
        .map_err(|d| d.to_string())
        .expect("valid")
        .cluster;

    // The file's CA setting: HTTPS on loopback, the test CA trusted.
    let opts = client_options(&cluster);
    assert_eq!(opts.tls_hosts, vec![reg.addr().to_string()]);
    let client = RegistryClient::new(opts).expect("client");
    let mut rng = Rng(77);
    let img = image(
        &[layer(&mut rng, "tls.bin", 5000).expect("layer")],
        "amd64",
        "tls",
    );
    push(&client, reg.addr(), "library/pause", "3.10.1", &img);
    let want = Digest::parse(&img.manifest.digest).expect("digest");
    assert_eq!(
        client
            .head_manifest(reg.addr(), "library/pause", "3.10.1")
            .expect("head"),
        Some(want.clone())
    );
    let got = client
        .get_manifest(reg.addr(), "library/pause", "3.10.1")
        .expect("get");
    assert_eq!(got.digest, want);
    let stored = reg.blob_count();
    assert!(stored >= 3, "{stored}");

    // A client trusting another CA is refused at the handshake and stores nothing.
    let wrong = RegistryClient::new(ClientOptions {
        ca_pem: Some(other.ca_pem.clone()),
        tls_hosts: vec![reg.addr().to_string()],
        ..Default::default()
    })
    .expect("client");
    let err = wrong
        .head_manifest(reg.addr(), "library/pause", "3.10.1")
        .expect_err("wrong CA must be refused")
        .to_string();
    assert!(
        err.contains("https://") && err.to_lowercase().contains("certificate"),
        "{err}"
    );
    let mut rng = Rng(78);
    let other_img = image(
        &[layer(&mut rng, "x.bin", 4000).expect("layer")],
        "amd64",
        "x",
    );
    let b = other_img.blobs[1].clone();
    let r = wrong.upload_blob(
        reg.addr(),
        "library/x",
        &Digest::parse(&b.digest).expect("digest"),
        b.bytes.len() as u64,
        &move || {
            Ok(Box::new(std::io::Cursor::new(b.bytes.clone())) as Box<dyn std::io::Read + Send>)
        },
    );
    assert!(r.is_err(), "upload with the wrong CA succeeded");
    assert_eq!(reg.blob_count(), stored);

    // The same file without its CA: the system roots do not know the test CA.
    let plain = RegistryClient::new(ClientOptions {
        tls_hosts: vec![reg.addr().to_string()],
        ..Default::default()
    })
    .expect("client");
    assert!(plain
        .head_manifest(reg.addr(), "library/pause", "3.10.1")
        .is_err());
}
