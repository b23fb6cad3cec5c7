//! `clusterctl certs`: the cluster's certificates, read from every node and parsed here
//! ([`check::run`], `certs check-expiration`), and kubeadm's renewal of them one control plane at a
//! time ([`renew::run`], `certs renew`).
//!
//! What is read ([`files_of`]): on every control plane what `kubeadm certs check-expiration` lists —
//! the certificates under `/etc/kubernetes/pki` (API server, its etcd and kubelet clients, the
//! front-proxy client, etcd's server, peer and healthcheck client), the client certificates embedded
//! in the kubeconfigs `admin.conf`, `super-admin.conf` (first control plane only: kubeadm writes it at
//! `init`), `controller-manager.conf` and `scheduler.conf`, and the three CAs (`ca`, `etcd-ca`,
//! `front-proxy-ca`); on every node the kubelet's client certificate
//! (`/var/lib/kubelet/pki/kubelet-client-current.pem`, rotated by the kubelet) and its serving
//! certificate (`kubelet-server-current.pem` when the kubelet bootstraps one, else its self-signed
//! `kubelet.crt`). Files are read through the node's transport and parsed in Rust (`parse.rs` over `crate::pki`); no
//! tool on the node is needed but `sh` to say which CA keys exist (a certificate whose CA key is not
//! on the node is externally managed, as kubeadm says). Private keys are never read into a report,
//! printed or kept.

pub mod check;
pub(crate) mod parse;
pub mod renew;

pub use check::{Certificate, CheckOptions, CheckReport, Missing, NodeFailure};
pub use renew::{RenewError, RenewOptions, RenewReport};

/// What kind of file a certificate is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A PEM certificate file.
    Certificate,
    /// A kubeconfig's embedded client certificate.
    Kubeconfig,
    /// A certificate authority's certificate.
    Authority,
}

/// Who renews a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RenewedBy {
    /// `kubeadm certs renew` (`clusterctl certs renew`).
    Kubeadm,
    /// The kubelet itself (client certificate rotation, or a new self-signed serving certificate).
    Kubelet,
    /// Nobody here: a CA (kubeadm does not renew CAs), or a certificate whose CA key is not on the node.
    External,
}

/// One file a certificate is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertFile {
    /// The name `kubeadm certs check-expiration` and `kubeadm certs renew` use (`apiserver`,
    /// `admin.conf`, `ca`), or `kubelet-client`/`kubelet-serving`.
    pub name: &'static str,
    /// Where it is on the node.
    pub path: &'static str,
    /// What is in the file.
    pub kind: Kind,
    /// The CA that signs it (for a CA: itself); `kubelet-serving`: decided from the certificate.
    pub ca: &'static str,
}

const fn file(name: &'static str, path: &'static str, kind: Kind, ca: &'static str) -> CertFile {
    CertFile {
        name,
        path,
        kind,
        ca,
    }
}

/// The certificates kubeadm manages on a control plane, in `kubeadm certs check-expiration`'s order,
/// then its CAs. Every name but the CAs' is one `kubeadm certs renew` takes.
pub const KUBEADM_FILES: &[CertFile] = &[
    file(
        "admin.conf",
        "/etc/kubernetes/admin.conf",
        Kind::Kubeconfig,
        "ca",
    ),
    file(
        "apiserver",
        "/etc/kubernetes/pki/apiserver.crt",
        Kind::Certificate,
        "ca",
    ),
    file(
        "apiserver-etcd-client",
        "/etc/kubernetes/pki/apiserver-etcd-client.crt",
        Kind::Certificate,
        "etcd-ca",
    ),
    file(
        "apiserver-kubelet-client",
        "/etc/kubernetes/pki/apiserver-kubelet-client.crt",
        Kind::Certificate,
        "ca",
    ),
    file(
        "controller-manager.conf",
        "/etc/kubernetes/controller-manager.conf",
        Kind::Kubeconfig,
        "ca",
    ),
    file(
        "etcd-healthcheck-client",
        "/etc/kubernetes/pki/etcd/healthcheck-client.crt",
        Kind::Certificate,
        "etcd-ca",
    ),
    file(
        "etcd-peer",
        "/etc/kubernetes/pki/etcd/peer.crt",
        Kind::Certificate,
        "etcd-ca",
    ),
    file(
        "etcd-server",
        "/etc/kubernetes/pki/etcd/server.crt",
        Kind::Certificate,
        "etcd-ca",
    ),
    file(
        "front-proxy-client",
        "/etc/kubernetes/pki/front-proxy-client.crt",
        Kind::Certificate,
        "front-proxy-ca",
    ),
    file(
        "scheduler.conf",
        "/etc/kubernetes/scheduler.conf",
        Kind::Kubeconfig,
        "ca",
    ),
    file(
        "super-admin.conf",
        "/etc/kubernetes/super-admin.conf",
        Kind::Kubeconfig,
        "ca",
    ),
    file("ca", "/etc/kubernetes/pki/ca.crt", Kind::Authority, "ca"),
    file(
        "etcd-ca",
        "/etc/kubernetes/pki/etcd/ca.crt",
        Kind::Authority,
        "etcd-ca",
    ),
    file(
        "front-proxy-ca",
        "/etc/kubernetes/pki/front-proxy-ca.crt",
        Kind::Authority,
        "front-proxy-ca",
    ),
];

