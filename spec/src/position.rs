//! A field-path → source-position index of a YAML document, built from the marked events of the
//! `yaml-rust2` parser (serde gives positions only for its own errors). Paths look like
//! `spec.nodes[1].address`; keys that contain `.`, `/`, `[` or spaces are written `labels["a.b/c"]`.
//! The index also records each mapping key's own position (`key_of`) and duplicate keys.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

use crate::diag::offset_of;

/// Where a node is in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    /// Byte offset of the node start.
    pub offset: usize,
    /// Length in bytes of the node's text (scalars: the raw token; collections: 1).
    pub len: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column in characters.
    pub column: usize,
}

/// A duplicate mapping key: its path and the position of the second occurrence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    /// Path of the key, e.g. `spec.networking`.
    pub path: String,
    /// Position of the repeated key.
    pub pos: Pos,
}

/// The index of one document.
#[derive(Debug, Default, Clone)]
pub struct PathIndex {
    values: HashMap<String, Pos>,
    keys: HashMap<String, Pos>,
    /// Keys that appear twice in the same mapping.
    pub duplicates: Vec<Duplicate>,
    /// Set when the YAML parser failed: (message, position).
    pub parse_error: Option<(String, Pos)>,
}

impl PathIndex {
    /// Indexes the first document of `text`. Never fails: a parse error is stored in `parse_error` and the
    /// index holds what was read before it.
    pub fn build(text: &str) -> PathIndex {
        let mut rx = Receiver {
            text,
            index: PathIndex::default(),
            stack: Vec::new(),
            skip: 0,
        };
        let mut parser = Parser::new_from_str(text);
        if let Err(e) = parser.load(&mut rx, false) {
            let pos = rx.pos_of(*e.marker(), false);
            rx.index.parse_error = Some((e.info().to_string(), pos));
        }
        rx.index
    }

    /// Position of the value at `path`.
    pub fn value(&self, path: &str) -> Option<Pos> {
        self.values.get(path).copied()
    }

    /// Position of the key naming the value at `path`.
    pub fn key_of(&self, path: &str) -> Option<Pos> {
        self.keys.get(path).copied()
    }

    /// Position of the value at `path`, else of the nearest ancestor that exists (for values that were
    /// defaulted or are missing); `None` only when nothing is indexed.
    pub fn nearest(&self, path: &str) -> Option<Pos> {
        let mut p = path.to_string();
        loop {
            if let Some(pos) = self.values.get(&p) {
                return Some(*pos);
            }
            match parent(&p) {
                Some(up) => p = up,
                None => return self.values.get("").copied(),
            }
        }
    }

    /// Finds the path of the node starting at `line`, `column` (1-based): a mapping key's path when
    /// `prefer_key` (unknown-field errors point at keys), else the innermost value starting there.
    pub fn path_at(&self, line: usize, column: usize, prefer_key: bool) -> Option<String> {
        let at = |p: &Pos| p.line == line && p.column == column;
        let key = self
            .keys
            .iter()
            .filter(|(_, p)| at(p))
            .map(|(k, _)| k.clone())
            .max_by_key(String::len);
        let value = self
            .values
            .iter()
            .filter(|(_, p)| at(p))
            .map(|(k, _)| k.clone())
            .max_by_key(String::len);
        if prefer_key {
            key.or(value)
        } else {
            value.or(key)
        }
    }

    /// All indexed value paths (unordered).
    pub fn paths(&self) -> impl Iterator<Item = &String> {
        self.values.keys()
    }
}

/// The parent of a path: `a.b[2]` → `a.b`, `a.b` → `a`, `a` → ``; `None` for ``.
pub fn parent(path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    if path.ends_with(']') {
        if let Some(i) = path.rfind('[') {
            return Some(path[..i].to_string());
        }
    }
    match path.rfind('.') {
        Some(i) => Some(path[..i].to_string()),
        None => Some(String::new()),
    }
}

