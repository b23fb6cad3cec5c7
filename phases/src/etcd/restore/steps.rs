//! The bodies of the restore's phases (their order and purpose: the module above). Each checks what is
//! already done before it changes anything, and acts through `NodeCtx` (a dry run only records).

use std::time::Duration;

use clusterctl_exec::shell::quote_word as q;
use clusterctl_exec::Cmd;

use super::{Data, MANIFESTS_ASIDE};
use crate::ctx::NodeCtx;
use crate::error::PhaseError;
use crate::etcd::{initial_cluster, tools, Member, SnapshotStatus, ETCD_MANIFEST};
use crate::up::KUBECTL;

/// The kubelet's static pod directory.
const MANIFESTS: &str = "/etc/kubernetes/manifests";
/// The control plane's containers (a `crictl ps --name` pattern).
const CONTROL_PLANE: &str = "^(etcd|kube-apiserver|kube-controller-manager|kube-scheduler)$";

/// The working directory of this snapshot's restore on a member.
fn stage_dir(m: &Member, id: &str) -> String {
    format!(
        "{}/clusterctl-restore/{id}",
        m.data_dir.trim_end_matches('/')
    )
}

/// A command that may run as long as the run's waits.
fn long(data: &Data, script: String) -> Cmd {
    let mut c = Cmd::new(script);
    c.timeout = Some(data.timeout + Duration::from_secs(60));
    c
}

/// This node's member, read by the `members` phase. Errors: it was not read.
fn member(ctx: &NodeCtx, data: &Data) -> Result<(Member, bool), PhaseError> {
    data.member(ctx.name())
        .ok_or_else(|| ctx.local_error("the etcd member of this node was not read"))
}

/// What a dry run assumes when it reads no manifest: kubeadm's member for the node.
fn assumed(ctx: &NodeCtx) -> Member {
    let host = match ctx.node.address {
        Some(std::net::IpAddr::V6(a)) => format!("[{a}]"),
        Some(a) => a.to_string(),
        None => "<address>".to_string(),
    };
    Member {
        name: ctx.name().to_string(),
        peer_url: format!("https://{host}:2380"),
        data_dir: "/var/lib/etcd".into(),
        image: "<the etcd image of its manifest>".into(),
    }
}

/// `members`: the member of this control plane from its etcd manifest (in place, or aside when a run
/// was interrupted), and whether this snapshot's restore is done here.
pub(super) fn members(ctx: &mut NodeCtx, data: &Data) -> Result<(), PhaseError> {
    let script = format!("cat {ETCD_MANIFEST} 2>/dev/null || cat {MANIFESTS_ASIDE}/etcd.yaml");
    let m = match ctx.read_labelled(&script, Some("read the etcd static pod manifest"))? {
        Some(yaml) => Member::from_manifest(&yaml).ok_or_else(|| {
            ctx.local_error(format!(
                "{ETCD_MANIFEST}: no --name, --initial-advertise-peer-urls or image in it (not a kubeadm etcd member?)"
            ))
        })?,
        None => assumed(ctx),
    };
    let done = ctx.test(&format!("test -e {}/done", stage_dir(&m, &data.id)))? == Some(true);
    ctx.info(&format!(
        "member {} at {}, data directory {}",
        m.name, m.peer_url, m.data_dir
    ));
    if let Ok(mut all) = data.members.lock() {
        all.insert(ctx.name().to_string(), (m, done));
    }
    Ok(())
}

