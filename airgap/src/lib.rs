//! Air-gapped installs: the OCI distribution client, the bundle writer (an OCI image layout plus
//! packages, binaries and a manifest), the verifier/reader and import into a registry or node runtimes.
//!
//! Flow: [`plan::list_images`] (from the render plan) → [`pull::pull_images`] into a resumable
//! [`store::BlobStore`] → [`bundle::write_bundle`] → (carried to the site) → [`bundle::verify_bundle`]
//! → [`import::import_to_registry`] or [`node::load_into_node`]. Upstream files a CNI install needs
//! (manifests, a Helm chart, the `helm` archive) come through [`upstream`]: pinned by sha256, cached,
//! resumable.

pub mod bundle;
pub mod digest;
pub(crate) mod error;
pub mod import;
pub mod node;
pub mod oci;
pub mod packages;
pub mod plan;
pub mod pull;
pub(crate) mod reference;
pub mod registry;
pub mod run;
pub mod store;
pub mod upstream;

pub use digest::Digest;
pub use error::{AirgapError, DownloadError, ReferenceError, RequestError, Result, TokenError};
pub use reference::ImageRef;