/// Appends a mapping key to a path, bracket-quoting keys that are not simple identifiers.
pub fn join_key(path: &str, key: &str) -> String {
    let simple = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (path.is_empty(), simple) {
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
        (_, false) => format!("{path}[{key:?}]"),
    }
}

/// Appends a sequence index to a path.
pub fn join_index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

enum Frame {
    /// `first_key_pending`: the mapping's own position is taken from its first key (yaml-rust2 marks a
    /// block mapping at its first `:`).
    Map {
        path: String,
        key: Option<String>,
        first_key_pending: bool,
    },
    Seq {
        path: String,
        next: usize,
    },
}

struct Receiver<'a> {
    text: &'a str,
    index: PathIndex,
    stack: Vec<Frame>,
    /// Depth of a complex (non-scalar) mapping key being skipped.
    skip: usize,
}

impl Receiver<'_> {
    fn pos_of(&self, m: Marker, scalar: bool) -> Pos {
        // Offsets are computed from line/column, which the parser reports reliably.
        let line = m.line().max(1);
        let column = m.col() + 1;
        let offset = offset_of(self.text, line, column);
        let len = if scalar {
            token_len(&self.text[offset..])
        } else {
            usize::from(offset < self.text.len())
        };
        Pos {
            offset,
            len,
            line,
            column,
        }
    }

    /// Path for a node arriving now, advancing the parent frame. `None` when the node is a mapping key.
    fn node_path(&mut self) -> Option<String> {
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Seq { path, next }) => {
                let p = join_index(path, *next);
                *next += 1;
                Some(p)
            }
            Some(Frame::Map { path, key, .. }) => key.take().map(|k| join_key(path, &k)),
        }
    }

    fn on_node(&mut self, ev: &Event, mark: Marker) {
        let is_key = matches!(self.stack.last(), Some(Frame::Map { key: None, .. }));
        if is_key {
            if let Event::Scalar(k, ..) = ev {
                let mut pos = self.pos_of(mark, true);
                pos.len = key_len(&self.text[pos.offset..], pos.len);
                if let Some(Frame::Map {
                    path,
                    key,
                    first_key_pending,
                }) = self.stack.last_mut()
                {
                    if *first_key_pending {
                        *first_key_pending = false;
                        if let Some(v) = self.index.values.get_mut(path.as_str()) {
                            if self.text.as_bytes().get(v.offset) != Some(&b'{') {
                                *v = Pos {
                                    len: pos.len.max(1),
                                    ..pos
                                };
                            }
                        }
                    }
                    let full = join_key(path, k);
                    match self.index.keys.entry(full) {
                        std::collections::hash_map::Entry::Occupied(e) => {
                            self.index.duplicates.push(Duplicate {
                                path: e.key().clone(),
                                pos,
                            });
                        }
                        std::collections::hash_map::Entry::Vacant(e) => {
                            e.insert(pos);
                        }
                    }
                    *key = Some(k.clone());
                }
            } else {
                // A complex key: skip its subtree and use a placeholder key.
                if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
                    *key = Some("<complex key>".to_string());
                }
                if matches!(ev, Event::MappingStart(..) | Event::SequenceStart(..)) {
                    self.skip = 1;
                }
            }
            return;
        }
        let scalar = matches!(ev, Event::Scalar(..) | Event::Alias(..));
        let pos = self.pos_of(mark, scalar);
        let path = self.node_path().unwrap_or_default();
        self.index.values.entry(path.clone()).or_insert(pos);
        match ev {
            Event::MappingStart(..) => self.stack.push(Frame::Map {
                path,
                key: None,
                first_key_pending: true,
            }),
            Event::SequenceStart(..) => self.stack.push(Frame::Seq { path, next: 0 }),
            _ => {}
        }
    }
}

