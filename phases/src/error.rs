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
        /// The last lines of stdout, then of stderr (`util::output_tail`).
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
        /// The transport's message, redacted.
        reason: String,
        /// The transport's error with its causes, each redacted ([`Cause`]).
        #[source]
        source: Option<Cause>,
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
        /// What went wrong, redacted: the step, then the cause's own message when there is one.
        reason: String,
        /// The error that made the step fail with its causes, each redacted ([`Cause`]); `None` when
        /// the step found the problem itself.
        #[source]
        source: Option<Cause>,
    },
}

/// An error's message and its causes (`source()` chain), each level's text redacted of the run's
/// secrets when it was taken: the `source` of [`PhaseError::Local`] and [`PhaseError::Transport`], so
/// a report can show every cause while no secret leaves the run, and [`PhaseError`] stays `Clone`
/// (and small: one pointer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause(Box<Level>);

/// One level of a [`Cause`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct Level {
    message: String,
    source: Option<Cause>,
}

impl Cause {
    /// `error` and its whole `source()` chain, each message passed through `redact`.
    pub fn new(
        error: &(dyn std::error::Error + 'static),
        redact: &dyn Fn(&str) -> String,
    ) -> Cause {
        Cause(Box::new(Level {
            message: redact(&error.to_string()),
            source: error.source().map(|s| Cause::new(s, redact)),
        }))
    }

    /// The (redacted) message of this level.
    pub fn message(&self) -> &str {
        &self.0.message
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_ref()
            .map(|c| c as &(dyn std::error::Error + 'static))
    }
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

#[cfg(test)]
mod tests {
    use crate::ctx::{Mode, NodeCtx, Secrets};
    use clusterctl_spec::model::Role;
    use clusterctl_spec::ValidNode;
    use std::error::Error as _;
    use std::sync::Arc;

    #[derive(Debug, thiserror::Error)]
    #[error("pushing to the mirror")]
    struct Push(#[source] std::io::Error);

    fn chain(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
        let mut out = Vec::new();
        let mut next = e.source();
        while let Some(s) = next {
            out.push(s.to_string());
            next = s.source();
        }
        out
    }

    #[test]
    fn a_phase_error_keeps_its_causes_each_redacted() {
        let secrets = Secrets::default();
        secrets.add("s3cr3t-token");
        let ctx = NodeCtx::new(
            ValidNode::new("cp1", Role::ControlPlane, "10.0.0.1".parse().ok()),
            None,
            Mode::default(),
            Arc::new(crate::report::QuietReporter),
            secrets,
        );
        let e = Push(std::io::Error::other("token s3cr3t-token refused"));
        let pe = ctx.local_error_in("images", &e);
        assert_eq!(
            pe.to_string(),
            "phase `` failed on `cp1`: images: pushing to the mirror"
        );
        assert_eq!(
            chain(&pe),
            ["pushing to the mirror", "token <redacted> refused"]
        );
        let direct = ctx.local_error_from(&std::io::Error::other("s3cr3t-token"));
        assert_eq!(direct.to_string(), "phase `` failed on `cp1`: <redacted>");
        assert_eq!(chain(&direct), ["<redacted>"]);
        let plain = ctx.local_error("no connection");
        assert!(plain.source().is_none());
    }
}
