//! `runtime/containerd` and `runtime/crio`: places the rendered runtime configuration (containerd's
//! `config.toml` with `SystemdCgroup = true` and the sandbox image, `certs.d/<registry>/hosts.toml`
//! for the mirror and its CA; CRI-O's drop-ins and `registries.conf`; the unit's proxy drop-in of
//! `spec.proxy`, after which systemd is reloaded), restarts the runtime only when a file changed, and makes sure its unit is enabled and active. A different file already in place is
//! backed up first (`crate::undo`), so that `destroy` restores it; the directories the node has are
//! recorded once before (when `files` did not already), so that `destroy` removes only those `up` made.

use super::UpData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::up::placed;

/// The runtime phase.
pub(crate) fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let unit = data.spec.runtime.unit();
    let files = data.files_of(ctx.name(), placed::RUNTIME);
    crate::undo::record_dirs(ctx)?;
    crate::undo::backup_before_overwrite(ctx, &files)?;
    let changed = super::files::place(ctx, &files)?;
    // A changed drop-in of the runtime's unit (`spec.proxy`) takes effect only after a reload.
    if changed
        .iter()
        .any(|p| p.starts_with("/etc/systemd/system/"))
    {
        ctx.run_script("systemctl daemon-reload")?;
    }
    if !changed.is_empty() {
        // A runtime still starting from boot can refuse one restart: reset and try once more, and
        // when it still fails end with the unit's journal, so the error shows why.
        ctx.run_script(&format!(
            "systemctl restart {unit} || {{ sleep 2; systemctl reset-failed {unit} 2>/dev/null; \
             systemctl restart {unit}; }} || {{ journalctl -u {unit} -n 20 --no-pager 2>&1; exit 1; }}"
        ))?;
    }
    if ctx.test(&format!(
        "systemctl is-enabled --quiet {unit} && systemctl is-active --quiet {unit}"
    ))? != Some(true)
    {
        ctx.run_script(&format!("systemctl enable --now {unit}"))?;
    }
    Ok(())
}
