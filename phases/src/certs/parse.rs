//! A certificate's names and dates as `certs check-expiration` reads them: from a PEM file through
//! [`crate::pki::dates`] (the first `CERTIFICATE` block; a key beside it is skipped and never kept),
//! or from a kubeconfig's embedded `users[0].user.client-certificate-data`; and how dates and residual
//! times are written. Nothing on the node is needed beyond reading the file.

use base64::Engine as _;

pub(crate) use crate::pki::Dates as Parsed;

/// Why a certificate could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParseError {
    /// The PEM certificate could not be read.
    #[error(transparent)]
    Certificate(#[from] crate::pki::BadCertificate),
    /// The kubeconfig is not YAML (the text holds credentials: the message names no part of it).
    #[error("the kubeconfig is not YAML")]
    Yaml(#[source] serde_yaml::Error),
    /// The kubeconfig embeds no client certificate (e.g. it names a file instead).
    #[error("the kubeconfig embeds no client certificate (users[0].user.client-certificate-data)")]
    NoClientCertificate,
    /// `client-certificate-data` is not base64.
    #[error("client-certificate-data is not base64")]
    Base64(#[source] base64::DecodeError),
}

/// The first `CERTIFICATE` block of `pem`. Errors: none, or it does not parse.
pub(crate) fn pem_certificate(pem: &[u8]) -> Result<Parsed, ParseError> {
    Ok(crate::pki::dates(pem)?)
}

/// The client certificate embedded in a kubeconfig (`users[0].user.client-certificate-data`, base64
/// of PEM). Errors: not YAML, no embedded certificate, or it does not parse.
pub(crate) fn kubeconfig_certificate(text: &[u8]) -> Result<Parsed, ParseError> {
    let v: serde_yaml::Value = serde_yaml::from_slice(text).map_err(ParseError::Yaml)?;
    let data = v["users"][0]["user"]["client-certificate-data"]
        .as_str()
        .ok_or(ParseError::NoClientCertificate)?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(ParseError::Base64)?;
    pem_certificate(&pem)
}

/// `YYYY-MM-DDTHH:MM:SSZ` (RFC 3339, UTC) for `secs` since the Unix epoch.
pub(crate) fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let s = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        (s / 60) % 60,
        s % 60
    )
}

/// A residual time as kubeadm prints it: `364d`, `9y`, `23h`, `59m`, or `expired`.
pub(crate) fn residual(secs: i64) -> String {
    const DAY: i64 = 86_400;
    match secs {
        s if s <= 0 => "expired".to_string(),
        s if s >= 2 * 365 * DAY => format!("{}y", s / (365 * DAY)),
        s if s >= 2 * DAY => format!("{}d", s / DAY),
        s if s >= 2 * 3600 => format!("{}h", s / 3600),
        s => format!("{}m", s / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(cn: &str, days: i64) -> (String, String) {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        p.not_before = rcgen::date_time_ymd(2026, 1, 2);
        p.not_after = p.not_before + std::time::Duration::from_secs((days * 86_400) as u64);
        let key = rcgen::KeyPair::generate().expect("key");
        let c = p.self_signed(&key).expect("cert");
        (c.pem(), key.serialize_pem())
    }

    #[test]
    fn the_first_certificate_of_a_pem_file_with_its_key() {
        let (pem, key) = cert("system:node:w1", 365);
        // The kubelet's kubelet-client-current.pem: certificate and key in one file, either order.
        for text in [format!("{pem}{key}"), format!("{key}{pem}")] {
            let p = pem_certificate(text.as_bytes()).expect("parsed");
            assert_eq!(p.subject, "system:node:w1");
            assert!(p.self_issued);
            assert_eq!(rfc3339(p.not_before), "2026-01-02T00:00:00Z");
            assert_eq!(p.not_after - p.not_before, 365 * 86_400);
        }
        assert!(matches!(
            pem_certificate(key.as_bytes()),
            Err(ParseError::Certificate(_))
        ));
    }

    #[test]
    fn the_client_certificate_of_a_kubeconfig() {
        let (pem, key) = cert("kubernetes-admin", 10);
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let conf = format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: a\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(&pem),
            b64(&key)
        );
        let p = kubeconfig_certificate(conf.as_bytes()).expect("parsed");
        assert_eq!(p.subject, "kubernetes-admin");
        let named = "users:\n- name: a\n  user: {client-certificate: /var/lib/kubelet/pki/x.pem}\n";
        assert!(matches!(
            kubeconfig_certificate(named.as_bytes()),
            Err(ParseError::NoClientCertificate)
        ));
    }

    #[test]
    fn dates_and_residual_times() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_798_761_599), "2026-12-31T23:59:59Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(residual(-5), "expired");
        assert_eq!(residual(364 * 86_400 + 5), "364d");
        assert_eq!(residual(3650 * 86_400), "10y");
        assert_eq!(residual(30 * 3600), "30h");
        assert_eq!(residual(119 * 60), "119m");
    }
}
