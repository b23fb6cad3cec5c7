//! The errors of the air-gap crate: registry I/O, digests, bundle format and verification. Every
//! variant names the image, blob or bundle entry it is about; none carries a credential.

use std::path::PathBuf;

/// Everything that can go wrong while listing, pulling, bundling, verifying or importing.
#[derive(Debug, thiserror::Error)]
pub enum AirgapError {
    /// An image reference that does not parse (`[registry/]repository[:tag][@sha256:hex]`).
    #[error("invalid image reference {reference:?}: {reason}")]
    Reference { reference: String, reason: String },
    /// Images whose manifests could not be fetched, each as `SOURCE [(from OVERRIDE)]: cause`; all
    /// are listed, not only the first.
    #[error("{} image(s) could not be fetched:\n  {}", .0.len(), .0.join("\n  "))]
    Images(Vec<String>),
    /// A digest string that is not `sha256:` followed by 64 lower-case hex digits.
    #[error("invalid digest {0:?}")]
    Digest(String),
    /// Content whose sha256 differs from the digest it was asked for or listed under.
    #[error("digest mismatch for {what}: expected {expected}, got {actual}")]
    DigestMismatch {
        what: String,
        expected: String,
        actual: String,
    },
    /// The registry answered with an unexpected HTTP status (method, URL without credentials, status, body head).
    #[error("registry {method} {url} answered {status}: {body}")]
    Http {
        method: String,
        url: String,
        status: u16,
        body: String,
    },
    /// The registry could not be reached or the transfer broke.
    #[error("registry request {url} failed: {reason}")]
    Transport { url: String, reason: String },
    /// Authentication failed or a challenge could not be answered.
    #[error("authentication to {registry} failed: {reason}")]
    Auth { registry: String, reason: String },
    /// A manifest or index that is not valid JSON of the expected OCI/Docker shape.
    #[error("bad manifest for {what}: {reason}")]
    Manifest { what: String, reason: String },
    /// A bundle entry that failed verification or is unsafe; `entry` is its path in the tar.
    #[error("bundle entry {entry:?} refused: {reason}")]
    Entry { entry: String, reason: String },
    /// The bundle as a whole is malformed (missing manifest, truncated, entries missing).
    #[error("bundle {path} is invalid: {reason}")]
    Bundle { path: PathBuf, reason: String },
    /// A sound bundle that does not fit the cluster file (another cluster or version, no mirror to
    /// push to); the reason says what to change.
    #[error("bundle {path} does not fit the cluster file: {reason}")]
    Mismatch { path: PathBuf, reason: String },
    /// A package source that could not be read or fetched.
    #[error("package {name}: {reason}")]
    Package { name: String, reason: String },
    /// Loading images into a node runtime failed.
    #[error("node {node}: {reason}")]
    Node { node: String, reason: String },
    /// Local file-system I/O (path, cause).
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl AirgapError {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        AirgapError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = AirgapError> = std::result::Result<T, E>;
