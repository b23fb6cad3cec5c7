//! How clusterctl reaches nodes: the `Transport` trait (run a command, upload/download files) with SSH
//! (ssh2), Docker exec (bollard) and local implementations, and the providers that turn a cluster file
//! into reachable nodes (SSH hosts, Docker node containers). The only crate that knows ssh2 and bollard.

pub mod docker;
pub mod local;
pub(crate) mod provider;
pub(crate) mod raw;
pub mod shell;
pub(crate) mod ssh;
pub(crate) mod transport;

pub use docker::{
    DockerClient, DockerNode, DockerNodeOptions, DockerProvider, DockerTransport, PortMapping,
};
pub use local::LocalTransport;
pub use provider::{NodeSpec, Provider, SshProvider};
pub use ssh::{Bastion, ConnectRetry, SshAuth, SshOptions, SshTarget, SshTransport};
pub use transport::{Cmd, ExecError, FileSpec, Output, Transport, WrapError};
