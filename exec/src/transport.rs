//! The `Transport` contract: the only way phases reach a node. Blocking by design (phases run one
//! thread per node); implementations that are async inside (Docker via bollard) own their runtime.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

/// A command to run on a node, as a shell script given to `sh -c` (so pipes and `&&` work).
#[derive(Debug, Clone, Default)]
pub struct Cmd {
    /// The shell script, run by `/bin/sh -c`.
    pub script: String,
    /// Run as root through `sudo -n` when the transport's user is not root.
    pub sudo: bool,
    /// Extra environment variables (name, value). Values may be secrets: never logged.
    pub env: Vec<(String, String)>,
    /// Bytes written to the command's standard input, then closed.
    pub stdin: Option<Vec<u8>>,
    /// Kill the command and fail with `ExecError::Timeout` after this long. `None`: no limit.
    pub timeout: Option<Duration>,
    /// Strings replaced by `<redacted>` wherever this command or its output is shown or stored
    /// (join tokens, certificate keys, passwords).
    pub secrets: Vec<String>,
}

impl Cmd {
    /// A command running `script` with no stdin, env, sudo or timeout.
    pub fn new(script: impl Into<String>) -> Self {
        Cmd {
            script: script.into(),
            ..Default::default()
        }
    }
    /// The same command, run as root.
    pub fn sudo(mut self) -> Self {
        self.sudo = true;
        self
    }
    /// `text` with every secret of this command replaced by `<redacted>`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in self.secrets.iter().filter(|s| !s.is_empty()) {
            out = out.replace(s.as_str(), "<redacted>");
        }
        out
    }
}

/// What a finished command returned. A non-zero exit status is not an `Err`: callers decide.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// Exit status (`-1` when killed by a signal).
    pub status: i32,
    /// Standard output bytes.
    pub stdout: Vec<u8>,
    /// Standard error bytes.
    pub stderr: Vec<u8>,
}

impl Output {
    /// True when the exit status is 0.
    pub fn success(&self) -> bool {
        self.status == 0
    }
    /// Standard output as (lossy) UTF-8, trimmed of trailing white space.
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim_end().to_string()
    }
}

/// A file to place on a node.
#[derive(Debug, Clone)]
pub struct FileSpec {
    /// Absolute destination path; parent directories are created.
    pub path: PathBuf,
    /// Unix permission bits, e.g. `0o600` for files holding secrets.
    pub mode: u32,
    /// `user:group` to chown to; `None`: root (every transport writes files as root — `sudo -n` when
    /// an SSH login is not root).
    pub owner: Option<String>,
}

/// Errors of a transport. Messages never contain secret values.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The node could not be reached or the session broke (host, reason).
    #[error("cannot reach {node}: {reason}")]
    Connect {
        /// The node's name.
        node: String,
        /// What failed (connect, handshake, authentication, a broken session).
        reason: String,
    },
    /// The host key presented differs from the recorded one, or is unknown under the strict policy.
    #[error("host key of {node} refused: {reason}")]
    HostKey {
        /// The node's name.
        node: String,
        /// Why the key was refused.
        reason: String,
    },
    /// The command ran longer than its timeout.
    #[error("command timed out on {node} after {after:?}")]
    Timeout {
        /// The node's name.
        node: String,
        /// The command's time limit.
        after: Duration,
    },
    /// A file transfer failed (path, reason).
    #[error("transfer of {path} on {node} failed: {reason}")]
    Transfer {
        /// The node's name.
        node: String,
        /// The file's path on the node.
        path: String,
        /// What failed.
        reason: String,
    },
    /// A `docker exec` that broke before it gave an exit status (the node is not reachable through
    /// the engine); the same words as [`ExecError::Connect`].
    #[error("cannot reach {node}: {source}")]
    Docker {
        /// The node's name.
        node: String,
        /// The step that failed, with the engine's error.
        #[source]
        source: crate::docker::DockerExecError,
    },
    /// A command that cannot be wrapped for the node's shell (an invalid environment name).
    #[error(transparent)]
    Wrap(#[from] WrapError),
    /// Anything else, with a message.
    #[error("{0}")]
    Other(String),
}

/// A command that cannot be wrapped for a shell (`crate::shell::wrap`; here beside [`ExecError`],
/// which carries it, so that `shell` imports `transport` and not the other way round).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WrapError {
    /// An environment variable name that is not a shell name (`[A-Za-z_][A-Za-z0-9_]*`).
    #[error("invalid environment variable name {0:?}")]
    EnvName(String),
}

/// How phases reach one node: run commands and move files. Implementations: SSH (ssh2), Docker exec
/// (bollard) and local. One value per node; it may hold a connection that is reused for every call.
pub trait Transport: Send + Sync {
    /// The node's name as in the cluster file (used in messages).
    fn node(&self) -> &str;
    /// Runs `cmd` to completion and returns its output; `on_output` receives stdout/stderr chunks as
    /// they arrive (for `-v`), already redacted.
    fn run_streaming(
        &self,
        cmd: &Cmd,
        on_output: &mut dyn FnMut(&[u8]),
    ) -> Result<Output, ExecError>;
    /// Runs `cmd` to completion and returns its output.
    fn run(&self, cmd: &Cmd) -> Result<Output, ExecError> {
        self.run_streaming(cmd, &mut |_| {})
    }
    /// Writes `data` to `file.path` with `file.mode` (atomically: a temp file in the same directory,
    /// size-checked, then renamed into place; a failed upload leaves the old file untouched).
    /// By default this is `upload_stream` over the bytes with no progress callback.
    fn upload(&self, data: &[u8], file: &FileSpec) -> Result<(), ExecError> {
        let mut reader: &[u8] = data;
        self.upload_stream(&mut reader, data.len() as u64, file, &mut |_| {})
    }
    /// Streams `size` bytes from `reader` to `file.path`; `progress` receives the running byte count.
    fn upload_stream(
        &self,
        reader: &mut dyn Read,
        size: u64,
        file: &FileSpec,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ExecError>;
    /// Reads a whole file from the node (as root). `Ok(None)` when it does not exist.
    fn download(&self, path: &str) -> Result<Option<Vec<u8>>, ExecError>;
}
