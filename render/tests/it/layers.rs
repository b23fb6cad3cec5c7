//! render's internal layering (docs/architecture.md, "Inside render"): every `crate::`/`super::` path
//! of `render/src` (tests left out) points to a lower layer — tables, then the image catalogue, then
//! `ctx`, then the renderers, then `lib.rs` — or, among tables or among renderers, along a graph
//! without cycles. Read from the sources, so a new import that closes a circle fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layer of module `m` (`::`-joined path under the crate root; `""` is `lib.rs`).
fn layer(m: &str) -> u8 {
    match m {
        "output" | "facts" | "placeholders" | "yaml" | "templates" | "cni::versions"
        | "cni::install" => 1,
        "images" => 2,
        "ctx" => 3,
        "" => 5,
        _ => 4,
    }
}

/// Every `.rs` file under `dir` as (module path, text).
fn modules(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("entry").path();
        let name = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        if p.is_dir() {
            let mut sub = prefix.to_vec();
            sub.push(name);
            modules(&p, &sub, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let mut path = prefix.to_vec();
            if !matches!(name.as_str(), "mod" | "lib") {
                path.push(name);
            }
            let text = std::fs::read_to_string(&p).expect("read file");
            out.insert(path.join("::"), text);
        }
    }
}

/// The code of `text` without its `#[cfg(test)]` tail and `//` comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths named in `code` of module `m`: `crate::a::b`, `super::a`, and the first level
/// of `use crate::{a, b::c}` groups.
fn paths(m: &str, code: &str) -> Vec<Vec<String>> {
    let flat = code.replace(['\n', '\t'], " ");
    let mut out = Vec::new();
    for (base, start) in [("crate", "crate::"), ("super", "super::")] {
        let mut rest = flat.as_str();
        while let Some(i) = rest.find(start) {
            let before = rest[..i].chars().last();
            rest = &rest[i + start.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let root: Vec<String> = if base == "crate" {
                Vec::new()
            } else {
                // A file's `super` is its parent module.
                let mut v: Vec<String> = m.split("::").map(str::to_string).collect();
                v.pop();
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

#[test]
fn render_modules_import_only_downward() {
    let mut mods = BTreeMap::new();
    modules(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &[],
        &mut mods,
    );
    assert!(
        mods.contains_key("ctx") && mods.contains_key("cni::versions"),
        "{:?}",
        mods.keys()
    );
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (m, text) in &mods {
        for p in paths(m, &code(text)) {
            // The longest module prefix of the path.
            let target = (1..=p.len())
                .rev()
                .map(|n| p[..n].join("::"))
                .find_map(|t| mods.get_key_value(&t).map(|(k, _)| k.as_str()));
            if let Some(t) = target {
                let inside = t.starts_with(&format!("{m}::")) || m.starts_with(&format!("{t}::"));
                if t != m && !inside && !m.is_empty() {
                    edges.entry(m).or_default().insert(t);
                }
            }
        }
    }
    let mut wrong = Vec::new();
    for (m, ts) in &edges {
        for t in ts {
            let (lm, lt) = (layer(m), layer(t));
            if lt > lm || (lt == lm && !matches!(lm, 1 | 4)) {
                wrong.push(format!("{m} (layer {lm}) imports {t} (layer {lt})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
    // No cycle (within a layer): depth-first search with colours.
    fn visit<'a>(
        m: &'a str,
        edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        state: &mut BTreeMap<&'a str, bool>,
        stack: &mut Vec<&'a str>,
    ) {
        match state.get(m) {
            Some(true) => return,
            Some(false) => panic!("import cycle: {} -> {m}", stack.join(" -> ")),
            None => {}
        }
        state.insert(m, false);
        stack.push(m);
        for t in edges.get(m).into_iter().flatten() {
            visit(t, edges, state, stack);
        }
        stack.pop();
        state.insert(m, true);
    }
    let mut state = BTreeMap::new();
    for m in mods.keys() {
        visit(m, &edges, &mut state, &mut Vec::new());
    }
    // The circle this replaced: ctx read the source registries from runtime, which reads ctx.
    let ctx = edges.get("ctx").cloned().unwrap_or_default();
    assert!(
        ctx.contains("images") && !ctx.contains("runtime"),
        "{ctx:?}"
    );
}
