//! Text from outside (names and messages the Kubernetes API returns) made safe for a terminal before
//! text output prints it: control characters (ESC sequences, BEL, CR, newlines inside a value) and
//! Unicode bidirectional formatting characters (which reorder what the user sees) are written as
//! escapes (`\u{1b}`), as Rust's `escape_debug` spells them. `-o json|yaml` documents carry the values
//! as they are (their own quoting escapes them).

use std::borrow::Cow;

/// Whether `c` is written as an escape: a control character or a bidirectional formatting character
/// (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069).
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `s` with every control or bidirectional formatting character written as `\u{…}`; `s` itself
/// (borrowed) when it has none.
pub(crate) fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_are_escaped_the_rest_is_kept() {
        assert!(matches!(
            printable("lab-worker"),
            Cow::Borrowed("lab-worker")
        ));
        assert_eq!(printable("naïve ノード"), "naïve ノード");
        assert_eq!(
            printable("c1\u{202e}\n\x1b[31mRED"),
            "c1\\u{202e}\\u{a}\\u{1b}[31mRED"
        );
        assert_eq!(
            printable("\x1b]0;pwned\x07x\r\t"),
            "\\u{1b}]0;pwned\\u{7}x\\u{d}\\u{9}"
        );
        assert_eq!(
            printable("\u{2066}a\u{2069}\u{200f}"),
            "\\u{2066}a\\u{2069}\\u{200f}"
        );
    }
}
