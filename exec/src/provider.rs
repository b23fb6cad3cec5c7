//! Providers: from a cluster's nodes (plain structs; their role and host-key policy are the cluster
//! file's own types, `clusterctl_spec::model::{Role, HostKeyPolicy}`) to one
//! [`Transport`] per node. [`SshProvider`] reaches listed hosts over SSH; the Docker provider
//! ([`crate::docker::DockerProvider`]) creates node containers first and reaches them with docker exec.

use std::path::PathBuf;
use std::time::Duration;

use clusterctl_spec::model::{HostKeyPolicy, Role};

use crate::ssh::{Bastion, SshAuth, SshOptions, SshTarget, SshTransport};
use crate::transport::{ExecError, Transport};

/// One node of the cluster, as a provider needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Node name.
    pub name: String,
    /// Role.
    pub role: Role,
    /// Host name or address to reach it at (SSH); ignored by the Docker provider.
    pub address: String,
    /// SSH login user; `None`: the provider's default.
    pub ssh_user: Option<String>,
    /// SSH port; `None`: 22.
    pub ssh_port: Option<u16>,
    /// SSH private key file; `None`: the provider's default authentication.
    pub ssh_key: Option<PathBuf>,
    /// What to do with an unknown host key; `None`: the provider's policy.
    pub ssh_host_key_policy: Option<HostKeyPolicy>,
}

impl NodeSpec {
    /// A node with the provider's default SSH settings.
    pub fn new(name: impl Into<String>, role: Role, address: impl Into<String>) -> Self {
        NodeSpec {
            name: name.into(),
            role,
            address: address.into(),
            ssh_user: None,
            ssh_port: None,
            ssh_key: None,
            ssh_host_key_policy: None,
        }
    }
}

/// Gives a transport per node. Implementations: [`SshProvider`], `docker::DockerProvider`.
pub trait Provider: Send + Sync {
    /// `ssh` or `docker`.
    fn kind(&self) -> &'static str;
    /// A transport to `node`. The SSH provider connects (and checks the host key) here.
    fn transport(&self, node: &NodeSpec) -> Result<Box<dyn Transport>, ExecError>;

    /// Transports to every node, made in parallel (at most 64 at a time), in the order of `nodes`;
    /// each node has its own result so that every unreachable node can be reported at once.
    fn transports(&self, nodes: &[NodeSpec]) -> Vec<Result<Box<dyn Transport>, ExecError>> {
        let mut out = Vec::with_capacity(nodes.len());
        for group in nodes.chunks(64) {
            std::thread::scope(|s| {
                let handles: Vec<_> = group
                    .iter()
                    .map(|n| s.spawn(move || self.transport(n)))
                    .collect();
                for (h, n) in handles.into_iter().zip(group) {
                    out.push(h.join().unwrap_or_else(|_| {
                        Err(ExecError::Other(format!(
                            "connecting to {} panicked",
                            n.name
                        )))
                    }));
                }
            });
        }
        out
    }
}

/// Nodes listed in the cluster file, reached over SSH with shared defaults.
#[derive(Debug, Clone)]
pub struct SshProvider {
    /// Login user when a node sets none.
    pub default_user: String,
    /// Authentication when a node sets no key, known_hosts file, host-key policy, timeouts.
    pub options: SshOptions,
}

impl SshProvider {
    /// A provider logging in as `user` with `auth`, checking `~/.ssh/known_hosts` under the default
    /// policy (`AcceptNew`, see [`SshOptions::new`]).
    pub fn new(user: impl Into<String>, auth: SshAuth) -> Self {
        SshProvider {
            default_user: user.into(),
            options: SshOptions::new(auth),
        }
    }

    /// The same provider with another known_hosts file and policy.
    pub fn with_known_hosts(mut self, file: PathBuf, policy: HostKeyPolicy) -> Self {
        self.options.known_hosts = file;
        self.options.host_key_policy = policy;
        self
    }

    /// The same provider with another connect timeout.
    pub fn with_connect_timeout(mut self, t: Duration) -> Self {
        self.options.connect_timeout = t;
        self
    }

    /// The same provider with `attempts` connection set-up attempts (at least 1; see
    /// [`crate::ConnectRetry`]).
    pub fn with_connect_attempts(mut self, attempts: u32) -> Self {
        self.options.connect_retry.attempts = attempts;
        self
    }

    /// The same provider reaching every node through the jump host `bastion`.
    pub fn with_bastion(mut self, bastion: Bastion) -> Self {
        self.options.bastion = Some(Box::new(bastion));
        self
    }

    /// The SSH target and options for `node` (its own user, port, key and host-key policy override
    /// the defaults).
    pub fn target(&self, node: &NodeSpec) -> (SshTarget, SshOptions) {
        let target = SshTarget {
            node: node.name.clone(),
            host: node.address.clone(),
            port: node.ssh_port.unwrap_or(22),
            user: node
                .ssh_user
                .clone()
                .unwrap_or_else(|| self.default_user.clone()),
        };
        let mut options = self.options.clone();
        if let Some(key) = &node.ssh_key {
            options.auth = SshAuth::KeyFile {
                path: key.clone(),
                passphrase: None,
            };
        }
        if let Some(policy) = node.ssh_host_key_policy {
            options.host_key_policy = policy;
        }
        (target, options)
    }
}

impl Provider for SshProvider {
    fn kind(&self) -> &'static str {
        "ssh"
    }

    fn transport(&self, node: &NodeSpec) -> Result<Box<dyn Transport>, ExecError> {
        let (target, options) = self.target(node);
        Ok(Box::new(SshTransport::connect(target, options)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_own_ssh_settings_override_the_providers() {
        let provider = SshProvider::new("ops", SshAuth::Agent)
            .with_known_hosts(PathBuf::from("/kh"), HostKeyPolicy::AcceptNew)
            .with_connect_attempts(7);
        let plain = NodeSpec::new("cp1", Role::ControlPlane, "10.0.0.1");
        let (target, options) = provider.target(&plain);
        assert_eq!(
            (target.user.as_str(), target.port, target.host.as_str()),
            ("ops", 22, "10.0.0.1")
        );
        assert_eq!(options.auth, SshAuth::Agent);
        assert_eq!(options.host_key_policy, HostKeyPolicy::AcceptNew);
        assert_eq!(options.connect_retry.attempts, 7);
        assert_eq!(options.known_hosts, PathBuf::from("/kh"));
        let own = NodeSpec {
            ssh_user: Some("root".into()),
            ssh_port: Some(2222),
            ssh_key: Some(PathBuf::from("/k")),
            ssh_host_key_policy: Some(HostKeyPolicy::Strict),
            ..plain
        };
        let (target, options) = provider.target(&own);
        assert_eq!((target.user.as_str(), target.port), ("root", 2222));
        assert_eq!(
            options.auth,
            SshAuth::KeyFile {
                path: PathBuf::from("/k"),
                passphrase: None
            }
        );
        assert_eq!(options.host_key_policy, HostKeyPolicy::Strict);
    }
}
