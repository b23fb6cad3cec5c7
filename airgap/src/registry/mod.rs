//! The OCI distribution client (distribution-spec v1.1): manifests and blobs over HTTP(S) with
//! anonymous, bearer-token and basic authentication, a custom CA, digest verification, uploads
//! (monolithic and chunked), cross-repository mounts and manifest pushes.

pub(crate) mod auth;
pub(crate) mod client;

pub use auth::{Challenge, EnvCredentials};
pub use client::{ClientOptions, FetchedManifest, RegistryClient};
