//! Reading PEM certificates read from a node, here in clusterctl instead of with a tool on the node
//! (`openssl` is not on every node): the subject alternative names of a serving certificate, the
//! sha256 of a CA's public key (kubeadm's `--discovery-token-ca-cert-hash`), and the names and dates
//! `certs check-expiration` reports. The first `CERTIFICATE` block of a file is read (a kubelet's
//! `kubelet-client-current.pem` holds its key too, which is skipped and never kept); no key is ever
//! read through this module.

use sha2::{Digest, Sha256};
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;

/// A PEM certificate that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a PEM X.509 certificate: {reason}")]
pub(crate) struct BadCertificate {
    /// What the parser said.
    pub reason: String,
}

fn bad(e: impl std::fmt::Display) -> BadCertificate {
    BadCertificate {
        reason: e.to_string(),
    }
}

/// Parses the first `CERTIFICATE` block of `pem` and hands it to `f`.
fn with_cert<T>(
    pem: &[u8],
    f: impl FnOnce(&x509_parser::certificate::X509Certificate<'_>) -> Result<T, BadCertificate>,
) -> Result<T, BadCertificate> {
    for block in Pem::iter_from_buffer(pem) {
        let block = block.map_err(bad)?;
        if block.label == "CERTIFICATE" {
            let cert = block.parse_x509().map_err(bad)?;
            return f(&cert);
        }
    }
    Err(bad("no PEM CERTIFICATE block"))
}

/// The names and dates of a certificate (`certs check-expiration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dates {
    /// The subject's common name (empty when it has none).
    pub subject: String,
    /// The issuer's common name (empty when it has none).
    pub issuer: String,
    /// Issuer and subject are the same name (a CA, or a self-signed certificate).
    pub self_issued: bool,
    /// `notBefore`, seconds since the Unix epoch.
    pub not_before: i64,
    /// `notAfter`, seconds since the Unix epoch.
    pub not_after: i64,
}

/// Subject, issuer and validity of the first certificate in `pem`.
/// Errors: no `CERTIFICATE` block, or it does not parse.
pub(crate) fn dates(pem: &[u8]) -> Result<Dates, BadCertificate> {
    with_cert(pem, |cert| {
        let cn = |name: &x509_parser::x509::X509Name<'_>| {
            name.iter_common_name()
                .next()
                .and_then(|c| c.as_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let validity = cert.validity();
        Ok(Dates {
            subject: cn(cert.subject()),
            issuer: cn(cert.issuer()),
            self_issued: cert.subject() == cert.issuer(),
            not_before: validity.not_before.timestamp(),
            not_after: validity.not_after.timestamp(),
        })
    })
}

/// The subject alternative names of the first certificate in `pem`: DNS names as written, IP addresses
/// in their usual text form (`10.0.0.1`, `fd00::1`).
/// Errors: not a PEM certificate, or an unreadable extension.
pub(crate) fn sans(pem: &[u8]) -> Result<Vec<String>, BadCertificate> {
    with_cert(pem, |cert| {
        let Some(ext) = cert.subject_alternative_name().map_err(bad)? else {
            return Ok(Vec::new());
        };
        Ok(ext
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(d) => Some((*d).to_string()),
                GeneralName::IPAddress(b) => ip_text(b),
                _ => None,
            })
            .collect())
    })
}

fn ip_text(b: &[u8]) -> Option<String> {
    match b.len() {
        4 => <[u8; 4]>::try_from(b)
            .ok()
            .map(|a| std::net::Ipv4Addr::from(a).to_string()),
        16 => <[u8; 16]>::try_from(b)
            .ok()
            .map(|a| std::net::Ipv6Addr::from(a).to_string()),
        _ => None,
    }
}

/// `sha256:<hex>` of the DER SubjectPublicKeyInfo of the first certificate in `pem` — what
/// `kubeadm join --discovery-token-ca-cert-hash` pins.
/// Errors: not a PEM certificate.
pub(crate) fn spki_sha256(pem: &[u8]) -> Result<String, BadCertificate> {
    with_cert(pem, |cert| {
        Ok(format!(
            "sha256:{}",
            hex::encode(Sha256::digest(cert.public_key().raw))
        ))
    })
}

/// True when `san` (a name as written in the file) is among `have`; IP addresses compare by value
/// (`fd00:0::1` is `fd00::1`).
pub(crate) fn san_present(have: &[String], san: &str) -> bool {
    let ip: Option<std::net::IpAddr> = san.parse().ok();
    have.iter().any(|h| {
        h == san
            || ip.is_some_and(|ip| h.parse::<std::net::IpAddr>().ok() == Some(ip))
            || h.eq_ignore_ascii_case(san)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // A self-signed certificate with SANs DNS:kubernetes, DNS:api.example.com, IP:10.0.0.1, IP:fd00::1
    // (openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -days 3650 -subj /CN=t -addext
    // subjectAltName=...), and the sha256 of its public key as `openssl x509 -pubkey | openssl pkey
    // -pubin -outform der | sha256sum` printed it.
    const CERT: &str = include_str!("pki_test_cert.pem");
    const HASH: &str = "sha256:828828ba9cf52c72500b8c10c461fdad8f5b27e1f92cf88fceddbe0d2672084b";

    #[test]
    fn sans_are_read_as_text() {
        let s = sans(CERT.as_bytes()).expect("sans");
        assert_eq!(s, ["kubernetes", "api.example.com", "10.0.0.1", "fd00::1"]);
        assert!(san_present(&s, "fd00:0::1") && san_present(&s, "API.example.com"));
        assert!(!san_present(&s, "10.0.0.2"));
    }

    #[test]
    fn spki_hash_matches_openssl() {
        assert_eq!(spki_sha256(CERT.as_bytes()).expect("hash"), HASH);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(sans(b"not a certificate").is_err());
        assert!(spki_sha256(b"").is_err());
    }
}
