//! Diagnostics: what validation says about a cluster file. A [`Diagnostic`] has a severity, a message, a
//! help line and a labelled span (byte offset and length) into the source, with its 1-based line and
//! column; [`Diagnostics`] is the report of all of them, rendered by miette's graphical handler (each
//! diagnostic is a `related` entry carrying the source) and by `Display` as `file:line:column: …` lines.
//!
//! Whatever the input, a report is safe to print: every text a diagnostic carries has its control
//! characters escaped ([`crate::limits::escape_unsafe`]) when it is added to a report, and miette is
//! never handed the source itself but a [`Snippet`] of it — at most three short lines around the
//! span, long lines cut to a window around it, control characters escaped — so that rendering costs
//! the same wherever the span is and no column can overflow miette's formatting (a span past column
//! 65,535 used to panic it).

use std::fmt;
use std::sync::Arc;

use miette::{LabeledSpan, SourceSpan};

use crate::limits::{escape_unsafe, is_unsafe_char};

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The file is refused.
    Error,
    /// The file is accepted, but probably not what was meant.
    Warning,
}

/// The source a diagnostic points into: a display name (the path as given) and the full text.
#[derive(Debug, Clone)]
pub struct Source {
    /// Display name, e.g. `cluster.yaml` or `profile lab`.
    pub name: String,
    /// The whole text.
    pub text: Arc<String>,
}

/// One finding, pointing at a value of the source.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A stable short code, e.g. `spec::cidr-overlap`.
    pub code: &'static str,
    /// What is wrong, naming the values (e.g. both overlapping ranges).
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
    /// The field path, e.g. `spec.nodes[1].address` (empty for the whole document).
    pub path: String,
    /// Label text shown under the span.
    pub label: String,
    /// Byte offset and length into the source; `None` when no position is known.
    pub span: Option<SourceSpan>,
    /// 1-based line of the span start (0 when unknown).
    pub line: usize,
    /// 1-based column (in characters) of the span start (0 when unknown).
    pub column: usize,
    /// The source, for rendering.
    pub source: Option<Arc<Source>>,
    /// What miette shows of the source (set when the diagnostic is added to a report).
    snippet: Option<Arc<Snippet>>,
}

impl Diagnostic {
    /// A new error with no position yet (see [`Diagnostic::at`]).
    pub fn error(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, code, message)
    }

    /// A new warning with no position yet.
    pub fn warning(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, code, message)
    }

    fn new(severity: Severity, code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            code,
            message: message.into(),
            help: None,
            path: String::new(),
            label: String::new(),
            span: None,
            line: 0,
            column: 0,
            source: None,
            snippet: None,
        }
    }

    /// Sets the help line.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Sets the label text.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Sets the field path (the position is filled in by validation from the path index).
    pub fn at(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// `file:line:column` (or just `file` when no position is known).
    pub fn location(&self) -> String {
        let name = escape_unsafe(
            self.source
                .as_ref()
                .map(|s| s.name.as_str())
                .unwrap_or("<input>"),
        );
        if self.line > 0 {
            format!("{name}:{}:{}", self.line, self.column)
        } else {
            name.to_string()
        }
    }
}

impl Diagnostic {
    /// One line: `file:line:column: error: message (help: …)`.
    pub fn to_line(&self) -> String {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        match &self.help {
            Some(h) => format!("{}: {sev}: {} (help: {h})", self.location(), self.message),
            None => format!("{}: {sev}: {}", self.location(), self.message),
        }
    }
}

/// The message only (miette prints location, label and help around it); see [`Diagnostic::to_line`].
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Diagnostic {}

impl miette::Diagnostic for Diagnostic {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.snippet
            .as_ref()
            .map(|s| s.as_ref() as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let snippet = self.snippet.as_ref()?;
        let label = if self.label.is_empty() {
            None
        } else {
            Some(self.label.clone())
        };
        Some(Box::new(std::iter::once(LabeledSpan::new_with_span(
            label,
            snippet.span,
        ))))
    }
}

impl miette::SourceCode for Source {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        let inner =
            self.text
                .as_str()
                .read_span(span, context_lines_before, context_lines_after)?;
        Ok(Box::new(miette::MietteSpanContents::new_named(
            self.name.clone(),
            inner.data(),
            *inner.span(),
            inner.line(),
            inner.column(),
            inner.line_count(),
        )))
    }
}

