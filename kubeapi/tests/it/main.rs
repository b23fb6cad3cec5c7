//! The integration tests of `clusterctl-kubeapi`, in one test binary (one link, not one per file): one module
//! per area (each a former `tests/*.rs` file) and the support modules they share.

mod diagnose;
mod real_api;
mod real_apply;
mod recorded_api;
mod unreachable;
