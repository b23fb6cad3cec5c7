//! Rules on the registry mirror and images: the mirror is a `host[:port]/path` rewrite prefix; credentials
//! only by environment variable name (an inline `username`/`password` is an error that never echoes the
//! value); the CA file was read and holds a PEM certificate; preload images parse; no two images the
//! cluster needs land on the same reference under the prefix.

use super::credentials::{self, CredentialFields};
use super::{Ctx, DEFAULT_KUBE_VIP_IMAGE};
use crate::diag::Diagnostic;
use crate::image::ImageRef;
use crate::load::Referenced;
use crate::mirror;
use crate::model::ClusterFile;
use crate::syntax;
use crate::valid::Mirror;

use super::rules_meta::Meta;

/// `Some(None)`: no mirror; `Some(Some(m))`: a valid mirror; `None`: errors.
pub(crate) fn check(
    ctx: &mut Ctx<'_>,
    file: &ClusterFile,
    meta: Option<&Meta>,
) -> Option<Option<Mirror>> {
    let mut ok = true;
    for (i, img) in file.spec.images.preload.iter().enumerate() {
        if ImageRef::parse(img).is_err() {
            ok = false;
            ctx.push(
                Diagnostic::error("spec::image", format!("{img:?} is not an image reference"))
                    .help("write `[registry/]repository:tag`, e.g. `cka-api:v4` (the tag must match what the Pods ask for)")
                    .at(format!("spec.images.preload[{i}]")),
            );
        }
    }
    let Some(reg) = &file.spec.registry else {
        return ok.then_some(None);
    };
    // Inline credentials: say how to fix it, never print the value.
    ok &= credentials::check(
        ctx,
        &CredentialFields {
            at: "spec.registry",
            subject: "registry",
            example: "HARBOR",
            command: "clusterctl",
            pair_prefix: String::new(),
            inline: [
                ("password", reg.password.is_some()),
                ("username", reg.username.is_some()),
            ],
            username_env: &reg.username_env,
            password_env: &reg.password_env,
        },
    );
    // `registry.local` alone (rules_lab checks it): no mirror.
    let Some(written) = &reg.mirror else {
        return ok.then_some(None);
    };
    let prefix = written.trim().trim_end_matches('/').to_string();
    let parts = match mirror_parts(&prefix) {
        Ok(p) => Some(p),
        Err(why) => {
            ok = false;
            ctx.push(
                Diagnostic::error("spec::mirror", format!("mirror {written:?} {why}"))
                    .help("write the rewrite prefix as `host[:port]/path`, e.g. `harbor.example.com/library` (no scheme, no tag)")
                    .at("spec.registry.mirror"),
            );
            None
        }
    };
    let ca_pem = match &reg.ca_file {
        None => None,
        Some(path) => pem_file(ctx, path, "spec.registry.caFile", "registry CA"),
    };
    if reg.ca_file.is_some() && ca_pem.is_none() {
        ok = false;
    }
    if let (Some(_), Some(meta)) = (&parts, meta) {
        let mut images: Vec<String> = meta.version.kubeadm_images();
        for v in &meta.extra_versions {
            images.extend(v.kubeadm_images());
        }
        if file.spec.control_plane.vip.is_some() {
            let kv = file
                .spec
                .control_plane
                .vip
                .as_ref()
                .and_then(|v| v.image.clone())
                .unwrap_or_else(|| DEFAULT_KUBE_VIP_IMAGE.to_string());
            images.push(kv);
        }
        images.extend(file.spec.images.preload.iter().cloned());
        for (a, b, m) in mirror::collisions(&prefix, &images) {
            ok = false;
            ctx.push(
                Diagnostic::error("spec::mirror-collision", format!("{a} and {b} would both be stored as {m}"))
                    .help("the mirror keeps only the path below the source registry; rename or retag one of the images, or drop one")
                    .at("spec.registry.mirror"),
            );
        }
    }
    if !ok {
        return None;
    }
    let (host, path) = parts?;
    Some(Some(Mirror {
        prefix,
        host,
        path,
        ca_pem,
        ca_file: reg.ca_file.clone(),
        username_env: reg.username_env.clone(),
        password_env: reg.password_env.clone(),
    }))
}

