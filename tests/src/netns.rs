//! Network namespaces, veth underlays and "nodes" for CNI tests, each uniquely named and removed by a drop guard.
