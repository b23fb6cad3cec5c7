//! Rules on the registry mirror and images: the mirror is a `host[:port]/path` rewrite prefix; credentials
//! only by environment variable name (an inline `username`/`password` is an error that never echoes the
//! value); the CA file was read and holds a PEM certificate; preload images parse; no two images the
//! cluster needs land on the same reference under the prefix.

use super::credentials::{self, CredentialFields};
use super::{Ctx, DEFAULT_KUBE_VIP_IMAGE};
use crate::diag::Diagnostic;
use crate::load::Referenced;
use crate::mirror::{self, ImageRef};
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
        if ImageRef::parse(img).is_none() {
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
    let prefix = reg.mirror.trim().trim_end_matches('/').to_string();
    let parts = match mirror_parts(&prefix) {
        Ok(p) => Some(p),
        Err(why) => {
            ok = false;
            ctx.push(
                Diagnostic::error("spec::mirror", format!("mirror {:?} {why}", reg.mirror))
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

/// Splits a mirror prefix into (host, path). Errors: a reason.
pub(crate) fn mirror_parts(prefix: &str) -> Result<(String, String), String> {
    if prefix.is_empty() {
        return Err("is empty".into());
    }
    if prefix.contains("://") {
        return Err("must not have a scheme (remove `https://`)".into());
    }
    if prefix.contains('@') {
        return Err("must not contain a digest".into());
    }
    let (host, path) = prefix.split_once('/').unwrap_or((prefix, ""));
    let hostname = match host.rsplit_once(':') {
        Some((h, p)) if !h.contains(']') || h.ends_with(']') => {
            p.parse::<u16>()
                .map_err(|_| format!("port {p:?} is not a number"))?;
            h
        }
        _ => host,
    };
    if hostname.parse::<std::net::IpAddr>().is_err() && hostname != "localhost" {
        syntax::dns_name(hostname).map_err(|e| format!("host {hostname:?} {e}"))?;
    }
    if !path.is_empty() {
        let probe = format!("{host}/{path}/x:1");
        if ImageRef::parse(&probe).is_none() {
            return Err(format!(
                "path {path:?} is not a repository path (lower-case, no tag)"
            ));
        }
    }
    Ok((host.to_string(), path.to_string()))
}

/// The PEM text of a referenced CA file, or an error at `path`.
pub(crate) fn pem_file(ctx: &mut Ctx<'_>, file: &str, path: &str, what: &str) -> Option<String> {
    match ctx.loaded.referenced.get(file) {
        Some(Referenced::Text(t))
            if t.contains("-----BEGIN CERTIFICATE-----")
                && t.contains("-----END CERTIFICATE-----") =>
        {
            Some(t.clone())
        }
        Some(Referenced::Text(_)) => {
            ctx.push(
                Diagnostic::error(
                    "spec::ca-file",
                    format!("{what} file {file:?} holds no PEM certificate"),
                )
                .help("give a PEM file with a `-----BEGIN CERTIFICATE-----` block")
                .at(path),
            );
            None
        }
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
