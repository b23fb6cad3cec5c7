//! The integration tests of `clusterctl-phases`, in one test binary (one link, not one per file): one module
//! per area (each a former `tests/*.rs` file) and the support modules they share.

mod destroy;
mod engine;
mod etcd;