impl MarkedEventReceiver for Receiver<'_> {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.skip > 0 {
            match ev {
                Event::MappingStart(..) | Event::SequenceStart(..) => self.skip += 1,
                Event::MappingEnd | Event::SequenceEnd => self.skip -= 1,
                _ => {}
            }
            return;
        }
        match ev {
            Event::Scalar(..)
            | Event::Alias(..)
            | Event::MappingStart(..)
            | Event::SequenceStart(..) => self.on_node(&ev, mark),
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

/// A plain key's token ends at its `:` (followed by a space or the line end); quoted keys keep `len`.
fn key_len(rest: &str, len: usize) -> usize {
    if rest.starts_with(['"', '\'']) {
        return len;
    }
    let line = rest.split('\n').next().unwrap_or("");
    let mut end = len.min(line.len());
    for (i, _) in line.match_indices(':') {
        let next = line[i + 1..].chars().next();
        if next.is_none() || next == Some(' ') || next == Some('\t') {
            end = end.min(i);
            break;
        }
    }
    line[..end].trim_end().len()
}

/// Length in bytes of the scalar token at the start of `rest`: a quoted string up to its closing quote,
/// else up to the end of the line, a ` #` comment, or a flow indicator; trailing spaces trimmed.
fn token_len(rest: &str) -> usize {
    let line = rest.split('\n').next().unwrap_or("");
    let mut chars = line.char_indices();
    match chars.next() {
        Some((_, q @ ('"' | '\''))) => {
            let mut escaped = false;
            for (i, c) in chars {
                if q == '"' && c == '\\' && !escaped {
                    escaped = true;
                    continue;
                }
                if c == q && !escaped {
                    return i + 1;
                }
                escaped = false;
            }
            line.len()
        }
        Some(_) => {
            let mut end = line.len();
            if let Some(i) = line.find(" #") {
                end = end.min(i);
            }
            for pat in [", ", ",", "]", "}"] {
                if let Some(i) = line.find(pat) {
                    end = end.min(i);
                }
            }
            // Never cut `a: b` keys in plain mappings: stop at ": " only for keys (not needed for values).
            line[..end].trim_end().len()
        }
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_paths_with_positions() {
        let text = "a: 1\nb:\n  c: [x, \"y z\"]\n  d:\n    - e: ü\n      f: g # c\n";
        let ix = PathIndex::build(text);
        assert_eq!(
            ix.value("a").map(|p| (p.line, p.column, p.len)),
            Some((1, 4, 1))
        );
        assert_eq!(
            ix.value("b.c[1]").map(|p| (p.line, p.column, p.len)),
            Some((3, 10, 5))
        );
        assert_eq!(
            ix.value("b.d[0].e").map(|p| (p.line, p.column)),
            Some((5, 10))
        );
        assert_eq!(
            ix.value("b.d[0].f").map(|p| (p.line, p.column, p.len)),
            Some((6, 10, 1))
        );
        let f = ix.value("b.d[0].f").map(|p| p.offset).unwrap_or(0);
        assert_eq!(&text[f..f + 1], "g");
        assert_eq!(
            ix.key_of("b.d[0].f").map(|p| (p.line, p.column)),
            Some((6, 7))
        );
        assert!(ix.duplicates.is_empty());
    }

    #[test]
    fn finds_duplicates_and_parse_errors() {
        let ix = PathIndex::build("a: 1\nb: 2\na: 3\n");
        assert_eq!(ix.duplicates.len(), 1);
        assert_eq!(ix.duplicates[0].path, "a");
        assert_eq!(ix.duplicates[0].pos.line, 3);
        let ix = PathIndex::build("a: [1, 2\nb: 3\n");
        assert!(ix.parse_error.is_some());
    }

    #[test]
    fn quoted_and_odd_keys() {
        let ix = PathIndex::build("labels:\n  node-role.kubernetes.io/x: \"\"\n");
        assert!(ix.value("labels[\"node-role.kubernetes.io/x\"]").is_some());
        assert_eq!(parent("labels[\"a.b\"]").as_deref(), Some("labels"));
        assert_eq!(parent("a.b[3]").as_deref(), Some("a.b"));
    }
}
