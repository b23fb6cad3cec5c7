//! The one primitive every shell-based transport provides — run a wrapped command with a preamble and
//! an optional input stream — and the uploads and downloads built on it (see [`crate::shell`]), so that
//! the transports share one atomic-write and one read path. Every [`RawExec`] is a [`Transport`]
//! through the one forwarding impl below (local, SSH and Docker alike).

use std::io::Read;

use crate::shell;
use crate::transport::{Cmd, ExecError, FileSpec, Output, Transport};

/// Bytes to feed a command after its preamble: a reader and the number of bytes it will give.
pub struct Input<'a> {
    /// Where the bytes come from.
    pub reader: &'a mut dyn Read,
    /// How many bytes (used for progress and checked on the node by the upload script).
    pub size: u64,
}

/// Runs one command on a node: what a transport must implement to get uploads and downloads.
pub trait RawExec {
    /// The node's name, for messages.
    fn raw_node(&self) -> &str;
    /// Runs `cmd`; writes `input` (if any) to its standard input after the preamble, reporting the
    /// running count of input bytes written to `progress`; streams redacted output chunks to
    /// `on_output`. A non-zero exit status is returned in [`Output`], not as an error.
    fn raw_exec(
        &self,
        cmd: &Cmd,
        input: Option<Input<'_>>,
        progress: &mut dyn FnMut(u64),
        on_output: &mut dyn FnMut(&[u8]),
    ) -> Result<Output, ExecError>;

    /// Streams `size` bytes from `reader` to `file` on the node, atomically; `progress` receives the
    /// running byte count. Default: the upload script over [`RawExec::raw_exec`]
    /// ([`upload_stream`]); a transport with a faster path (Docker's archive copy) overrides it.
    fn raw_upload(
        &self,
        reader: &mut dyn Read,
        size: u64,
        file: &FileSpec,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ExecError> {
        upload_stream(self, reader, size, file, progress)
    }
}

/// The transports' one forwarding: commands through [`run`], uploads through
/// [`RawExec::raw_upload`], downloads through [`download`].
impl<T: RawExec + Send + Sync> Transport for T {
    fn node(&self) -> &str {
        self.raw_node()
    }

    fn run_streaming(
        &self,
        cmd: &Cmd,
        on_output: &mut dyn FnMut(&[u8]),
    ) -> Result<Output, ExecError> {
        run(self, cmd, on_output)
    }

    fn upload_stream(
        &self,
        reader: &mut dyn Read,
        size: u64,
        file: &FileSpec,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ExecError> {
        self.raw_upload(reader, size, file, progress)
    }

    fn download(&self, path: &str) -> Result<Option<Vec<u8>>, ExecError> {
        download(self, path)
    }
}

/// Runs `cmd` with its own `cmd.stdin` (if any) as input: what `Transport::run_streaming` does.
pub(crate) fn run<R: RawExec + ?Sized>(
    raw: &R,
    cmd: &Cmd,
    on_output: &mut dyn FnMut(&[u8]),
) -> Result<Output, ExecError> {
    match &cmd.stdin {
        Some(data) => {
            let mut r: &[u8] = data;
            let input = Input {
                reader: &mut r,
                size: data.len() as u64,
            };
            raw.raw_exec(cmd, Some(input), &mut |_| {}, on_output)
        }
        None => raw.raw_exec(cmd, None, &mut |_| {}, on_output),
    }
}

/// The last `max` bytes of `bytes` as lossy UTF-8, trimmed (for error messages).
pub(crate) fn tail(bytes: &[u8], max: usize) -> String {
    let start = bytes.len().saturating_sub(max);
    String::from_utf8_lossy(&bytes[start..]).trim().to_string()
}

/// Streams `size` bytes from `reader` into `file` on the node through the upload script (as root:
/// `sudo -n` when the user is not), atomically. Errors with [`ExecError::Transfer`] naming the path.
pub(crate) fn upload_stream<R: RawExec + ?Sized>(
    raw: &R,
    reader: &mut dyn Read,
    size: u64,
    file: &FileSpec,
    progress: &mut dyn FnMut(u64),
) -> Result<(), ExecError> {
    let cmd = Cmd::new(shell::upload_script(file, size)).sudo();
    let out = raw.raw_exec(&cmd, Some(Input { reader, size }), progress, &mut |_| {})?;
    if out.success() {
        Ok(())
    } else {
        Err(ExecError::Transfer {
            node: raw.raw_node().to_string(),
            path: file.path.display().to_string(),
            reason: format!("exit status {}: {}", out.status, tail(&out.stderr, 400)),
        })
    }
}

/// Reads the whole file at `path` (as root), `Ok(None)` when it does not exist.
pub(crate) fn download<R: RawExec + ?Sized>(
    raw: &R,
    path: &str,
) -> Result<Option<Vec<u8>>, ExecError> {
    let cmd = Cmd::new(shell::download_script(path)).sudo();
    let out = raw.raw_exec(&cmd, None, &mut |_| {}, &mut |_| {})?;
    match out.status {
        0 => Ok(Some(out.stdout)),
        shell::DOWNLOAD_MISSING_STATUS => Ok(None),
        s => Err(ExecError::Transfer {
            node: raw.raw_node().to_string(),
            path: path.to_string(),
            reason: format!("exit status {s}: {}", tail(&out.stderr, 400)),
        }),
    }
}
