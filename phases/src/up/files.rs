//! `render` (local: the rendered files per node, from the facts) and `files`: places the host files
//! (`/etc/modules-load.d`, `/etc/sysctl.d`) and the other files the control plane or kubelet reads
//! (audit policy, authentication configuration, encryption configuration with its key, CA files,
//! the kubelet's proxy drop-in of `spec.proxy`)
//! before `init`/`join`. A file is written only
//! when its sha256 or mode differ; changed module and sysctl files are applied, a changed
//! `/etc/tmpfiles.d` entry is created (`systemd-tmpfiles --create`), and when a systemd unit among the
//! host files or a file it runs changed, the unit is reloaded, enabled and (re)started (the
//! unprivileged-container node files: `/dev/kmsg` link, the kubelet sysctl unit).

use super::UpData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::up::placed;
use clusterctl_render::RenderedFile;

/// The `render` phase (runs once, locally): renders every node's files from the facts.
/// Errors: the renderer's message.
pub(crate) fn render(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let facts = data.facts.lock().map(|f| f.clone()).unwrap_or_default();
    let files = data
        .renderer
        .render(&facts)
        .map_err(|e| ctx.local_error_in("rendering", &e))?;
    let count: usize = files.values().map(Vec::len).sum();
    ctx.info(&format!("{count} files rendered for {} nodes", files.len()));
    if let Ok(mut slot) = data.files.write() {
        *slot = files;
    }
    Ok(())
}

/// Places `files` on the node; returns the paths that changed.
pub(crate) fn place(ctx: &mut NodeCtx, files: &[RenderedFile]) -> Result<Vec<String>, PhaseError> {
    let mut changed = Vec::new();
    for f in files {
        if ctx.put_file(&f.path, f.mode, &f.content)? {
            changed.push(f.path.clone());
        }
    }
    Ok(changed)
}

/// The `files` phase.
pub(crate) fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let host = data.files_of(ctx.name(), placed::HOST);
    let other = super::encryption::fill(ctx, data, data.files_of(ctx.name(), placed::OTHER))?;
    // The directories the node has before anything is placed, for `destroy` (`crate::undo`).
    crate::undo::record_dirs(ctx)?;
    let changed = place(ctx, &host)?;
    let other_changed = place(ctx, &other)?;
    // The kubelet's proxy drop-in (`spec.proxy`): systemd reloaded; a running kubelet restarted
    // (kubeadm starts it later otherwise).
    if other_changed
        .iter()
        .any(|p| p.starts_with("/etc/systemd/system/kubelet.service.d/"))
    {
        ctx.run_script(
            "systemctl daemon-reload && if systemctl is-active --quiet kubelet; then systemctl restart kubelet; fi",
        )?;
    }
    let units: Vec<&str> = host
        .iter()
        .filter_map(|f| f.path.strip_prefix("/etc/systemd/system/"))
        .filter(|u| u.ends_with(".service") && !u.contains('/'))
        .collect();
    for path in &changed {
        if path.starts_with("/etc/tmpfiles.d/") {
            ctx.run_script(&format!(
                "systemd-tmpfiles --create {}",
                clusterctl_exec::shell::quote_word(path)
            ))?;
        }
    }
    let others_changed = changed.iter().any(|p| {
        !p.starts_with("/etc/modules-load.d/")
            && !p.starts_with("/etc/sysctl.d/")
            && !p.starts_with("/etc/tmpfiles.d/")
    });
    if others_changed {
        for u in &units {
            let u = clusterctl_exec::shell::quote_word(u);
            ctx.run_script(&format!(
                "systemctl daemon-reload && systemctl enable {u} && systemctl restart {u}"
            ))?;
        }
    }
    for path in &changed {
        if path.starts_with("/etc/modules-load.d/") {
            let f = host.iter().find(|f| &f.path == path);
            let text = f
                .map(|f| String::from_utf8_lossy(&f.content).into_owned())
                .unwrap_or_default();
            for m in text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
            {
                let m = clusterctl_exec::shell::quote_word(m);
                ctx.run_script(&format!("[ -d /sys/module/{m} ] || modprobe {m} || echo \"warning: kernel module {m} could not be loaded\" >&2"))?;
            }
        } else if path.starts_with("/etc/sysctl.d/") {
            // Only the values that differ are written (/proc/sys may be read-only where they already
            // hold, e.g. in containers).
            let f = host.iter().find(|f| &f.path == path);
            let text = f
                .map(|f| String::from_utf8_lossy(&f.content).into_owned())
                .unwrap_or_default();
            for (k, v) in text
                .lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .filter_map(|l| l.split_once('='))
            {
                let (k, v) = (
                    clusterctl_exec::shell::quote_word(k.trim()),
                    clusterctl_exec::shell::quote_word(v.trim()),
                );
                ctx.run_script(&format!(
                    "[ \"$(sysctl -n {k})\" = {v} ] || sysctl -w {k}={v}"
                ))?;
            }
        }
    }
    Ok(())
}
