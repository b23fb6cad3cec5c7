//! The cluster file: parse, default and validate `cluster.yaml` (`apiVersion: clusterctl.io/v1alpha1`,
//! `kind: Cluster`) into a `ValidCluster`. No I/O beyond the bytes given (files the spec references are
//! read by the loader before validation); every error names its field and points at file:line:column.
