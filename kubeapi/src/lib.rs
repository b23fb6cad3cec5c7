//! The cluster through a small API: a [`ClusterApi`] trait (nodes, pods, events, labels, taints, cordon,
//! drain, node deletion, server-side apply and reads of objects of any kind) with one implementation over the `kube` crate ([`KubeClusterApi`], built from a
//! kubeconfig path), and the pure diagnosis behind `clusterctl status` ([`diagnose`]): which layer a stuck
//! pod is stuck at (scheduling, image, application), why, and what to look at next.
//!
//! Object shapes are the Kubernetes API's own (`k8s-openapi`, core/v1 `Node`, `Pod`, `Event`), so the
//! diagnosis can be fed recorded API responses directly.

pub(crate) mod api;
mod apply;
pub mod diagnose;
pub mod drain;
pub(crate) mod kube_impl;
pub mod kubeconfig;
pub(crate) mod node;
pub(crate) mod paged;

pub use api::{ApiError, Applied, ClusterApi, EvictOutcome, TaintSpec};
pub use diagnose::{diagnose, Diagnosis, Layer, StuckPod, Termination};
pub use kube_impl::KubeClusterApi;
pub use node::{node_status, NodeStatus};

/// Re-exported Kubernetes object types used by the trait (core/v1).
pub use k8s_openapi::api::core::v1::{Event, Node, Pod};
