//! Errors of phases: every one names the phase, the node, the command (redacted), its exit status and
//! the tail of its output, so that a failed `up` can be understood from its message alone.

/// Why a phase failed on a node.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PhaseError {
    /// A command exited non-zero. `command` and `output_tail` are redacted of secrets.
    #[error("phase `{phase}` failed on node `{node}`: command `{command}` exited with status {status}\n{output_tail}")]
    Command {
        /// Phase path, e.g. `runtime/containerd`.
        phase: String,
        /// Node name.
        node: String,
        /// The command as run, secrets replaced by `<redacted>`.
        command: String,
        /// Exit status (`-1`: killed by a signal).
        status: i32,
        /// The last lines of stderr and stdout.
        output_tail: String,
    },
    /// The transport failed (unreachable node, refused host key, timeout, transfer error).
    #[error("phase `{phase}` failed on node `{node}` while running `{command}`: {reason}")]
    Transport {
        /// Phase path.
        phase: String,
        /// Node name.
        node: String,
        /// The command or file operation, redacted.
        command: String,
        /// The transport's message (never holds secrets).
        reason: String,
    },
    /// A check found something wrong that the phase cannot or may not change (preflight failures,
    /// unexpected state). `problems` lists every one found.
    #[error("phase `{phase}` failed on node `{node}`:\n{}", problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Check {
        /// Phase path.
        phase: String,
        /// Node name.
        node: String,
        /// One line per problem, with the fix when there is one.
        problems: Vec<String>,
    },
    /// A local step failed (rendering, reading the binary, writing the kubeconfig or the cache).
    #[error("phase `{phase}` failed on `{node}`: {reason}")]
    Local {
        /// Phase path.
        phase: String,
        /// Node name, or `local`.
        node: String,
        /// What went wrong.
        reason: String,
    },
}

impl PhaseError {
    /// The phase path the error belongs to.
    pub fn phase(&self) -> &str {
        match self {
            PhaseError::Command { phase, .. }
            | PhaseError::Transport { phase, .. }
            | PhaseError::Check { phase, .. }
            | PhaseError::Local { phase, .. } => phase,
        }
    }
    /// The node the error belongs to.
    pub fn node(&self) -> &str {
        match self {
            PhaseError::Command { node, .. }
            | PhaseError::Transport { node, .. }
            | PhaseError::Check { node, .. }
            | PhaseError::Local { node, .. } => node,
        }
    }
}

/// The errors of one `up` run: every node's failure in the phase that stopped the run.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct RunError(pub Vec<PhaseError>);