/// `stage`: the snapshot placed, checked with `etcdutl snapshot status` and restored into `…/new`,
/// while the cluster still runs.
pub(super) fn stage(ctx: &mut NodeCtx, data: &Data) -> Result<(), PhaseError> {
    let (m, done) = member(ctx, data)?;
    let s = stage_dir(&m, &data.id);
    if done {
        ctx.info(&format!("this snapshot's restore is done here ({s}/done)"));
        return Ok(());
    }
    if ctx.test(&format!("[ -d {s}/new/member ] || [ -d {s}/old-member ]"))? == Some(true) {
        ctx.info(&format!("already restored into {s}"));
        return Ok(());
    }
    ctx.put_file(&format!("{s}/snapshot.db"), 0o600, &data.snapshot)?;
    let (img, dd) = (q(&m.image), q(&m.data_dir));
    let script = format!(
        "set -e\numask 077\n{tools}chmod 700 {s}\n\
         etcdutl_in {img} {dd} snapshot status {s}/snapshot.db --write-out=json\n\
         rm -rf {s}/new.part\n\
         etcdutl_in {img} {dd} snapshot restore {s}/snapshot.db --name {name} \
         --initial-cluster {ic} --initial-advertise-peer-urls {peer} --data-dir {s}/new.part \
         --bump-revision 1000000000 --mark-compacted >&2\n\
         mv {s}/new.part {s}/new\n",
        tools = tools(),
        name = q(&m.name),
        ic = q(&initial_cluster(&data.all())),
        peer = q(&m.peer_url),
    );
    if let Some(out) = ctx.run(long(data, script))? {
        if let Some(status) = SnapshotStatus::parse(&out.stdout_str()) {
            let line = format!("etcdutl snapshot status: {status}; restored into {s}/new");
            ctx.reporter().change(&ctx.phase, ctx.name(), &line);
        }
    }
    Ok(())
}

/// `stop`: every static pod manifest moved aside; waits until the control plane's containers stopped.
pub(super) fn stop(ctx: &mut NodeCtx, data: &Data) -> Result<(), PhaseError> {
    let (m, done) = member(ctx, data)?;
    if done {
        ctx.info(&format!(
            "this snapshot's restore is done here ({}/done)",
            stage_dir(&m, &data.id)
        ));
        return Ok(());
    }
    let running = format!("crictl ps -q --state running --name '{CONTROL_PLANE}'");
    let stopped = format!("! ls {MANIFESTS}/*.yaml >/dev/null 2>&1 && [ -z \"$({running})\" ]");
    if ctx.test(&stopped)? == Some(true) {
        ctx.info("the control plane is already stopped");
        return Ok(());
    }
    let secs = data.timeout.as_secs();
    let script = format!(
        "set -e\nmkdir -p {MANIFESTS_ASIDE} && chmod 700 {MANIFESTS_ASIDE}\n\
         for f in {MANIFESTS}/*.yaml; do [ -e \"$f\" ] || continue; mv \"$f\" {MANIFESTS_ASIDE}/; done\n\
         t=0\nwhile [ -n \"$({running})\" ]; do\n\
         \x20 t=$((t+2)); [ $t -lt {secs} ] || {{ echo 'the control plane containers still run after {secs}s' >&2; exit 1; }}\n\
         \x20 sleep 2\ndone\n"
    );
    ctx.run(long(data, script))?;
    Ok(())
}

/// `data-dir`: the member's data moved to `…/old-member` (kept) and the restored data moved in.
pub(super) fn data_dir(ctx: &mut NodeCtx, data: &Data) -> Result<(), PhaseError> {
    let (m, done) = member(ctx, data)?;
    let s = stage_dir(&m, &data.id);
    if done || ctx.test(&format!("[ -d {s}/old-member ] && [ ! -d {s}/new ]"))? == Some(true) {
        ctx.info(&format!(
            "the restored data is in place (the previous in {s}/old-member)"
        ));
        return Ok(());
    }
    let d = q(m.data_dir.trim_end_matches('/'));
    let script = format!(
        "set -e\n\
         [ -z \"$(crictl ps -q --state running --name '^etcd$')\" ] || {{ echo 'etcd still runs' >&2; exit 1; }}\n\
         [ -d {s}/new/member ] || {{ echo 'no restored data in {s}/new' >&2; exit 1; }}\n\
         if [ -d {d}/member ] && [ ! -e {s}/old-member ]; then mv {d}/member {s}/old-member; fi\n\
         [ ! -e {d}/member ] || {{ echo '{d}/member and {s}/old-member both exist: move one away by hand' >&2; exit 1; }}\n\
         mv {s}/new/member {d}/member\nrmdir {s}/new\n"
    );
    ctx.run_script(&script)?;
    Ok(())
}

