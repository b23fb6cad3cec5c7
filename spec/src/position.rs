//! A field-path → source-position index of a YAML document, built from the marked events of the
//! `yaml-rust2` parser (serde gives positions only for its own errors). Paths look like
//! `spec.nodes[1].address`; keys that contain `.`, `/`, `[` or spaces are written `labels["a.b/c"]`.
//! The index also records each mapping key's own position (`key_of`), duplicate keys, and which parts
//! of the text hold secrets (the values under secret-bearing keys, whatever their YAML shape, and the
//! anchored values such a key reuses through an alias), so that reports can hide them.
//!
//! Built in one pass over the parser's events (the parser is iterative, so depth costs no stack) in
//! time linear in the text: the index is a tree of nodes, each holding its own key once, and
//! positions come from a cursor that moves through the text with the events. The pass stops at the
//! first value over the [`Budget`] (depth, number of values) and records the limit hit.

use std::collections::{HashMap, HashSet};

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::Marker;

use crate::limits::{At, Budget, LimitError, CLUSTER_FILE};
use crate::locator::Locator;

/// Where a node is in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
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
pub(crate) struct Duplicate {
    /// Path of the key, e.g. `spec.networking`.
    pub path: String,
    /// Position of the repeated key.
    pub pos: Pos,
}

/// One step of a path: a mapping key or a sequence index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Seg {
    /// A mapping key.
    Key(Box<str>),
    /// A sequence index.
    Index(usize),
}

#[derive(Debug, Clone)]
struct Node {
    /// Index of the parent node (the root is its own parent).
    parent: u32,
    /// The step from the parent (`None` for the root).
    seg: Option<Seg>,
    depth: u32,
    value: Option<Pos>,
    key: Option<Pos>,
}

/// The index of one document.
#[derive(Debug, Clone)]
pub(crate) struct PathIndex {
    nodes: Vec<Node>,
    children: HashMap<(u32, Seg), u32>,
    /// Keys that appear twice in the same mapping.
    pub duplicates: Vec<Duplicate>,
    /// Set when the YAML parser failed: (message, position).
    pub parse_error: Option<(String, Pos)>,
    /// Set when the text exceeds its budget; the index then holds what was read before the limit.
    pub limit: Option<LimitError>,
    /// Byte ranges holding secrets, sorted and merged.
    secret_ranges: Vec<(usize, usize)>,
    /// The scalar texts found in those ranges (values and keys), longest first.
    secret_texts: Vec<String>,
}

impl Default for PathIndex {
    fn default() -> Self {
        PathIndex {
            nodes: vec![Node {
                parent: 0,
                seg: None,
                depth: 0,
                value: None,
                key: None,
            }],
            children: HashMap::new(),
            duplicates: Vec::new(),
            parse_error: None,
            limit: None,
            secret_ranges: Vec::new(),
            secret_texts: Vec::new(),
        }
    }
}

/// True for a mapping key whose value is a secret or may hold one: a password, passphrase, token,
/// secret, credential, private or API or access key, or a user name (and the `…Env` fields naming
/// them, where a secret may be pasted by mistake). Case, `-` and `_` are ignored.
pub(crate) fn is_secret_key(key: &str) -> bool {
    let k: String = key
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect();
    let k = k.strip_suffix("env").unwrap_or(&k);
    const CONTAINS: &[&str] = &[
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "credential",
        "privatekey",
        "apikey",
        "accesskey",
    ];
    CONTAINS.iter().any(|w| k.contains(w)) || k.ends_with("username") || k == "auth"
}

impl PathIndex {
    /// Indexes the first document of `text` within the cluster file's budget. Never fails: a parse
    /// error is stored in `parse_error`, a limit in `limit`, and the index holds what was read before.
    pub(crate) fn build(text: &str) -> PathIndex {
        Self::build_with(text, &CLUSTER_FILE)
    }

    /// As [`PathIndex::build`], within `budget` (its depth and value count; size and characters are
    /// the caller's to check first, see [`crate::limits::check_yaml`]).
    pub(crate) fn build_with(text: &str, budget: &Budget) -> PathIndex {
        let mut rx = Builder::new(text, budget);
        rx.run();
        rx.finish()
    }

    fn node(&self, path: &str) -> Option<&Node> {
        let segs = segments(path)?;
        let mut cur = 0u32;
        for s in segs {
            cur = *self.children.get(&(cur, s))?;
        }
        self.nodes.get(cur as usize)
    }

