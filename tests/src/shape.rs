//! The countable shape of the workspace's sources (issue 30): each crate's module import graph and its
//! cycles, functions longer than a limit, files longer than a limit, and the places that match on a
//! provider. Read from the source text alone (rustfmt-formatted code: a function's closing brace sits
//! at its `fn` line's indentation), so the checks need no compiler and run in milliseconds.
//!
//! `render/tests/it/layers.rs` checks render's layers with [`modules`] and [`import_edges`];
//! `tests/tests/it/shape.rs` holds the workspace to the budgets written there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every `.rs` file under `src` as (module path, file text): the path is `::`-joined under the crate
/// root, `""` for `lib.rs`/`main.rs`, a directory's `mod.rs` named after the directory.
///
/// # Panics
/// When `src` or a file in it cannot be read (a test helper: the sources are the test's input).
pub fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(src, &[], &mut out);
    out
}

fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        if p.is_dir() {
            let mut sub = prefix.to_vec();
            sub.push(name);
            walk(&p, &sub, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let mut path = prefix.to_vec();
            if !matches!(name.as_str(), "mod" | "lib" | "main") {
                path.push(name);
            }
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
            out.insert(path.join("::"), text);
        }
    }
}

/// The code of `text` without its `#[cfg(test)]` tail and `//` comments.
pub fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Module `m`'s imports of other modules of its crate: for every `crate::…`/`super::…` path in its
/// code (and each item of a `use crate::{a, b::c}` group), the longest prefix that is a module of
/// `mods`. A module's own submodules and its ancestors are left out (they are its inside, not an
/// arrow between rooms), and so is the crate root.
pub fn import_edges(mods: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in mods {
        for p in paths(m, &code(text)) {
            let target = (1..=p.len())
                .rev()
                .map(|n| p[..n].join("::"))
                .find(|t| mods.contains_key(t));
            if let Some(t) = target {
                let inside = t.starts_with(&format!("{m}::")) || m.starts_with(&format!("{t}::"));
                if t != *m && !inside && !m.is_empty() {
                    edges.entry(m.clone()).or_default().insert(t);
                }
            }
        }
    }
    edges
}

/// The module paths named in `code` of module `m`: `crate::a::b`, `super::a`, and the first level
/// of `use crate::{a, b::c}` groups.
fn paths(m: &str, code: &str) -> Vec<Vec<String>> {
    let flat = code.replace(['\n', '\t'], " ");
    let mut out = Vec::new();
    for (base, start) in [("crate", "crate::"), ("super", "super::")] {
        let mut rest = flat.as_str();
        while let Some(i) = rest.find(start) {
            let before = &rest[..i];
            rest = &rest[i + start.len()..];
            // Part of a longer path (`x::super::`, `my_crate::`) or a chain already read.
            if before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let root: Vec<String> = if base == "crate" {
                Vec::new()
            } else {
                // A file's `super` is its parent module; each further `super::` one more up.
                let mut v: Vec<String> = m.split("::").map(str::to_string).collect();
                v.pop();
                while let Some(r) = rest.strip_prefix("super::") {
                    v.pop();
                    rest = r;
                }
                v
            };
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let item: String = item.chars().filter(|c| !c.is_whitespace()).collect();
                    out.push(join(&root, &item));
                }
            } else {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(rest.len());
                out.push(join(&root, &rest[..end]));
            }
        }
    }
    out
}

fn join(root: &[String], path: &str) -> Vec<String> {
    let mut v = root.to_vec();
    v.extend(
        path.split("::")
            .filter(|s| !s.is_empty() && *s != "self")
            .map(str::to_string),
    );
    v
}

/// The import cycles of `edges`: every strongly connected component of more than one module
/// (Tarjan's algorithm), each sorted, in a sorted list. Empty when the graph has no cycle.
pub fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut t = Tarjan::default();
    let nodes: BTreeSet<&String> = edges.keys().chain(edges.values().flatten()).collect();
    for n in nodes {
        if !t.index.contains_key(n.as_str()) {
            t.connect(n, edges);
        }
    }
    let mut out: Vec<Vec<String>> = t.sccs.into_iter().filter(|c| c.len() > 1).collect();
    for c in &mut out {
        c.sort();
    }
    out.sort();
    out
}

#[derive(Default)]
struct Tarjan {
    next: usize,
    index: BTreeMap<String, usize>,
    low: BTreeMap<String, usize>,
    stack: Vec<String>,
    on_stack: BTreeSet<String>,
    sccs: Vec<Vec<String>>,
}

