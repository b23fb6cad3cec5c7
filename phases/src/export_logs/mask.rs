//! Secrets masked out of what `export logs` collects, before anything is written: the value after a
//! secret-bearing key (`token`, `certificateKey`, `secret`, `password`, `client-key-data`, …, in YAML,
//! JSON or flag form: `key: v`, `"key": "v"`, `--key=v`, `--key v`) and anything shaped like a kubeadm
//! bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`) wherever it appears, each replaced by [`MASK`].

/// What a masked value becomes.
pub const MASK: &str = "<masked>";

/// Keys whose value is a secret (compared case-insensitively, without `-`/`_`).
const SECRET_KEYS: [&str; 9] = [
    "token",
    "certificatekey",
    "secret",
    "password",
    "clientkeydata",
    "tokendata",
    "bootstraptoken",
    "privatekey",
    "encryptionkey",
];

/// `text` with every secret masked (see the module doc).
pub fn mask(text: &str) -> String {
    let lines: Vec<String> = text.lines().map(mask_line).collect();
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    mask_bootstrap_tokens(&out)
}

/// One line: the value after each secret key masked.
fn mask_line(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < bytes.len() {
        // A key: a run of letters, digits, `-`, `_`, `.`.
        if is_key_char(bytes[i]) && (i == 0 || !is_key_char(bytes[i - 1])) {
            let start = i;
            while i < bytes.len() && is_key_char(bytes[i]) {
                i += 1;
            }
            let key = &line[start..i];
            out.push_str(key);
            if secret_key(key) {
                if let Some((sep_end, value_end)) = value_after(bytes, i) {
                    out.push_str(&line[i..sep_end]);
                    out.push_str(MASK);
                    i = value_end;
                }
            }
            continue;
        }
        let c = line[i..].chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

fn is_key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'
}

/// Whether `key` (its last dotted or dashed word group, e.g. `--discovery-token`, `bootstrapToken`,
/// `"client-key-data"`) names a secret. `token-ttl`-like keys are not secrets; a token hash is no
/// secret either (`caCertHashes`, `discovery-token-ca-cert-hash`).
fn secret_key(key: &str) -> bool {
    let norm: String = key
        .trim_start_matches('-')
        .rsplit('.')
        .next()
        .unwrap_or(key)
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .collect::<String>()
        .to_ascii_lowercase();
    SECRET_KEYS.iter().any(|k| norm.ends_with(k))
}

/// After a key ending at `i`: `Some((where the value starts, where it ends))` when a separator (`:`,
/// `=`, or a space for a `--flag value`) and a non-empty value follow.
fn value_after(b: &[u8], mut i: usize) -> Option<(usize, usize)> {
    // A JSON key's closing quote.
    if i < b.len() && b[i] == b'"' {
        i += 1;
    }
    let sep = i;
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    if i < b.len() && (b[i] == b':' || b[i] == b'=') {
        i += 1;
    } else if i == sep {
        return None;
    }
    while i < b.len() && (b[i] == b' ' || b[i] == b'"' || b[i] == b'\'') {
        i += 1;
    }
    let start = i;
    while i < b.len() && !matches!(b[i], b' ' | b'"' | b'\'' | b',' | b'}' | b'\t') {
        i += 1;
    }
    (i > start && !b[start..i].starts_with(b"<")).then_some((start, i))
}

/// Masks every `[a-z0-9]{6}.[a-z0-9]{16}` not inside a longer word (a kubeadm bootstrap token).
fn mask_bootstrap_tokens(text: &str) -> String {
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i + 23 <= b.len() {
        let fits = (i == 0 || !word(b[i - 1]))
            && b[i..i + 6].iter().all(|c| word(*c))
            && b[i + 6] == b'.'
            && b[i + 7..i + 23].iter().all(|c| word(*c))
            && (i + 23 == b.len() || !word(b[i + 23]));
        if fits {
            out.push_str(&text[copied..i]);
            out.push_str(MASK);
            i += 23;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_are_masked_in_every_form() {
        let token = "abcdef.0123456789abcdef";
        let key = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let text = format!(
            "bootstrapToken:\n  token: {token}\ncontrolPlane:\n  certificateKey: {key}\n\
             \"token\": \"{token}\"\n  - secret: c2VjcmV0LWtleS1ieXRlcw==\n\
             kubeadm join c1:6443 --token {token} --certificate-key {key} --discovery-token-ca-cert-hash sha256:{key}\n\
             client-key-data: LS0tLS1CRUdJTg==\nlog line mentioning {token} inside\n"
        );
        let m = mask(&text);
        assert!(!m.contains(token), "{m}");
        assert!(!m.contains("c2VjcmV0"), "{m}");
        assert!(!m.contains("LS0tLS1CRUdJTg"), "{m}");
        assert!(!m.contains(&format!("--certificate-key {key}")), "{m}");
        assert!(!m.contains(&format!("certificateKey: {key}")), "{m}");
        // A CA certificate hash is no secret and stays readable.
        assert!(
            m.contains(&format!("--discovery-token-ca-cert-hash sha256:{key}")),
            "{m}"
        );
        assert!(m.ends_with('\n'));
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let text =
            "ttl: 24h0m0s\nimage: registry.k8s.io/pause:3.10.1\ntokenTTL: 1h\nname: kube-proxy\n";
        // `tokenTTL` ends in ttl, not token.
        assert_eq!(mask(text), text);
        assert_eq!(mask("token: <masked>"), "token: <masked>");
    }
}