    /// Position of the value at `path`.
    pub(crate) fn value(&self, path: &str) -> Option<Pos> {
        self.node(path)?.value
    }

    /// Position of the key naming the value at `path`.
    pub(crate) fn key_of(&self, path: &str) -> Option<Pos> {
        self.node(path)?.key
    }

    /// Position of the value at `path`, else of the nearest ancestor that exists (for values that were
    /// defaulted or are missing); `None` only when nothing is indexed.
    pub(crate) fn nearest(&self, path: &str) -> Option<Pos> {
        let root = self.nodes.first().and_then(|n| n.value);
        let Some(segs) = segments(path) else {
            return root;
        };
        let mut cur = 0u32;
        let mut best = root;
        for s in segs {
            match self.children.get(&(cur, s)) {
                Some(&c) => {
                    cur = c;
                    if let Some(v) = self.nodes.get(c as usize).and_then(|n| n.value) {
                        best = Some(v);
                    }
                }
                None => break,
            }
        }
        best
    }

    /// Finds the path of the node starting at `line`, `column` (1-based): a mapping key's path when
    /// `prefer_key` (unknown-field errors point at keys), else the innermost value starting there.
    pub(crate) fn path_at(&self, line: usize, column: usize, prefer_key: bool) -> Option<String> {
        let at = |p: &Option<Pos>| p.is_some_and(|p| p.line == line && p.column == column);
        let deepest = |pick: &dyn Fn(&Node) -> bool| {
            self.nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| pick(n))
                .max_by_key(|(_, n)| n.depth)
                .map(|(i, _)| self.path_of(i as u32))
        };
        let key = deepest(&|n| at(&n.key));
        let value = deepest(&|n| at(&n.value));
        if prefer_key {
            key.or(value)
        } else {
            value.or(key)
        }
    }

    /// The path of node `id`, e.g. `spec.nodes[1].labels["a.b/c"]`.
    fn path_of(&self, id: u32) -> String {
        let mut segs = Vec::new();
        let mut cur = id;
        while let Some(n) = self.nodes.get(cur as usize) {
            match &n.seg {
                Some(s) => segs.push(s),
                None => break,
            }
            cur = n.parent;
        }
        let mut out = String::new();
        for s in segs.into_iter().rev() {
            out = match s {
                Seg::Key(k) => join_key(&out, k),
                Seg::Index(i) => join_index(&out, *i),
            };
        }
        out
    }

    /// The byte ranges of the text that hold secrets, sorted and not overlapping: every value under a
    /// secret-bearing key ([`is_secret_key`]), whatever its shape (scalar of any style, mapping,
    /// list), and every anchored value such a value reuses through an alias.
    pub(crate) fn secret_ranges(&self) -> &[(usize, usize)] {
        &self.secret_ranges
    }

    /// The texts of the scalars (values and keys) in [`PathIndex::secret_ranges`], longest first, so
    /// that a message quoting one can be masked.
    pub(crate) fn secret_texts(&self) -> &[String] {
        &self.secret_texts
    }
}

/// When `path` passes through a secret-bearing key ([`is_secret_key`]), the path up to and including
/// that key (what lies below it may be the secret itself, e.g. `password["hunter2"]`).
pub(crate) fn secret_prefix(path: &str) -> Option<String> {
    let segs = segments(path)?;
    let i = segs
        .iter()
        .position(|s| matches!(s, Seg::Key(k) if is_secret_key(k)))?;
    if i + 1 == segs.len() {
        return None;
    }
    let mut out = String::new();
    for s in &segs[..=i] {
        out = match s {
            Seg::Key(k) => join_key(&out, k),
            Seg::Index(n) => join_index(&out, *n),
        };
    }
    Some(out)
}

