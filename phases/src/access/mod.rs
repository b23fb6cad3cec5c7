//! Cluster access, below every workflow (`up`, `node join`, `upgrade`, `status`, …): the admin
//! kubeconfig and the user's kubeconfig files ([`kubeconfig`], no I/O but the environment), and the
//! cluster's API client for the commands that reach an existing cluster ([`api`]). `up` and the
//! other workflows import this module; it imports none of them.

pub(crate) mod api;
pub mod kubeconfig;
