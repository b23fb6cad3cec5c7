//! How the engine tells the user what it does: the `Reporter` trait, and a plain reporter writing one
//! timestamped line per event (used when the output is not a terminal, and by tests). The terminal
//! reporter with a progress line per node lives in `progress.rs`.

use std::io::Write;
use std::sync::Mutex;

/// How a phase ended on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The phase ran; `changes` mutating commands and file writes were made (0: its work was already done).
    Done {
        /// Number of mutating commands and file writes.
        changes: usize,
    },
    /// The phase did not run: recorded done with the same inputs, or excluded by `--skip-phases`/`--only`.
    Skipped(String),
    /// The phase failed (the error is reported separately).
    Failed,
}

/// Receives the engine's events. Implementations must be cheap and must not fail; they are called from
/// one thread per node. Every text they receive is already redacted of secrets.
pub trait Reporter: Send + Sync {
    /// A phase starts on a node.
    fn phase_start(&self, phase: &str, node: &str);
    /// A phase ended on a node.
    fn phase_end(&self, phase: &str, node: &str, outcome: &Outcome);
    /// A command or file write that changes the node was made (`what`: e.g. `run: systemctl restart
    /// containerd`, `write /etc/containerd/config.toml (1234 bytes, mode 0644)`), or a line of the
    /// phase's work that says itself that nothing changed (`api: server-side apply KIND NAME: unchanged`).
    fn change(&self, phase: &str, node: &str, what: &str);
    /// A read-only command ran (shown only with `-v`).
    fn query(&self, phase: &str, node: &str, what: &str);
    /// Output of a command, as it arrives (shown only with `-v`).
    fn output(&self, node: &str, chunk: &[u8]);
    /// Upload progress: `done` of `total` bytes of `path`.
    fn upload_progress(&self, node: &str, path: &str, done: u64, total: u64);
    /// A free-form line (warnings, the summary).
    fn note(&self, text: &str);
}

/// Writes one line per event, `HH:MM:SS [node] phase: text`, to a writer (stderr by default).
pub struct PlainReporter {
    out: Mutex<Box<dyn Write + Send>>,
    verbose: bool,
}

impl PlainReporter {
    /// A reporter writing to standard error; `verbose` also shows queries and command output.
    pub fn stderr(verbose: bool) -> Self {
        PlainReporter {
            out: Mutex::new(Box::new(std::io::stderr())),
            verbose,
        }
    }
    /// A reporter writing to `out`.
    pub fn to(out: Box<dyn Write + Send>, verbose: bool) -> Self {
        PlainReporter {
            out: Mutex::new(out),
            verbose,
        }
    }
    fn line(&self, node: &str, phase: &str, text: &str) {
        if let Ok(mut w) = self.out.lock() {
            let _ = writeln!(w, "{} [{node}] {phase}: {text}", crate::util::clock());
        }
    }
}

impl Reporter for PlainReporter {
    fn phase_start(&self, phase: &str, node: &str) {
        if self.verbose {
            self.line(node, phase, "start");
        }
    }
    fn phase_end(&self, phase: &str, node: &str, outcome: &Outcome) {
        let text = match outcome {
            Outcome::Done { changes: 0 } => "done, nothing to change".to_string(),
            Outcome::Done { changes } => format!(
                "done ({changes} change{})",
                if *changes == 1 { "" } else { "s" }
            ),
            Outcome::Skipped(why) => format!("skipped ({why})"),
            Outcome::Failed => "FAILED".to_string(),
        };
        self.line(node, phase, &text);
    }
    fn change(&self, phase: &str, node: &str, what: &str) {
        self.line(node, phase, what);
    }
    fn query(&self, phase: &str, node: &str, what: &str) {
        if self.verbose {
            self.line(node, phase, &format!("check: {what}"));
        }
    }
    fn output(&self, node: &str, chunk: &[u8]) {
        if self.verbose {
            if let Ok(mut w) = self.out.lock() {
                for l in String::from_utf8_lossy(chunk).lines() {
                    let _ = writeln!(w, "    [{node}] | {l}");
                }
            }
        }
    }
    fn upload_progress(&self, node: &str, path: &str, done: u64, total: u64) {
        if self.verbose && done == total {
            self.line(node, "upload", &format!("{path}: {done} bytes"));
        }
    }
    fn note(&self, text: &str) {
        if let Ok(mut w) = self.out.lock() {
            let _ = writeln!(w, "{} {text}", crate::util::clock());
        }
    }
}

/// A reporter that shows nothing (for callers that only want the returned summary).
pub struct QuietReporter;

impl Reporter for QuietReporter {
    fn phase_start(&self, _: &str, _: &str) {}
    fn phase_end(&self, _: &str, _: &str, _: &Outcome) {}
    fn change(&self, _: &str, _: &str, _: &str) {}
    fn query(&self, _: &str, _: &str, _: &str) {}
    fn output(&self, _: &str, _: &[u8]) {}
    fn upload_progress(&self, _: &str, _: &str, _: u64, _: u64) {}
    fn note(&self, _: &str) {}
}