/// The parent of a path: `a.b[2]` → `a.b`, `a.b` → `a`, `a` → ``; `None` for ``.
pub(crate) fn parent(path: &str) -> Option<String> {
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
pub(crate) fn join_key(path: &str, key: &str) -> String {
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
pub(crate) fn join_index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// The steps of a path as [`join_key`] and [`join_index`] write it: `a.b[1]["x.y"]` → key a, key b,
/// index 1, key x.y. `None` when the text is not such a path.
pub(crate) fn segments(path: &str) -> Option<Vec<Seg>> {
    let mut out = Vec::new();
    let b = path.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' => i += 1,
            b'[' => {
                if b.get(i + 1) == Some(&b'"') {
                    let (key, used) = unquote_debug(path.get(i + 1..)?)?;
                    if b.get(i + 1 + used) != Some(&b']') {
                        return None;
                    }
                    out.push(Seg::Key(key.into_boxed_str()));
                    i += used + 2;
                } else {
                    let end = path[i..].find(']')? + i;
                    out.push(Seg::Index(path[i + 1..end].parse().ok()?));
                    i = end + 1;
                }
            }
            _ => {
                let end = path[i..]
                    .find(['.', '['])
                    .map(|e| e + i)
                    .unwrap_or(path.len());
                out.push(Seg::Key(path[i..end].into()));
                i = end;
            }
        }
    }
    Some(out)
}

/// Reads a string written with Rust's `{:?}` at the start of `s` (which begins with `"`): the text
/// and the number of bytes it took. `None` when it is not one.
fn unquote_debug(s: &str) -> Option<(String, usize)> {
    let mut chars = s.char_indices();
    if chars.next()?.1 != '"' {
        return None;
    }
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, i + 1)),
            '\\' => match chars.next()?.1 {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                '\\' => out.push('\\'),
                '"' => out.push('"'),
                '\'' => out.push('\''),
                'u' => {
                    if chars.next()?.1 != '{' {
                        return None;
                    }
                    let mut hex = String::new();
                    loop {
                        let (_, h) = chars.next()?;
                        if h == '}' {
                            break;
                        }
                        hex.push(h);
                    }
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                _ => return None,
            },
            c => out.push(c),
        }
    }
    None
}

enum Frame {
    /// `first_key_pending`: the mapping's own position is taken from its first key (yaml-rust2 marks a
    /// block mapping at its first `:`). `key`: the node of the key read, waiting for its value.
    Map {
        node: u32,
        key: Option<u32>,
        first_key_pending: bool,
        secret: bool,
    },
    Seq {
        node: u32,
        next: usize,
        secret: bool,
    },
}

/// A value whose extent is being measured: it starts at `start` and ends where the event after it
/// begins. `depth`: the frame depth of a collection (`None` for a scalar, closed by the next event).
struct Open {
    start: usize,
    depth: usize,
}

struct Builder<'a> {
    text: &'a str,
    budget: &'a Budget,
    index: PathIndex,
    locator: Locator<'a>,
    stack: Vec<Frame>,
    /// Depth of a complex (non-scalar) mapping key being skipped.
    skip: usize,
    values: usize,
    /// The outermost secret collection being read.
    secret_root: Option<Open>,
    /// Anchored collections being read: (anchor id, extent).
    open_anchors: Vec<(usize, Open)>,
    /// Extents waiting for the next event's offset to end: (anchor id or 0 for a secret, start,
    /// least end).
    closing: Vec<(usize, usize, usize)>,
    anchors: HashMap<usize, (usize, usize)>,
    /// Every alias: (offset, anchor id).
    aliases: Vec<(usize, usize)>,
    /// Anchors reused under a secret-bearing key.
    secret_aliases: Vec<usize>,
    /// Scalars (offset, text) read since the first anchor (an anchored value may turn out secret).
    scalars: Vec<(usize, String)>,
    secret_texts: Vec<String>,
    ranges: Vec<(usize, usize)>,
}

impl<'a> Builder<'a> {
    fn new(text: &'a str, budget: &'a Budget) -> Self {
        Builder {
            text,
            budget,
            index: PathIndex::default(),
            locator: Locator::new(text),
            stack: Vec::new(),
            skip: 0,
            values: 0,
            secret_root: None,
            open_anchors: Vec::new(),
            closing: Vec::new(),
            anchors: HashMap::new(),
            aliases: Vec::new(),
            secret_aliases: Vec::new(),
            scalars: Vec::new(),
            secret_texts: Vec::new(),
            ranges: Vec::new(),
        }
    }

    fn at(&mut self, m: Marker) -> At {
        self.locator.at(m.line(), m.col() + 1)
    }

    fn pos_of(&mut self, m: Marker, scalar: bool) -> Pos {
        let at = self.at(m);
        let len = if scalar {
            token_len(&self.text[at.offset..])
        } else {
            usize::from(at.offset < self.text.len())
        };
        Pos {
            offset: at.offset,
            len,
            line: at.line,
            column: at.column,
        }
    }