/// The kubelet's client certificate (every node).
pub const KUBELET_CLIENT: CertFile = file(
    "kubelet-client",
    "/var/lib/kubelet/pki/kubelet-client-current.pem",
    Kind::Certificate,
    "ca",
);

/// The kubelet's serving certificate when it bootstraps one from the CA (`serverTLSBootstrap`).
pub const KUBELET_SERVING_BOOTSTRAPPED: CertFile = file(
    "kubelet-serving",
    "/var/lib/kubelet/pki/kubelet-server-current.pem",
    Kind::Certificate,
    "ca",
);

/// The kubelet's self-signed serving certificate (kubeadm's default).
pub const KUBELET_SERVING: CertFile = file(
    "kubelet-serving",
    "/var/lib/kubelet/pki/kubelet.crt",
    Kind::Certificate,
    "self-signed",
);

/// The names `kubeadm certs renew` takes (every kubeadm file but the CAs), in its order.
pub fn renewable() -> Vec<&'static str> {
    KUBEADM_FILES
        .iter()
        .filter(|f| f.kind != Kind::Authority)
        .map(|f| f.name)
        .collect()
}

/// The files read on a node: the kubeadm files on a control plane, the kubelet's on every node (its
/// serving certificate is whichever of the two paths exists, the bootstrapped one first).
pub fn files_of(control_plane: bool) -> Vec<CertFile> {
    let mut v = if control_plane {
        KUBEADM_FILES.to_vec()
    } else {
        Vec::new()
    };
    v.push(KUBELET_CLIENT);
    v
}

/// The static pods whose containers must restart to load a renewed certificate, in the order they
/// are restarted (etcd before the API server, which reconnects to it; then its clients): `etcd` for
/// its server and peer certificates, `kube-apiserver` for its own and its clients', the controller manager and
/// scheduler for their kubeconfigs. `admin.conf` and `super-admin.conf` need none.
pub fn components_for(names: &[&str]) -> Vec<&'static str> {
    let needs = |c: &str| {
        names.iter().any(|n| match c {
            "etcd" => *n == "etcd-server" || *n == "etcd-peer",
            "kube-apiserver" => n.starts_with("apiserver") || *n == "front-proxy-client",
            "kube-controller-manager" => *n == "controller-manager.conf",
            _ => *n == "scheduler.conf",
        })
    };
    [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ]
    .into_iter()
    .filter(|c| needs(c))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeadm_names_and_the_components_that_load_them() {
        assert_eq!(
            renewable(),
            [
                "admin.conf",
                "apiserver",
                "apiserver-etcd-client",
                "apiserver-kubelet-client",
                "controller-manager.conf",
                "etcd-healthcheck-client",
                "etcd-peer",
                "etcd-server",
                "front-proxy-client",
                "scheduler.conf",
                "super-admin.conf"
            ]
        );
        assert_eq!(
            components_for(&renewable()),
            [
                "etcd",
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler"
            ]
        );
        assert_eq!(components_for(&["admin.conf"]), Vec::<&str>::new());
        assert_eq!(
            components_for(&["scheduler.conf", "front-proxy-client"]),
            ["kube-apiserver", "kube-scheduler"]
        );
        assert_eq!(files_of(false), [KUBELET_CLIENT]);
        assert_eq!(files_of(true).len(), 15);
    }
}
