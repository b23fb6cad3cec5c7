//! `node remove`'s `etcd` phase, on the first control plane: checks that the removed control plane is
//! no longer an etcd member and removes the member when `kubeadm reset` could not (e.g. etcd was
//! unreachable from the node), with the `etcdctl` of the first control plane's etcd static pod.

use super::Data;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;

/// The etcd static pod's `etcdctl` with kubeadm's certificate paths, run in the pod of the control
/// plane `cp` (`kubectl exec`, admin.conf).
pub(crate) fn etcdctl(cp: &str, args: &str) -> String {
    format!(
        "{} -n kube-system exec etcd-{} -- etcdctl --endpoints=https://127.0.0.1:2379 \
         --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt \
         --key=/etc/kubernetes/pki/etcd/server.key {args}",
        crate::up::KUBECTL,
        clusterctl_exec::shell::quote_word(cp)
    )
}

/// The hex member ID of the etcd member named `node` in `etcdctl member list` output (simple format:
/// `ID, STATUS, NAME, PEER ADDRS, CLIENT ADDRS, IS LEARNER` per line). `None` when not listed.
pub(crate) fn member_id(list: &str, node: &str) -> Option<String> {
    list.lines().find_map(|l| {
        let cols: Vec<&str> = l.split(',').map(str::trim).collect();
        (cols.len() >= 3 && cols[2] == node && !cols[0].is_empty()).then(|| cols[0].to_string())
    })
}

/// The `etcd` phase (on the first control plane); its line is about the removed node.
pub(super) fn run(ctx: &mut NodeCtx, data: &Data<'_>) -> Result<(), PhaseError> {
    if ctx.unreachable() {
        let first = ctx.name().to_string();
        data.step(
            "etcd",
            Err(ctx.local_error(format!(
                "cannot reach the first control plane {first} to check the member list"
            ))),
        );
        return Ok(());
    }
    let r = member_gone(ctx, &data.node.name);
    data.step("etcd", r);
    Ok(())
}

fn member_gone(ctx: &mut NodeCtx, node: &str) -> Result<String, PhaseError> {
    let first = ctx.name().to_string();
    let Some(list) = ctx.read(&etcdctl(&first, "member list"))? else {
        ctx.info(&format!(
            "a member still listed as {node} is removed: {}",
            etcdctl(&first, "member remove <its ID>")
        ));
        return Ok("planned (dry run)".to_string());
    };
    match member_id(&list, node) {
        None => Ok(format!(
            "member {node} not in the member list (checked on {first})"
        )),
        Some(id) => {
            ctx.run_script(&etcdctl(&first, &format!("member remove {id}")))?;
            Ok(format!(
                "member {node} ({id}) was still listed: removed on {first}"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_member_id_by_name() {
        let list = "8e9e05c52164694d, started, c1, https://10.0.0.1:2380, https://10.0.0.1:2379, false\n\
                    91bc3c398fb3c146, started, c2, https://10.0.0.2:2380, https://10.0.0.2:2379, false\n";
        assert_eq!(
            super::member_id(list, "c2").as_deref(),
            Some("91bc3c398fb3c146")
        );
        assert_eq!(super::member_id(list, "c3"), None);
        assert_eq!(super::member_id("garbage", "c2"), None);
    }
}
