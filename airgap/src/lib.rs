//! Air-gapped installs: the OCI distribution client, the bundle writer (an OCI image layout plus
//! packages, binaries and a manifest), the verifier/reader and import into a registry or node runtimes.

pub mod digest;
pub mod error;
pub mod oci;
pub mod reference;
pub mod registry;

pub use digest::Digest;
pub use error::{AirgapError, Result};
pub use reference::ImageRef;
