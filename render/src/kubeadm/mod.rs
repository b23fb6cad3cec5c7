//! kubeadm configuration files: `/etc/kubernetes/kubeadm/init.yaml` on the first control plane (Init +
//! Cluster + Kubelet [+ KubeProxy] configuration), `join.yaml` on every other node, and — where the API
//! has them (v1beta4) — `reset.yaml` and `upgrade.yaml` on every node. `kubeadm.k8s.io/v1beta4` for
//! Kubernetes ≥ 1.31, `v1beta3` below, each in its own shapes (see [`v1beta4`], [`v1beta3`]).
//! Join secrets are placeholders ([`crate::placeholders`]).

pub(crate) mod common;
pub(crate) mod node_labels;
pub(crate) mod v1beta3;
pub(crate) mod v1beta4;

use crate::ctx::Ctx;
use crate::output::{Purpose, RenderError, RenderedFile};
use clusterctl_spec::{KubeadmApi, ValidNode};

/// Directory of the kubeadm config files on a node.
pub const DIR: &str = "/etc/kubernetes/kubeadm";
/// `kubeadm init --config` file (first control plane).
pub(crate) const INIT_PATH: &str = "/etc/kubernetes/kubeadm/init.yaml";
/// `kubeadm join --config` file (every other node); placeholders inside, so mode 0600.
pub(crate) const JOIN_PATH: &str = "/etc/kubernetes/kubeadm/join.yaml";
/// `kubeadm reset --config` file (v1beta4).
pub const RESET_PATH: &str = "/etc/kubernetes/kubeadm/reset.yaml";
/// `kubeadm upgrade apply|node --config` file (v1beta4).
pub(crate) const UPGRADE_PATH: &str = "/etc/kubernetes/kubeadm/upgrade.yaml";

pub(crate) fn node_files(
    cx: &Ctx,
    node: &ValidNode,
    out: &mut Vec<RenderedFile>,
) -> Result<(), RenderError> {
    match cx.api {
        KubeadmApi::V1beta4 => {
            if cx.is_first(node) {
                out.push(RenderedFile::text(
                    INIT_PATH,
                    0o600,
                    v1beta4::init(cx, node)?,
                    Purpose::KubeadmInit,
                ));
            } else {
                out.push(RenderedFile::text(
                    JOIN_PATH,
                    0o600,
                    v1beta4::join(cx, node)?,
                    Purpose::KubeadmJoin,
                ));
            }
            out.extend(cx.cached("kubeadm-reset-upgrade", || {
                Ok(vec![
                    RenderedFile::text(
                        RESET_PATH,
                        0o600,
                        v1beta4::reset(cx)?,
                        Purpose::KubeadmReset,
                    ),
                    RenderedFile::text(
                        UPGRADE_PATH,
                        0o600,
                        v1beta4::upgrade(cx)?,
                        Purpose::KubeadmUpgrade,
                    ),
                ])
            })?);
        }
        KubeadmApi::V1beta3 => {
            if cx.is_first(node) {
                out.push(RenderedFile::text(
                    INIT_PATH,
                    0o600,
                    v1beta3::init(cx, node)?,
                    Purpose::KubeadmInit,
                ));
            } else {
                out.push(RenderedFile::text(
                    JOIN_PATH,
                    0o600,
                    v1beta3::join(cx, node)?,
                    Purpose::KubeadmJoin,
                ));
            }
        }
    }
    Ok(())
}
