//! Structural checks: YAML syntax, empty files, several documents, duplicate keys, `apiVersion`/`kind`, and
//! the typed model. serde stops at its first error, so after each schema error the offending entry is
//! removed from a copy of the document and decoding is retried (at most [`MAX_SCHEMA_ERRORS`] times,
//! and only while the retries have decoded less than [`RECOVERY_BYTES`] in all); positions in the
//! retried copy are mapped back to the original through field paths.

use std::collections::HashSet;

use serde_yaml::Value;

use super::Ctx;
use crate::diag::Diagnostic;
use crate::limits::{self, LimitError};
use crate::model::{ClusterFile, API_VERSION, KIND};
use crate::position::{join_key, segments, PathIndex, Seg};

/// Most schema errors reported in one run.
pub(super) const MAX_SCHEMA_ERRORS: usize = 50;

/// Most bytes the retries after schema errors decode in all (each retry re-serialises, decodes and
/// indexes the whole pruned copy): a file of 80 KB gets its [`MAX_SCHEMA_ERRORS`] retries, one of
/// 1 MiB four, so that validation stays linear in the file's size whatever the number of schema
/// errors (50 retries of a 1.4 MB file of 16,000 nodes took 20 s of CPU).
pub(super) const RECOVERY_BYTES: usize = 4 * 1024 * 1024;
const _: () = assert!(RECOVERY_BYTES >= MAX_SCHEMA_ERRORS * 80_000);

