//! The docker provider's node containers for `up` and `node join`: what creating them would do
//! ([`plan`], the dry run's provider lines), creating them and waiting for their systemd ([`create`]),
//! and, when that fails, removing what the attempt made (the containers it created, and the network when
//! nothing else uses it) and saying why ([`CreateError`], with [`CreateError::hint`] for an engine that
//! refuses privileged containers). Also the API server as this machine reaches it ([`local_api`]),
//! and the API load balancer in front of several control planes ([`load_balancer`], [`configure_lb`]).

use std::time::Duration;

use clusterctl_exec::docker::Removed;
use clusterctl_exec::{DockerNode, DockerNodeOptions, DockerProvider, ExecError};
use clusterctl_spec::ValidCluster;

use crate::access::kubeconfig::LocalApi;
use clusterctl_spec::ValidNode;

/// How long node containers may take to boot (systemd `running` or `degraded`).
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(120);

/// The settings that run the nodes unprivileged, as the test bed runs them (docs/spec.md,
/// "Unprivileged node containers"); named by [`CreateError::hint`].
pub const UNPRIVILEGED_SETTINGS: &str = "spec.nodeEnvironment: unprivileged-container and spec.docker.runOptions: {privileged: false, capAdd: [SYS_ADMIN, NET_ADMIN, SYS_PTRACE], tmpfs: [\"/run:exec\", /run/lock, \"/tmp:exec\", \"/var/lib/containerd:exec\"], cgroupns: private}";

/// The docker provider's node options for `cluster` at its Kubernetes version
/// ([`crate::reach::docker_options`]).
pub fn options(cluster: &ValidCluster) -> DockerNodeOptions {
    crate::reach::docker_options(cluster, &cluster.version_info().tag())
}