    /// Ends every extent waiting for the next event at `offset`.
    fn close(&mut self, offset: usize) {
        for (anchor, start, least) in std::mem::take(&mut self.closing) {
            let end = offset.max(least);
            if anchor == 0 {
                self.ranges.push((start, end));
            } else {
                self.anchors.insert(anchor, (start, end));
            }
        }
    }

    fn run(&mut self) {
        let mut parser = Parser::new_from_str(self.text);
        loop {
            let (ev, mark) = match parser.next_token() {
                Ok(x) => x,
                Err(e) => {
                    let pos = self.pos_of(*e.marker(), false);
                    if crate::limits::parser_depth_limit(e.info()) {
                        self.index.limit = Some(LimitError::Depth {
                            what: self.budget.what,
                            limit: self.budget.max_depth,
                            at: At {
                                offset: pos.offset,
                                line: pos.line,
                                column: pos.column,
                            },
                        });
                    } else {
                        self.index.parse_error = Some((e.info().to_string(), pos));
                    }
                    return;
                }
            };
            if !self.closing.is_empty() {
                let off = self.at(mark).offset;
                self.close(off);
            }
            match ev {
                Event::StreamEnd | Event::DocumentEnd => return,
                Event::Scalar(..)
                | Event::Alias(..)
                | Event::MappingStart(..)
                | Event::SequenceStart(..) => {
                    self.values += 1;
                    let opens = matches!(ev, Event::MappingStart(..) | Event::SequenceStart(..));
                    let limit = if self.values > self.budget.max_values {
                        Some(LimitError::Values {
                            what: self.budget.what,
                            limit: self.budget.max_values,
                            at: self.at(mark),
                        })
                    } else if opens && self.stack.len() + self.skip + 1 > self.budget.max_depth {
                        Some(LimitError::Depth {
                            what: self.budget.what,
                            limit: self.budget.max_depth,
                            at: self.at(mark),
                        })
                    } else {
                        None
                    };
                    if limit.is_some() {
                        self.index.limit = limit;
                        return;
                    }
                    if self.skip > 0 {
                        if opens {
                            self.skip += 1;
                        }
                        continue;
                    }
                    self.on_node(&ev, mark);
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    if self.skip > 0 {
                        self.skip -= 1;
                        continue;
                    }
                    self.on_end();
                }
                _ => {}
            }
        }
    }

    fn on_end(&mut self) {
        let depth = self.stack.len();
        self.stack.pop();
        if self.secret_root.as_ref().is_some_and(|r| r.depth == depth) {
            if let Some(r) = self.secret_root.take() {
                self.closing.push((0, r.start, r.start));
            }
        }
        while self
            .open_anchors
            .last()
            .is_some_and(|(_, o)| o.depth == depth)
        {
            if let Some((id, o)) = self.open_anchors.pop() {
                self.closing.push((id, o.start, o.start));
            }
        }
    }

    fn child(&mut self, parent: u32, seg: Seg) -> (u32, bool) {
        if let Some(&c) = self.index.children.get(&(parent, seg.clone())) {
            return (c, false);
        }
        let id = self.index.nodes.len() as u32;
        let depth = self.index.nodes[parent as usize].depth + 1;
        self.index.nodes.push(Node {
            parent,
            seg: Some(seg.clone()),
            depth,
            value: None,
            key: None,
        });
        self.index.children.insert((parent, seg), id);
        (id, true)
    }