/// Why a registry prefix (the mirror's `host[:port]/path`, a source registry's `host[:port]`) is
/// refused; the text continues `mirror "x" …` or `source registry "x" …`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PrefixError {
    /// Nothing written.
    #[error("is empty")]
    Empty,
    /// A URL instead of a prefix.
    #[error("must not have a scheme (remove `https://`)")]
    Scheme,
    /// An `@digest` part.
    #[error("must not contain a digest")]
    Digest,
    /// A port that is not a number 0–65535.
    #[error("port {text:?} is not a number")]
    Port {
        /// The port as written.
        text: String,
        /// The parser's error.
        #[source]
        source: std::num::ParseIntError,
    },
    /// A host that is neither an address, `localhost` nor a DNS name.
    #[error("host {host:?} {source}")]
    Host {
        /// The host as written.
        host: String,
        /// Why it is not a DNS name.
        #[source]
        source: crate::syntax::SyntaxError,
    },
    /// A path that is not a repository path.
    #[error("path {path:?} is not a repository path (lower-case, no tag)")]
    RepositoryPath {
        /// The path as written.
        path: String,
        /// Why an image under it does not parse.
        #[source]
        source: crate::image::ReferenceError,
    },
    /// A path where only a registry host is allowed (source registries: credentials are per registry).
    #[error("must not have a path (the credentials are for the whole registry)")]
    PathNotAllowed,
}

/// Splits a mirror prefix into (host, path). Errors: [`PrefixError`].
pub(crate) fn mirror_parts(prefix: &str) -> Result<(String, String), PrefixError> {
    if prefix.is_empty() {
        return Err(PrefixError::Empty);
    }
    if prefix.contains("://") {
        return Err(PrefixError::Scheme);
    }
    if prefix.contains('@') {
        return Err(PrefixError::Digest);
    }
    let (host, path) = prefix.split_once('/').unwrap_or((prefix, ""));
    let hostname = match host.rsplit_once(':') {
        Some((h, p)) if !h.contains(']') || h.ends_with(']') => {
            p.parse::<u16>().map_err(|source| PrefixError::Port {
                text: p.to_string(),
                source,
            })?;
            h
        }
        _ => host,
    };
    if hostname.parse::<std::net::IpAddr>().is_err() && hostname != "localhost" {
        syntax::dns_name(hostname).map_err(|source| PrefixError::Host {
            host: hostname.to_string(),
            source,
        })?;
    }
    if !path.is_empty() {
        let probe = format!("{host}/{path}/x:1");
        if let Err(source) = ImageRef::parse(&probe) {
            return Err(PrefixError::RepositoryPath {
                path: path.to_string(),
                source,
            });
        }
    }
    Ok((host.to_string(), path.to_string()))
}

/// Why a CA file is refused. Nothing from the file is quoted but the labels PEM defines.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CaFileError {
    /// A private key block: the file would be copied to every node, readable by all.
    #[error("holds a private key (a `{label}` block at line {line})")]
    PrivateKey {
        /// The block's label, one of the private-key labels.
        label: &'static str,
        /// Its line.
        line: usize,
    },
    /// A PEM block that is not a certificate (public key, CRL, parameters, or unknown).
    #[error("holds a PEM block at line {line} that is not a certificate")]
    NotCertificate {
        /// Its line.
        line: usize,
    },
    /// A certificate block that is cut short or holds something but base64.
    #[error("holds a malformed certificate block at line {line}")]
    Malformed {
        /// Its line.
        line: usize,
    },
    /// No certificate at all.
    #[error("holds no PEM certificate")]
    NoCertificate,
}

/// The labels of PEM blocks that hold private keys (RFC 7468 and OpenSSL/OpenSSH's own).
const PRIVATE_KEY_LABELS: &[&str] = &[
    "PRIVATE KEY",
    "ENCRYPTED PRIVATE KEY",
    "RSA PRIVATE KEY",
    "DSA PRIVATE KEY",
    "EC PRIVATE KEY",
    "OPENSSH PRIVATE KEY",
    "ANY PRIVATE KEY",
];