impl Tarjan {
    fn connect(&mut self, v: &str, edges: &BTreeMap<String, BTreeSet<String>>) {
        self.index.insert(v.to_string(), self.next);
        self.low.insert(v.to_string(), self.next);
        self.next += 1;
        self.stack.push(v.to_string());
        self.on_stack.insert(v.to_string());
        for w in edges.get(v).into_iter().flatten() {
            if !self.index.contains_key(w) {
                self.connect(w, edges);
                let lw = self.low[w];
                let lv = self.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if self.on_stack.contains(w) {
                let iw = self.index[w];
                let lv = self.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if self.low[v] == self.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack.remove(&w);
                let done = w == v;
                scc.push(w);
                if done {
                    break;
                }
            }
            self.sccs.push(scc);
        }
    }
}

/// A function of a source file: its name, the line its `fn` is on (1-based) and its length in lines
/// (from the `fn` line to its closing brace, both counted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// The function's name.
    pub name: String,
    /// The line of its `fn` keyword, 1-based.
    pub line: usize,
    /// Lines from the `fn` line to the closing brace, inclusive.
    pub lines: usize,
}

/// Every function with a body in `text` (tests included), found as rustfmt lays them out: a line
/// whose code starts with `fn`, `pub fn`, `pub(crate) fn`, `async fn`, `const fn`, `unsafe fn` …, and
/// ends at the first later line that is `}` at the same indentation. Declarations without a body
/// (trait items ending in `;`) are skipped.
pub fn functions(text: &str) -> Vec<Function> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(name) = fn_name(l) else { continue };
        let indent = l.len() - l.trim_start().len();
        let close = format!("{}}}", &l[..indent]);
        // The signature ends at the first line ending in `{` (a body) or `;` (a declaration).
        let Some(open) = lines[i..]
            .iter()
            .position(|x| x.trim_end().ends_with('{') || x.trim_end().ends_with(';'))
            .map(|n| i + n)
        else {
            continue;
        };
        if !lines[open].trim_end().ends_with('{') {
            continue;
        }
        let end = lines[open..]
            .iter()
            .position(|x| x.trim_end() == close)
            .map(|n| open + n);
        if let Some(end) = end {
            out.push(Function {
                name,
                line: i + 1,
                lines: end - i + 1,
            });
        }
    }
    out
}

/// The function name a line declares, when its code starts with a `fn` item (after visibility and
/// qualifiers).
fn fn_name(line: &str) -> Option<String> {
    let mut rest = line.trim_start();
    for q in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
        "extern \"C\" ",
    ] {
        rest = rest.strip_prefix(q).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(rest[..end].to_string())
}

/// How many times `text`'s code (comments and the test tail left out) matches on a provider variant
/// (`Provider::Docker`, `Provider::Ssh`).
pub fn provider_matches(text: &str) -> usize {
    let code = code(text);
    ["Provider::Docker", "Provider::Ssh"]
        .iter()
        .map(|p| code.matches(p).count())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_are_measured_from_fn_to_their_closing_brace() {
        let text = "pub(crate) fn a(x: u8) -> u8 {\n    x\n}\n\nimpl T {\n    async fn b() {\n        c();\n    }\n    fn decl(&self);\n}\n";
        let f = functions(text);
        assert_eq!(
            f,
            vec![
                Function {
                    name: "a".into(),
                    line: 1,
                    lines: 3
                },
                Function {
                    name: "b".into(),
                    line: 6,
                    lines: 3
                },
            ]
        );
    }

    #[test]
    fn a_cycle_is_one_component_and_a_chain_is_none() {
        let mut e: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut add = |a: &str, b: &str| {
            e.entry(a.into()).or_default().insert(b.into());
        };
        add("a", "b");
        add("b", "c");
        add("c", "a");
        add("c", "d");
        assert_eq!(
            cycles(&e),
            vec![vec!["a".to_string(), "b".into(), "c".into()]]
        );
        let mut chain: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        chain.entry("x".into()).or_default().insert("y".into());
        assert!(cycles(&chain).is_empty());
    }

    #[test]
    fn imports_name_the_longest_module_prefix_and_skip_the_inside() {
        let mut mods = BTreeMap::new();
        mods.insert("".to_string(), "mod a; mod b;".to_string());
        mods.insert(
            "a".to_string(),
            "use crate::b::Thing; use super::a::inner;".to_string(),
        );
        mods.insert("a::inner".to_string(), "use super::super::b;".to_string());
        mods.insert("b".to_string(), "// use crate::a;\nfn f() {}".to_string());
        let e = import_edges(&mods);
        assert_eq!(e["a"], BTreeSet::from(["b".to_string()]));
        assert_eq!(e["a::inner"], BTreeSet::from(["b".to_string()]));
        assert!(!e.contains_key("b"));
    }
}
