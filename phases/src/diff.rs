//! `up --dry-run --diff`: the unified diff of a node's current file against the content `up` would
//! write (made with the `similar` crate), with secrets masked on both sides — the run's redaction list
//! (join tokens, certificate keys, encryption keys, registry passwords), the value of every line whose
//! key names a secret (`token`, `secret`, `password`, `certificateKey`, `auth`, `…-key-data`, so an old
//! token still on the node is masked too), and the body of every PEM private key.

use similar::TextDiff;

/// The largest file (either side, in bytes) diffed line by line; larger ones are described by size.
const MAX_DIFF_BYTES: usize = 256 * 1024;

/// What a masked value is shown as.
const MASK: &str = "<masked>";

/// The lines of context around each change.
const CONTEXT: usize = 3;

/// The unified diff of `current` (the node's file at `path`, `None` when absent) against `new`, every
/// line passed through `redact` and [`mask`]. Binary or very large content is described, not shown;
/// equal content says that only the mode changes.
pub(crate) fn unified(
    path: &str,
    current: Option<&[u8]>,
    new: &[u8],
    redact: &dyn Fn(&str) -> String,
) -> String {
    let old_len = current.map_or(0, <[u8]>::len);
    if current == Some(new) {
        return "content unchanged (only the mode differs)\n".into();
    }
    if old_len > MAX_DIFF_BYTES || new.len() > MAX_DIFF_BYTES {
        return format!("too large to diff: {old_len} → {} bytes\n", new.len());
    }
    let (Ok(old), Ok(new_text)) = (
        std::str::from_utf8(current.unwrap_or_default()),
        std::str::from_utf8(new),
    ) else {
        return format!("binary content differs: {old_len} → {} bytes\n", new.len());
    };
    let old = mask(&redact(old));
    let new_text = mask(&redact(new_text));
    let from = if current.is_some() {
        format!("{path} (node)")
    } else {
        "/dev/null".to_string()
    };
    let to = format!("{path} (rendered)");
    let diff = TextDiff::from_lines(&old, &new_text);
    let text = diff
        .unified_diff()
        .context_radius(CONTEXT)
        .header(&from, &to)
        .to_string();
    if text.is_empty() {
        // Only masked values differ (e.g. a new join token): said, not shown.
        "only masked values differ\n".into()
    } else {
        text
    }
}

/// `text` with the values of secret-named keys and the bodies of PEM private keys replaced by
/// [`MASK`].
pub(crate) fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_key = false;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        let end = &line[bare.len()..];
        if bare.contains("-----BEGIN") && bare.contains("PRIVATE KEY-----") {
            in_key = true;
            out.push_str(line);
        } else if bare.contains("-----END") && bare.contains("PRIVATE KEY-----") {
            in_key = false;
            out.push_str(line);
        } else if in_key {
            out.push_str(MASK);
            out.push_str(end);
        } else {
            out.push_str(&mask_line(bare));
            out.push_str(end);
        }
    }
    out
}

