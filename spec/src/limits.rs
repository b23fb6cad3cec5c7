//! The budget every YAML text the tool reads must fit — the cluster file and each YAML file it
//! references (the audit policy) — checked before and while parsing so that no input, however
//! hostile, can make parsing or validation use unbounded time, memory or stack:
//!
//! - size in bytes (checked on the file's metadata, again while reading, and on the text);
//! - characters: YAML allows no control characters but tab, line feed and carriage return (checked
//!   by one scan before any parser runs, so the error points at the character's line and column);
//! - nesting depth and the number of YAML values (scalars, aliases, mappings, sequences), counted on
//!   the event stream of an iterative parser that stops at the first value over the budget, before
//!   any recursive decoder sees the text.
//!
//! Every refusal names the limit it hit ([`LimitError`]).

pub use crate::locator::At;
use crate::locator::Locator;
use yaml_rust2::parser::{Event, Parser};

/// A budget for one kind of YAML text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// What the text is, for messages: `cluster file`, `referenced file`.
    pub what: &'static str,
    /// Largest size in bytes.
    pub max_bytes: u64,
    /// Deepest nesting of mappings and sequences (the top-level value is depth 1).
    pub max_depth: usize,
    /// Most YAML values (scalars, aliases, mappings and sequences, keys included).
    pub max_values: usize,
}

/// The cluster file's budget: 8 MiB (a 16,000-node file is about 1 MiB), 32 levels (the deepest
/// field is 6 levels down), 400,000 values (16,000 nodes with labels use about 200,000).
pub const CLUSTER_FILE: Budget = Budget {
    what: "cluster file",
    max_bytes: 8 * 1024 * 1024,
    max_depth: 32,
    max_values: 400_000,
};

/// The budget of a file the cluster file references (CA bundle, audit policy): 1 MiB, and for YAML
/// 32 levels and 100,000 values.
pub const REFERENCED_FILE: Budget = Budget {
    what: "referenced file",
    max_bytes: 1024 * 1024,
    max_depth: 32,
    max_values: 100_000,
};

/// A budget exceeded. The message names the limit and, where there is one, the position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The text is larger than the budget allows.
    #[error("the {what} is {size} bytes, more than the limit of {limit} bytes")]
    Bytes {
        /// What the text is.
        what: &'static str,
        /// Its size (at least this many bytes when read from a file that was still growing).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A character YAML does not allow.
    #[error(
        "control character {} at line {}, column {} is not allowed in YAML (only tab, line feed and carriage return are)",
        escape_char(*ch), at.line, at.column
    )]
    ControlCharacter {
        /// The character.
        ch: char,
        /// Where it is.
        at: At,
    },
    /// Nesting deeper than the budget allows.
    #[error("the {what} nests deeper than the limit of {limit} levels at line {}, column {}", at.line, at.column)]
    Depth {
        /// What the text is.
        what: &'static str,
        /// The limit.
        limit: usize,
        /// The first value too deep.
        at: At,
    },
    /// More values than the budget allows.
    #[error("the {what} holds more than the limit of {limit} YAML values (line {}, column {})", at.line, at.column)]
    Values {
        /// What the text is.
        what: &'static str,
        /// The limit.
        limit: usize,
        /// The first value over the limit.
        at: At,
    },
}

impl LimitError {
    /// Where the limit was hit, when it has a position.
    pub fn at(&self) -> Option<At> {
        match self {
            LimitError::Bytes { .. } => None,
            LimitError::ControlCharacter { at, .. }
            | LimitError::Depth { at, .. }
            | LimitError::Values { at, .. } => Some(*at),
        }
    }
}

/// True for a character that must never reach a terminal raw: C0 and C1 controls but tab and line
/// feed, DEL, and the bidirectional overrides and isolates (which reorder what is shown).
pub fn is_unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

/// A character written so it can be read but not acted on by a terminal: `U+001B`.
pub fn escape_char(c: char) -> String {
    format!("U+{:04X}", c as u32)
}

