//! Docker: node containers reached through the Docker Engine API with `bollard` (the version is
//! negotiated, so Debian's Engine 20.10 / API 1.41 works), and the kind-style provider that creates,
//! lists and removes them. bollard is async: a [`DockerClient`] owns a small Tokio runtime and every
//! blocking method of this module runs its future there.

pub(crate) mod client;
pub(crate) mod provider;
pub(crate) mod transport;

pub use client::DockerClient;
pub use provider::{
    haproxy_config, DockerNode, DockerNodeOptions, DockerProvider, LoadBalancerContainer,
    LoadBalancerState, PortMapping, RegistryContainer, Removed, CLUSTER_LABEL, HAPROXY_CONFIG_PATH,
    LOAD_BALANCER_LABEL, NODE_LABEL, REGISTRY_LABEL, ROLE_LABEL,
};
pub use transport::{DockerExecError, DockerTransport};