/// The provider lines of a dry run: the network, then one `create container <cluster>-<node> (ROLE,
/// image IMAGE)…` line per node of `nodes` (the first control plane's API server published on
/// 127.0.0.1, its port mappings, memory and CPU limits), then the local registry's container when the
/// file asks for one.
pub fn plan(
    cluster: &ValidCluster,
    nodes: &[ValidNode],
    options: &DockerNodeOptions,
) -> Vec<String> {
    let name = cluster.name();
    let network = options
        .network
        .clone()
        .unwrap_or_else(|| format!("clusterctl-{name}"));
    let first_cp = nodes.iter().find(|n| n.is_control_plane()).map(|n| &n.name);
    let mut out = vec![format!("create network {network} (if missing)")];
    for n in nodes {
        out.push(format!(
            "create container {name}-{} ({}, image {}){}{}",
            n.name,
            if n.is_control_plane() {
                "control-plane"
            } else {
                "worker"
            },
            options.image,
            if first_cp == Some(&n.name) {
                ", API server published on 127.0.0.1"
            } else {
                ""
            },
            extras(options, &n.name)
        ));
    }
    if let Some(lb) = &options.load_balancer {
        out.push(format!(
            "create load balancer container {} (image {}, 127.0.0.1:{} -> {}; backends {}) (if missing, else its backends updated)",
            lb.name,
            lb.image,
            match lb.host_port {
                0 => "<port Docker assigns>".to_string(),
                p => p.to_string(),
            },
            lb.port,
            lb.backends.iter().map(|(_, a)| a.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(r) = &options.registry {
        out.push(format!(
            "create registry container {} (image {}, 127.0.0.1:{} -> {}) (if missing)",
            r.name, r.image, r.host_port, r.container_port
        ));
    }
    out
}

/// What `options` adds to node `node`'s container, for the dry-run plan: its published ports and the
/// memory and CPU limits (empty when none).
fn extras(options: &DockerNodeOptions, node: &str) -> String {
    let mut out = String::new();
    for m in options.port_mappings.get(node).into_iter().flatten() {
        out += &format!(
            ", port {}:{}->{}/{}",
            m.listen_address, m.host_port, m.container_port, m.protocol
        );
    }
    if let Some(b) = options.memory {
        out += &format!(", memory {b} bytes");
    }
    if let Some(c) = options.nano_cpus {
        out += &format!(", cpus {}", c as f64 / 1e9);
    }
    out
}

/// What happened to the containers and network a failed attempt made.
#[derive(Debug)]
pub enum Cleanup {
    /// They were removed (the lists name them; both empty when the attempt made nothing).
    Removed(Removed),
    /// Removing them failed too.
    Failed(ExecError),
}

/// Node containers could not be created or did not boot; what the attempt made was removed (or
/// [`Cleanup::Failed`] says why not).
#[derive(Debug, thiserror::Error)]
#[error("creating the node containers failed: {source}{}{}", cleanup_text(.cleanup), self.hint().map(|h| format!("\n  hint: {h}")).unwrap_or_default())]
pub struct CreateError {
    /// The engine's error.
    #[source]
    pub source: ExecError,
    /// What happened to what the attempt made.
    pub cleanup: Cleanup,
}

impl CreateError {
    /// True when the engine refused a privileged container (rootless Docker, a policy, or a daemon
    /// without every capability: `unable to apply caps: operation not permitted`).
    pub fn privileged_refused(&self) -> bool {
        privileged_refused(&self.source.to_string())
    }

    /// The next step for the user when the engine refused a privileged container: the settings that
    /// run the nodes unprivileged ([`UNPRIVILEGED_SETTINGS`]).
    pub fn hint(&self) -> Option<String> {
        self.privileged_refused().then(|| {
            format!(
                "this Docker engine refuses privileged containers (rootless Docker, a policy, or a daemon without every capability): run the nodes unprivileged with {UNPRIVILEGED_SETTINGS} (docs/spec.md, \"Unprivileged node containers\")"
            )
        })
    }
}

/// The cleanup part of [`CreateError`]'s message.
fn cleanup_text(cleanup: &Cleanup) -> String {
    match cleanup {
        Cleanup::Removed(r) if r.containers.is_empty() && r.networks.is_empty() => String::new(),
        Cleanup::Removed(r) => format!(
            "\n  removed what this attempt created: {}",
            r.containers
                .iter()
                .map(|c| format!("container {c}"))
                .chain(r.networks.iter().map(|n| format!("network {n}")))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Cleanup::Failed(e) => format!(
            "\n  removing what this attempt created failed too ({e}): run `clusterctl destroy`"
        ),
    }
}

/// Whether an engine error (its text: the engine answers with a message, not a code) is the refusal
/// of a privileged container.
fn privileged_refused(error: &str) -> bool {
    let e = error.to_ascii_lowercase();
    e.contains("unable to apply caps")
        || (e.contains("privileged") && (e.contains("not permitted") || e.contains("not allowed")))
        || (e.contains("operation not permitted") && e.contains("cap"))
}

/// Creates the node containers of `nodes` that do not exist yet (the network first when missing) and
/// waits up to [`BOOT_TIMEOUT`] for every node's systemd; returns the cluster's node containers.
/// Errors: the engine's, after removing what this attempt created (containers that were not there
/// before, the network when no container uses it).
pub fn create(
    provider: &DockerProvider,
    nodes: &[ValidNode],
) -> Result<Vec<DockerNode>, Box<CreateError>> {
    let fail = |source: ExecError, before: &[DockerNode]| {
        Box::new(CreateError {
            source,
            cleanup: match provider.remove_created(before) {
                Ok(r) => Cleanup::Removed(r),
                Err(e) => Cleanup::Failed(e),
            },
        })
    };
    let before = provider.list().map_err(|e| fail(e, &[]))?;
    let specs: Vec<clusterctl_exec::NodeSpec> = nodes
        .iter()
        .map(|n| {
            clusterctl_exec::NodeSpec::new(n.name.clone(), n.role, crate::reach::address_text(n))
        })
        .collect();
    provider
        .create(&specs)
        .and_then(|made| provider.wait_ready(BOOT_TIMEOUT).map(|()| made))
        .map_err(|e| fail(e, &before))
}

/// For the docker provider: the API server as this machine reaches it, the load balancer's port (when
/// the cluster has one), else the first control plane's 6443, published on 127.0.0.1 (the certificate checked against the endpoint host). `offline` (a
/// dry run that contacts nothing) names the port `<port Docker assigns>`. `None` for SSH nodes, or
/// when the engine or the published port cannot be found.
pub fn local_api(cluster: &ValidCluster, offline: bool) -> Option<LocalApi> {
    if cluster.provider() != clusterctl_spec::model::Provider::Docker {
        return None;
    }
    let tls_server_name = cluster.endpoint().host.clone();
    if offline {
        return Some(LocalApi {
            server: "https://127.0.0.1:<port Docker assigns>".into(),
            tls_server_name,
        });
    }
    let provider = crate::reach::docker_provider(cluster).ok()?;
    let port = if cluster.load_balancer().is_some() {
        provider.load_balancer().ok()??.host_port?
    } else {
        let first = cluster.first_control_plane();
        provider
            .list()
            .ok()?
            .into_iter()
            .find(|n| n.name == first.name)?
            .api_server_port?
    };
    Some(LocalApi {
        server: format!("https://127.0.0.1:{port}"),
        tls_server_name,
    })
}

/// `node remove` of control plane `node`: the load balancer's backends without it, reloaded when
/// they changed. `Ok(None)` when the cluster has no load balancer; else whether it changed. Errors:
/// the engine's.
pub(crate) fn configure_lb(
    cluster: &ValidCluster,
    node: &str,
) -> Result<Option<bool>, crate::reach::ReachError> {
    let Some(lb) = crate::reach::load_balancer(cluster, Some(node)) else {
        return Ok(None);
    };
    let provider = crate::reach::docker_provider(cluster)?;
    provider
        .configure_load_balancer(&lb.backends)
        .map(Some)
        .map_err(|e| crate::reach::ReachError::Docker(std::sync::Arc::new(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str, cleanup: Cleanup) -> CreateError {
        CreateError {
            source: ExecError::Other(text.into()),
            cleanup,
        }
    }

    #[test]
    fn the_engines_refusal_of_privileged_containers_gets_the_unprivileged_settings() {
        let raw = "Docker responded with status code 500: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: unable to apply caps: operation not permitted: unknown";
        let e = error(raw, Cleanup::Removed(Removed::default()));
        let text = e.to_string();
        assert!(
            text.contains("hint: this Docker engine refuses privileged containers"),
            "{text}"
        );
        for setting in [
            "nodeEnvironment: unprivileged-container",
            "privileged: false",
            "capAdd: [SYS_ADMIN, NET_ADMIN, SYS_PTRACE]",
            "cgroupns: private",
        ] {
            assert!(text.contains(setting), "{setting} missing: {text}");
        }
        let other = error(
            "no such image kindest/node:v1.34.1",
            Cleanup::Removed(Removed::default()),
        );
        assert!(other.hint().is_none());
        assert!(!other.to_string().contains("hint"));
    }

    #[test]
    fn the_message_names_what_was_removed_or_why_not() {
        let removed = Removed {
            containers: vec!["x-cp1".into()],
            networks: vec!["clusterctl-x".into()],
        };
        let text = error("boom", Cleanup::Removed(removed)).to_string();
        assert!(
            text.contains(
                "removed what this attempt created: container x-cp1, network clusterctl-x"
            ),
            "{text}"
        );
        let text = error("boom", Cleanup::Failed(ExecError::Other("gone".into()))).to_string();
        assert!(
            text.contains("failed too (gone): run `clusterctl destroy`"),
            "{text}"
        );
    }

    #[test]
    fn the_plan_names_network_containers_and_the_published_api_server() {
        let yaml = "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {name: pl}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: docker\n  docker:\n    runOptions: {memory: 1g}\n  nodes:\n    - {name: cp1, role: control-plane}\n    - {name: w1, role: worker}\n";
        let cluster = crate::up::from_file::test_cluster(yaml);
        let nodes: Vec<ValidNode> = cluster.nodes().to_vec();
        let lines = plan(&cluster, &nodes, &options(&cluster));
        assert_eq!(lines[0], "create network clusterctl-pl (if missing)");
        assert!(
            lines[1].starts_with("create container pl-cp1 (control-plane, image "),
            "{lines:?}"
        );
        assert!(
            lines[1].contains("API server published on 127.0.0.1"),
            "{lines:?}"
        );
        assert!(lines[2].ends_with(", memory 1073741824 bytes"), "{lines:?}");
        assert!(!lines[2].contains("API server"), "{lines:?}");
    }
}
