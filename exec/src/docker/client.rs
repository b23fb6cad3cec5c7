//! `DockerClient`: a bollard connection to the local Docker Engine (`DOCKER_HOST` or the default
//! unix socket), with the API version negotiated, and the Tokio runtime that drives it.

use std::future::Future;
use std::sync::Arc;

use bollard::Docker;

use crate::transport::ExecError;

/// A negotiated Docker Engine connection plus the runtime its futures run on. Cheap to share (`Arc`).
pub struct DockerClient {
    rt: tokio::runtime::Runtime,
    docker: Docker,
    api_version: String,
}

impl std::fmt::Debug for DockerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerClient")
            .field("api_version", &self.api_version)
            .finish_non_exhaustive()
    }
}

impl DockerClient {
    /// Connects with bollard's local defaults (honours `DOCKER_HOST`) and negotiates the API version
    /// with the engine (`GET /version`). Errors with [`ExecError::Connect`] (node `docker`).
    pub fn connect() -> Result<Arc<DockerClient>, ExecError> {
        let err = |reason: String| ExecError::Connect {
            node: "docker".into(),
            reason,
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("clusterctl-docker")
            .enable_all()
            .build()
            .map_err(|e| err(format!("starting the async runtime: {e}")))?;
        let docker = rt.block_on(async {
            let d = Docker::connect_with_local_defaults()
                .map_err(|e| err(format!("connecting to the engine: {e}")))?;
            d.negotiate_version()
                .await
                .map_err(|e| err(format!("negotiating the API version: {e}")))
        })?;
        let v = docker.client_version();
        let api_version = format!("{}.{}", v.major_version, v.minor_version);
        Ok(Arc::new(DockerClient {
            rt,
            docker,
            api_version,
        }))
    }

    /// The negotiated API version, e.g. `1.41`.
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    /// The bollard handle (for futures run with [`DockerClient::block_on`] or spawned on
    /// [`DockerClient::runtime`]).
    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// The runtime that drives this client.
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        &self.rt
    }

    /// Runs `f` to completion on this client's runtime, blocking the calling (non-async) thread.
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }
}
