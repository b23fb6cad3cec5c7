//! The errors of the air-gap crate: registry I/O, digests, bundle format and verification. Every
//! variant names the image, blob or bundle entry it is about; none carries a credential.

use std::path::PathBuf;

/// Everything that can go wrong while listing, pulling, bundling, verifying or importing.
#[derive(Debug, thiserror::Error)]
pub enum AirgapError {
    /// An image reference that does not parse (`[registry/]repository[:tag][@sha256:hex]`).
    #[error("invalid image reference {reference:?}: {reason}")]
    Reference {
        /// The reference as given.
        reference: String,
        /// Why it does not parse.
        reason: String,
    },
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
        /// The blob, manifest or file checked.
        what: String,
        /// The digest it should have.
        expected: String,
        /// The digest it has.
        actual: String,
    },
    /// The registry answered with an unexpected HTTP status (method, URL without credentials, status, body head).
    #[error("registry {method} {url} answered {status}: {body}")]
    Http {
        /// HTTP method.
        method: String,
        /// The URL, without credentials.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The head of the response body.
        body: String,
    },
    /// The registry could not be reached or the transfer broke.
    #[error("registry request {url} failed: {reason}")]
    Transport {
        /// The URL, without credentials.
        url: String,
        /// What broke.
        reason: String,
    },
    /// A file download (an upstream CNI file, a chart) could not be completed: the server could not
    /// be reached or the transfer broke (tried again), or it answered a status other than 200/206
    /// (`status`, not tried again).
    #[error("download of {url} failed: {reason}")]
    Download {
        /// The URL, without credentials.
        url: String,
        /// What broke, or the status and the head of the body.
        reason: String,
        /// The HTTP status when the server answered one.
        status: Option<u16>,
    },
    /// Authentication failed or a challenge could not be answered.
    #[error("authentication to {registry} failed: {reason}")]
    Auth {
        /// The registry host.
        registry: String,
        /// Why authentication failed.
        reason: String,
    },
    /// A manifest or index that is not valid JSON of the expected OCI/Docker shape.
    #[error("bad manifest for {what}: {reason}")]
    Manifest {
        /// The image or blob the manifest belongs to.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A bundle entry (the bundle manifest or the OCI index) that is not the JSON it must be; the
    /// same words as [`AirgapError::Entry`].
    #[error("bundle entry {entry:?} refused: {source}")]
    EntryJson {
        /// The entry's path in the tar.
        entry: String,
        /// The JSON decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A TLS client that could not be built (the first attempt's error, shared by every request of
    /// this client that needs it); the same words as [`AirgapError::Transport`].
    #[error("registry request {what} failed: {source}")]
    Client {
        /// Which client, e.g. `TLS client` or `TLS client for harbor.example:8443`.
        what: String,
        /// Why it could not be built.
        #[source]
        source: std::sync::Arc<AirgapError>,
    },
    /// A bundle entry that failed verification or is unsafe; `entry` is its path in the tar.
    #[error("bundle entry {entry:?} refused: {reason}")]
    Entry {
        /// The entry's path in the tar.
        entry: String,
        /// Why it is refused.
        reason: String,
    },
    /// The bundle as a whole is malformed (missing manifest, truncated, entries missing).
    #[error("bundle {path} is invalid: {reason}")]
    Bundle {
        /// The bundle file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A sound bundle that does not fit the cluster file (another cluster or version, no mirror to
    /// push to); the reason says what to change.
    #[error("bundle {path} does not fit the cluster file: {reason}")]
    Mismatch {
        /// The bundle file.
        path: PathBuf,
        /// What does not fit, and what to change.
        reason: String,
    },
    /// A package source that could not be read or fetched.
    #[error("package {name}: {reason}")]
    Package {
        /// The package's name.
        name: String,
        /// Why it could not be read or fetched.
        reason: String,
    },
    /// Loading images into a node runtime failed.
    #[error("node {node}: {reason}")]
    Node {
        /// The node's name.
        node: String,
        /// What failed.
        reason: String,
    },
    /// Local file-system I/O (path, cause).
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
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
