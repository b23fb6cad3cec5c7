//! The bodies of the upgrade phases (see the module above for their order). Each checks before it
//! changes where a check exists (`kubeadm version`, the snapshot file, `admin.conf`), acts through
//! `NodeCtx` (so a dry run only records) and, for the API steps, through [`super::NodeApi`].

use std::time::Duration;

use clusterctl_exec::Cmd;

use super::error::NodeApiError;
use super::packages::install;
use super::{UpgradeData, SNAPSHOT_DIR, UPGRADE_CONFIG};
use crate::ctx::{Change, NodeCtx, PlanKind};
use crate::error::PhaseError;
use crate::up::{ADMIN_CONF, KUBELET_CONF};

fn long(script: String) -> Cmd {
    let mut c = Cmd::new(script);
    c.timeout = Some(Duration::from_secs(900));
    c
}

/// Where the upgrade's scripts are placed on a node (each run as `sh <file>`, so the output shows one
/// short line per step and the node keeps what ran).
pub(crate) const SCRIPT_DIR: &str = "/var/lib/clusterctl/upgrade";

/// Places `script` as `<SCRIPT_DIR>/<name>.sh` (0700, unless already there) and runs it.
fn run_file(ctx: &mut NodeCtx, name: &str, script: &str) -> Result<(), PhaseError> {
    let path = format!("{SCRIPT_DIR}/{name}.sh");
    ctx.put_file(&path, 0o700, script.as_bytes())?;
    ctx.run(long(format!("sh {path}")))?;
    Ok(())
}

/// `upgrade/kubeadm`: installs the target kubeadm unless `kubeadm version -o short` already prints it.
pub(crate) fn kubeadm(ctx: &mut NodeCtx, data: &UpgradeData) -> Result<(), PhaseError> {
    let want = clusterctl_spec::versions::tag(&data.spec.to);
    let have = ctx
        .query(Cmd::new("kubeadm version -o short"))?
        .map(|o| o.stdout_str().trim().to_string());
    if have.as_deref() == Some(want.as_str()) {
        ctx.info(&format!("kubeadm {want} already installed"));
        return Ok(());
    }
    install(ctx, data, &["kubeadm"])
}

/// The script saving an etcd snapshot to `file`: `etcdctl` on the node when installed, else inside the
/// running etcd static pod's container (`crictl exec`, whose image ships etcdctl; the data directory
/// `/var/lib/etcd` is a hostPath, so the snapshot is written there and moved). Authenticates with the
/// healthcheck client certificate kubeadm creates under `/etc/kubernetes/pki/etcd/`.
pub(crate) fn snapshot_script(file: &str) -> String {
    let certs = "--endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt \
                 --cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt \
                 --key=/etc/kubernetes/pki/etcd/healthcheck-client.key";
    format!(
        "set -e\n\
         umask 077\n\
         mkdir -p {SNAPSHOT_DIR} && chmod 700 {SNAPSHOT_DIR}\n\
         if command -v etcdctl >/dev/null 2>&1; then\n\
         \x20 ETCDCTL_API=3 etcdctl {certs} snapshot save {file}.part\n\
         else\n\
         \x20 id=$(crictl ps -q --name '^etcd$' --state running | head -n1)\n\
         \x20 [ -n \"$id\" ] || {{ echo 'no running etcd container on this node' >&2; exit 1; }}\n\
         \x20 crictl exec \"$id\" etcdctl {certs} snapshot save /var/lib/etcd/clusterctl-snapshot.db\n\
         \x20 mv /var/lib/etcd/clusterctl-snapshot.db {file}.part\n\
         fi\n\
         chmod 600 {file}.part && mv {file}.part {file}\n"
    )
}

/// `upgrade/etcd-snapshot`: `<SNAPSHOT_DIR>/pre-upgrade-v<to>.db` on the first control plane, unless it
/// is already there (a resumed run keeps the snapshot taken before the first change).
pub(crate) fn etcd_snapshot(ctx: &mut NodeCtx, data: &UpgradeData) -> Result<(), PhaseError> {
    let file = format!(
        "{SNAPSHOT_DIR}/pre-upgrade-{}.db",
        clusterctl_spec::versions::tag(&data.spec.to)
    );
    if ctx.test(&format!("test -s {file}"))? == Some(true) {
        ctx.info(&format!("snapshot {file} already taken"));
        return Ok(());
    }
    run_file(
        ctx,
        &format!(
            "etcd-snapshot-{}",
            clusterctl_spec::versions::tag(&data.spec.to)
        ),
        &snapshot_script(&file),
    )
}