/// The certificate blocks of a CA file, and nothing else: every PEM block must be a `CERTIFICATE`
/// with a base64 body; text between blocks (the comments of a CA bundle) is allowed but not kept.
/// Returns the blocks, each `-----BEGIN CERTIFICATE-----` … `-----END CERTIFICATE-----\n`.
/// Errors: a private key or any other block (refused whatever else the file holds), a malformed
/// certificate block, or no certificate.
pub(crate) fn certificates_only(text: &str) -> Result<String, CaFileError> {
    let mut out = String::new();
    let mut open: Option<usize> = None;
    let mut body_ok = true;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let n = i + 1;
        if let Some(label) = line
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        {
            if label.contains("PRIVATE KEY") {
                // Named by the known label only: the line is the file's content.
                let label = PRIVATE_KEY_LABELS
                    .iter()
                    .find(|k| **k == label)
                    .copied()
                    .unwrap_or("PRIVATE KEY");
                return Err(CaFileError::PrivateKey { label, line: n });
            }
            if label != "CERTIFICATE" {
                return Err(CaFileError::NotCertificate { line: n });
            }
            if open.is_some() {
                return Err(CaFileError::Malformed { line: n });
            }
            open = Some(n);
            body_ok = true;
            out.push_str("-----BEGIN CERTIFICATE-----\n");
            continue;
        }
        if let Some(label) = line
            .strip_prefix("-----END ")
            .and_then(|l| l.strip_suffix("-----"))
        {
            let Some(start) = open.take() else {
                return Err(CaFileError::Malformed { line: n });
            };
            if label != "CERTIFICATE" || !body_ok || out.ends_with("-----\n") {
                return Err(CaFileError::Malformed { line: start });
            }
            out.push_str("-----END CERTIFICATE-----\n");
            continue;
        }
        if open.is_some() {
            if line.is_empty() {
                continue;
            }
            if !line
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
            {
                body_ok = false;
            }
            out.push_str(line);
            out.push('\n');
        } else if line.contains("PRIVATE KEY") {
            // A key pasted without its BEGIN line, or a header naming one: refused as well.
            return Err(CaFileError::PrivateKey {
                label: "PRIVATE KEY",
                line: n,
            });
        }
    }
    if let Some(start) = open {
        return Err(CaFileError::Malformed { line: start });
    }
    if out.is_empty() {
        return Err(CaFileError::NoCertificate);
    }
    Ok(out)
}

/// The certificates of a referenced CA file ([`certificates_only`]: what is passed on, to the nodes
/// and the registry client), or an error at `path` naming the file.
pub(crate) fn pem_file(ctx: &mut Ctx<'_>, file: &str, path: &str, what: &str) -> Option<String> {
    match ctx.loaded.referenced.get(file) {
        Some(Referenced::Text(t)) => match certificates_only(t) {
            Ok(pem) => Some(pem),
            Err(e) => {
                let help = match e {
                    CaFileError::PrivateKey { .. } => "a CA file is copied to every node and readable by all: give only the CA's certificate (`openssl x509 -in FILE -out ca.crt`), never its key",
                    _ => "give a PEM file of `-----BEGIN CERTIFICATE-----` blocks only",
                };
                ctx.push(
                    Diagnostic::error("spec::ca-file", format!("{what} file {file:?} {e}"))
                        .help(help)
                        .at(path),
                );
                None
            }
        },
        Some(Referenced::Unreadable(why)) => {
            ctx.push(
                Diagnostic::error(
                    "spec::ca-file",
                    format!("cannot read {what} file {file:?}: {why}"),
                )
                .help("paths are relative to the cluster file; check the name and permissions")
                .at(path),
            );
            None
        }
        None => {
            ctx.push(
                Diagnostic::error("spec::ca-file", format!("{what} file {file:?} was not loaded"))
                    .help("load the cluster file with `clusterctl validate -f FILE` so referenced files are read")
                    .at(path),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str =
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\nZm9vYmFy\n-----END CERTIFICATE-----\n";

    #[test]
    fn a_ca_file_holds_certificates_only() {
        assert_eq!(certificates_only(CERT).as_deref(), Ok(CERT));
        // A bundle with comments between blocks: the blocks are kept, the comments are not.
        let bundle = format!("# Example Root CA\n{CERT}\nsubject=CN=x\n{CERT}");
        assert_eq!(certificates_only(&bundle), Ok(format!("{CERT}{CERT}")));
        assert_eq!(
            certificates_only(&format!("{CERT}\r\n")).as_deref(),
            Ok(CERT)
        );
        for (key, label) in [
            ("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n", "PRIVATE KEY"),
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n", "RSA PRIVATE KEY"),
            ("-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n", "EC PRIVATE KEY"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----\n", "OPENSSH PRIVATE KEY"),
            ("-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n-----END ENCRYPTED PRIVATE KEY-----\n", "ENCRYPTED PRIVATE KEY"),
        ] {
            // Before or after the certificate, the key is refused and named.
            for text in [format!("{CERT}{key}"), format!("{key}{CERT}")] {
                match certificates_only(&text) {
                    Err(CaFileError::PrivateKey { label: l, .. }) => assert_eq!(l, label),
                    other => panic!("{text}: {other:?}"),
                }
            }
        }
        assert!(matches!(
            certificates_only(&format!(
                "{CERT}-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"
            )),
            Err(CaFileError::NotCertificate { line: 5 })
        ));
        assert!(matches!(
            certificates_only(
                "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n"
            ),
            Err(CaFileError::Malformed { line: 1 })
        ));
        assert!(matches!(
            certificates_only("-----BEGIN CERTIFICATE-----\nMIIB\n"),
            Err(CaFileError::Malformed { line: 1 })
        ));
        assert_eq!(certificates_only("hello"), Err(CaFileError::NoCertificate));
    }
}
