//! Rules on identity and version: `metadata.name` is a DNS-1123 label; `kubernetesVersion` and
//! `airgap.extraVersions` are exact patch versions present in the supported table.

use super::Ctx;
use crate::diag::Diagnostic;
use crate::model::ClusterFile;
use crate::syntax;
use crate::versions::{self, VersionInfo};

/// Resolved identity facts.
pub(crate) struct Meta {
    pub(crate) version: VersionInfo,
    pub(crate) extra_versions: Vec<VersionInfo>,
}

pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile) -> Option<Meta> {
    if let Err(why) = syntax::dns1123_label(&file.metadata.name) {
        ctx.push(
            Diagnostic::error("spec::name", format!("cluster name {:?} {why}", file.metadata.name))
                .help("use a DNS-1123 label: lower-case letters, digits and '-', at most 63, e.g. `topgun`")
                .at("metadata.name"),
        );
    }
    let version = version_at(ctx, &file.spec.kubernetes_version, "spec.kubernetesVersion");
    let mut extra = Vec::new();
    let mut extra_ok = true;
    if let Some(a) = &file.spec.airgap {
        for (i, v) in a.extra_versions.iter().enumerate() {
            match version_at(ctx, v, &format!("spec.airgap.extraVersions[{i}]")) {
                Some(info) => extra.push(info),
                None => extra_ok = false,
            }
        }
    }
    let version = version?;
    if !extra_ok {
        return None;
    }
    Some(Meta {
        version,
        extra_versions: extra,
    })
}

fn version_at(ctx: &mut Ctx<'_>, text: &str, path: &str) -> Option<VersionInfo> {
    let Some(v) = versions::parse_version(text.trim()) else {
        ctx.push(
            Diagnostic::error(
                "spec::version",
                format!("{text:?} is not an exact Kubernetes patch version"),
            )
            .help(format!(
                "write MAJOR.MINOR.PATCH such as `v1.34.1`; supported: {}",
                versions::ranges_text()
            ))
            .at(path),
        );
        return None;
    };
    match versions::lookup(&v) {
        Some(info) => Some(info),
        None => {
            let hint = match versions::newest_patch(v.minor) {
                Some(n) if v.major == 1 => format!(
                    "the newest known 1.{} patch is {}; supported: {}",
                    v.minor,
                    versions::tag(&n),
                    versions::ranges_text()
                ),
                _ => format!("supported: {}", versions::ranges_text()),
            };
            ctx.push(
                Diagnostic::error(
                    "spec::version",
                    format!(
                        "Kubernetes {} is not in the supported version table",
                        versions::tag(&v)
                    ),
                )
                .help(hint)
                .at(path),
            );
            None
        }
    }
}