/// One line with the value of every secret-named key masked (`key: value`, `key = value`,
/// `--key=value`, and each `key: value` of a flow mapping `{a: 1, secret: x}`); other text unchanged.
fn mask_line(line: &str) -> String {
    let flow = line.contains('{');
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find([':', '=']) {
        let (head, tail) = rest.split_at(at);
        let (delim, after) = tail.split_at(1);
        let key = head.trim_end();
        let key_start = key
            .rfind(|ch: char| !(ch.is_ascii_alphanumeric() || "-_.\"'".contains(ch)))
            .map_or(0, |i| i + 1);
        let len = if flow {
            after.find([',', '}']).unwrap_or(after.len())
        } else {
            after.len()
        };
        let value = after[..len].trim();
        out.push_str(head);
        out.push_str(delim);
        if !value.is_empty() && value != "|" && value != ">" && secret_key(&key[key_start..]) {
            out.push(' ');
            out.push_str(MASK);
            rest = &after[len..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Whether `key` (as written before `:` or `=`: indentation, `- `, quotes and `--` allowed) names a
/// secret value.
fn secret_key(key: &str) -> bool {
    let k = key
        .trim()
        .trim_start_matches("- ")
        .trim_start_matches('-')
        .trim_matches(['"', '\''])
        .to_ascii_lowercase();
    let k = k.rsplit(['.', ' ']).next().unwrap_or(&k);
    [
        "token",
        "secret",
        "password",
        "certificatekey",
        "auth",
        "key-data",
    ]
    .iter()
    .any(|s| k.ends_with(s))
        && !k.ends_with("-file")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(t: &str) -> String {
        t.to_string()
    }

    #[test]
    fn a_changed_line_is_a_unified_hunk_with_the_path() {
        let d = unified("/etc/a.conf", Some(b"a\nb\nc\n"), b"a\nB\nc\n", &none);
        assert_eq!(
            d,
            "--- /etc/a.conf (node)\n+++ /etc/a.conf (rendered)\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
    }

    #[test]
    fn an_absent_file_is_diffed_against_dev_null() {
        let d = unified("/etc/n", None, b"x\n", &none);
        assert!(
            d.starts_with("--- /dev/null\n+++ /etc/n (rendered)\n"),
            "{d}"
        );
        assert!(d.contains("+x\n"), "{d}");
    }

    #[test]
    fn secrets_are_masked_on_both_sides() {
        let old = b"discovery:\n  bootstrapToken:\n    token: abcdef.0123456789abcdef\ncertificateKey: \"deadbeef\"\n";
        let new = b"discovery:\n  bootstrapToken:\n    token: ghijkl.0123456789abcdef\ncertificateKey: \"feedface\"\nx: 1\n";
        let redact = |t: &str| t.replace("listed-secret", "<redacted>");
        let d = unified("/j.yaml", Some(old), new, &redact);
        for s in ["abcdef.", "ghijkl.", "deadbeef", "feedface"] {
            assert!(!d.contains(s), "{s} in {d}");
        }
        assert!(d.contains("+x: 1"), "{d}");
        assert!(!d.contains("-    token"), "equal once masked: {d}");
        let d = unified("/e", None, b"a: listed-secret\n", &redact);
        assert!(
            d.contains("+a: <redacted>") && !d.contains("listed-secret"),
            "{d}"
        );
    }

    #[test]
    fn private_keys_args_and_file_paths() {
        let t = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQ\nabc\n-----END EC PRIVATE KEY-----\n";
        assert_eq!(
            mask(t),
            "-----BEGIN EC PRIVATE KEY-----\n<masked>\n<masked>\n-----END EC PRIVATE KEY-----\n"
        );
        assert_eq!(mask("  - --token=abc\n"), "  - --token= <masked>\n");
        assert_eq!(
            mask("  client-key-data: QUJD\n"),
            "  client-key-data: <masked>\n"
        );
        assert_eq!(mask("    password = \"pw\"\n"), "    password = <masked>\n");
        assert_eq!(mask("tokenFile: /etc/t\n"), "tokenFile: /etc/t\n");
        assert_eq!(mask("token-file=/etc/t\n"), "token-file=/etc/t\n");
        assert_eq!(mask("secret:\n  x: 1\n"), "secret:\n  x: 1\n");
        assert_eq!(
            mask("  - {name: key1, secret: c2VjcmV0}\n"),
            "  - {name: key1, secret: <masked>}\n"
        );
        assert_eq!(mask("url: https://x:6443\n"), "url: https://x:6443\n");
        assert_eq!(
            mask("authorization-mode: Node\n"),
            "authorization-mode: Node\n"
        );
    }

    #[test]
    fn binary_large_and_mode_only() {
        assert!(unified("/b", Some(&[0xff, 0]), b"x", &none).starts_with("binary content differs"));
        let big = vec![b'a'; MAX_DIFF_BYTES + 1];
        assert!(unified("/b", None, &big, &none).starts_with("too large to diff"));
        assert!(unified("/b", Some(b"x"), b"x", &none).starts_with("content unchanged"));
    }
}
