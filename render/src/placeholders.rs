//! Placeholders for run-time secrets. Rendered kubeadm join configs never contain a bootstrap token, a
//! discovery CA-certificate hash or a certificate key, and the rendered EncryptionConfiguration never
//! holds its key: these strings stand in for them, and the phases replace them on the node just before
//! `kubeadm join` (or when placing the encryption configuration), writing the result with mode 0600.

/// Stands for the bootstrap token (`discovery.bootstrapToken.token`, format `[a-z0-9]{6}.[a-z0-9]{16}`).
pub const JOIN_TOKEN: &str = "@@CLUSTERCTL_JOIN_TOKEN@@";
/// Stands for the discovery CA pin (`discovery.bootstrapToken.caCertHashes[0]`, `sha256:<hex>`).
pub const CA_CERT_HASH: &str = "@@CLUSTERCTL_CA_CERT_HASH@@";
/// Stands for the certificate key of `kubeadm init --upload-certs` (`controlPlane.certificateKey`, 64 hex).
pub const CERTIFICATE_KEY: &str = "@@CLUSTERCTL_CERTIFICATE_KEY@@";
/// Stands for the encryption-at-rest key (`secret` of the one key of the EncryptionConfiguration's
/// provider, 32 bytes in base64): `up` fills in the key the first control plane already has, or one
/// it generates once.
pub const ENCRYPTION_KEY: &str = "@@CLUSTERCTL_ENCRYPTION_KEY@@";
/// Stands for the node's podCIDR in the builtin CNI's conflist template (filled by the agent).
pub const POD_CIDR: &str = "@@CLUSTERCTL_POD_CIDR@@";

/// Every placeholder, for checks that none is left after substitution.
pub const ALL: [&str; 5] = [
    JOIN_TOKEN,
    CA_CERT_HASH,
    CERTIFICATE_KEY,
    ENCRYPTION_KEY,
    POD_CIDR,
];
