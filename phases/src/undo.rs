//! The undo record: what `up` changed on a node that existed before it, kept on the node under
//! [`UNDO_DIR`] (root only) so that `clusterctl destroy` can put it back rather than delete it.
//!
//! - Runtime configuration (`runtime/<kind>` phase): before a rendered file replaces a different file
//!   that was already there, the original is copied to `BACKUP_DIR/<path>` (mode, owner and times
//!   kept); a path that did not exist gets a marker `BACKUP_DIR/<path>.absent`. Either is made once,
//!   the first time, so a later `up` never backs up clusterctl's own file. [`RESTORE_SCRIPT`] copies
//!   every backup back and prints the restored paths.
//! - `--fix` of the swap check: `/etc/fstab` is copied to [`FSTAB_RECORD`] and the active swap devices
//!   (`/proc/swaps`) listed in [`SWAPS_RECORD`] before `swapoff -a` and commenting swap out of
//!   fstab ([`SWAP_FIX`]); [`RESTORE_HOST_SCRIPT`] restores fstab and turns those devices on again.
//!   The other `--fix` changes write files of clusterctl's own (`/etc/modules-load.d/clusterctl.conf`,
//!   `/etc/sysctl.d/99-clusterctl.conf`, [`FIX_FILES`]), which `destroy` deletes.
//! - Directories and firewall tables: before `files` and `runtime/<kind>` first place anything, every
//!   directory under [`DIR_ROOTS`] (where clusterctl, kubeadm, the kubelet, the runtime and the CNI
//!   make theirs) is listed once in [`DIRS_RECORD`], and the iptables/ip6tables tables the node has in
//!   [`TABLES_RECORD`] ([`record_dirs`]); `destroy` then removes the empty directories under those
//!   roots that the record does not name ([`remove_new_dirs_script`]), so a node is left without the
//!   empty `/etc/kubernetes/pki`, `/var/lib/etcd`, `/opt/containerd/bin`… that `up` made, and the
//!   empty tables the kubelet and kube-proxy made once their `KUBE-*` chains are gone.

use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use clusterctl_exec::shell::quote_word;
use clusterctl_render::RenderedFile;

/// Where the undo record lives on a node.
pub const UNDO_DIR: &str = "/var/lib/clusterctl/undo";
/// Backups of files `up` replaced (`BACKUP_DIR/<absolute path>`).
pub const BACKUP_DIR: &str = "/var/lib/clusterctl/undo/backup";
/// `/etc/fstab` as it was before `--fix` commented swap out.
pub const FSTAB_RECORD: &str = "/var/lib/clusterctl/undo/fstab";
/// The swap devices that were active before `--fix` turned swap off, one per line.
pub const SWAPS_RECORD: &str = "/var/lib/clusterctl/undo/swaps";
/// Files the `--fix` of the module and sysctl checks create (clusterctl's own names).
pub const FIX_FILES: &[&str] = &[
    "/etc/modules-load.d/clusterctl.conf",
    "/etc/sysctl.d/99-clusterctl.conf",
];

/// The directories `up` lists before it first places a file, one per line, sorted.
pub const DIRS_RECORD: &str = "/var/lib/clusterctl/undo/dirs";
/// The iptables and ip6tables tables the node had before `up` (`iptables TABLE` per line).
pub const TABLES_RECORD: &str = "/var/lib/clusterctl/undo/iptables-tables";
/// Where clusterctl, kubeadm, the kubelet, the container runtime and the CNI make directories on a
/// node: the roots [`DIRS_RECORD`] lists and `destroy` removes new empty directories under.
pub const DIR_ROOTS: &[&str] = &[
    "/etc/kubernetes",
    "/etc/containerd",
    "/etc/crio",
    "/etc/containers",
    "/etc/cni",
    "/opt/cni",
    "/opt/containerd",
    "/usr/local/lib/clusterctl",
    "/var/lib/etcd",
    "/var/lib/kubelet",
    "/var/lib/cni",
];

