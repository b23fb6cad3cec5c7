//! Pure, deterministic rendering: a `ValidCluster` (plus per-node facts) becomes every file each node
//! needs — kubeadm, kind, kube-vip, audit, authentication, runtime, sysctl/modules and CNI files — and
//! the list of images the cluster pulls. Same input, byte-identical output; no I/O.