    fn on_key(&mut self, ev: &Event, mark: Marker) {
        let Some(Frame::Map {
            node,
            first_key_pending,
            secret,
            ..
        }) = self.stack.last()
        else {
            return;
        };
        let (map, first, secret) = (*node, *first_key_pending, *secret);
        let depth = self.stack.len();
        let child = if let Event::Scalar(k, ..) = ev {
            let mut pos = self.pos_of(mark, true);
            pos.len = key_len(&self.text[pos.offset..], pos.len);
            if first {
                let m = &mut self.index.nodes[map as usize];
                if let Some(v) = m.value.as_mut() {
                    if self.text.as_bytes().get(v.offset) != Some(&b'{') {
                        *v = Pos {
                            len: pos.len.max(1),
                            ..pos
                        };
                    }
                }
                // The mapping's extent starts at its first key, not at the `:` the parser marks.
                if let Some(r) = self.secret_root.as_mut().filter(|r| r.depth == depth) {
                    r.start = r.start.min(pos.offset);
                }
                for (_, o) in self
                    .open_anchors
                    .iter_mut()
                    .filter(|(_, o)| o.depth == depth)
                {
                    o.start = o.start.min(pos.offset);
                }
            }
            if secret && !k.is_empty() {
                self.secret_texts.push(k.clone());
            }
            if !self.open_anchors.is_empty() || !self.anchors.is_empty() {
                self.scalars.push((pos.offset, k.clone()));
            }
            let (c, new) = self.child(map, Seg::Key(k.as_str().into()));
            if new {
                self.index.nodes[c as usize].key = Some(pos);
            } else {
                let path = self.index.path_of(c);
                self.index.duplicates.push(Duplicate { path, pos });
            }
            c
        } else {
            // A complex key: skip its subtree and use a placeholder key.
            if matches!(ev, Event::MappingStart(..) | Event::SequenceStart(..)) {
                self.skip = 1;
            }
            self.child(map, Seg::Key("<complex key>".into())).0
        };
        if let Some(Frame::Map {
            key,
            first_key_pending,
            ..
        }) = self.stack.last_mut()
        {
            *key = Some(child);
            *first_key_pending = false;
        }
    }

    fn on_node(&mut self, ev: &Event, mark: Marker) {
        if matches!(self.stack.last(), Some(Frame::Map { key: None, .. })) {
            self.on_key(ev, mark);
            return;
        }
        let scalar = matches!(ev, Event::Scalar(..) | Event::Alias(..));
        let pos = self.pos_of(mark, scalar);
        let depth = self.stack.len();
        // The node, whether it is secret, and whether it starts a secret value.
        let (node, parent_secret, key_secret) = match self.stack.last_mut() {
            None => (0, false, false),
            Some(Frame::Seq { node, next, secret }) => {
                let (n, s, i) = (*node, *secret, *next);
                *next += 1;
                (self.child(n, Seg::Index(i)).0, s, false)
            }
            Some(Frame::Map { key, secret, .. }) => {
                let s = *secret;
                let k = key.take().unwrap_or(0);
                let ks = matches!(&self.index.nodes[k as usize].seg, Some(Seg::Key(name)) if is_secret_key(name));
                (k, s, ks)
            }
        };
        let secret = parent_secret || key_secret;
        let n = &mut self.index.nodes[node as usize];
        if n.value.is_none() {
            n.value = Some(pos);
        }
        let anchor = match ev {
            Event::Scalar(_, _, a, _) | Event::MappingStart(a, _) | Event::SequenceStart(a, _) => {
                *a
            }
            _ => 0,
        };
        match ev {
            Event::Scalar(text, ..) => {
                if secret && !text.is_empty() {
                    self.secret_texts.push(text.clone());
                }
                if anchor != 0 || !self.open_anchors.is_empty() || !self.anchors.is_empty() {
                    self.scalars.push((pos.offset, text.clone()));
                }
            }
            Event::Alias(id) => {
                self.aliases.push((pos.offset, *id));
                if secret {
                    self.secret_aliases.push(*id);
                }
            }
            _ => {}
        }
        if scalar {
            let least = pos.offset + pos.len;
            if key_secret && !parent_secret {
                self.closing.push((0, pos.offset, least));
            }
            if anchor != 0 {
                self.closing.push((anchor, pos.offset, least));
            }
            return;
        }
        if key_secret && !parent_secret && self.secret_root.is_none() {
            self.secret_root = Some(Open {
                start: pos.offset,
                depth: depth + 1,
            });
        }
        if anchor != 0 {
            self.open_anchors.push((
                anchor,
                Open {
                    start: pos.offset,
                    depth: depth + 1,
                },
            ));
        }
        self.stack.push(match ev {
            Event::MappingStart(..) => Frame::Map {
                node,
                key: None,
                first_key_pending: true,
                secret,
            },
            _ => Frame::Seq {
                node,
                next: 0,
                secret,
            },
        });
    }