/// Returns the typed file when it decodes; all structural problems are pushed to `ctx`.
pub(crate) fn parse(ctx: &mut Ctx<'_>) -> Option<ClusterFile> {
    let text = ctx.loaded.source_text.as_str();
    // The budget: characters YAML refuses, then depth and values (the index stopped at the limit).
    if let Some((ch, at)) = limits::first_control_character(text) {
        let e = LimitError::ControlCharacter { ch, at };
        let mut d = Diagnostic::error("spec::control-character", e.to_string())
            .help("remove the character (a paste from a terminal or a binary file?); write it as an escape such as \\x1b inside a double-quoted string if it is really meant")
            .label("here");
        d.span = Some((at.offset, ch.len_utf8()).into());
        d.line = at.line;
        d.column = at.column;
        ctx.push(d);
        return None;
    }
    if let Some(e) = ctx.index.limit.clone() {
        let mut d = Diagnostic::error("spec::limit", e.to_string())
            .help("a cluster file needs a few levels of nesting and a few values per node; check that -f names the cluster file")
            .label("limit reached here");
        if let Some(at) = e.at() {
            d.span = Some((at.offset, usize::from(at.offset < text.len())).into());
            d.line = at.line;
            d.column = at.column;
        }
        ctx.push(d);
        return None;
    }
    if text.trim().is_empty()
        || text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        ctx.push(
            Diagnostic::error("spec::empty", "the cluster file is empty")
                .help(format!("start from a profile: `clusterctl validate --list-profiles`; a file begins with `apiVersion: {API_VERSION}` and `kind: {KIND}`")),
        );
        return None;
    }
    if let Some((msg, pos)) = ctx.index.parse_error.clone() {
        let mut d = Diagnostic::error("spec::yaml", format!("not valid YAML: {msg}"))
            .help("fix the YAML syntax at this position (indentation, an unclosed bracket or quote, a tab)")
            .label("YAML syntax error");
        d.span = Some(
            (
                pos.offset,
                pos.len.max(1).min(text.len().saturating_sub(pos.offset)),
            )
                .into(),
        );
        d.line = pos.line;
        d.column = pos.column;
        ctx.push(d);
        return None;
    }
    for dup in ctx.index.duplicates.clone() {
        let mut d = Diagnostic::error(
            "spec::duplicate-key",
            format!("duplicate key `{}`", last_key(&dup.path)),
        )
        .help("each key may appear once in a mapping; merge the two entries")
        .label("second occurrence");
        d.path = dup.path.clone();
        d.span = Some((dup.pos.offset, dup.pos.len).into());
        d.line = dup.pos.line;
        d.column = dup.pos.column;
        ctx.push(d);
    }
    if !ctx.index.duplicates.is_empty() {
        return None;
    }
    let (value, out_of_range) = match decode_value(ctx, text) {
        Ok(v) => v,
        Err(e) => {
            let msg = strip_location(&e.to_string());
            let help = if msg.contains("more than one document") {
                "keep one document (one `apiVersion: clusterctl.io/v1alpha1` Cluster) per file; remove the `---` separators"
            } else {
                "fix the YAML at this position"
            };
            push_at_location(
                ctx,
                Diagnostic::error("spec::yaml", format!("cannot read the file: {msg}")).help(help),
                &e,
            );
            return None;
        }
    };
    let Value::Mapping(top) = &value else {
        ctx.push(
            Diagnostic::error("spec::not-a-mapping", format!("the cluster file must be a mapping, not {}", kind_of(&value)))
                .help(format!("a cluster file starts with `apiVersion: {API_VERSION}`, `kind: {KIND}`, `metadata` and `spec`")),
        );
        return None;
    };
    let mut header_ok = true;
    match top.get("apiVersion") {
        Some(Value::String(s)) if s == API_VERSION => {}
        Some(v) => {
            header_ok = false;
            let kind_config = v.as_str().is_some_and(|s| s.starts_with("kind.x-k8s.io/"));
            let help = if kind_config {
                format!("this is a kind config: `clusterctl convert -f {} > cluster.yaml` writes the equivalent cluster file", ctx.loaded.source_name)
            } else {
                format!("set `apiVersion: {API_VERSION}` (this is not a kubeadm or kind config)")
            };
            ctx.push(
                Diagnostic::error(
                    "spec::api-version",
                    format!("apiVersion is {}, expected {API_VERSION}", show(v)),
                )
                .help(help)
                .at("apiVersion"),
            );
        }
        None => {
            header_ok = false;
            ctx.push(
                Diagnostic::error("spec::api-version", "apiVersion is missing")
                    .help(format!("add `apiVersion: {API_VERSION}` as the first line")),
            );
        }
    }
    match top.get("kind") {
        Some(Value::String(s)) if s == KIND => {}
        Some(v) => {
            header_ok = false;
            ctx.push(
                Diagnostic::error(
                    "spec::kind",
                    format!("kind is {}, expected {KIND}", show(v)),
                )
                .help(format!("set `kind: {KIND}`"))
                .at("kind"),
            );
        }
        None => {
            header_ok = false;
            ctx.push(
                Diagnostic::error("spec::kind", "kind is missing")
                    .help(format!("add `kind: {KIND}` after apiVersion")),
            );
        }
    }
    if !header_ok {
        return None;
    }
    if out_of_range.is_empty() {
        return decode_with_recovery(ctx, value);
    }
    // Each too-large integer is reported once, as out of range: the schema's own complaint about
    // the stand-in decoded in its place is dropped, and the file is refused.
    let before = ctx.diags.len();
    let _ = decode_with_recovery(ctx, value);
    let mut i = before;
    while i < ctx.diags.len() {
        if out_of_range
            .iter()
            .any(|p| ctx.diags[i].path == *p || is_within(&ctx.diags[i].path, p))
        {
            ctx.diags.remove(i);
        } else {
            i += 1;
        }
    }
    None
}

/// Most integers too large for 64 bits reported in one file (each one costs a decode of the text).
const MAX_OUT_OF_RANGE: usize = 20;