/// Moves `names` (a shell glob of manifests aside) back into the kubelet's manifest directory, unless
/// none is aside.
fn put_back(ctx: &mut NodeCtx, glob: &str) -> Result<(), PhaseError> {
    if ctx.test(&format!("ls {MANIFESTS_ASIDE}/{glob} >/dev/null 2>&1"))? == Some(false) {
        ctx.info(&format!("no manifest {glob} aside: in place"));
        return Ok(());
    }
    ctx.run_script(&format!(
        "set -e\nfor f in {MANIFESTS_ASIDE}/{glob}; do [ -e \"$f\" ] || continue; mv \"$f\" {MANIFESTS}/; done\n\
         rmdir {MANIFESTS_ASIDE} 2>/dev/null || true\n"
    ))?;
    Ok(())
}

/// `start-etcd`: etcd's manifest moved back.
pub(super) fn start_etcd(ctx: &mut NodeCtx, _: &Data) -> Result<(), PhaseError> {
    put_back(ctx, "etcd.yaml")
}

/// `start`: the other manifests moved back.
pub(super) fn start(ctx: &mut NodeCtx, _: &Data) -> Result<(), PhaseError> {
    put_back(ctx, "*.yaml")
}

/// Waits (read-only, every 2 s, at most the run's timeout) until `cond` succeeds; on time out shows
/// what `cond` printed last. Offline only planned.
fn wait(ctx: &mut NodeCtx, data: &Data, what: &str, cond: &str) -> Result<(), PhaseError> {
    let secs = data.timeout.as_secs();
    let script = format!(
        "{}t=0\nuntil ( {cond} ) >/dev/null 2>&1; do\n\
         \x20 t=$((t+2)); if [ $t -ge {secs} ]; then echo 'not within {secs}s: {what}' >&2; ( {cond} ) >&2 || true; exit 1; fi\n\
         \x20 sleep 2\ndone\n",
        tools()
    );
    let cmd = long(data, script);
    let Some(out) = ctx.query_labelled(cmd.clone(), Some(&format!("wait: {what}")))? else {
        return Ok(());
    };
    if !out.success() {
        return Err(ctx.command_error(&cmd, &out));
    }
    Ok(())
}

/// `etcd-healthy`: the local member answers `endpoint health`.
pub(super) fn etcd_healthy(ctx: &mut NodeCtx, data: &Data) -> Result<(), PhaseError> {
    wait(ctx, data, "etcd healthy", "etcdctl_in endpoint health")
}

/// `healthy`: this node's API server ready (`kubectl get --raw=/readyz` with admin.conf, at the
/// node's own address) and the member list naming every control plane.
pub(super) fn healthy(ctx: &mut NodeCtx, data: &Data) -> Result<(), PhaseError> {
    let (m, _) = member(ctx, data)?;
    let host = m
        .peer_url
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .rsplit_once(':')
        .map_or(m.peer_url.as_str(), |(h, _)| h)
        .to_string();
    let server = q(&format!("https://{host}:6443"));
    wait(
        ctx,
        data,
        "the API server ready",
        &format!("{KUBECTL} --server={server} get --raw=/readyz"),
    )?;
    let names: Vec<String> = data
        .all()
        .iter()
        .map(|m| format!("grep -q -- {}", q(&format!(", {}, ", m.name))))
        .collect();
    wait(
        ctx,
        data,
        "every control plane an etcd member",
        &format!(
            "ml=$(etcdctl_in member list -w simple) && {}",
            names
                .iter()
                .map(|g| format!("echo \"$ml\" | {g}"))
                .collect::<Vec<_>>()
                .join(" && ")
        ),
    )
}

/// `nodes-ready` (first control plane): every Node Ready.
pub(super) fn nodes_ready(ctx: &mut NodeCtx, data: &Data) -> Result<(), PhaseError> {
    wait(
        ctx,
        data,
        "every Node Ready",
        &format!("{KUBECTL} wait --for=condition=Ready nodes --all --timeout=10s"),
    )
}

/// `done`: `…/<id>/done` written (a later run of the same snapshot changes nothing).
pub(super) fn done(ctx: &mut NodeCtx, data: &Data) -> Result<(), PhaseError> {
    let (m, done) = member(ctx, data)?;
    let s = stage_dir(&m, &data.id);
    if done {
        ctx.info(&format!("{s}/done already written"));
        return Ok(());
    }
    ctx.run_script(&format!("touch {s}/done"))?;
    Ok(())
}
