//! The integration tests of `clusterctl-exec`, in one test binary (one link, not one per file): one module
//! per area (each a former `tests/*.rs` file) and the support modules they share.

mod bastion;
mod docker;
mod local;
mod ssh;
mod testbed;
