//! Placeholders for run-time secrets. Rendered kubeadm join configs never contain a bootstrap token, a
//! discovery CA-certificate hash or a certificate key: these strings stand in for them, and the phases
//! replace them (plain text substitution) on the node just before `kubeadm join`, writing the result
//! with mode 0600.

/// Stands for the bootstrap token (`discovery.bootstrapToken.token`, format `[a-z0-9]{6}.[a-z0-9]{16}`).
pub const JOIN_TOKEN: &str = "@@CLUSTERCTL_JOIN_TOKEN@@";
/// Stands for the discovery CA pin (`discovery.bootstrapToken.caCertHashes[0]`, `sha256:<hex>`).
pub const CA_CERT_HASH: &str = "@@CLUSTERCTL_CA_CERT_HASH@@";
/// Stands for the certificate key of `kubeadm init --upload-certs` (`controlPlane.certificateKey`, 64 hex).
pub const CERTIFICATE_KEY: &str = "@@CLUSTERCTL_CERTIFICATE_KEY@@";
/// Stands for the node's podCIDR in the builtin CNI's conflist template (filled by the agent).
pub const POD_CIDR: &str = "@@CLUSTERCTL_POD_CIDR@@";

/// Every placeholder, for checks that none is left after substitution.
pub const ALL: [&str; 4] = [JOIN_TOKEN, CA_CERT_HASH, CERTIFICATE_KEY, POD_CIDR];
