//! Small helpers shared by the engine and the phases: sha256 digests, POSIX shell quoting (exec's), output tails,
//! UTC clock formatting, random bytes from the local kernel and a bounded parallel map over scoped threads.

use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Lower-case hex sha256 of `data` (64 characters).
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Lower-case hex sha256 of the local file at `path`, streamed (large binaries are not read into
/// memory), memoised per process by (path, size, modification time) so that one run hashes the
/// clusterctl binary once for all its nodes. Errors: the file cannot be read.
pub(crate) fn file_sha256(path: &std::path::Path) -> std::io::Result<String> {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    type Key = (std::path::PathBuf, u64, Option<SystemTime>);
    static CACHE: OnceLock<Mutex<HashMap<Key, String>>> = OnceLock::new();
    let meta = std::fs::metadata(path)?;
    let key = (path.to_path_buf(), meta.len(), meta.modified().ok());
    let cache = CACHE.get_or_init(Default::default);
    if let Some(h) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(h);
    }
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    let hex = hex::encode(h.finalize());
    if let Ok(mut c) = cache.lock() {
        c.insert(key, hex.clone());
    }
    Ok(hex)
}

/// The last `lines` lines of `text` (lossy UTF-8), trimmed of trailing white space.
pub(crate) fn tail(text: &[u8], lines: usize) -> String {
    let s = String::from_utf8_lossy(text);
    let all: Vec<&str> = s.trim_end().lines().collect();
    let start = all.len().saturating_sub(lines);
    all[start..].join("\n")
}

/// What a failed command's error shows of its output, at most `lines` lines: the last lines of
/// `stdout`, then the last lines of `stderr` (at least a third of `lines` for stdout when it has any,
/// the rest for stderr). Programs print their error last on stderr after pages of stdout (kubeadm's
/// system verification prints its whole `CONFIG_*`/`CGROUPS_*` report to stdout, then the
/// `[ERROR SystemVerification]` line to stderr), so stderr's end is kept whatever stdout's length.
pub(crate) fn output_tail(stdout: &[u8], stderr: &[u8], lines: usize) -> String {
    let count = |t: &str| if t.is_empty() { 0 } else { t.lines().count() };
    let has_out = !tail(stdout, 1).is_empty();
    let err_room = if has_out { lines - lines / 3 } else { lines };
    let err = tail(stderr, err_room);
    let out = tail(stdout, lines - count(&err));
    match (out.is_empty(), err.is_empty()) {
        (true, _) => err,
        (false, true) => out,
        (false, false) => format!("{out}\n{err}"),
    }
}

/// Seconds since the Unix epoch, local clock (0 if the clock is before 1970).
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The UTC time of day `HH:MM:SS` for the local clock, for plain progress lines.
pub(crate) fn clock() -> String {
    let s = now_secs() % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// `n` random bytes from the local kernel (`/dev/urandom`). Errors: the device cannot be read.
pub(crate) fn random_bytes(n: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open("/dev/urandom")?;
    let mut buf = vec![0u8; n];
    f.read_exact(&mut buf)?;
    Ok(buf)
}

/// `n` random characters from `[a-z0-9]` (the alphabet of kubeadm bootstrap tokens).
pub(crate) fn random_token_chars(n: usize) -> std::io::Result<String> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut out = String::with_capacity(n);
    while out.len() < n {
        for b in random_bytes(n * 2)? {
            // 252 = 7 * 36: reject the top values so every character is equally likely.
            if b < 252 && out.len() < n {
                out.push(ALPHABET[(b % 36) as usize] as char);
            }
        }
    }
    Ok(out)
}

/// `f` of every item, `width` items at a time (0 counts as 1), on scoped threads; the results in the
/// items' order.
pub(crate) fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    width: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::with_capacity(items.len()));
    std::thread::scope(|s| {
        for _ in 0..width.clamp(1, items.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else {
                    return;
                };
                let r = f(item);
                done.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real run's defect (issue 11, `upgrade` for real): kubeadm's error line on stderr was
    /// lost behind the last 15 lines of its stdout report.
    #[test]
    fn output_tail_keeps_the_error_on_stderr_after_a_long_stdout() {
        let stdout: String = (0..60).map(|i| format!("CONFIG_{i}: enabled\n")).collect();
        let stderr =
            b"[preflight] Some fatal errors occurred:\n\t[ERROR SystemVerification]: cgroups v1\n";
        let t = output_tail(stdout.as_bytes(), stderr, 15);
        assert!(
            t.ends_with("\t[ERROR SystemVerification]: cgroups v1"),
            "{t}"
        );
        assert!(t.contains("CONFIG_59: enabled"), "{t}");
        assert_eq!(t.lines().count(), 15, "{t}");
        // A long stderr still leaves stdout's last lines a third of the room.
        let long_err: String = (0..40).map(|i| format!("e{i}\n")).collect();
        let t = output_tail(stdout.as_bytes(), long_err.as_bytes(), 15);
        assert_eq!(t.lines().count(), 15, "{t}");
        assert!(t.starts_with("CONFIG_55") && t.ends_with("e39"), "{t}");
        assert_eq!(output_tail(b"only out\n", b"", 15), "only out");
        assert_eq!(output_tail(b"", b"only err\n", 15), "only err");
        assert_eq!(output_tail(b"", b"", 15), "");
    }

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail(b"1\n2\n3\n4\n", 2), "3\n4");
        assert_eq!(tail(b"", 3), "");
    }

    #[test]
    fn tokens_use_the_kubeadm_alphabet() {
        let t = random_token_chars(16).unwrap_or_default();
        assert_eq!(t.len(), 16);
        assert!(t
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        assert_ne!(t, random_token_chars(16).unwrap_or_default());
    }

    #[test]
    fn in_parallel_keeps_the_order_and_the_width() {
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let items: Vec<usize> = (0..24).collect();
        let out = in_parallel(&items, 4, |&i| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(5));
            running.fetch_sub(1, Ordering::SeqCst);
            i * 10
        });
        assert_eq!(out, items.iter().map(|i| i * 10).collect::<Vec<_>>());
        assert!(most.load(Ordering::SeqCst) <= 4);
        // Width 0 counts as 1; no items, no threads.
        assert_eq!(in_parallel(&[1, 2], 0, |&i| i), [1, 2]);
        assert!(in_parallel(&[] as &[u8], 8, |&i| i).is_empty());
    }
}