    fn finish(mut self) -> PathIndex {
        // Whatever is still open (a parse error, a limit) runs to the end of the text.
        let end = self.text.len();
        self.close(end);
        if let Some(r) = self.secret_root.take() {
            self.ranges.push((r.start, end));
        }
        for (id, o) in std::mem::take(&mut self.open_anchors) {
            self.anchors.insert(id, (o.start, end));
        }
        // Anchored values reused under a secret key are secret, and so is what they reuse in turn.
        self.aliases.sort_unstable();
        let mut seen = HashSet::new();
        let mut queue = std::mem::take(&mut self.secret_aliases);
        let mut anchored = Vec::new();
        while let Some(id) = queue.pop() {
            if !seen.insert(id) {
                continue;
            }
            let Some(&(s, e)) = self.anchors.get(&id) else {
                continue;
            };
            anchored.push((s, e));
            let from = self.aliases.partition_point(|(o, _)| *o < s);
            for (o, a) in &self.aliases[from..] {
                if *o >= e {
                    break;
                }
                queue.push(*a);
            }
        }
        let anchored = merge(anchored);
        for (off, text) in std::mem::take(&mut self.scalars) {
            let i = anchored.partition_point(|(_, e)| *e <= off);
            if anchored.get(i).is_some_and(|(s, _)| *s <= off) && !text.is_empty() {
                self.secret_texts.push(text);
            }
        }
        self.ranges.extend(anchored);
        // And, as the text reads, whatever follows a secret-bearing key: this covers the text a
        // parse error or a limit kept the parser from reading, and a secret swallowed by a
        // mistake before it (an unclosed quote, a stray block scalar).
        textual_secrets(self.text, &mut self.ranges, &mut self.secret_texts);
        self.index.secret_ranges = merge(std::mem::take(&mut self.ranges));
        let mut texts = std::mem::take(&mut self.secret_texts);
        texts.sort_unstable_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        texts.dedup();
        self.index.secret_texts = texts;
        self.index
    }
}

/// Finds, line by line and without parsing, the values that follow a secret-bearing key
/// ([`is_secret_key`]) — `password: x`, `- token: "x"`, `{user: a, password: x}`, and the more
/// indented lines under `password: |` or a key with nothing after it — and adds their byte ranges
/// to `ranges` and their texts to `texts`. Linear in the text.
fn textual_secrets(text: &str, ranges: &mut Vec<(usize, usize)>, texts: &mut Vec<String>) {
    let mut offset = 0;
    // The indentation of a key whose value continues on the more indented lines below it.
    let mut block: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let indent = body.len() - body.trim_start().len();
        if let Some(k) = block {
            if body.trim().is_empty() || indent > k {
                if !body.trim().is_empty() {
                    ranges.push((offset + indent, offset + body.len()));
                    texts.push(body.trim().to_string());
                }
                offset += line.len();
                continue;
            }
            block = None;
        }
        let b = body.as_bytes();
        for (i, _) in body.match_indices(':') {
            if !matches!(b.get(i + 1), None | Some(b' ' | b'\t')) {
                continue;
            }
            // The key before the colon: letters, digits, `-`, `_`, `.`, optionally quoted.
            let quoted = i > 0 && matches!(b[i - 1], b'"' | b'\'');
            let key_end = if quoted { i - 1 } else { i };
            let mut start = key_end;
            while start > 0
                && key_end - start < 64
                && (b[start - 1].is_ascii_alphanumeric()
                    || matches!(b[start - 1], b'-' | b'_' | b'.'))
            {
                start -= 1;
            }
            if start == key_end || !is_secret_key(&body[start..key_end]) {
                continue;
            }
            let rest = &body[i + 1..];
            let value_start = i + 1 + (rest.len() - rest.trim_start().len());
            let value = &body[value_start..];
            // A flow value ends at `,` or `}` (a quoted one at its closing quote, roughly).
            let end = if body[..start].contains('{') {
                value
                    .find([',', '}'])
                    .map_or(body.len(), |e| value_start + e)
            } else {
                body.len()
            };
            let v = body[value_start..end].trim();
            if v.is_empty() || matches!(v, "|" | ">" | "|-" | ">-" | "|+" | ">+") {
                block = Some(indent);
                continue;
            }
            ranges.push((offset + value_start, offset + end));
            let v = v.trim_matches(['"', '\'']);
            if !v.is_empty() {
                texts.push(v.to_string());
            }
        }
        offset += line.len();
    }
}

