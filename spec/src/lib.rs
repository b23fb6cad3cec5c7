//! The cluster file: parse, default and validate `cluster.yaml` (`apiVersion: clusterctl.io/v1alpha1`,
//! `kind: Cluster`) into a [`ValidCluster`]. No I/O beyond [`load`] (which reads the file and the files it
//! references, relative to it); every problem is reported at once, each pointing at file:line:column.
//!
//! ```no_run
//! let loaded = clusterctl_spec::load(std::path::Path::new("cluster.yaml")).map_err(|d| d.to_string())?;
//! let v = clusterctl_spec::validate(&loaded).map_err(|d| d.to_string())?;
//! println!("{} runs Kubernetes {}", v.cluster.name(), v.cluster.kubernetes_version());
//! # Ok::<(), String>(())
//! ```

pub mod audit;
pub mod cni_values;
pub mod cni_versions;
pub mod convert;
pub(crate) mod diag;
pub mod image;
pub mod kubeadm_images;
pub mod lab;
pub mod limits;
pub mod load;
pub(crate) mod locator;
pub mod mirror;
pub mod model;
pub(crate) mod position;
pub mod profiles;
pub mod proxy;
pub(crate) mod proxy_env;
pub(crate) mod syntax;
pub(crate) mod valid;
pub mod validate;
pub mod versions;

pub use diag::{Diagnostic, Diagnostics, Severity};
pub use load::{load, Loaded, Referenced};
pub use profiles::{from_profile, profiles, DEFAULT_PROFILE};
pub use proxy_env::ProxyEnv;
pub use valid::{Endpoint, Mirror, SourceAuth, SshTarget, ValidCluster, ValidNode};
pub use validate::{validate, Validated};
pub use versions::{KubeadmApi, VersionInfo};

/// Whether `name` can be a cluster's name (`metadata.name`): a DNS-1123 label, 1–63 lower-case
/// letters, digits and `-`, starting and ending with a letter or digit — what validation requires.
pub fn is_cluster_name(name: &str) -> bool {
    syntax::dns1123_label(name).is_ok()
}