/// The generic YAML value of `text`. An integer too large for 64 bits (`port: 18446744073709551616`)
/// stops the YAML decoder ("invalid type: integer … as u128"): each is reported at its line as out of
/// range and decoded as a stand-in of the same length (so that positions stay), so that the rest of
/// the file is still checked; returns the value with the paths of those integers. Errors: any other
/// decode error (or more than [`MAX_OUT_OF_RANGE`] such integers: the last error).
fn decode_value(ctx: &mut Ctx<'_>, text: &str) -> Result<(Value, Vec<String>), serde_yaml::Error> {
    let mut work: Option<String> = None;
    let mut paths = Vec::new();
    loop {
        let current = work.as_deref().unwrap_or(text);
        let e = match serde_yaml::from_str::<Value>(current) {
            Ok(v) => return Ok((v, paths)),
            Err(e) => e,
        };
        let msg = e.to_string();
        let too_large = msg.contains(" as u128") || msg.contains(" as i128");
        let Some(loc) = e
            .location()
            .filter(|_| too_large && paths.len() < MAX_OUT_OF_RANGE)
        else {
            return Err(e);
        };
        let off = crate::diag::offset_of(current, loc.line(), loc.column());
        let len = current[off..]
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_')))
            .map_or(current.len() - off, |(i, _)| i);
        let digits = &current[off..off + len];
        if !digits
            .trim_start_matches(['+', '-'])
            .starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(e);
        }
        let path = ctx
            .index
            .path_at(loc.line(), loc.column(), false)
            .unwrap_or_default();
        let mut d = Diagnostic::error(
            "spec::out-of-range",
            format!("{digits} is out of range: too large for any number field (the largest is 18446744073709551615)"),
        )
        .help("give a value in the field's range (ports 1–65535, sizes and counts as documented in docs/spec.md); quote it if it is meant as text")
        .label("out of range");
        d.path = path.clone();
        d.span = Some((off, len).into());
        d.line = loc.line();
        d.column = loc.column();
        ctx.push(d);
        paths.push(path);
        // A plain string of the same length stands in: `x` then the rest of the token.
        let mut next = current.to_string();
        next.replace_range(off..off + 1, "x");
        work = Some(next);
    }
}

/// Decodes the typed model; after each schema error removes the offending entry and retries. When the
/// pruned copy decodes after schema errors, the semantic rules run on it too (see [`check_pruned`]), so
/// one run reports every mistake; the file is still refused (`None`).
fn decode_with_recovery(ctx: &mut Ctx<'_>, mut value: Value) -> Option<ClusterFile> {
    // Paths removed from the pruned copy, and list elements removed (list path, index) for mapping later
    // paths back to the original.
    let mut removed: HashSet<String> = HashSet::new();
    let mut removed_elems: Vec<(String, usize)> = Vec::new();
    // The same removals as paths of the original file.
    let mut gone = Gone::default();
    let mut reported = false;
    for pass in 0..MAX_SCHEMA_ERRORS {
        // The first pass decodes the original text, so positions are exact; later passes re-serialise the
        // pruned copy and map positions back through paths.
        let text = if pass == 0 {
            ctx.loaded.source_text.clone()
        } else {
            serde_yaml::to_string(&value).ok()?
        };
        if pass > 0 {
            if ctx.retried_bytes + text.len() > ctx.retry_budget {
                ctx.push(
                    Diagnostic::warning(
                        "spec::schema-more",
                        format!("the search for schema errors stopped after {pass} in a file this large; there may be more"),
                    )
                    .help("fix the schema errors shown and validate again"),
                );
                return None;
            }
            ctx.retried_bytes += text.len();
        }
        let err = match serde_yaml::from_str::<ClusterFile>(&text) {
            Ok(file) if reported => {
                check_pruned(ctx, file, &removed_elems, &gone);
                return None;
            }
            Ok(file) => return Some(file),
            Err(e) => e,
        };
        let msg = strip_location(&err.to_string());
        let prefer_key = msg.starts_with("unknown field") || msg.starts_with("duplicate field");
        let pruned_path = err.location().and_then(|loc| {
            if pass == 0 {
                ctx.index.path_at(loc.line(), loc.column(), prefer_key)
            } else {
                PathIndex::build(&text).path_at(loc.line(), loc.column(), prefer_key)
            }
        });
        if msg.starts_with("duplicate field")
            && ctx.diags.iter().any(|d| d.code == "spec::duplicate-key")
        {
            return None;
        }
        if let Some(field) = missing_field(&msg) {
            let parent = pruned_path.clone().unwrap_or_default();
            let candidate = join_key(&parent, field);
            if removed.contains(&candidate) {
                // Missing only because a bad value was removed (already reported): drop the whole entry
                // holding it instead, and go on.
                removed.insert(parent.clone());
                gone.insert(unshift(&parent, &removed_elems));
                if let Some((list, i)) = split_index(&parent) {
                    removed_elems.push((list, i));
                }
                if parent.is_empty() || !remove_path(&mut value, &parent) {
                    return None;
                }
                continue;
            }
        }
        let (message, help) = explain(&msg);
        let mut d = Diagnostic::error("spec::schema", message).help(help);
        let original = pruned_path
            .as_deref()
            .map(|p| unshift(p, &removed_elems))
            .unwrap_or_default();
        d.path = if prefer_key {
            format!("{original}#key")
        } else {
            original
        };
        ctx.push(d);
        reported = true;
        let p = pruned_path?;
        // Every other unknown key of the same mapping is reported and removed in this pass: a file
        // with thousands of unknown keys costs one more decode, not one per key.
        if msg.starts_with("unknown field") {
            if let Some(allowed) = allowed_fields(&msg) {
                let parent = crate::position::parent(&p).unwrap_or_default();
                for k in unknown_keys(&value, &parent, &allowed, &p) {
                    let kp = join_key(&parent, &k);
                    let tail = expected_tail(&msg).unwrap_or_default();
                    let (message, help) = explain(&format!("unknown field `{k}`, {tail}"));
                    let mut d = Diagnostic::error("spec::schema", message).help(help);
                    d.path = format!("{}#key", unshift(&kp, &removed_elems));
                    ctx.push(d);
                    if remove_path(&mut value, &kp) {
                        gone.insert(unshift(&kp, &removed_elems));
                        removed.insert(kp);
                    }
                }
            }
        }
        if p.is_empty() || !remove_path(&mut value, &p) {
            return None;
        }
        gone.insert(unshift(&p, &removed_elems));
        if let Some((list, i)) = split_index(&p) {
            removed_elems.push((list, i));
        }
        removed.insert(p);
    }
    None
}

