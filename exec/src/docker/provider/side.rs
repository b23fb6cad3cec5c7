//! What the provider's containers share beyond the nodes' own set-up: finding containers by one of
//! the provider's labels (the nodes, the local registry, the API load balancer), removing one with its
//! anonymous volumes, and the create body of a container beside the nodes (the registry, the load
//! balancer): on the cluster network, one port published on 127.0.0.1, restarted always.

use std::collections::HashMap;

use bollard::models::{
    ContainerCreateBody, ContainerSummary, EndpointSettings, HostConfig, NetworkingConfig,
    PortBinding, RestartPolicy, RestartPolicyNameEnum,
};
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

use super::DockerProvider;
use crate::transport::ExecError;

/// A container beside the nodes, as [`side_body`] creates it.
pub(crate) struct Side<'a> {
    /// The image reference.
    pub(crate) image: &'a str,
    /// The label key that names the cluster on it (never the node label).
    pub(crate) label: &'a str,
    /// The cluster network it joins.
    pub(crate) network: &'a str,
    /// The port it listens on inside (TCP).
    pub(crate) container_port: u16,
    /// The port published on 127.0.0.1; 0: Docker picks one.
    pub(crate) host_port: u16,
}

/// The create body of `side` for cluster `cluster`.
pub(crate) fn side_body(side: &Side<'_>, cluster: &str) -> ContainerCreateBody {
    let port_key = format!("{}/tcp", side.container_port);
    let host = HostConfig {
        network_mode: Some(side.network.to_string()),
        port_bindings: Some(HashMap::from([(
            port_key.clone(),
            Some(vec![PortBinding {
                host_ip: Some("127.0.0.1".into()),
                host_port: Some(match side.host_port {
                    0 => String::new(),
                    p => p.to_string(),
                }),
            }]),
        )])),
        restart_policy: Some(RestartPolicy {
            name: Some(RestartPolicyNameEnum::ALWAYS),
            maximum_retry_count: None,
        }),
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(side.image.to_string()),
        labels: Some(HashMap::from([(
            side.label.to_string(),
            cluster.to_string(),
        )])),
        exposed_ports: Some(vec![port_key]),
        host_config: Some(host),
        networking_config: Some(NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                side.network.to_string(),
                EndpointSettings::default(),
            )])),
        }),
        ..Default::default()
    }
}

impl DockerProvider {
    /// Every container (any state) carrying `label=<this cluster>`. Errors: the engine's.
    pub(crate) fn labelled(&self, label: &str) -> Result<Vec<ContainerSummary>, ExecError> {
        self.client.block_on(async {
            self.client
                .docker()
                .list_containers(Some(
                    ListContainersOptionsBuilder::default()
                        .all(true)
                        .filters(&HashMap::from([(
                            "label",
                            vec![format!("{label}={}", self.cluster)],
                        )]))
                        .build(),
                ))
                .await
                .map_err(|e| self.err(format!("listing containers: {e}")))
        })
    }

    /// Removes container `name`, running or not, with its anonymous volumes (`docker rm -f -v`).
    /// Errors: the engine's, naming the container.
    pub(crate) fn force_remove(&self, name: &str) -> Result<(), ExecError> {
        self.client.block_on(async {
            self.client
                .docker()
                .remove_container(
                    name,
                    Some(
                        RemoveContainerOptionsBuilder::default()
                            .force(true)
                            .v(true)
                            .build(),
                    ),
                )
                .await
                .map_err(|e| self.err(format!("removing container {name}: {e}")))
        })
    }
}
