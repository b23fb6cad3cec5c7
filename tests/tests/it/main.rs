//! The integration tests of `clusterctl-testbed`, in one test binary: the harness modules that run
//! real programs (`envtest`), and tests that need several crates against a real control plane (the
//! CNI agent's RBAC and token from render, phases and kubeapi; the `labels` phase's decisions; kubeadm's
//! strict-decoding warnings failing a phase; Calico's real manifests; audit and a Keycloak OIDC login
//! against an API server run with the rendered flags).

mod agent_rbac;
mod apiserver_rendered;
mod audit_seen;
mod cni_install;
mod envtest;
mod kubeadm_strict;
mod labels_converge;
mod oidc_login;
mod shape;