/// The script listing the firewall tables into [`TABLES_RECORD`], then every directory under
/// [`DIR_ROOTS`] into [`DIRS_RECORD`] (made last and atomically: its presence means both are there).
fn record_dirs_script() -> String {
    format!(
        r#"mkdir -p {UNDO_DIR} && chmod 700 {UNDO_DIR} && for v in iptables ip6tables; do command -v $v-save >/dev/null 2>&1 && $v-save 2>/dev/null | sed -n "s/^\*/$v /p"; done > {TABLES_RECORD}; {{ find {} -type d 2>/dev/null; true; }} | sort > {DIRS_RECORD}.tmp && mv {DIRS_RECORD}.tmp {DIRS_RECORD}"#,
        DIR_ROOTS.join(" ")
    )
}

/// Lists the directories a node has under [`DIR_ROOTS`] into [`DIRS_RECORD`] and its firewall tables
/// into [`TABLES_RECORD`], once: a record already there (an earlier `up`) is kept. Checks first;
/// offline the listing is only planned.
pub fn record_dirs(ctx: &mut NodeCtx) -> Result<(), PhaseError> {
    if ctx.test(&format!("[ -e {DIRS_RECORD} ]"))? == Some(true) {
        return Ok(());
    }
    ctx.run_script(&record_dirs_script())?;
    Ok(())
}

/// The shell fragment run before clusterctl's files are deleted: keeps [`DIRS_RECORD`]'s list in
/// `$keep` (and `rec=yes` when there is one) for [`remove_new_dirs_script`].
pub fn keep_dirs_prelude() -> String {
    format!(
        "rec=no; keep=''; if [ -f {DIRS_RECORD} ]; then rec=yes; keep=$(cat {DIRS_RECORD}); fi; "
    )
}

/// The shell fragment, after [`keep_dirs_prelude`] and the file deletion, removing every empty
/// directory under [`DIR_ROOTS`] that `$keep` does not name, deepest first (so a directory emptied
/// by removing its empty children goes too). One the kubelet bind-mounted onto itself (to make its
/// root directory shared; `kubeadm reset` unmounts only what is under it) is unmounted first — it
/// did not exist before `up`, so neither did the mount. Appends `; N empty directories removed` to
/// `$msg`, or says that without a record none is removed.
pub fn remove_new_dirs_script() -> String {
    format!(
        r#"if [ "$rec" = yes ]; then
  d=0
  while IFS= read -r dir; do
    [ -n "$dir" ] || continue
    printf '%s\n' "$keep" | grep -qxF -- "$dir" && continue
    [ -z "$(ls -A -- "$dir" 2>/dev/null)" ] || continue
    if mountpoint -q -- "$dir" 2>/dev/null; then umount -- "$dir" 2>/dev/null || continue; fi
    rmdir -- "$dir" 2>/dev/null && d=$((d+1))
  done <<CLUSTERCTL_DIRS
$(find {} -depth -type d 2>/dev/null)
CLUSTERCTL_DIRS
  msg="$msg; $d empty directories removed"
else
  msg="$msg; no record of the directories before up: empty ones kept"
fi
"#,
        DIR_ROOTS.join(" ")
    )
}

/// The `--fix` of the swap check: records fstab and the active swap devices (once), then `swapoff -a`
/// and comments every swap line of `/etc/fstab` out (as kubeadm's documentation suggests).
pub const SWAP_FIX: &str = r"mkdir -p /var/lib/clusterctl/undo && chmod 700 /var/lib/clusterctl/undo && { [ -e /var/lib/clusterctl/undo/fstab ] || { cp -p /etc/fstab /var/lib/clusterctl/undo/fstab && tail -n +2 /proc/swaps | cut -d' ' -f1 > /var/lib/clusterctl/undo/swaps; }; } && swapoff -a && sed -ri '/\sswap\s/s/^#?/#/' /etc/fstab";