/// All findings about one file, errors first, each in source order.
#[derive(Debug, Clone)]
pub struct Diagnostics {
    /// The source the diagnostics point into.
    pub source: Arc<Source>,
    /// The findings.
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// An empty report about `source`.
    pub fn new(source: Arc<Source>) -> Self {
        Diagnostics {
            source,
            items: Vec::new(),
        }
    }

    /// A report holding one diagnostic.
    pub fn single(source: Arc<Source>, d: Diagnostic) -> Self {
        let mut ds = Self::new(source);
        ds.push(d);
        ds
    }

    /// Adds a diagnostic, attaching the source and the snippet miette shows of it; control
    /// characters in its message, help, label and path are escaped.
    pub fn push(&mut self, mut d: Diagnostic) {
        d.message = escape_unsafe(&d.message);
        d.help = d.help.as_deref().map(escape_unsafe);
        d.label = escape_unsafe(&d.label);
        d.path = escape_unsafe(&d.path);
        d.snippet = d
            .span
            .and_then(|span| Snippet::of(&self.source, span, d.line, d.column))
            .map(Arc::new);
        d.source = Some(self.source.clone());
        self.items.push(d);
    }

    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    /// Number of warnings.
    pub fn warning_count(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .count()
    }

    /// True when any error is present.
    pub fn has_errors(&self) -> bool {
        self.error_count() > 0
    }

    /// The warnings only.
    pub fn warnings(&self) -> Vec<Diagnostic> {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .cloned()
            .collect()
    }

    /// Sorts errors before warnings, then by position (stable).
    pub fn sort(&mut self) {
        self.items
            .sort_by_key(|d| (d.severity, d.line == 0, d.line, d.column));
    }

    /// One-line summary, e.g. `cluster.yaml: 3 errors, 1 warning`.
    pub fn summary(&self) -> String {
        let e = self.error_count();
        let w = self.warning_count();
        format!(
            "{}: {e} error{}, {w} warning{}",
            escape_unsafe(&self.source.name),
            if e == 1 { "" } else { "s" },
            if w == 1 { "" } else { "s" }
        )
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.items {
            writeln!(f, "{}", d.to_line())?;
        }
        write!(f, "{}", self.summary())
    }
}

impl std::error::Error for Diagnostics {}

impl miette::Diagnostic for Diagnostics {
    fn severity(&self) -> Option<miette::Severity> {
        Some(if self.has_errors() {
            miette::Severity::Error
        } else {
            miette::Severity::Warning
        })
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        Some(Box::new(
            self.items.iter().map(|d| d as &dyn miette::Diagnostic),
        ))
    }
}

/// Most characters of the span's line shown before the span, and after its end.
const SNIPPET_SIDE: usize = 60;
/// Most characters of a span shown (a longer one is cut; the message says what is wrong).
const SNIPPET_SPAN: usize = 120;
/// Most characters shown of the lines before and after the span's line.
const SNIPPET_CONTEXT: usize = 120;

/// What miette is shown of a source for one diagnostic: the span's line (cut to a window around the
/// span when long) and, when they are short enough to find, the lines before and after it, with
/// control characters escaped and line breaks normalised. Built in time proportional to what it
/// shows, wherever the span is.
#[derive(Debug, Clone)]
pub(crate) struct Snippet {
    name: String,
    /// The excerpt.
    data: String,
    /// 0-based line number of the excerpt's first line.
    first_line: usize,
    /// The span within `data`.
    span: SourceSpan,
    /// 1-based line and column of the span in the source (for the header).
    line: usize,
    column: usize,
}

/// Appends `piece` to `out` with unsafe characters escaped and `\r` before a line feed dropped.
fn push_escaped(out: &mut String, piece: &str) {
    let mut chars = piece.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && matches!(chars.peek(), Some('\n') | None) {
            continue;
        }
        if is_unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
}

/// Walks back from `from` over at most `max` characters, stopping after a line feed. Returns the
/// offset reached and whether the limit (not a line start) stopped it.
fn back(text: &str, from: usize, max: usize) -> (usize, bool) {
    let mut off = from;
    for _ in 0..max {
        match text[..off].chars().next_back() {
            None | Some('\n') => return (off, false),
            Some(c) => off -= c.len_utf8(),
        }
    }
    let at_start = off == 0 || text[..off].ends_with('\n');
    (off, !at_start)
}

