//! An in-memory `Transport` for tests of the engine and of phases: a node with a file map that
//! understands the few shell forms the engine itself emits (file digests, file reads) plus `test -f`,
//! `touch`, `rm -f` and `echo`, records every call with whether it changed the node, counts how many
//! calls are in flight at once, and can inject a failure. Not a shell: anything else exits 127.

use clusterctl_exec::{Cmd, ExecError, FileSpec, Output, Transport};
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One call made to a fake node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// A command; `mutating` when it changed the node's files.
    Run {
        /// The script as given (not redacted: tests check that secrets were redacted elsewhere).
        script: String,
        /// It changed the node.
        mutating: bool,
    },
    /// An upload (always mutating).
    Upload {
        /// Destination path.
        path: String,
        /// Mode.
        mode: u32,
    },
}

impl Call {
    /// True for calls that changed the node.
    pub fn is_mutating(&self) -> bool {
        matches!(self, Call::Run { mutating: true, .. } | Call::Upload { .. })
    }
}

/// Counters shared by several fake nodes, to observe parallelism.
#[derive(Debug, Default)]
pub struct Concurrency {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Concurrency {
    /// The largest number of calls that were in flight at once.
    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
}

/// An in-memory node.
pub struct FakeNode {
    name: String,
    files: Mutex<BTreeMap<String, (Vec<u8>, u32)>>,
    calls: Mutex<Vec<Call>>,
    fail_on: Mutex<Option<String>>,
    delay: Duration,
    conc: Arc<Concurrency>,
}

impl FakeNode {
    /// A node named `name`; every call takes `delay` and is counted in `conc`.
    pub fn new(name: &str, delay: Duration, conc: Arc<Concurrency>) -> Self {
        FakeNode {
            name: name.into(),
            files: Mutex::new(BTreeMap::new()),
            calls: Mutex::new(Vec::new()),
            fail_on: Mutex::new(None),
            delay,
            conc,
        }
    }
    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
    /// Forgets the recorded calls.
    pub fn clear_calls(&self) {
        if let Ok(mut c) = self.calls.lock() {
            c.clear();
        }
    }
    /// The content and mode of a file.
    pub fn file(&self, path: &str) -> Option<(Vec<u8>, u32)> {
        self.files.lock().ok()?.get(path).cloned()
    }
    /// Every file path.
    pub fn paths(&self) -> Vec<String> {
        self.files
            .lock()
            .map(|f| f.keys().cloned().collect())
            .unwrap_or_default()
    }
    /// The next command whose script contains `needle` exits 1 (once).
    pub fn fail_once_on(&self, needle: &str) {
        if let Ok(mut f) = self.fail_on.lock() {
            *f = Some(needle.into());
        }
    }

    fn record(&self, call: Call) {
        if let Ok(mut c) = self.calls.lock() {
            c.push(call);
        }
    }

    fn enter(&self) {
        let now = self.conc.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.conc.max.fetch_max(now, Ordering::SeqCst);
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
    }
    fn leave(&self) {
        self.conc.now.fetch_sub(1, Ordering::SeqCst);
    }

    fn interpret(&self, script: &str) -> (Output, bool) {
        let ok = |stdout: Vec<u8>| Output {
            status: 0,
            stdout,
            stderr: vec![],
        };
        let status = |s: i32| Output {
            status: s,
            stdout: vec![],
            stderr: vec![],
        };
        let Ok(mut files) = self.files.lock() else {
            return (status(1), false);
        };
        let unq = |p: &str| p.trim_matches('\'').to_string();
        let words: Vec<&str> = script.split_whitespace().collect();
        if script.starts_with("if [ -e ") && script.contains("then cat") {
            let p = unq(words.get(3).copied().unwrap_or(""));
            return match files.get(&p) {
                Some((d, _)) => (ok(d.clone()), false),
                None => (status(3), false),
            };
        }
        if script.starts_with("if [ -f ") && script.contains("sha256sum") {
            let p = unq(words.get(3).copied().unwrap_or(""));
            return match files.get(&p) {
                Some((d, m)) => (
                    ok(format!("{} {:o}\n", crate::util::sha256_hex(d), m).into_bytes()),
                    false,
                ),
                None => (ok(b"absent\n".to_vec()), false),
            };
        }
        match words.as_slice() {
            ["test", "-f", p] => (
                status(if files.contains_key(&unq(p)) { 0 } else { 1 }),
                false,
            ),
            ["touch", p] => {
                files.entry(unq(p)).or_insert((Vec::new(), 0o644));
                (status(0), true)
            }
            ["rm", "-f", p] => (status(0), files.remove(&unq(p)).is_some()),
            ["echo", rest @ ..] => (ok(format!("{}\n", rest.join(" ")).into_bytes()), false),
            _ => (
                Output {
                    status: 127,
                    stdout: vec![],
                    stderr: b"fake: unknown command".to_vec(),
                },
                false,
            ),
        }
    }
}

impl Transport for FakeNode {
    fn node(&self) -> &str {
        &self.name
    }
    fn run_streaming(
        &self,
        cmd: &Cmd,
        on_output: &mut dyn FnMut(&[u8]),
    ) -> Result<Output, ExecError> {
        self.enter();
        let injected = self.fail_on.lock().ok().and_then(|mut f| {
            if f.as_deref().is_some_and(|n| cmd.script.contains(n)) {
                f.take()
            } else {
                None
            }
        });
        let (out, mutating) = if injected.is_some() {
            (
                Output {
                    status: 1,
                    stdout: vec![],
                    stderr: b"injected failure".to_vec(),
                },
                false,
            )
        } else {
            self.interpret(&cmd.script)
        };
        self.record(Call::Run {
            script: cmd.script.clone(),
            mutating,
        });
        on_output(cmd.redact(&String::from_utf8_lossy(&out.stdout)).as_bytes());
        self.leave();
        Ok(out)
    }
    fn upload(&self, data: &[u8], file: &FileSpec) -> Result<(), ExecError> {
        self.enter();
        let path = file.path.to_string_lossy().into_owned();
        if let Ok(mut f) = self.files.lock() {
            f.insert(path.clone(), (data.to_vec(), file.mode));
        }
        self.record(Call::Upload {
            path,
            mode: file.mode,
        });
        self.leave();
        Ok(())
    }
    fn upload_stream(
        &self,
        reader: &mut dyn Read,
        size: u64,
        file: &FileSpec,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ExecError> {
        let mut data = Vec::new();
        reader
            .read_to_end(&mut data)
            .map_err(|e| ExecError::Other(e.to_string()))?;
        progress(size);
        self.upload(&data, file)
    }
    fn download(&self, path: &str) -> Result<Option<Vec<u8>>, ExecError> {
        Ok(self.file(path).map(|(d, _)| d))
    }
}
