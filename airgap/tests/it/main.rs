//! The integration tests of `clusterctl-airgap`, in one test binary (one link, not one per file): one module
//! per area (each a former `tests/*.rs` file) and the support modules they share.

mod common;

mod client;
mod cluster_file;
mod hostile;
mod node_archive;
mod node_crio;
mod roundtrip;
mod runtime;
mod sources;
mod tamper;
mod tls;
mod upstream;
