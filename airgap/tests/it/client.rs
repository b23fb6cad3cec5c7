//! The distribution client against a real loopback `docker-registry`: monolithic and chunked
//! uploads, HEAD, download with digest verification, cross-repository mount, a wrong digest refused
//! by the registry; and the bearer-token flow against a small loopback token server.

use crate::common;

use clusterctl_airgap::registry::{ClientOptions, RegistryClient};
use clusterctl_airgap::Digest;
use clusterctl_testbed::registry::Registry;
use clusterctl_testbed::require;
use common::*;
use std::io::{Read, Write};

fn reader(bytes: &[u8]) -> impl Fn() -> clusterctl_airgap::Result<Box<dyn Read + Send>> + '_ {
    move || Ok(Box::new(std::io::Cursor::new(bytes.to_vec())) as Box<dyn Read + Send>)
}

#[test]
fn uploads_monolithic_and_chunked_then_reads_back() {
    if !require("docker-registry", clusterctl_testbed::registry::available()) {
        return;
    }
    let reg = Registry::start().expect("registry");
    let client = RegistryClient::new(ClientOptions {
        chunk_size: 10_000,
        ..Default::default()
    })
    .expect("client");
    let work = scratch("cc-airgap-client-");
    let mut rng = Rng(3);
    for (i, size) in [5_000usize, 10_000, 45_001].into_iter().enumerate() {
        let bytes = rng.bytes(size);
        let d = Digest::of(&bytes);
        assert!(!client.head_blob(reg.addr(), "t/one", &d).expect("head"));
        client
            .upload_blob(reg.addr(), "t/one", &d, size as u64, &reader(&bytes))
            .expect("upload");
        assert!(client.head_blob(reg.addr(), "t/one", &d).expect("head"));
        let dest = work.path().join(format!("b{i}"));
        let n = client
            .get_blob_to_file(reg.addr(), "t/one", &d, Some(size as u64), &dest, &|_| {})
            .expect("get");
        assert_eq!(n, size as u64);
        assert_eq!(std::fs::read(&dest).expect("read"), bytes);
        // Mounted into another repository without sending the bytes again.
        assert!(client
            .mount_blob(reg.addr(), "t/two", &d, "t/one")
            .expect("mount"));
        assert!(client.head_blob(reg.addr(), "t/two", &d).expect("head"));
    }
    // A PATCH per chunk for the 45 001-byte blob (5 chunks), none for the others.
    assert_eq!(reg.count_requests("PATCH", "/v2/t/one/blobs/uploads/"), 5);
    // Content that does not match the digest is refused by the registry, and nothing is stored.
    let bytes = rng.bytes(1000);
    let wrong = Digest::of(b"something else");
    assert!(client
        .upload_blob(reg.addr(), "t/one", &wrong, 1000, &reader(&bytes))
        .is_err());
    assert!(!client.head_blob(reg.addr(), "t/one", &wrong).expect("head"));
    // A download whose content does not match is refused and leaves no file.
    let real = rng.bytes(2000);
    let d = Digest::of(&real);
    client
        .upload_blob(reg.addr(), "t/one", &d, 2000, &reader(&real))
        .expect("upload");
    let dest = work.path().join("mismatch");
    assert!(client
        .get_blob_to_file(reg.addr(), "t/one", &d, Some(1999), &dest, &|_| {})
        .is_err());
    assert!(!dest.exists());
}

/// A loopback server playing registry + token service: `/v2/…` answers 401 with a Bearer challenge
/// unless `Authorization: Bearer tok-123` is sent; `/token` returns that token when asked with the
/// expected service and scope and HTTP basic credentials `u:p`.
fn token_server() -> (String, std::thread::JoinHandle<Vec<String>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    let a2 = addr.clone();
    let h = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for _ in 0..4 {
            let Ok((mut s, _)) = l.accept() else { break };
            let mut buf = vec![0u8; 8192];
            let n = s.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]).into_owned();
            let line = req.lines().next().unwrap_or("").to_string();
            let auth = req
                .lines()
                .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
                .unwrap_or("")
                .to_string();
            seen.push(format!("{line} | {auth}"));
            let resp = if line.starts_with("GET /token?") {
                let ok = line.contains("service=reg.test")
                    && line.contains("scope=repository%3At%2Fimg%3Apull")
                    && auth.contains("Basic dTpw");
                let body = if ok {
                    r#"{"token":"tok-123"}"#
                } else {
                    r#"{}"#
                };
                format!("HTTP/1.1 {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", if ok { "200 OK" } else { "401 Unauthorized" }, body.len())
            } else if auth.contains("Bearer tok-123") {
                let body = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}"#;
                format!("HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
            } else {
                format!("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"http://{a2}/token\",service=\"reg.test\",scope=\"repository:t/img:pull\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            };
            let _ = s.write_all(resp.as_bytes());
            if seen.len() >= 3 {
                break;
            }
        }
        seen
    });
    (addr, h)
}

#[test]
fn answers_a_bearer_challenge_with_basic_credentials_from_env() {
    let (addr, server) = token_server();
    std::env::set_var("CC_TEST_REG_USER", "u");
    std::env::set_var("CC_TEST_REG_PASS", "p");
    let creds = clusterctl_airgap::registry::EnvCredentials {
        registry: addr.clone(),
        username_var: "CC_TEST_REG_USER".into(),
        password_var: "CC_TEST_REG_PASS".into(),
    };
    let client = RegistryClient::new(ClientOptions {
        credentials: vec![creds],
        ..Default::default()
    })
    .expect("client");
    let m = client
        .get_manifest(&addr, "t/img", "v1")
        .expect("manifest through a bearer token");
    assert_eq!(m.media_type, "application/vnd.oci.image.manifest.v1+json");
    let seen = server.join().expect("server");
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen[1].starts_with("GET /token?"), "{seen:?}");
    assert!(seen[2].contains("Bearer tok-123"), "{seen:?}");
}
