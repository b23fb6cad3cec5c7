//! The integration tests of `clusterctl-cni`, in one test binary (one link, not one per file): one module
//! per area (each a former `tests/*.rs` file) and the support modules they share.

mod support;

mod chain_versions;
mod conflist_version;
mod kube_peers;
mod masq;
mod netpol;
mod reboot;
