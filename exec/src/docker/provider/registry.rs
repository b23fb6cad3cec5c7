//! The lab's local registry container beside the node containers (kind's local-registry recipe):
//! created on the cluster network when the options ask for one ([`DockerProvider::ensure_registry`],
//! called by `create`), removed with the cluster ([`DockerProvider::remove_registry`], called by
//! `remove_all`). It carries [`REGISTRY_LABEL`] instead of the cluster label, so it is never taken for
//! a node. Also how an image reference is split for a pull ([`pull_parts`]).

use bollard::query_parameters::CreateContainerOptionsBuilder;

use super::side::{side_body, Side};
use super::{DockerProvider, REGISTRY_LABEL};
use crate::transport::ExecError;

/// `image` as the engine's pull takes it: (`fromImage`, `tag`), the tag being the digest for a
/// reference pinned by one (`repo:2@sha256:…` → (`repo`, `sha256:…`)), else the tag or `latest`.
pub(crate) fn pull_parts(image: &str) -> (String, String) {
    if let Some((name, digest)) = image.split_once('@') {
        let repo = match name.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => r,
            _ => name,
        };
        return (repo.to_string(), digest.to_string());
    }
    match image.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r.to_string(), t.to_string()),
        _ => (image.to_string(), "latest".to_string()),
    }
}

impl DockerProvider {
    /// The cluster's registry containers (by [`REGISTRY_LABEL`]): their names.
    pub fn registry_containers(&self) -> Result<Vec<String>, ExecError> {
        let summaries = self.labelled(REGISTRY_LABEL)?;
        Ok(summaries
            .into_iter()
            .filter_map(|c| {
                c.names?
                    .first()
                    .map(|n| n.trim_start_matches('/').to_string())
            })
            .collect())
    }

    /// Creates and starts the options' registry container on `network` unless it exists (the image
    /// pulled first when missing). Returns whether it created one. Errors: the engine's, naming the
    /// container (a host port in use among them).
    pub fn ensure_registry(&self, network: &str) -> Result<bool, ExecError> {
        let Some(r) = self.options.registry.clone() else {
            return Ok(false);
        };
        if self.registry_containers()?.contains(&r.name) {
            return Ok(false);
        }
        self.ensure(&r.image)?;
        let body = side_body(
            &Side {
                image: &r.image,
                label: REGISTRY_LABEL,
                network,
                container_port: r.container_port,
                host_port: r.host_port,
            },
            &self.cluster,
        );
        self.client.block_on(async {
            let d = self.client.docker();
            d.create_container(
                Some(
                    CreateContainerOptionsBuilder::default()
                        .name(&r.name)
                        .build(),
                ),
                body,
            )
            .await
            .map_err(|e| self.err(format!("creating registry container {}: {e}", r.name)))?;
            d.start_container(
                &r.name,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
            .map_err(|e| self.err(format!("starting registry container {}: {e}", r.name)))
        })?;
        Ok(true)
    }

    /// Removes the cluster's registry containers (with their anonymous volumes: the images pushed
    /// there); returns their names.
    pub fn remove_registry(&self) -> Result<Vec<String>, ExecError> {
        let names = self.registry_containers()?;
        for n in &names {
            self.force_remove(n)?;
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::pull_parts;

    #[test]
    fn references_split_into_what_the_engine_pulls() {
        let p = |s: &str| {
            let (a, b) = pull_parts(s);
            (a, b)
        };
        assert_eq!(
            p("docker.io/library/registry:2@sha256:abc"),
            ("docker.io/library/registry".into(), "sha256:abc".into())
        );
        assert_eq!(
            p("localhost:5000/x@sha256:abc"),
            ("localhost:5000/x".into(), "sha256:abc".into())
        );
        assert_eq!(
            p("clusterctl.test/registry:2"),
            ("clusterctl.test/registry".into(), "2".into())
        );
        assert_eq!(
            p("localhost:5000/x"),
            ("localhost:5000/x".into(), "latest".into())
        );
        assert_eq!(p("kindest/node"), ("kindest/node".into(), "latest".into()));
    }
}