fn api_change(
    ctx: &mut NodeCtx,
    what: &str,
    f: impl FnOnce() -> Result<String, NodeApiError>,
) -> Result<(), PhaseError> {
    ctx.change(Change::new(PlanKind::Info, format!("API: {what}")), |ctx| {
        let done = f().map_err(|e| ctx.local_error_in(what, &e))?;
        if !done.is_empty() {
            ctx.reporter()
                .change(&ctx.phase, ctx.name(), &format!("API: {done}"));
        }
        Ok(())
    })?;
    Ok(())
}

/// `upgrade/drain`: cordons the node and evicts its pods through the API.
pub(crate) fn drain(ctx: &mut NodeCtx, data: &UpgradeData) -> Result<(), PhaseError> {
    let node = ctx.name().to_string();
    api_change(ctx, &format!("drain node {node}"), || data.api.drain(&node))
}

/// ` --ignore-preflight-errors=A,B` for the file's ignored kubeadm preflight checks (without an
/// UpgradeConfiguration, which otherwise carries them), or nothing.
fn ignore_flag(checks: &[String]) -> String {
    if checks.is_empty() {
        return String::new();
    }
    format!(
        " --ignore-preflight-errors={}",
        clusterctl_exec::shell::quote_word(&checks.join(","))
    )
}

/// `upgrade/apply` (first control plane): places the UpgradeConfiguration, runs `kubeadm upgrade plan`
/// (fails when kubeadm refuses the target) and `kubeadm upgrade apply --config … --yes`.
pub(crate) fn apply(ctx: &mut NodeCtx, data: &UpgradeData) -> Result<(), PhaseError> {
    if ctx.test(&format!("test -f {ADMIN_CONF}"))? == Some(false) {
        return Err(ctx.check_error(vec![format!(
            "{ADMIN_CONF} is missing: this node is not an initialised control plane (run `clusterctl up` first)"
        )]));
    }
    let to = &data.spec.to;
    let flag = ignore_flag(&data.spec.ignore_preflight_errors);
    let (plan, apply) = match &data.spec.upgrade_config {
        Some(cfg) => {
            ctx.put_file(UPGRADE_CONFIG, 0o600, cfg)?;
            (
                format!("kubeadm upgrade plan --config {UPGRADE_CONFIG}"),
                format!("kubeadm upgrade apply --config {UPGRADE_CONFIG} --yes"),
            )
        }
        None => (
            format!("kubeadm upgrade plan v{to}{flag}"),
            format!("kubeadm upgrade apply v{to} --yes{flag}"),
        ),
    };
    ctx.run(long(plan))?;
    ctx.run(long(apply))?;
    Ok(())
}

/// `upgrade/node` (other nodes): `kubeadm upgrade node` (with the UpgradeConfiguration when there is
/// one), which upgrades a control plane's static pods or a worker's kubelet configuration.
pub(crate) fn node(ctx: &mut NodeCtx, data: &UpgradeData) -> Result<(), PhaseError> {
    if ctx.test(&format!("test -f {KUBELET_CONF}"))? == Some(false) {
        return Err(ctx.check_error(vec![format!(
            "{KUBELET_CONF} is missing: this node has not joined the cluster (run `clusterctl up` first)"
        )]));
    }
    let cmd = match &data.spec.upgrade_config {
        Some(cfg) => {
            ctx.put_file(UPGRADE_CONFIG, 0o600, cfg)?;
            format!("kubeadm upgrade node --config {UPGRADE_CONFIG}")
        }
        None => format!(
            "kubeadm upgrade node{}",
            ignore_flag(&data.spec.ignore_preflight_errors)
        ),
    };
    ctx.run(long(cmd))?;
    Ok(())
}

/// `upgrade/kubelet`: installs the target kubelet and kubectl, then `systemctl daemon-reload && systemctl
/// restart kubelet`; on a control plane it then waits until the control plane has settled
/// ([`settled_script`]), so that the next node's drain does not meet an API server being replaced.
pub(crate) fn kubelet(ctx: &mut NodeCtx, data: &UpgradeData) -> Result<(), PhaseError> {
    install(ctx, data, &["kubelet", "kubectl"])?;
    ctx.run_script("systemctl daemon-reload && systemctl restart kubelet")?;
    if ctx.node.is_control_plane() {
        ctx.run(long(settled_script(SETTLE_TIMEOUT_SECS)))?;
    }
    Ok(())
}

/// How long [`settled_script`] waits for a control plane to settle after its kubelet restarted.
pub(crate) const SETTLE_TIMEOUT_SECS: u64 = 300;

