//! `LocalTransport`: the machine clusterctl runs on, reached through `std::process`. Commands run as
//! `sh -c` of the wrapped command line (see [`crate::shell`]), in their own process group so that a
//! timeout kills the whole tree; output is read by two threads and handed back to the caller's thread.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use crate::raw::{Input, RawExec};
use crate::shell;
use crate::transport::{Cmd, ExecError, Output};

/// Runs commands on this machine. `sudo -n` is used for `Cmd::sudo` when the process is not root.
#[derive(Debug, Clone)]
pub struct LocalTransport {
    name: String,
    is_root: bool,
}

impl LocalTransport {
    /// A local transport reporting itself as node `name`.
    pub fn new(name: impl Into<String>) -> Self {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let is_root = unsafe { libc::geteuid() } == 0;
        LocalTransport {
            name: name.into(),
            is_root,
        }
    }
}

enum Chunk {
    Out(Vec<u8>),
    Err(Vec<u8>),
    Done,
}

fn spawn_reader(mut r: impl Read + Send + 'static, tx: mpsc::Sender<Chunk>, is_err: bool) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let c = buf[..n].to_vec();
                    let msg = if is_err { Chunk::Err(c) } else { Chunk::Out(c) };
                    if tx.send(msg).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = tx.send(Chunk::Done);
    });
}

impl RawExec for LocalTransport {
    fn raw_node(&self) -> &str {
        &self.name
    }

    fn raw_exec(
        &self,
        cmd: &Cmd,
        input: Option<Input<'_>>,
        progress: &mut dyn FnMut(u64),
        on_output: &mut dyn FnMut(&[u8]),
    ) -> Result<Output, ExecError> {
        // The timeout is enforced here (process-group kill), not by `timeout` on the command line.
        let mut plain = cmd.clone();
        plain.timeout = None;
        let wrapped = shell::wrap(&plain, self.is_root)?;
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(&wrapped.command_line)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| ExecError::Connect {
                node: self.name.clone(),
                reason: format!("spawn sh: {e}"),
            })?;
        let pid = child.id() as i32;
        let (tx, rx) = mpsc::channel();
        if let Some(o) = child.stdout.take() {
            spawn_reader(o, tx.clone(), false);
        }
        if let Some(e) = child.stderr.take() {
            spawn_reader(e, tx.clone(), true);
        }
        drop(tx);

        // Watchdog: kills the process group at the deadline.
        let timed_out = Arc::new(AtomicBool::new(false));
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        if let Some(limit) = cmd.timeout {
            let flag = timed_out.clone();
            std::thread::spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = stop_rx.recv_timeout(limit) {
                    flag.store(true, Ordering::SeqCst);
                    // SAFETY: kill(2) on our own child's process group; no memory is touched.
                    unsafe {
                        libc::kill(-pid, libc::SIGKILL);
                    }
                }
            });
        }

        let mut out = Output::default();
        let mut open = 2;
        let mut handle = |c: Chunk, out: &mut Output, open: &mut i32| match c {
            Chunk::Out(b) => {
                on_output(cmd.redact(&String::from_utf8_lossy(&b)).as_bytes());
                out.stdout.extend_from_slice(&b);
            }
            Chunk::Err(b) => {
                on_output(cmd.redact(&String::from_utf8_lossy(&b)).as_bytes());
                out.stderr.extend_from_slice(&b);
            }
            Chunk::Done => *open -= 1,
        };

        if let Some(mut stdin) = child.stdin.take() {
            let mut ok = stdin.write_all(&wrapped.preamble).is_ok();
            if let Some(inp) = input {
                let mut buf = vec![0u8; 128 * 1024];
                let mut sent = 0u64;
                while ok {
                    let n = match inp.reader.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            let _ = stop_tx.send(());
                            // SAFETY: as above.
                            unsafe {
                                libc::kill(-pid, libc::SIGKILL);
                            }
                            let _ = child.wait();
                            return Err(ExecError::Other(format!("reading upload input: {e}")));
                        }
                    };
                    ok = stdin.write_all(&buf[..n]).is_ok();
                    sent += n as u64;
                    progress(sent);
                    while let Ok(c) = rx.try_recv() {
                        handle(c, &mut out, &mut open);
                    }
                }
            }
            drop(stdin);
        }
        while open > 0 {
            match rx.recv() {
                Ok(c) => handle(c, &mut out, &mut open),
                Err(_) => break,
            }
        }
        let status = child
            .wait()
            .map_err(|e| ExecError::Other(format!("waiting for local command: {e}")))?;
        let _ = stop_tx.send(());
        if timed_out.load(Ordering::SeqCst) {
            return Err(ExecError::Timeout {
                node: self.name.clone(),
                after: cmd.timeout.unwrap_or_default(),
            });
        }
        out.status = status.code().unwrap_or(-1);
        Ok(out)
    }
}
