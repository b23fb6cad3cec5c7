//! POSIX shell text shared by the transports: quoting, the command line that runs a [`Cmd`] without
//! putting its script or environment on any process's command line, and the scripts behind atomic
//! uploads and downloads.
//!
//! A command is run as `[sudo -n] [timeout -k 2 SECS] sh -c 'eval "$(head -c N)"'`: the first `N` bytes of
//! standard input are a *preamble* (`export NAME='value'` lines, then the script) that the shell reads
//! and evaluates; every byte after them is the command's own standard input. So secrets given as
//! environment values or inside the script never show in `ps` on the node. GNU `head -c N` reads at most
//! `N` bytes (coreutils, as on Debian, Ubuntu and EL hosts).

use crate::transport::{Cmd, FileSpec, WrapError};

/// Exit status the download script uses for "the file does not exist".
pub const DOWNLOAD_MISSING_STATUS: i32 = 44;

/// Exit status of coreutils `timeout` when the time limit was reached.
pub const TIMEOUT_STATUS: i32 = 124;

/// `s` quoted for a POSIX shell as one word: `'…'`, with `'` written as `'\''`. The workspace's one
/// shell-quoting function (see also [`quote_word`], which leaves safe words bare).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// `s` as one shell word, bare when it holds only characters no shell treats specially
/// (`[A-Za-z0-9-_./:=@,+%]`, not empty), else [`quote`]d: for scripts people read (plans, dry runs).
pub fn quote_word(s: &str) -> String {
    let safe = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@,+%".contains(&b));
    if safe {
        s.to_string()
    } else {
        quote(s)
    }
}

/// True when `name` is a valid shell variable name (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// How to start a [`Cmd`] through a remote shell: the command line (no secrets in it) and the
/// preamble bytes to write to its standard input before the command's own input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapped {
    /// The command line given to the login shell (SSH) or to `sh -c` (local).
    pub command_line: String,
    /// Environment exports and script, written first on standard input.
    pub preamble: Vec<u8>,
}

/// Wraps `cmd` for a user that is root (`is_root`) or not: `sudo -n` is added only when `cmd.sudo`
/// and the user is not root; `timeout -k 2 SECS` (whole seconds, rounded up) when `cmd.timeout` is set.
/// Errors: [`WrapError::EnvName`] when an environment variable name is not a valid shell name.
pub fn wrap(cmd: &Cmd, is_root: bool) -> Result<Wrapped, WrapError> {
    let mut preamble = String::new();
    for (name, value) in &cmd.env {
        if !valid_env_name(name) {
            return Err(WrapError::EnvName(name.clone()));
        }
        preamble.push_str("export ");
        preamble.push_str(name);
        preamble.push('=');
        preamble.push_str(&quote(value));
        preamble.push('\n');
    }
    preamble.push_str(&cmd.script);
    preamble.push('\n');
    let mut line = String::new();
    if cmd.sudo && !is_root {
        line.push_str("sudo -n ");
    }
    if let Some(t) = cmd.timeout {
        let secs = t.as_secs() + u64::from(t.subsec_nanos() > 0);
        line.push_str(&format!("timeout -k 2 {} ", secs.max(1)));
    }
    line.push_str(&format!("sh -c 'eval \"$(head -c {})\"'", preamble.len()));
    Ok(Wrapped {
        command_line: line,
        preamble: preamble.into_bytes(),
    })
}

/// The script that writes its standard input (exactly `size` bytes) to `file.path` atomically: a temp
/// file (mode 0600 while written) in the same directory, size checked, `chmod`, optional `chown`, then
/// renamed over the destination. Parent directories are created.
pub fn upload_script(file: &FileSpec, size: u64) -> String {
    let path = file.path.to_string_lossy();
    let mut s = String::new();
    s.push_str("set -e\n");
    s.push_str(&format!("p={}\n", quote(&path)));
    s.push_str("d=$(dirname -- \"$p\")\nmkdir -p -- \"$d\"\n");
    s.push_str("t=$(mktemp \"$d/.clusterctl-upload.XXXXXX\")\n");
    s.push_str("trap 'rm -f -- \"$t\"' EXIT\n");
    s.push_str("cat > \"$t\"\n");
    s.push_str("n=$(wc -c < \"$t\")\n");
    s.push_str(&format!(
        "if [ \"$n\" -ne {size} ]; then echo \"short upload: $n of {size} bytes\" >&2; exit 1; fi\n"
    ));
    s.push_str(&format!("chmod {:o} \"$t\"\n", file.mode & 0o7777));
    if let Some(owner) = &file.owner {
        s.push_str(&format!("chown {} \"$t\"\n", quote(owner)));
    }
    s.push_str("mv -f -- \"$t\" \"$p\"\n");
    s
}

/// The script that prints the file at `path`, or exits with [`DOWNLOAD_MISSING_STATUS`] when it does
/// not exist.
pub fn download_script(path: &str) -> String {
    format!(
        "p={}\nif [ ! -e \"$p\" ]; then exit {DOWNLOAD_MISSING_STATUS}; fi\nexec cat -- \"$p\"\n",
        quote(path)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn quote_escapes_single_quotes() {
        assert_eq!(quote("a'b"), "'a'\\''b'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote_word("a/b:1"), "a/b:1");
        assert_eq!(quote_word("it's"), "'it'\\''s'");
        assert_eq!(quote_word("a b"), "'a b'");
        assert_eq!(quote_word(""), "''");
    }

    #[test]
    fn env_names_are_checked() {
        assert!(valid_env_name("A_1"));
        assert!(valid_env_name("_x"));
        assert!(!valid_env_name("1A"));
        assert!(!valid_env_name("A-B"));
        assert!(!valid_env_name(""));
        let mut c = Cmd::new("true");
        c.env.push(("BAD NAME".into(), "v".into()));
        assert!(wrap(&c, true).is_err());
    }

    #[test]
    fn wrap_keeps_secrets_off_the_command_line() {
        let mut c = Cmd::new("echo $TOKEN").sudo();
        c.env.push(("TOKEN".into(), "s3cr3t".into()));
        c.timeout = Some(Duration::from_millis(1500));
        let w = wrap(&c, false).unwrap();
        assert!(!w.command_line.contains("s3cr3t"));
        assert!(!w.command_line.contains("echo"));
        assert!(w.command_line.starts_with("sudo -n timeout -k 2 2 sh -c"));
        let pre = String::from_utf8(w.preamble.clone()).unwrap();
        assert!(pre.contains("export TOKEN='s3cr3t'\n"));
        assert!(w
            .command_line
            .contains(&format!("head -c {}", w.preamble.len())));
        let root = wrap(&c, true).unwrap();
        assert!(!root.command_line.contains("sudo"));
    }
}