/// Copies every backup back to its place (mode, owner, times kept), removes what was absent before,
/// and prints one line per path: `restored PATH` or `absent PATH`.
pub const RESTORE_SCRIPT: &str = r#"d=/var/lib/clusterctl/undo/backup
if [ -d "$d" ]; then
  (cd "$d" && find . \( -type f -o -type l \) | sort) | while IFS= read -r f; do
    p="/${f#./}"
    case "$p" in
      *.absent) p="${p%.absent}"; rm -f -- "$p" && echo "absent $p" ;;
      *) mkdir -p -- "$(dirname -- "$p")" && cp -a -- "$d/${f#./}" "$p" && echo "restored $p" ;;
    esac
  done
fi"#;

/// Restores `/etc/fstab` from [`FSTAB_RECORD`] and turns the recorded swap devices on again; prints
/// what it did (`fstab restored`, `swapon DEVICE`) or nothing when `--fix` changed neither.
pub const RESTORE_HOST_SCRIPT: &str = r#"u=/var/lib/clusterctl/undo
if [ -f "$u/fstab" ]; then cp -p "$u/fstab" /etc/fstab && echo "fstab restored"; fi
if [ -s "$u/swaps" ]; then
  while IFS= read -r dev; do
    [ -n "$dev" ] || continue
    if swapon "$dev" 2>/dev/null; then echo "swapon $dev"; else echo "swapon $dev failed (left off)"; fi
  done < "$u/swaps"
fi"#;

/// The paths a [`RESTORE_SCRIPT`] run printed (`restored P` and `absent P` lines): the caller must not
/// delete them afterwards.
pub fn restored_paths(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| {
            l.strip_prefix("restored ")
                .or_else(|| l.strip_prefix("absent "))
        })
        .map(str::to_string)
        .collect()
}

/// Before `files` are placed: for each whose path holds a different file and has no backup or marker
/// yet, copies the original into [`BACKUP_DIR`]; for a path that does not exist yet, leaves the
/// `.absent` marker. Checks first (read-only); offline it records nothing.
pub fn backup_before_overwrite(
    ctx: &mut NodeCtx,
    files: &[RenderedFile],
) -> Result<(), PhaseError> {
    for f in files {
        let p = quote_word(&f.path);
        let b = quote_word(&format!("{BACKUP_DIR}{}", f.path));
        let m = quote_word(&format!("{BACKUP_DIR}{}.absent", f.path));
        let want = crate::util::sha256_hex(&f.content);
        let check = format!(
            "[ ! -e {b} ] && [ ! -e {m} ] && {{ [ ! -e {p} ] || [ \"$(sha256sum < {p} | cut -d' ' -f1)\" != {want} ]; }}"
        );
        if ctx.test(&check)? != Some(true) {
            continue;
        }
        ctx.run_script(&format!(
            "mkdir -p \"$(dirname -- {b})\" && chmod 700 {UNDO_DIR} && if [ -e {p} ]; then cp -a -- {p} {b}; else : > {m}; fi"
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restored_paths_are_read_from_the_restore_output() {
        let out = "restored /etc/containerd/config.toml\nabsent /etc/containerd/certs.d/r/hosts.toml\nnoise\n";
        assert_eq!(
            restored_paths(out),
            [
                "/etc/containerd/config.toml",
                "/etc/containerd/certs.d/r/hosts.toml"
            ]
        );
    }

    #[test]
    fn swap_fix_records_before_it_changes() {
        let rec = SWAP_FIX.find("cp -p /etc/fstab").expect("record");
        let off = SWAP_FIX.find("swapoff -a").expect("swapoff");
        assert!(rec < off);
        assert!(SWAP_FIX.contains(FSTAB_RECORD) && SWAP_FIX.contains(SWAPS_RECORD));
    }
}