/// `s` with every [`is_unsafe_char`] written as `\u{1b}`, so that no message can move the cursor,
/// change the title or hide text.
pub fn escape_unsafe(s: &str) -> String {
    if !s.chars().any(is_unsafe_char) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// True for a character YAML 1.2 accepts in a stream (`c-printable`, plus the byte-order mark).
fn yaml_printable(c: char) -> bool {
    matches!(c,
        '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}'
        | '\u{10000}'..='\u{10ffff}')
}

/// The first character YAML does not allow, with its position. One pass, no allocation.
pub fn first_control_character(text: &str) -> Option<(char, At)> {
    let mut line = 1;
    let mut column = 1;
    for (offset, c) in text.char_indices() {
        if !yaml_printable(c) {
            return Some((
                c,
                At {
                    offset,
                    line,
                    column,
                },
            ));
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    None
}

/// A YAML syntax error found while checking a text: the parser's message and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// The parser's message (a fixed text, except `unexpected character` which names one).
    pub message: String,
    /// Where.
    pub at: At,
}

/// The parser's own nesting limit (its scanner refuses deeper flow collections before it emits any
/// event for them): a depth limit, reported as ours.
pub(crate) fn parser_depth_limit(info: &str) -> bool {
    info == "recursion limit exceeded"
}

/// Checks `text` against `budget`: its size, its characters, then (on the parser's events, which are
/// produced without recursion) its depth and number of values. Returns the YAML syntax error that
/// stopped the scan, if any (texts with one must not reach a decoder: it may be slow on them).
/// Errors: the first limit hit.
pub fn check_yaml(text: &str, budget: &Budget) -> Result<Option<SyntaxError>, LimitError> {
    if text.len() as u64 > budget.max_bytes {
        return Err(LimitError::Bytes {
            what: budget.what,
            size: text.len() as u64,
            limit: budget.max_bytes,
        });
    }
    if let Some((ch, at)) = first_control_character(text) {
        return Err(LimitError::ControlCharacter { ch, at });
    }
    let mut parser = Parser::new_from_str(text);
    let mut depth = 0usize;
    let mut values = 0usize;
    let mut locator = Locator::new(text);
    loop {
        let (ev, mark) = match parser.next_token() {
            Ok(x) => x,
            Err(e) => {
                let at = locator.at(e.marker().line(), e.marker().col() + 1);
                if parser_depth_limit(e.info()) {
                    return Err(LimitError::Depth {
                        what: budget.what,
                        limit: budget.max_depth,
                        at,
                    });
                }
                return Ok(Some(SyntaxError {
                    message: e.info().to_string(),
                    at,
                }));
            }
        };
        match ev {
            Event::StreamEnd => return Ok(None),
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                values += 1;
                depth += 1;
                if depth > budget.max_depth {
                    return Err(LimitError::Depth {
                        what: budget.what,
                        limit: budget.max_depth,
                        at: locator.at(mark.line(), mark.col() + 1),
                    });
                }
            }
            Event::Scalar(..) | Event::Alias(..) => values += 1,
            Event::MappingEnd | Event::SequenceEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
        if values > budget.max_values {
            return Err(LimitError::Values {
                what: budget.what,
                limit: budget.max_values,
                at: locator.at(mark.line(), mark.col() + 1),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_wide_and_control_characters_are_refused_with_the_limit_named() {
        let small = Budget {
            what: "test file",
            max_bytes: 1000,
            max_depth: 3,
            max_values: 10,
        };
        assert_eq!(check_yaml("a: {b: [1]}", &small), Ok(None));
        assert!(check_yaml("a: [1", &small).is_ok_and(|e| e.is_some()));
        let e = check_yaml("a: {b: [[1]]}", &small).expect_err("too deep");
        assert!(e.to_string().contains("limit of 3 levels"), "{e}");
        assert_eq!(e.at().map(|a| (a.line, a.column)), Some((1, 9)));
        let e = check_yaml("[1,2,3,4,5,6,7,8,9,10,11]", &small).expect_err("too many");
        assert!(e.to_string().contains("limit of 10 YAML values"), "{e}");
        let e = check_yaml(&"x".repeat(1001), &small).expect_err("too big");
        assert!(e.to_string().contains("limit of 1000 bytes"), "{e}");
        let e = check_yaml("a: 1\nb: \u{1b}[2J\n", &small).expect_err("control");
        assert_eq!(
            e.to_string(),
            "control character U+001B at line 2, column 4 is not allowed in YAML (only tab, line feed and carriage return are)"
        );
        // A deep sequence of 100,000 levels is refused at level 33 without recursion.
        for deep in ["- ".repeat(100_000), "[".repeat(100_000)] {
            assert!(
                matches!(
                    check_yaml(&deep, &CLUSTER_FILE),
                    Err(LimitError::Depth { limit: 32, .. })
                ),
                "{:?}",
                check_yaml(&deep, &CLUSTER_FILE)
            );
        }
    }

    #[test]
    fn unsafe_characters_are_escaped() {
        assert_eq!(escape_unsafe("a\u{1b}]0;x\u{7}b"), "a\\u{1b}]0;x\\u{7}b");
        assert_eq!(escape_unsafe("tab\tok\nline"), "tab\tok\nline");
        assert_eq!(escape_unsafe("\u{202e}evil"), "\\u{202e}evil");
        assert_eq!(escape_unsafe("\r"), "\\u{d}");
        assert_eq!(
            first_control_character("ok\n\u{fffe}").map(|(c, a)| (c, a.line)),
            Some(('\u{fffe}', 2))
        );
        assert_eq!(first_control_character("ü\r\n\u{feff}"), None);
    }
}
