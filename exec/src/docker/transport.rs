//! `DockerTransport`: a node container reached with `docker exec` through the Engine API (bollard).
//! Commands run as root through the same shell wrapper as SSH (preamble on the attached stdin, so
//! secrets stay off command lines; `timeout` on the node). Uploads are tar archives sent with the
//! archive API (`PUT /containers/{id}/archive`) into a staging directory on the container's own file
//! system (an archive extracted into a tmpfs mount does not land), then moved into place atomically.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::query_parameters::UploadToContainerOptionsBuilder;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use super::client::DockerClient;
use crate::raw::{self, Input, RawExec};
use crate::shell::{self, quote};
use crate::transport::{Cmd, ExecError, FileSpec, Output, Transport};

/// Directory on the container's own file system where uploads are staged before being moved.
pub(crate) const STAGING_DIR: &str = "/var/tmp";

/// A node container. Commands run as the container's root user.
#[derive(Debug, Clone)]
pub struct DockerTransport {
    client: Arc<DockerClient>,
    container: String,
    node: String,
}

enum Event {
    Out(Bytes),
    Err(Bytes),
    End(Result<i64, DockerExecError>),
}

/// Why a `docker exec` broke before it gave an exit status (the step that failed, the engine's error).
#[derive(Debug, thiserror::Error)]
pub enum DockerExecError {
    /// `POST /containers/{id}/exec` failed.
    #[error("creating the exec: {0}")]
    Create(#[source] bollard::errors::Error),
    /// `POST /exec/{id}/start` failed.
    #[error("starting the exec: {0}")]
    Start(#[source] bollard::errors::Error),
    /// The attached output stream broke.
    #[error("reading the exec output: {0}")]
    Output(#[source] bollard::errors::Error),
    /// The engine started the exec detached, so there is no output to read.
    #[error("the engine detached the exec")]
    Detached,
    /// `GET /exec/{id}/json` (the exit code) failed.
    #[error("inspecting the exec: {0}")]
    Inspect(#[source] bollard::errors::Error),
}

impl DockerTransport {
    /// A transport into `container` (name or id), reporting itself as node `node`.
    pub fn new(
        client: Arc<DockerClient>,
        container: impl Into<String>,
        node: impl Into<String>,
    ) -> Self {
        DockerTransport {
            client,
            container: container.into(),
            node: node.into(),
        }
    }

    /// The container this transport runs in.
    pub fn container(&self) -> &str {
        &self.container
    }

    fn err(&self, reason: impl Into<String>) -> ExecError {
        ExecError::Connect {
            node: self.node.clone(),
            reason: reason.into(),
        }
    }

    /// Streams a one-file tar archive (`name`, `size` bytes from `reader`, mode 0600, root) into
    /// [`STAGING_DIR`] through the archive API, reporting bytes sent to `progress`.
    fn put_archive(
        &self,
        name: &str,
        reader: &mut dyn Read,
        size: u64,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ExecError> {
        let transfer = |reason: String| ExecError::Transfer {
            node: self.node.clone(),
            path: format!("{STAGING_DIR}/{name}"),
            reason,
        };
        let mut header = tar::Header::new_gnu();
        header
            .set_path(name)
            .map_err(|e| transfer(format!("tar header: {e}")))?;
        header.set_size(size);
        header.set_mode(0o600);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();

        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(8);
        let docker = self.client.docker().clone();
        let container = self.container.clone();
        let opts = UploadToContainerOptionsBuilder::default()
            .path(STAGING_DIR)
            .build();
        let stream = tokio_stream_from(rx);
        let task = self.client.runtime().spawn(async move {
            docker
                .upload_to_container(&container, Some(opts), bollard::body_try_stream(stream))
                .await
                .map_err(|e| e.to_string())
        });
        let send = |b: Vec<u8>| tx.blocking_send(Ok(Bytes::from(b))).is_ok();
        let mut ok = send(header.as_bytes().to_vec());
        let mut sent = 0u64;
        let mut buf = vec![0u8; 256 * 1024];
        while ok && sent < size {
            let want = usize::try_from((size - sent).min(buf.len() as u64)).unwrap_or(buf.len());
            match reader.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => {
                    ok = send(buf[..n].to_vec());
                    sent += n as u64;
                    progress(sent);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
                    drop(tx);
                    let _ = self.client.block_on(task);
                    return Err(transfer(format!("reading upload input: {e}")));
                }
            }
        }
        if ok && sent < size {
            // A short reader: abort the body so the engine rejects the truncated archive.
            let _ = tx.blocking_send(Err(std::io::Error::other("short input")));
            drop(tx);
            let _ = self.client.block_on(task);
            return Err(transfer(format!(
                "input ended after {sent} of {size} bytes"
            )));
        }
        if ok {
            // Pad the entry to 512 bytes, then the two zero blocks that end an archive.
            let pad = (512 - (size % 512) as usize) % 512;
            ok = send(vec![0u8; pad + 1024]);
        }
        drop(tx);
        match self.client.block_on(task) {
            Ok(Ok(())) if ok => Ok(()),
            Ok(Ok(())) => Err(transfer("the engine stopped reading the archive".into())),
            Ok(Err(e)) => Err(transfer(e)),
            Err(e) => Err(transfer(format!("upload task: {e}"))),
        }
    }
}

/// A `Stream` over a Tokio mpsc receiver (what `tokio-stream`'s `ReceiverStream` does).
fn tokio_stream_from<T: Send + 'static>(
    rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) })
}

