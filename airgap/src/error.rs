//! The errors of the air-gap crate: registry I/O, digests, bundle format and verification. Every
//! variant names the image, blob or bundle entry it is about; none carries a credential.

use std::path::PathBuf;

use clusterctl_exec::ExecError;
pub use clusterctl_spec::image::ReferenceError;

/// Everything that can go wrong while listing, pulling, bundling, verifying or importing.
#[derive(Debug, thiserror::Error)]
pub enum AirgapError {
    /// An image reference that does not parse (`[registry/]repository[:tag][@sha256:hex]`, sha256
    /// digests only): spec's error, which names the reference and why.
    #[error("{0}")]
    Reference(#[source] ReferenceError),
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
    /// A registry request refused by clusterctl itself (an upload location on another origin, a
    /// download over its bound, a worker that panicked); the same words as [`AirgapError::Request`].
    #[error("registry request {url} failed: {reason}")]
    Transport {
        /// The URL, without credentials.
        url: String,
        /// What clusterctl refused, in its own words.
        reason: String,
    },
    /// The registry could not be reached or the transfer broke (the HTTP client's, the body's or the
    /// URL's error, kept as the source).
    #[error("registry request {url} failed: {source}")]
    Request {
        /// The URL (or `client`, a CA), without credentials.
        url: String,
        /// What broke.
        #[source]
        source: RequestError,
    },
    /// A file download (an upstream CNI file, a chart) could not be completed: the server could not
    /// be reached or the transfer broke (tried again), or it answered a status other than 200/206
    /// (`status`, not tried again).
    #[error("download of {url} failed: {source}")]
    Download {
        /// The URL, without credentials.
        url: String,
        /// What broke, or the status and the head of the body.
        #[source]
        source: DownloadError,
        /// The HTTP status when the server answered one.
        status: Option<u16>,
    },
    /// Authentication failed or a challenge could not be answered (in clusterctl's words: no
    /// usable challenge, credentials missing or refused, the token endpoint's answer).
    #[error("authentication to {registry} failed: {reason}")]
    Auth {
        /// The registry host.
        registry: String,
        /// Why authentication failed.
        reason: String,
    },
    /// The token endpoint of a bearer challenge could not be used; the same words as
    /// [`AirgapError::Auth`].
    #[error("authentication to {registry} failed: {source}")]
    Token {
        /// The registry host.
        registry: String,
        /// The realm's URL or the token response that could not be read.
        #[source]
        source: TokenError,
    },
    /// A manifest or index that is not of the expected OCI/Docker shape (in clusterctl's words).
    #[error("bad manifest for {what}: {reason}")]
    Manifest {
        /// The image or blob the manifest belongs to.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A manifest or index (or a bundle's index or manifest being written) that is not the JSON it
    /// must be; the same words as [`AirgapError::Manifest`].
    #[error("bad manifest for {what}: {source}")]
    ManifestJson {
        /// The image, blob or bundle file the manifest belongs to.
        what: String,
        /// The JSON decoder's (or encoder's) error.
        #[source]
        source: serde_json::Error,
    },
    /// The cluster's CNI files (`spec.networking.cni`) could not be listed for the bundle.
    #[error("bad manifest for spec.networking.cni: {0}")]
    CniFiles(#[source] clusterctl_render::RenderError),
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
    /// A bundle entry that could not be read; the same words as [`AirgapError::Entry`].
    #[error("bundle entry {entry:?} refused: read failed: {source}")]
    EntryRead {
        /// The entry's path in the tar.
        entry: String,
        /// The read's error.
        #[source]
        source: std::io::Error,
    },
    /// A bundle entry (the bundle manifest) naming an image reference that does not parse; the same
    /// words as [`AirgapError::Entry`].
    #[error("bundle entry {entry:?} refused: {source}")]
    EntryReference {
        /// The entry's path in the tar.
        entry: String,
        /// Why the reference does not parse.
        #[source]
        source: ReferenceError,
    },
    /// The bundle as a whole is malformed (missing manifest, truncated, entries missing).
    #[error("bundle {path} is invalid: {reason}")]
    Bundle {
        /// The bundle file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The bundle's tar could not be opened; the same words as [`AirgapError::Bundle`].
    #[error("bundle {path} is invalid: {source}")]
    BundleRead {
        /// The bundle file.
        path: PathBuf,
        /// The tar reader's error.
        #[source]
        source: std::io::Error,
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
    /// A package source that is not usable (in clusterctl's words: no pin, no source, a digest
    /// that does not match or a refused upstream file).
    #[error("package {name}: {reason}")]
    Package {
        /// The package's name.
        name: String,
        /// Why it could not be read or fetched.
        reason: String,
    },
    /// A package source that could not be fetched or read; the same words as
    /// [`AirgapError::Package`].
    #[error("package {name}: {source}")]
    PackageSource {
        /// The package's name.
        name: String,
        /// The download's or the read's error.
        #[source]
        source: Box<AirgapError>,
    },
    /// A transfer to a node, or a command on it, that could not run (the transport's error, with its
    /// chain, is the source).
    #[error("node {node}: {}{source}", what.as_ref().map(|w| format!("{w}: ")).unwrap_or_default())]
    NodeTransport {
        /// The node's name.
        node: String,
        /// What was being done, when the transport's error does not say (`upload of FILE`).
        what: Option<String>,
        /// The transport's error (boxed: it is large, and this error travels far).
        #[source]
        source: Box<ExecError>,
    },
    /// A command on a node that ran and failed.
    #[error("node {node}: {what} exited {status}: {stderr}")]
    NodeCommand {
        /// The node's name.
        node: String,
        /// The command, e.g. `image import`.
        what: &'static str,
        /// Its exit status.
        status: i32,
        /// The end of its standard error.
        stderr: String,
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

/// Why a registry request broke ([`AirgapError::Request`]), each the underlying library's error.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Sending the request failed; the message lists the error's causes too (e.g. rustls's
    /// `invalid peer certificate: UnknownIssuer` under reqwest's `error sending request`), so a
    /// wrong CA is named.
    #[error("{}", with_causes(.0))]
    Send(#[source] reqwest::Error),
    /// The HTTP client could not be built, or a request or its body failed otherwise.
    #[error("{0}")]
    Http(#[source] reqwest::Error),
    /// Reading or writing a body failed.
    #[error("{0}")]
    Body(#[source] std::io::Error),
    /// A location the registry gave is not a URL.
    #[error("{0}")]
    Url(#[source] url::ParseError),
    /// A CA's certificates could not be read (`what`: `CA file`, `CA PEM`, `CA of registry HOST`).
    #[error("{what}: {source}")]
    Certificates {
        /// Which CA.
        what: String,
        /// The PEM parser's error.
        #[source]
        source: reqwest::Error,
    },
}

/// `e`'s message followed by those of its causes that it does not already contain.
fn with_causes(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        src = s.source();
    }
    text
}

/// Why a file download broke ([`AirgapError::Download`]).
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// The server could not be reached or the request failed.
    #[error("{0}")]
    Request(#[source] reqwest::Error),
    /// The transfer broke after `after` bytes of the file.
    #[error("interrupted after {after} bytes: {source}")]
    Interrupted {
        /// Bytes of the file held when it broke (the partial download's included).
        after: u64,
        /// The read's or write's error.
        #[source]
        source: std::io::Error,
    },
    /// The partial download kept from an earlier attempt is longer than the file.
    #[error("the partial download is longer than the file; restarting")]
    LongerPartial,
    /// The server answered a status other than 200/206.
    #[error("the server answered {status}: {body}")]
    Status {
        /// The status line's code and reason, e.g. `404 Not Found`.
        status: String,
        /// The head of the body.
        body: String,
    },
}

/// Why a bearer challenge's token endpoint could not be used ([`AirgapError::Token`]).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The challenge's realm is not a URL.
    #[error("bad realm: {0}")]
    Realm(#[source] url::ParseError),
    /// The token response could not be read.
    #[error("token response: {0}")]
    Read(#[source] std::io::Error),
    /// The token response is not JSON.
    #[error("token response: {0}")]
    Json(#[source] serde_json::Error),
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
