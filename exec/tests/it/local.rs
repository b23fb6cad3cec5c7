//! `LocalTransport` on this machine: run, env, stdin, exit codes, timeout, streamed and redacted output,
//! atomic uploads with mode and owner, streamed uploads with byte progress, downloads.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

use clusterctl_exec::{Cmd, ExecError, FileSpec, LocalTransport, Transport};

fn t() -> LocalTransport {
    LocalTransport::new("local")
}

#[test]
fn runs_with_env_stdin_and_exit_status() {
    let mut c = Cmd::new("read line; echo \"$GREETING $line\"; echo err >&2; exit 7");
    c.env
        .push(("GREETING".into(), "hello 'quoted' $world".into()));
    c.stdin = Some(b"from stdin\n".to_vec());
    let out = t().run(&c).unwrap();
    assert_eq!(out.status, 7);
    assert_eq!(out.stdout_str(), "hello 'quoted' $world from stdin");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
}

#[test]
fn a_timeout_kills_the_whole_process_group() {
    let mut c = Cmd::new("sleep 30 & sleep 30; echo never");
    c.timeout = Some(Duration::from_millis(300));
    let start = Instant::now();
    let err = t().run(&c).unwrap_err();
    assert!(matches!(err, ExecError::Timeout { .. }), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn output_streams_in_chunks_and_is_redacted() {
    let mut c = Cmd::new("echo token=abc123; sleep 0.2; echo second");
    c.secrets.push("abc123".into());
    let mut chunks: Vec<(Instant, String)> = Vec::new();
    let out = t()
        .run_streaming(&c, &mut |b| {
            chunks.push((Instant::now(), String::from_utf8_lossy(b).into_owned()))
        })
        .unwrap();
    let all: String = chunks.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(all, "token=<redacted>\nsecond\n");
    assert!(
        chunks.len() >= 2,
        "output arrived as {} chunk(s)",
        chunks.len()
    );
    let gap = chunks[chunks.len() - 1].0 - chunks[0].0;
    assert!(
        gap >= Duration::from_millis(150),
        "chunks were not streamed: gap {gap:?}"
    );
    // The returned output keeps the real bytes (phases parse join commands from it).
    assert!(out.stdout_str().contains("abc123"));
}

#[test]
fn upload_is_atomic_with_mode_and_owner_and_download_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/dir/file.conf");
    let spec = FileSpec {
        path: path.clone(),
        mode: 0o640,
        owner: Some("nobody:nogroup".into()),
    };
    let tr = t();
    tr.upload(b"first\n", &spec).unwrap();
    tr.upload(b"second\n", &spec).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"second\n");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    if clusterctl_testbed::is_root() {
        let out = tr.run(&Cmd::new("id -u nobody")).unwrap();
        assert_eq!(meta.uid().to_string(), out.stdout_str());
    }
    // No temp file is left next to it.
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert_eq!(
        tr.download(path.to_str().unwrap()).unwrap().as_deref(),
        Some(&b"second\n"[..])
    );
    assert_eq!(
        tr.download(dir.path().join("missing").to_str().unwrap())
            .unwrap(),
        None
    );
}

#[test]
fn stream_upload_reports_byte_progress() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.bin");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut seen = Vec::new();
    let spec = FileSpec {
        path: path.clone(),
        mode: 0o600,
        owner: None,
    };
    t().upload_stream(&mut &data[..], data.len() as u64, &spec, &mut |n| {
        seen.push(n)
    })
    .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), data);
    assert!(seen.len() > 1);
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(seen.last().copied(), Some(data.len() as u64));
}

#[test]
fn a_short_stream_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.bin");
    let spec = FileSpec {
        path: path.clone(),
        mode: 0o644,
        owner: None,
    };
    let err = t()
        .upload_stream(&mut &b"abc"[..], 10, &spec, &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, ExecError::Transfer { .. }), "{err}");
    assert!(!path.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