/// Runs the semantic rules on `file`, the copy that decoded once the entries with schema errors were
/// removed, and keeps what they find about the rest of the file: each finding's path is mapped back to
/// the original (list elements removed before it re-inserted), and a finding is dropped when it is about
/// a removed entry (already reported) or, once a list element was removed, about that list or a section
/// holding it as a whole (a count such as "no control plane" would only be an echo of the removal).
fn check_pruned(
    ctx: &mut Ctx<'_>,
    file: ClusterFile,
    removed_elems: &[(String, usize)],
    gone: &Gone,
) {
    let before = ctx.diags.len();
    // Whatever it builds is discarded: the schema errors already refuse the file.
    let _ = super::resolve(ctx, file);
    let found = ctx.diags.split_off(before);
    for mut d in found {
        let (base, key) = match d.path.strip_suffix("#key") {
            Some(b) => (b.to_string(), "#key"),
            None => (d.path.clone(), ""),
        };
        let base = unshift(&base, removed_elems);
        let about_removed = gone.holds(&base);
        let about_a_shortened_list = removed_elems
            .iter()
            .any(|(list, _)| base.is_empty() || is_within(list, &base));
        if about_removed || about_a_shortened_list {
            continue;
        }
        d.path = format!("{base}{key}");
        ctx.push(d);
    }
}

/// The entries removed from the pruned copy, as paths of the original file: thousands when a file
/// has thousands of unknown keys, so whether a path lies within one is asked in time proportional to
/// the path's length, not to their number.
#[derive(Default)]
struct Gone(HashSet<String>);

impl Gone {
    fn insert(&mut self, path: String) {
        self.0.insert(path);
    }

    /// Whether `path` is one of the removed paths or lies under one (as [`is_within`] says).
    fn holds(&self, path: &str) -> bool {
        self.0.contains(path)
            || self.0.contains("")
            || path
                .char_indices()
                .filter(|(_, c)| *c == '.' || *c == '[')
                .any(|(i, _)| self.0.contains(&path[..i]))
    }
}