/// Unique staging names within this process.
static STAGE_SEQ: AtomicU64 = AtomicU64::new(0);

impl RawExec for DockerTransport {
    fn raw_node(&self) -> &str {
        &self.node
    }

    fn raw_exec(
        &self,
        cmd: &Cmd,
        input: Option<Input<'_>>,
        progress: &mut dyn FnMut(u64),
        on_output: &mut dyn FnMut(&[u8]),
    ) -> Result<Output, ExecError> {
        let wrapped = shell::wrap(cmd, true)?;
        // Measured from before the exec is created: the node's `timeout` counts from its start, and
        // writing the input may take a while on a loaded machine.
        let start = Instant::now();
        let (in_tx, mut in_rx) = tokio::sync::mpsc::channel::<Bytes>(8);
        let (ev_tx, ev_rx) = mpsc::channel::<Event>();
        let docker = self.client.docker().clone();
        let container = self.container.clone();
        let line = wrapped.command_line.clone();
        self.client.runtime().spawn(async move {
            let ev = ev_tx.clone();
            let res: Result<i64, DockerExecError> = async move {
                let exec = docker
                    .create_exec(
                        &container,
                        CreateExecOptions::<String> {
                            attach_stdin: Some(true),
                            attach_stdout: Some(true),
                            attach_stderr: Some(true),
                            cmd: Some(vec!["/bin/sh".into(), "-c".into(), line]),
                            ..Default::default()
                        },
                    )
                    .await
                    .map_err(DockerExecError::Create)?;
                match docker
                    .start_exec(&exec.id, None)
                    .await
                    .map_err(DockerExecError::Start)?
                {
                    StartExecResults::Attached {
                        mut output,
                        mut input,
                    } => {
                        let writer = async move {
                            while let Some(b) = in_rx.recv().await {
                                if input.write_all(&b).await.is_err() {
                                    return;
                                }
                            }
                            let _ = input.shutdown().await;
                        };
                        let reader = async {
                            while let Some(item) = output.next().await {
                                match item.map_err(DockerExecError::Output)? {
                                    bollard::container::LogOutput::StdOut { message }
                                    | bollard::container::LogOutput::Console { message } => {
                                        let _ = ev.send(Event::Out(message));
                                    }
                                    bollard::container::LogOutput::StdErr { message } => {
                                        let _ = ev.send(Event::Err(message));
                                    }
                                    bollard::container::LogOutput::StdIn { .. } => {}
                                }
                            }
                            Ok::<(), DockerExecError>(())
                        };
                        let (_, r) = tokio::join!(writer, reader);
                        r?;
                    }
                    StartExecResults::Detached => return Err(DockerExecError::Detached),
                }
                let info = docker
                    .inspect_exec(&exec.id)
                    .await
                    .map_err(DockerExecError::Inspect)?;
                Ok(info.exit_code.unwrap_or(-1))
            }
            .await;
            let _ = ev_tx.send(Event::End(res));
        });

        let mut out = Output::default();
        let mut end: Option<Result<i64, DockerExecError>> = None;
        let mut handle =
            |e: Event, out: &mut Output, end: &mut Option<Result<i64, DockerExecError>>| match e {
                Event::Out(b) => {
                    on_output(cmd.redact(&String::from_utf8_lossy(&b)).as_bytes());
                    out.stdout.extend_from_slice(&b);
                }
                Event::Err(b) => {
                    on_output(cmd.redact(&String::from_utf8_lossy(&b)).as_bytes());
                    out.stderr.extend_from_slice(&b);
                }
                Event::End(r) => *end = Some(r),
            };
        let mut writing = in_tx
            .blocking_send(Bytes::from(wrapped.preamble.clone()))
            .is_ok();
        if let Some(inp) = input {
            let mut buf = vec![0u8; 128 * 1024];
            let mut sent = 0u64;
            while writing {
                match inp.reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        writing = in_tx
                            .blocking_send(Bytes::copy_from_slice(&buf[..n]))
                            .is_ok();
                        sent += n as u64;
                        progress(sent);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(ExecError::Other(format!("reading command input: {e}"))),
                }
                while let Ok(e) = ev_rx.try_recv() {
                    handle(e, &mut out, &mut end);
                }
            }
        }
        drop(in_tx);
        let deadline = cmd.timeout.map(|t| start + t + Duration::from_secs(5));
        while end.is_none() {
            let wait = deadline
                .map(|d| d.saturating_duration_since(Instant::now()))
                .unwrap_or(Duration::from_secs(3600));
            match ev_rx.recv_timeout(wait) {
                Ok(e) => handle(e, &mut out, &mut end),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(ExecError::Timeout {
                            node: self.node.clone(),
                            after: cmd.timeout.unwrap_or_default(),
                        });
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(self.err("the exec task ended without a result"))
                }
            }
        }
        let status = match end {
            Some(Ok(s)) => i32::try_from(s).unwrap_or(-1),
            Some(Err(source)) => {
                return Err(ExecError::Docker {
                    node: self.node.clone(),
                    source,
                })
            }
            None => return Err(self.err("no exit status")),
        };
        out.status = status;
        if let Some(limit) = cmd.timeout {
            if (status == shell::TIMEOUT_STATUS || status == 128 + 9)
                && start.elapsed() + Duration::from_millis(50) >= limit
            {
                return Err(ExecError::Timeout {
                    node: self.node.clone(),
                    after: limit,
                });
            }
        }
        Ok(out)
    }

    /// Docker copies the bytes in as a tar archive to a staging directory (`put_archive`), then
    /// moves them into place with the same checks as the upload script.
    fn raw_upload(
        &self,
        reader: &mut dyn Read,
        size: u64,
        file: &FileSpec,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ExecError> {
        let name = format!(
            ".clusterctl-stage-{}-{}-{}",
            std::process::id(),
            STAGE_SEQ.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        self.put_archive(&name, reader, size, progress)?;
        let staged = format!("{STAGING_DIR}/{name}");
        let path = file.path.to_string_lossy();
        let mut s = String::from("set -e\n");
        s.push_str(&format!("s={}\np={}\n", quote(&staged), quote(&path)));
        s.push_str("trap 'rm -f -- \"$s\" \"${t:-}\"' EXIT\n");
        s.push_str("d=$(dirname -- \"$p\")\nmkdir -p -- \"$d\"\n");
        s.push_str("t=$(mktemp \"$d/.clusterctl-upload.XXXXXX\")\n");
        // A rename when staging and destination share a file system, a copy otherwise (tmpfs).
        s.push_str("mv -f -- \"$s\" \"$t\"\n");
        s.push_str(&format!(
            "n=$(wc -c < \"$t\"); if [ \"$n\" -ne {size} ]; then echo \"short upload: $n of {size} bytes\" >&2; exit 1; fi\n"
        ));
        s.push_str(&format!("chmod {:o} \"$t\"\n", file.mode & 0o7777));
        if let Some(owner) = &file.owner {
            s.push_str(&format!("chown {} \"$t\"\n", quote(owner)));
        }
        s.push_str("mv -f -- \"$t\" \"$p\"\n");
        let out = self.run(&Cmd::new(s))?;
        if out.success() {
            Ok(())
        } else {
            Err(ExecError::Transfer {
                node: self.node.clone(),
                path: path.into_owned(),
                reason: format!(
                    "exit status {}: {}",
                    out.status,
                    raw::tail(&out.stderr, 400)
                ),
            })
        }
    }
}
