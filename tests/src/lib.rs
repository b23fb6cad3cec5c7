//! Test-bed harness for clusterctl's whole-system tests: uniquely named network namespaces, Docker node
//! containers built from a local Debian image, a loopback OCI registry, and recording stand-ins. Every
//! resource is removed by a drop guard. When `CI` is set, a missing capability fails instead of skipping.
