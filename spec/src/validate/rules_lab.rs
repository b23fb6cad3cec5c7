//! Rules on the lab's additions (issue 27, [`crate::lab`]): `spec.storage.defaultClass` is `local-path`
//! or `none`; `spec.registry` gives a mirror, a local registry or both; `spec.registry.local` is for
//! the docker provider with containerd, its port is 1–65535, its image parses, and no node is named
//! like its container (`<cluster>-registry`); `spec.docker.loadBalancer` is for the docker provider
//! without a VIP or `controlPlane.endpoint`, its port is 0–65535, its image parses, and no node is
//! named like its container (`<cluster>-external-load-balancer`).

use crate::diag::Diagnostic;
use crate::image::ImageRef;
use crate::lab::{LOAD_BALANCER_NAME, LOCAL_REGISTRY_NAME, STORAGE_CLASSES};
use crate::model::{ClusterFile, RuntimeKind};

use super::Ctx;

/// Checks `spec.storage`, `spec.registry.local` and `spec.docker.loadBalancer`.
pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    check_load_balancer(ctx, file);
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

/// Checks `spec.docker.loadBalancer` (see the module doc); the node names also when the load balancer
/// comes by default (several control planes).
fn check_load_balancer(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    let spec = &file.spec;
    let cps = spec
        .nodes
        .iter()
        .filter(|n| n.role == crate::model::Role::ControlPlane)
        .count();
    let written = spec.docker.load_balancer.as_ref();
    let fronted = spec.control_plane.vip.is_some() || spec.control_plane.endpoint.is_some();
    if crate::lab::load_balancer_enabled(
        spec.provider.node_containers(),
        fronted,
        cps,
        written.is_some(),
    ) {
        for (i, n) in spec.nodes.iter().enumerate() {
            if n.name == LOAD_BALANCER_NAME {
                ctx.push(
                    Diagnostic::error(
                        "spec::load-balancer",
                        format!("node name {LOAD_BALANCER_NAME:?} is the API load balancer's container name (<cluster>-{LOAD_BALANCER_NAME})"),
                    )
                    .help("rename the node, e.g. `cp-lb`")
                    .at(format!("spec.nodes[{i}].name")),
                );
            }
        }
    }
    let Some(lb) = written else {
        return;
    };
    let refuse = |ctx: &mut Ctx<'_>, what: String, help: &str, at: &str| {
        ctx.push(
            Diagnostic::error("spec::load-balancer", what)
                .help(help)
                .at(at),
        );
    };
    if !spec.provider.node_containers() {
        refuse(ctx, "docker.loadBalancer runs a load balancer container beside docker node containers; this cluster's provider is ssh".into(),
            "use `provider: docker`, or for SSH hosts give the control planes a VIP (`controlPlane.vip`) or an external `controlPlane.endpoint`",
            "spec.docker.loadBalancer#key");
    } else if spec.control_plane.vip.is_some() {
        refuse(ctx, "docker.loadBalancer and controlPlane.vip both put an address in front of the API servers".into(),
            "keep one: remove `docker.loadBalancer` to use the VIP (kube-vip), or remove `controlPlane.vip` to use the load balancer container",
            "spec.docker.loadBalancer#key");
    } else if spec.control_plane.endpoint.is_some() {
        refuse(ctx, "docker.loadBalancer makes the endpoint `<cluster>-external-load-balancer:6443`, but controlPlane.endpoint names another".into(),
            "remove `controlPlane.endpoint` (the load balancer becomes the endpoint), or remove `docker.loadBalancer` to use your endpoint",
            "spec.docker.loadBalancer#key");
    }
    if let Some(p) = lb.port {
        if p > u32::from(u16::MAX) {
            refuse(ctx, format!("docker.loadBalancer.port {p} is not a TCP port"),
                "give a free port on this machine between 1 and 65535, or 0 (the default) for one Docker chooses",
                "spec.docker.loadBalancer.port");
        }
    }
    if let Some(img) = &lb.image {
        if ImageRef::parse(img).is_err() {
            refuse(ctx, format!("docker.loadBalancer.image {img:?} is not an image reference"),
                "write `[registry/]repository[:tag][@sha256:digest]`, e.g. `kindest/haproxy:v20230606-42a2262b`, or leave it out for the pinned kindest/haproxy",
                "spec.docker.loadBalancer.image");
        }
    }
}
