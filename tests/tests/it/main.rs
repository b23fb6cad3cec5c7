//! The integration tests of `clusterctl-testbed`, in one test binary: the harness modules that run
//! real programs (`envtest`), and tests that need several crates against a real control plane (the
//! CNI agent's RBAC and token from render, phases and kubeapi; the `labels` phase's decisions; kubeadm's
//! strict-decoding warnings failing a phase).

mod agent_rbac;
mod cni_install;
mod envtest;
mod kubeadm_strict;
mod labels_converge;
