//! The cluster through a small API: a `ClusterApi` trait (nodes, pods, events, labels, taints, cordon,
//! drain) with one implementation over the `kube` crate, and the pure diagnosis behind `clusterctl
//! status` (which layer a stuck pod is stuck at, and what to look at next).