/// Whether `path` is `ancestor` or lies under it (`spec.nodes[1].address` is within `spec.nodes` and
/// `spec.nodes[1]`, not within `spec.node`).
fn is_within(path: &str, ancestor: &str) -> bool {
    ancestor.is_empty()
        || path == ancestor
        || path
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// The field names serde lists as allowed after an unknown field: `expected one of `a`, `b``,
/// `expected `a` or `b``, `expected `a``, or none (`there are no fields`). `None` when the message
/// has another form.
fn allowed_fields(msg: &str) -> Option<Vec<String>> {
    let rest = expected_tail(msg)?;
    if rest == "there are no fields" {
        return Some(Vec::new());
    }
    let list = rest.strip_prefix("expected ")?;
    Some(
        list.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect(),
    )
}

/// What follows the field name in an unknown-field message: `expected …` or `there are no fields`.
fn expected_tail(msg: &str) -> Option<&str> {
    if msg.ends_with(", there are no fields") {
        return Some("there are no fields");
    }
    msg.rfind(", expected ").map(|i| &msg[i + 2..])
}

/// The string keys of the mapping at `parent` in `v` that are not in `allowed`, except the one at
/// `reported` (already reported), in file order.
fn unknown_keys(v: &Value, parent: &str, allowed: &[String], reported: &str) -> Vec<String> {
    let Some(segs) = segments(parent) else {
        return Vec::new();
    };
    let mut cur = v;
    for s in &segs {
        let next = match (s, cur) {
            (Seg::Key(k), Value::Mapping(m)) => m.get(&**k),
            (Seg::Index(i), Value::Sequence(q)) => q.get(*i),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return Vec::new(),
        }
    }
    let Value::Mapping(m) = cur else {
        return Vec::new();
    };
    m.keys()
        .filter_map(Value::as_str)
        .filter(|k| !allowed.iter().any(|a| a == k) && join_key(parent, k) != reported)
        .map(str::to_string)
        .collect()
}

/// `a.b[3]` → (`a.b`, 3) when the path ends in a list index.
fn split_index(path: &str) -> Option<(String, usize)> {
    let stripped = path.strip_suffix(']')?;
    let open = stripped.rfind('[')?;
    let i = stripped[open + 1..].parse().ok()?;
    Some((stripped[..open].to_string(), i))
}

/// Maps a path of the pruned copy back to the original by re-inserting removed list elements.
fn unshift(path: &str, removed_elems: &[(String, usize)]) -> String {
    let mut p = path.to_string();
    for (list, i) in removed_elems.iter().rev() {
        let prefix = format!("{list}[");
        if let Some(rest) = p.strip_prefix(&prefix) {
            if let Some(close) = rest.find(']') {
                if let Ok(j) = rest[..close].parse::<usize>() {
                    if j >= *i {
                        p = format!("{prefix}{}{}", j + 1, &rest[close..]);
                    }
                }
            }
        }
    }
    p
}

fn push_at_location(ctx: &mut Ctx<'_>, mut d: Diagnostic, e: &serde_yaml::Error) {
    let text = ctx.loaded.source_text.as_str();
    let at = match e.location() {
        Some(loc) => Some((
            crate::diag::offset_of(text, loc.line(), loc.column()),
            loc.line(),
            loc.column(),
        )),
        // The YAML reader's errors give a byte offset in the message instead: "… at position N".
        None => byte_position(&e.to_string()).map(|off| {
            let off = off.min(text.len());
            let (line, column) = crate::diag::line_col(text, off);
            (off, line, column)
        }),
    };
    if let Some((off, line, column)) = at {
        d.span = Some((off, usize::from(off < text.len())).into());
        d.line = line;
        d.column = column;
    }
    ctx.push(d);
}

/// The byte offset in a YAML reader message ending in `at position N`.
fn byte_position(msg: &str) -> Option<usize> {
    let i = msg.rfind(" at position ")?;
    let digits: String = msg[i + 13..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Turns a serde message into (message, help).
fn explain(msg: &str) -> (String, String) {
    if let Some(rest) = msg.strip_prefix("unknown field ") {
        let (field, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let help = if expected.is_empty() {
            "remove this field; see docs/spec.md for the fields of this section".to_string()
        } else {
            format!(
                "remove or rename this field; allowed here: {}",
                expected.trim_start_matches("one of ")
            )
        };
        return (format!("unknown field {field}"), help);
    }
    if let Some(rest) = msg.strip_prefix("unknown variant ") {
        let (variant, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        return (
            format!("unknown value {variant}"),
            format!("use {}", expected.trim_start_matches("one of ")),
        );
    }
    if let Some(field) = missing_field(msg) {
        return (
            format!("missing field `{field}`"),
            format!("add `{field}`; see docs/spec.md"),
        );
    }
    if msg.starts_with("invalid type") {
        return (
            msg.to_string(),
            "give a value of the expected type (quote strings that look like numbers)".to_string(),
        );
    }
    if msg.starts_with("invalid value") {
        return (
            msg.to_string(),
            "give a value in the allowed range".to_string(),
        );
    }
    (
        msg.to_string(),
        "fix this value; see docs/spec.md".to_string(),
    )
}

fn missing_field(msg: &str) -> Option<&str> {
    let rest = msg.strip_prefix("missing field `")?;
    rest.split_once('`').map(|(f, _)| f)
}

/// serde_yaml messages end with ` at line N column M` and may start with `path: `; keep the message.
fn strip_location(msg: &str) -> String {
    let m = match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => msg,
    };
    // Drop a leading `spec.nodes[0]: ` path prefix (we report our own path).
    const STARTS: &[&str] = &[
        "unknown field",
        "unknown variant",
        "missing field",
        "invalid type",
        "invalid value",
        "invalid length",
        "duplicate field",
        "duplicate entry",
    ];
    for start in STARTS {
        if let Some(i) = m.find(start) {
            let prefix = &m[..i];
            if prefix.is_empty()
                || (prefix.ends_with(": ") && !prefix.trim_end_matches(": ").contains(' '))
            {
                return m[i..].to_string();
            }
        }
    }
    m.to_string()
}

fn last_key(path: &str) -> String {
    match path.rsplit_once('.') {
        Some((_, k)) => k.to_string(),
        None => path.to_string(),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => kind_of(other).to_string(),
    }
}

/// Removes the entry at `path` from `v`. Returns false when it is not there.
fn remove_path(v: &mut Value, path: &str) -> bool {
    let Some(segs) = segments(path) else {
        return false;
    };
    let Some((last, init)) = segs.split_last() else {
        return false;
    };
    let mut cur = v;
    for s in init {
        let next = match (s, cur) {
            (Seg::Key(k), Value::Mapping(m)) => m.get_mut(&**k),
            (Seg::Index(i), Value::Sequence(q)) => q.get_mut(*i),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return false,
        }
    }
    match (last, cur) {
        (Seg::Key(k), Value::Mapping(m)) => m.remove(&**k).is_some(),
        (Seg::Index(i), Value::Sequence(q)) if *i < q.len() => {
            // Keep indices stable for later path mapping: replace by an empty mapping is not type-safe, so
            // remove the element; later errors in this list may then be attributed one index early.
            q.remove(*i);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_messages_lose_path_and_location() {
        assert_eq!(
            strip_location("spec.nodes[0]: unknown field `x`, expected `name` at line 3 column 5"),
            "unknown field `x`, expected `name`"
        );
        assert_eq!(
            strip_location("spec: missing field `nodes`"),
            "missing field `nodes`"
        );
        assert_eq!(
            strip_location("invalid type: string \"a\", expected u32"),
            "invalid type: string \"a\", expected u32"
        );
        assert_eq!(missing_field("missing field `role`"), Some("role"));
        let (m, h) = explain("unknown variant `minion`, expected `control-plane` or `worker`");
        assert_eq!(m, "unknown value `minion`");
        assert!(h.contains("`control-plane` or `worker`"));
    }

    /// Issue 17's slow class: valid nodes and nodes with `role: 5` (the fuzz target's `Nodes` and
    /// `BadRoles`), where each of 50 retries decoded the whole file again (4,000 valid nodes and
    /// 2,000 bad ones took 28 s): the retries stop at their budget (here 5 copies of the file, to
    /// keep the test short), say so, and what was found is still reported.
    #[test]
    fn retries_after_schema_errors_decode_a_bounded_amount() {
        let mut text = String::from("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: lab\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  nodes:\n    - {name: cp, role: control-plane, address: 172.31.255.1}\n");
        for i in 0..200 {
            let (a, b) = (i / 250, i % 250 + 1);
            text.push_str(&format!(
                "    - name: w{i}\n      role: worker\n      address: 172.16.{a}.{b}\n"
            ));
            if i % 5 == 0 {
                text.push_str(&format!(
                    "    - name: bad{i}\n      role: 5\n      address: 172.17.{a}.{b}\n"
                ));
            }
        }
        let loaded = crate::load::Loaded::from_text("cluster.yaml", text.as_str());
        let index = PathIndex::build(&text);
        let mut ctx = Ctx {
            index: &index,
            loaded: &loaded,
            diags: Vec::new(),
            retried_bytes: 0,
            retry_budget: 5 * text.len(),
        };
        assert!(parse(&mut ctx).is_none());
        // Each retry decodes one pruned copy; a bad node takes two (its role, then the node).
        assert!(
            ctx.retried_bytes <= ctx.retry_budget,
            "{}",
            ctx.retried_bytes
        );
        assert!(ctx.retried_bytes > 3 * text.len(), "{}", ctx.retried_bytes);
        let schema = ctx
            .diags
            .iter()
            .filter(|d| d.code == "spec::schema")
            .count();
        assert!((2..=5).contains(&schema), "{schema}: {:?}", ctx.diags);
        let more = ctx.diags.iter().find(|d| d.code == "spec::schema-more");
        assert!(more.is_some_and(|d| d.help.is_some()), "{:?}", ctx.diags);
    }

    #[test]
    fn removed_paths_hold_what_lies_within_them() {
        let mut gone = Gone::default();
        for p in ["spec.nodes[3]", "spec.unknown1", "spec.x[\"a.b\"]"] {
            gone.insert(p.to_string());
        }
        for path in [
            "spec.nodes[3]",
            "spec.nodes[3].role",
            "spec.nodes[30]",
            "spec.nodes[3]x",
            "spec.unknown1",
            "spec.unknown10",
            "spec.unknown1.a",
            "spec.x[\"a.b\"].c",
            "spec.x[\"a\"]",
            "spec",
            "",
        ] {
            let want = gone.0.iter().any(|g| is_within(path, g));
            assert_eq!(gone.holds(path), want, "{path}");
        }
        gone.insert(String::new());
        assert!(gone.holds("anything.at.all"));
    }

    #[test]
    fn paths_are_removed_and_shifted_back() {
        let mut v: Value =
            serde_yaml::from_str("a:\n  b: [1, 2, 3]\n  \"x.y\": {z: 1}\n").expect("yaml");
        assert!(remove_path(&mut v, "a.b[1]"));
        assert!(remove_path(&mut v, "a[\"x.y\"].z"));
        assert!(!remove_path(&mut v, "a.nope"));
        assert_eq!(
            serde_yaml::to_string(&v).expect("yaml"),
            "a:\n  b:\n  - 1\n  - 3\n  x.y: {}\n"
        );
        assert_eq!(
            split_index("spec.nodes[2]"),
            Some(("spec.nodes".to_string(), 2))
        );
        let removed = vec![("spec.nodes".to_string(), 1)];
        assert_eq!(
            unshift("spec.nodes[1].role", &removed),
            "spec.nodes[2].role"
        );
        assert_eq!(
            unshift("spec.nodes[0].role", &removed),
            "spec.nodes[0].role"
        );
    }
}
