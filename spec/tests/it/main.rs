//! The integration tests of `clusterctl-spec`, in one test binary (one link, not one per file): one module
//! per area (each a former `tests/*.rs` file) and the support modules they share.

mod cni_sources;
mod encryption;
mod fuzz;
mod hostile;
mod invalid;
mod lab;
mod lb_pool;
mod never_panics;
mod profiles;
mod resolve;
mod timeouts_mtu_audit;