/// Walks forward from `from` over at most `max` characters, stopping before a line feed. Returns the
/// offset reached and whether the limit (not a line end) stopped it.
fn forward(text: &str, from: usize, max: usize) -> (usize, bool) {
    let mut off = from;
    for _ in 0..max {
        match text[off..].chars().next() {
            None | Some('\n') => return (off, false),
            Some(c) => off += c.len_utf8(),
        }
    }
    let at_end = off == text.len() || text[off..].starts_with('\n');
    (off, !at_end)
}

impl Snippet {
    /// The snippet of `source` around `span` (on 1-based `line`, 0 when unknown). `None` when the
    /// source is empty or the span lies outside it.
    fn of(source: &Source, span: SourceSpan, line: usize, column: usize) -> Option<Snippet> {
        let text = source.text.as_str();
        if text.is_empty() || span.offset() > text.len() {
            return None;
        }
        let mut start = span.offset();
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        // The span is shown up to the end of its line, and at most SNIPPET_SPAN characters of it.
        let mut span_end = (start + span.len()).min(text.len());
        while !text.is_char_boundary(span_end) {
            span_end -= 1;
        }
        let (mut end_shown, _) = forward(text, start, SNIPPET_SPAN);
        end_shown = end_shown.min(span_end);
        let span_cut = end_shown < span_end && !text[end_shown..].starts_with('\n');
        let (left, left_cut) = back(text, start, SNIPPET_SIDE);
        let (right, right_cut) = forward(text, end_shown, SNIPPET_SIDE);
        let (line, column) = if line > 0 {
            (line, column.max(1))
        } else {
            line_col(text, start)
        };
        let mut data = String::new();
        let mut first_line = line - 1;
        // The line before, when the span's line starts within reach.
        if !left_cut && left > 0 && line > 1 {
            let prev_end = left - 1;
            let prev_end = if text[..prev_end].ends_with('\r') {
                prev_end - 1
            } else {
                prev_end
            };
            let (prev_start, prev_cut) = back(text, prev_end, SNIPPET_CONTEXT);
            if prev_cut {
                data.push('…');
            }
            push_escaped(&mut data, &text[prev_start..prev_end]);
            data.push('\n');
            first_line -= 1;
        }
        if left_cut {
            data.push('…');
        }
        push_escaped(&mut data, &text[left..start]);
        let span_start = data.len();
        push_escaped(&mut data, &text[start..end_shown]);
        let span_len = data.len() - span_start;
        push_escaped(&mut data, &text[end_shown..right]);
        if right_cut || span_cut {
            data.push('…');
        }
        // The line after, when the span's line ends within reach.
        if !right_cut && right < text.len() {
            let next_start = right + 1;
            let (next_end, next_cut) = forward(text, next_start, SNIPPET_CONTEXT);
            data.push('\n');
            push_escaped(&mut data, &text[next_start..next_end]);
            if next_cut {
                data.push('…');
            }
        }
        Some(Snippet {
            name: escape_unsafe(&source.name),
            data,
            first_line,
            span: (span_start, span_len).into(),
            line,
            column,
        })
    }
}

impl miette::SourceCode for Snippet {
    fn read_span<'a>(
        &'a self,
        _span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        let lines = self.data.split('\n').count();
        // miette reads the primary label without context for the header `[file:line:column]`.
        let (line, column) = if context_lines_before == 0 && context_lines_after == 0 {
            (self.line.saturating_sub(1), self.column.saturating_sub(1))
        } else {
            (self.first_line, 0)
        };
        Ok(Box::new(miette::MietteSpanContents::new_named(
            self.name.clone(),
            self.data.as_bytes(),
            (0, self.data.len()).into(),
            line,
            column,
            lines,
        )))
    }
}

/// Converts a byte offset into 1-based (line, column-in-characters). Offsets past the end clamp to it.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut off = offset.min(text.len());
    while off > 0 && !text.is_char_boundary(off) {
        off -= 1;
    }
    let before = &text[..off];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = text[line_start..off].chars().count() + 1;
    (line, column)
}

/// Converts a 1-based (line, column-in-characters) into a byte offset; clamps to the text.
pub(crate) fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut start = 0usize;
    for _ in 1..line.max(1) {
        match text[start..].find('\n') {
            Some(i) => start += i + 1,
            None => return text.len(),
        }
    }
    let rest = &text[start..];
    let line_end = rest.find('\n').unwrap_or(rest.len());
    rest[..line_end]
        .char_indices()
        .nth(column.saturating_sub(1))
        .map(|(i, _)| start + i)
        .unwrap_or(start + line_end)
}
