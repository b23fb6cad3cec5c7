//! Rules on the lab's additions (issue 27, [`crate::lab`]): `spec.storage.defaultClass` is `local-path`
//! or `none`; `spec.registry` gives a mirror, a local registry or both; `spec.registry.local` is for
//! the docker provider with containerd, its port is 1–65535, its image parses, and no node is named
//! like its container (`<cluster>-registry`).

use crate::diag::Diagnostic;
use crate::image::ImageRef;
use crate::lab::{LOCAL_REGISTRY_NAME, STORAGE_CLASSES};
use crate::model::{ClusterFile, RuntimeKind};

use super::Ctx;

/// Checks `spec.storage` and `spec.registry.local`.
pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    if let Some(c) = &file.spec.storage.default_class {
        if !STORAGE_CLASSES.contains(&c.as_str()) {
            ctx.push(
                Diagnostic::error(
                    "spec::storage",
                    format!("storage.defaultClass {c:?} is not a storage class clusterctl installs"),
                )
                .help("write `local-path` (local-path-provisioner, the default for the docker provider) or `none` (no StorageClass, the default for ssh)")
                .at("spec.storage.defaultClass"),
            );
        }
    }
    let Some(reg) = &file.spec.registry else {
        return;
    };
    if reg.mirror.is_none() && reg.local.is_none() {
        ctx.push(
            Diagnostic::error("spec::registry", "spec.registry gives neither `mirror` nor `local`")
                .help("give `mirror: harbor.example.com/library` (a registry mirror), `local: {port: 5001}` (a lab registry beside docker nodes), or remove spec.registry")
                .at("spec.registry#key"),
        );
    }
    let Some(local) = &reg.local else {
        return;
    };
    if !file.spec.provider.node_containers() {
        ctx.push(
            Diagnostic::error(
                "spec::registry-local",
                "registry.local runs a registry container beside docker node containers; this cluster's provider is ssh",
            )
            .help("use `provider: docker`, or for SSH hosts point `registry.mirror` at a registry the nodes reach")
            .at("spec.registry.local#key"),
        );
    }
    if file.spec.runtime.kind != RuntimeKind::Containerd {
        ctx.push(
            Diagnostic::error(
                "spec::registry-local",
                "registry.local configures containerd's hosts.toml; this cluster's runtime is not containerd",
            )
            .help("use `runtime: {kind: containerd}` with registry.local")
            .at("spec.registry.local#key"),
        );
    }
    if let Some(p) = local.port {
        if p == 0 || p > u32::from(u16::MAX) {
            ctx.push(
                Diagnostic::error(
                    "spec::registry-local",
                    format!("registry.local.port {p} is not a TCP port"),
                )
                .help("give a free port on this machine between 1 and 65535, e.g. 5001 (the default, kind's)")
                .at("spec.registry.local.port"),
            );
        }
    }
    if let Some(img) = &local.image {
        if ImageRef::parse(img).is_err() {
            ctx.push(
                Diagnostic::error(
                    "spec::registry-local",
                    format!("registry.local.image {img:?} is not an image reference"),
                )
                .help("write `[registry/]repository[:tag][@sha256:digest]`, e.g. `registry:2`, or leave it out for the pinned registry:2")
                .at("spec.registry.local.image"),
            );
        }
    }
    for (i, n) in file.spec.nodes.iter().enumerate() {
        if n.name == LOCAL_REGISTRY_NAME {
            ctx.push(
                Diagnostic::error(
                    "spec::registry-local",
                    format!("node name {LOCAL_REGISTRY_NAME:?} is the local registry's container name (<cluster>-{LOCAL_REGISTRY_NAME})"),
                )
                .help("rename the node, e.g. `w-registry`")
                .at(format!("spec.nodes[{i}].name")),
            );
        }
    }
}