/// The script waiting, on a control plane whose kubelet was just replaced, until its control plane
/// has settled: the kubelet active for at least 20 s, a running container for each control-plane
/// static pod manifest (`etcd`, `kube-apiserver`, `kube-controller-manager`, `kube-scheduler` under
/// `/etc/kubernetes/manifests`), the same containers 5 s apart, and the API server's `/readyz` (which
/// includes its informer sync and RBAC bootstrap) answering through `admin.conf`. Found on the real
/// cluster (issue 11): a kubelet of the next minor restarts the static pods' containers a few seconds
/// after it starts (their container hash changed), so the next node's drain met a refused connection,
/// or the new API server's `403 Forbidden` before its RBAC caches synced. Exits 1 after
/// `timeout_secs`, saying which condition is missing.
pub(crate) fn settled_script(timeout_secs: u64) -> String {
    format!(
        "set -u\n\
         names=$(ls /etc/kubernetes/manifests 2>/dev/null | sed -n 's/^\\(etcd\\|kube-apiserver\\|kube-controller-manager\\|kube-scheduler\\)\\.yaml$/\\1/p')\n\
         want=$(printf '%s\\n' $names | grep -c .)\n\
         regex=\"^($(echo $names | tr ' ' '|'))$\"\n\
         ready() {{ kubectl --kubeconfig {ADMIN_CONF} --request-timeout=5s get --raw /readyz 2>&1 | tail -n1; }}\n\
         end=$(( $(date +%s) + {timeout_secs} ))\n\
         while :; do\n\
         \x20 up=$(( $(date +%s) - $(date -d \"$(systemctl show -p ActiveEnterTimestamp --value kubelet)\" +%s) ))\n\
         \x20 a=$(crictl ps --state running --name \"$regex\" -q 2>/dev/null | sort)\n\
         \x20 sleep 5\n\
         \x20 b=$(crictl ps --state running --name \"$regex\" -q 2>/dev/null | sort)\n\
         \x20 n=$(printf '%s\\n' $b | grep -c .)\n\
         \x20 r=$(ready)\n\
         \x20 if [ \"$up\" -ge 20 ] && [ \"$a\" = \"$b\" ] && [ \"$n\" -ge \"$want\" ] && [ \"$r\" = ok ]; then\n\
         \x20   echo \"control plane settled: $n static-pod container(s) running, kubelet up ${{up}}s, API ready\"; exit 0\n\
         \x20 fi\n\
         \x20 if [ \"$(date +%s)\" -ge \"$end\" ]; then\n\
         \x20   same=yes; [ \"$a\" = \"$b\" ] || same='no (still being replaced)'\n\
         \x20   echo \"the control plane did not settle within {timeout_secs}s after the kubelet restart: kubelet up ${{up}}s; $n of $want static-pod container(s) ($names) running; unchanged for 5s: $same; API /readyz: $r\" >&2\n\
         \x20   exit 1\n\
         \x20 fi\n\
         done\n"
    )
}

/// `upgrade/uncordon`: uncordons the node, then waits until it is Ready with the target kubelet.
pub(crate) fn uncordon(ctx: &mut NodeCtx, data: &UpgradeData) -> Result<(), PhaseError> {
    let node = ctx.name().to_string();
    api_change(ctx, &format!("uncordon node {node}"), || {
        data.api.uncordon(&node).map(|_| String::new())
    })?;
    let want = clusterctl_spec::versions::tag(&data.spec.to);
    // Not a change: a dry run uncordoned nothing, so it plans the wait instead of waiting.
    if ctx.mode.dry_run {
        ctx.info(&format!("wait until {node} is Ready with kubelet {want}"));
        return Ok(());
    }
    data.api
        .wait_ready(&node, &want)
        .map_err(|e| ctx.local_error_in(format!("waiting for {node} to be Ready"), &e))?;
    ctx.reporter().change(
        &ctx.phase,
        &node,
        &format!("node {node} Ready with kubelet {want}"),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settled_script_is_valid_sh_naming_every_condition() {
        let script = settled_script(300);
        let out = std::process::Command::new("sh")
            .args(["-n", "-c", &script])
            .output()
            .expect("sh");
        assert!(out.status.success(), "{script}\n{out:?}");
        for part in [
            "^($(echo $names | tr ' ' '|'))$",
            "get --raw /readyz",
            "[ \"$up\" -ge 20 ]",
            "within 300s",
        ] {
            assert!(script.contains(part), "{part}: {script}");
        }
    }

    #[test]
    fn ignored_preflight_checks_become_one_flag_without_an_upgrade_configuration() {
        assert_eq!(ignore_flag(&[]), "");
        assert_eq!(
            ignore_flag(&["SystemVerification".into(), "Swap".into()]),
            " --ignore-preflight-errors=SystemVerification,Swap"
        );
    }
}
