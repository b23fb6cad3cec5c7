//! containerd: `/etc/containerd/config.toml` in the schema of the node's containerd major version
//! (1.x: `version = 2`, plugin `io.containerd.grpc.v1.cri`; 2.x: `version = 3`, plugins
//! `io.containerd.cri.v1.images`/`io.containerd.cri.v1.runtime` — containerd docs/cri/config.md), with
//! `SystemdCgroup`, the sandbox (pause) image and `config_path` (and, for `nodeEnvironment:
//! unprivileged-container`, `restrict_oom_score_adj` and runc's `privileged_without_host_devices`); mirrors as `hosts.toml` files under
//! `config_path` (containerd docs/hosts.md) with the mirror's CA — never the legacy `mirrors` table; the
//! lab's local registry (`spec.registry.local`) as the `hosts.toml` of `localhost:<port>`.

use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use crate::templates;
use clusterctl_spec::model::{CgroupDriver, NodeEnvironment};
use clusterctl_spec::ValidNode;
use minijinja::context;

/// containerd's main config file.
pub(crate) const CONFIG_PATH: &str = "/etc/containerd/config.toml";
/// `config_path` of the CRI registry settings.
pub(crate) const CERTS_D: &str = "/etc/containerd/certs.d";

/// The upstream server of a registry host as containerd names it (`docker.io` is served by
/// `registry-1.docker.io`).
pub(crate) fn upstream_server(host: &str) -> String {
    if host == "docker.io" {
        "https://registry-1.docker.io".to_string()
    } else {
        format!("https://{host}")
    }
}

pub(crate) fn node_files(
    cx: &Ctx,
    node: &ValidNode,
    out: &mut Vec<RenderedFile>,
) -> Result<(), RenderError> {
    let major = cx.facts.node(&node.name).containerd_major;
    out.extend(cx.cached(&format!("containerd-{major}"), || files(cx, major))?);
    Ok(())
}

fn files(cx: &Ctx, major: u32) -> Result<Vec<RenderedFile>, RenderError> {
    let mut out = Vec::new();
    let template = if major >= 2 {
        "containerd-config-v3.toml.j2"
    } else {
        "containerd-config-v2.toml.j2"
    };
    let systemd = cx.c.spec().runtime.cgroup_driver == CgroupDriver::Systemd;
    let unprivileged = cx.c.spec().node_environment == NodeEnvironment::UnprivilegedContainer;
    let cfg = templates::render(
        template,
        context! {
            sandbox_image => cx.kimg.pause_image(), systemd_cgroup => systemd, config_path => CERTS_D,
            unprivileged => unprivileged,
        },
    )?;
    out.push(RenderedFile::text(
        CONFIG_PATH,
        0o644,
        cfg,
        Purpose::ContainerdConfig,
    ));

    if let Some(r) = cx.c.local_registry() {
        // kind's local-registry recipe: `localhost:<port>` on a node is the registry container on the
        // cluster network, over plain HTTP.
        out.push(RenderedFile::text(
            format!("{CERTS_D}/{}/hosts.toml", r.host()),
            0o644,
            format!(
                "# clusterctl: spec.registry.local, images named {}/... come from the lab's registry container\n[host.\"{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
                r.host(),
                r.endpoint()
            ),
            Purpose::ContainerdHosts,
        ));
    }
    let Some(m) = cx.c.mirror() else {
        return Ok(out);
    };
    let ca_path = m
        .ca_pem
        .as_ref()
        .map(|_| format!("{CERTS_D}/{}/ca.crt", m.host));
    if let (Some(p), Some(pem)) = (&ca_path, &m.ca_pem) {
        let mut t = pem.clone();
        if !t.ends_with('\n') {
            t.push('\n');
        }
        out.push(RenderedFile::text(p.clone(), 0o644, t, Purpose::RegistryCa));
    }
    let (mirror_url, override_path) = if m.path.is_empty() {
        (format!("https://{}", m.host), false)
    } else {
        (format!("https://{}/v2/{}", m.host, m.path), true)
    };
    for reg in &cx.registries {
        let text = templates::render(
            "containerd-hosts.toml.j2",
            context! {
                registry => reg.clone(), server => upstream_server(reg), mirror_url => mirror_url.clone(),
                ca_path => ca_path.clone(), override_path => override_path,
            },
        )?;
        out.push(RenderedFile::text(
            format!("{CERTS_D}/{reg}/hosts.toml"),
            0o644,
            text,
            Purpose::ContainerdHosts,
        ));
    }
    // The mirror itself: trust its CA when pulled by its own name (kubeadm's imageRepository).
    let own = templates::render(
        "containerd-hosts.toml.j2",
        context! {
            registry => m.host.clone(), server => format!("https://{}", m.host), mirror_url => "",
            ca_path => ca_path.clone(), override_path => false,
        },
    )?;
    out.push(RenderedFile::text(
        format!("{CERTS_D}/{}/hosts.toml", m.host),
        0o644,
        own,
        Purpose::ContainerdHosts,
    ));
    Ok(out)
}
