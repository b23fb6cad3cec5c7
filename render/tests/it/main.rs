//! The integration tests of `clusterctl-render`, in one test binary (one link, not one per file): one module
//! per area (each a former `tests/*.rs` file) and the support modules they share.

mod common;
mod upstream;

mod golden;
mod kind_loader;
mod layers;
mod node_labels;
mod real_kubeadm;
mod strict_upstream;
mod targeted;
