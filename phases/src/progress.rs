//! The terminal reporter: one `indicatif` line per node showing its current phase and step, byte counts
//! for uploads, and changes printed above the bars. Used when standard error is a terminal.

use crate::report::{Outcome, Reporter};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::time::Duration;

/// A progress line per node on a terminal.
pub struct TtyReporter {
    multi: MultiProgress,
    bars: BTreeMap<String, ProgressBar>,
    verbose: bool,
}

impl TtyReporter {
    /// One spinner line per node name in `nodes`, in that order; `verbose` also prints command output.
    pub fn new(nodes: &[String], verbose: bool) -> Self {
        let multi = MultiProgress::new();
        let style = ProgressStyle::with_template("{spinner} {prefix:.bold} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        let width = nodes.iter().map(|n| n.len()).max().unwrap_or(0);
        let mut bars = BTreeMap::new();
        for n in nodes {
            let bar = multi.add(ProgressBar::new_spinner());
            bar.set_style(style.clone());
            bar.set_prefix(format!("{n:width$}"));
            bar.enable_steady_tick(Duration::from_millis(120));
            bars.insert(n.clone(), bar);
        }
        TtyReporter {
            multi,
            bars,
            verbose,
        }
    }
    fn bar(&self, node: &str) -> Option<&ProgressBar> {
        self.bars.get(node)
    }
    fn println(&self, text: String) {
        let _ = self.multi.println(text);
    }
    /// Stops every spinner, leaving each node's last line on screen.
    pub fn finish(&self) {
        for b in self.bars.values() {
            b.finish();
        }
    }
}

impl Reporter for TtyReporter {
    fn phase_start(&self, phase: &str, node: &str) {
        if let Some(b) = self.bar(node) {
            b.set_message(format!("{phase} …"));
        }
    }
    fn phase_end(&self, phase: &str, node: &str, outcome: &Outcome) {
        let text = match outcome {
            Outcome::Done { changes: 0 } => format!("{phase}: already done"),
            Outcome::Done { changes } => format!("{phase}: done ({changes} changes)"),
            Outcome::Skipped(why) => format!("{phase}: skipped ({why})"),
            Outcome::Failed => format!("{phase}: FAILED"),
        };
        if matches!(outcome, Outcome::Failed) {
            self.println(format!("[{node}] {text}"));
        }
        if let Some(b) = self.bar(node) {
            b.set_message(text);
        }
    }
    fn change(&self, phase: &str, node: &str, what: &str) {
        self.println(format!("{} [{node}] {phase}: {what}", crate::util::clock()));
        if let Some(b) = self.bar(node) {
            b.set_message(format!("{phase}: {what}"));
        }
    }
    fn query(&self, phase: &str, node: &str, what: &str) {
        if let Some(b) = self.bar(node) {
            b.set_message(format!("{phase}: check {what}"));
        }
    }
    fn output(&self, node: &str, chunk: &[u8]) {
        if self.verbose {
            for l in String::from_utf8_lossy(chunk).lines() {
                self.println(format!("    [{node}] | {l}"));
            }
        }
    }
    fn upload_progress(&self, node: &str, path: &str, done: u64, total: u64) {
        if let Some(b) = self.bar(node) {
            b.set_message(format!("upload {path}: {done}/{total} bytes"));
        }
    }
    fn note(&self, text: &str) {
        self.println(text.to_string());
    }
}