/// Sorts ranges and merges those that overlap or touch.
fn merge(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (s, e) in ranges {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Length in bytes of a mapping key's token at the start of `rest` (whose scalar token is `len`
/// bytes): a quoted key keeps `len`; a plain key ends at its `:` (followed by a space, a tab or the
/// line end). Reads at most the token.
fn key_len(rest: &str, len: usize) -> usize {
    if rest.starts_with(['"', '\'']) {
        return len;
    }
    let b = rest.as_bytes();
    let mut end = len.min(b.len());
    for i in 0..end {
        if b[i] == b':' && matches!(b.get(i + 1), None | Some(b' ' | b'\t' | b'\n' | b'\r')) {
            end = i;
            break;
        }
    }
    rest[..end].trim_end().len()
}

/// Length in bytes of the scalar token at the start of `rest`: a quoted string up to its closing quote
/// (or the line end), else up to the line end, a ` #` comment, or a flow indicator; trailing spaces
/// trimmed. Reads only the token, so that many tokens on one long line cost their own length.
fn token_len(rest: &str) -> usize {
    let mut chars = rest.char_indices().peekable();
    match chars.next() {
        Some((_, q @ ('"' | '\''))) => {
            let mut escaped = false;
            for (i, c) in chars {
                if c == '\n' || c == '\r' {
                    return i;
                }
                if q == '"' && c == '\\' && !escaped {
                    escaped = true;
                    continue;
                }
                if c == q && !escaped {
                    return i + 1;
                }
                escaped = false;
            }
            rest.len()
        }
        Some((_, c0)) => {
            let mut end = rest.len();
            let mut prev = c0;
            if matches!(c0, '\n' | '\r' | ',' | ']' | '}') {
                return 0;
            }
            for (i, c) in chars {
                if matches!(c, '\n' | '\r' | ',' | ']' | '}') || (c == '#' && prev == ' ') {
                    end = i;
                    break;
                }
                prev = c;
            }
            rest[..end].trim_end().len()
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
    fn secrets_are_found_whatever_their_shape_and_after_a_parse_error() {
        let shown = |text: &str| {
            let ix = PathIndex::build(text);
            let mut out = text.as_bytes().to_vec();
            for &(s, e) in ix.secret_ranges() {
                for b in &mut out[s..e] {
                    if *b != b'\n' {
                        *b = b'*';
                    }
                }
            }
            (
                String::from_utf8(out).expect("utf8"),
                ix.secret_texts().to_vec(),
            )
        };
        for text in [
            "registry:\n  password: hunter2\n",
            "registry: {mirror: m, password: hunter2, x: 1}\n",
            "registry:\n  password:\n    - hunter2\n",
            "registry:\n  password: {a: hunter2}\n",
            "registry:\n  password: |\n    hunter2\n    more\n  mirror: m\n",
            "registry:\n  password: >-\n    hunter2\n",
            "registry:\n  PASSWORD_ENV: \"hunter2\"\n",
            "a: &p hunter2\nregistry:\n  password: *p\n",
            "registry:\n  password: &p {x: [hunter2]}\nb: *p\n",
            // After a parse error, and swallowed by an unclosed quote before it.
            "a: [1\nregistry:\n  password: hunter2\n",
            "a: \"open\nregistry:\n  password: hunter2\n",
            "a: |\n  text\n  password: hunter2\n",
        ] {
            let (out, texts) = shown(text);
            assert!(!out.contains("hunter2"), "{text:?} shown as {out:?}");
            assert!(
                texts.iter().any(|t| t.contains("hunter2")),
                "{text:?}: {texts:?}"
            );
            assert!(!out.contains("more"), "{out}");
            assert!(out.contains("registry") || out.contains("a:"), "{out}");
        }
        // The rest stays readable.
        let (out, _) = shown("registry:\n  mirror: m\n  password: x\n  usernameClaim: sub\n");
        assert!(
            out.contains("mirror: m") && out.contains("usernameClaim: sub"),
            "{out}"
        );
    }

    #[test]
    fn quoted_and_odd_keys() {
        let ix = PathIndex::build("labels:\n  node-role.kubernetes.io/x: \"\"\n");
        assert!(ix.value("labels[\"node-role.kubernetes.io/x\"]").is_some());
        assert_eq!(parent("labels[\"a.b\"]").as_deref(), Some("labels"));
        assert_eq!(parent("a.b[3]").as_deref(), Some("a.b"));
    }
}
