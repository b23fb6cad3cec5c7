//! Which phase places a rendered file: the render purposes ([`Purpose`]) each phase takes from
//! [`super::UpData::files_of`].

use clusterctl_render::Purpose;

/// Kernel modules, sysctls and the node environment of an unprivileged node container: placed by
/// `preflight --fix` and by `files`.
pub(crate) const HOST: &[Purpose] = &[
    Purpose::Sysctl,
    Purpose::KernelModules,
    Purpose::NodeEnvironment,
];
/// Container runtime configuration (containerd `config.toml`, `certs.d/*/hosts.toml`, CRI-O
/// drop-ins, `registries.conf`, registry CA files): placed by `runtime/*`, which restarts the
/// runtime when one changed.
pub(crate) const RUNTIME: &[Purpose] = &[
    Purpose::ContainerdConfig,
    Purpose::ContainerdHosts,
    Purpose::RegistryCa,
    Purpose::CrioConfig,
    Purpose::RegistriesConf,
    Purpose::RuntimeProxy,
];
/// The kube-vip static pod manifest (`/etc/kubernetes/manifests/kube-vip.yaml`).
pub(crate) const KUBE_VIP: &[Purpose] = &[Purpose::KubeVip];
/// The kubeadm `InitConfiguration`/`ClusterConfiguration` (first control plane).
pub(crate) const KUBEADM_INIT: &[Purpose] = &[Purpose::KubeadmInit];
/// The kubeadm `JoinConfiguration` (other nodes); bootstrap token, CA cert hash and certificate
/// key are filled in by the join phase, never by the renderer.
pub(crate) const KUBEADM_JOIN: &[Purpose] = &[Purpose::KubeadmJoin];
/// The kubeadm `ResetConfiguration` (v1beta4): placed by `init` only when it finds a `kubeadm
/// init` that failed half-way and resets it before trying again.
pub(crate) const KUBEADM_RESET: &[Purpose] = &[Purpose::KubeadmReset];
/// CNI files: manifests and Helm values to apply (on the first control plane) or the builtin
/// agent's unit and config.
pub(crate) const CNI: &[Purpose] = &[
    Purpose::CniConfig,
    Purpose::CniAgentConfig,
    Purpose::CniAgentUnit,
    Purpose::ClusterManifest,
    Purpose::HelmValues,
];
/// Anything else the control plane or kubelet reads (audit policy, authentication
/// configuration, OIDC CA, encryption configuration — its key filled in by `up::encryption::fill` —,
/// crictl's configuration): placed by `files` before `init`/`join`.
pub(crate) const OTHER: &[Purpose] = &[
    Purpose::AuditPolicy,
    Purpose::AuthenticationConfig,
    Purpose::OidcCa,
    Purpose::EncryptionConfig,
    Purpose::CrictlConfig,
    Purpose::KubeletProxy,
];
