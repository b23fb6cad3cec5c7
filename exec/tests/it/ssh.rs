//! `SshTransport` against systemd node containers over real SSH (tests/src/docker.rs): commands with
//! env, stdin, exit codes, timeouts and streamed output on one reused connection; uploads and downloads
//! with mode and owner, a large streamed upload with byte progress; sudo as a non-root user; host keys
//! refused when unknown (strict) or changed (always), recorded then pinned on first use.

use std::time::{Duration, Instant};

use clusterctl_exec::{Cmd, ConnectRetry, ExecError, FileSpec, SshTransport, Transport};
use clusterctl_spec::model::HostKeyPolicy;
use clusterctl_testbed::docker::{docker_available, TestCluster, TestKey};
use clusterctl_testbed::{is_root, require};

fn cluster(prefix: &str) -> Option<TestCluster> {
    if !require(
        "root and a Docker engine (scripts/services/docker.sh)",
        is_root() && docker_available(),
    ) {
        return None;
    }
    Some(TestCluster::start(prefix, 1).expect("test cluster"))
}

#[test]
fn runs_commands_on_one_reused_connection() {
    let Some(c) = cluster("sshr") else { return };
    let node = &c.nodes[0];
    let t = node.transport().unwrap();

    // Exit codes, stdout and stderr.
    let out = t.run(&Cmd::new("echo out; echo err >&2; exit 3")).unwrap();
    assert_eq!((out.status, out.stdout_str().as_str()), (3, "out"));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    assert_eq!(
        t.run(&Cmd::new("hostname")).unwrap().stdout_str(),
        node.name
    );

    // Env and stdin; neither the secret nor the script appear on any command line on the node.
    let mut cmd = Cmd::new(
        "read a; echo \"$TOKEN:$a\"; cat /proc/$$/cmdline | tr '\\0' ' '; echo; ps -eo args",
    );
    cmd.env.push(("TOKEN".into(), "tok'en secret".into()));
    cmd.stdin = Some(b"line one\nrest".to_vec());
    cmd.secrets.push("tok'en secret".into());
    let out = t.run(&cmd).unwrap();
    let text = out.stdout_str();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("tok'en secret:line one"));
    let rest: Vec<&str> = lines.collect();
    assert!(
        !rest.iter().any(|l| l.contains("secret")),
        "secret visible in a command line: {rest:?}"
    );
    assert!(rest[0].starts_with("sh -c eval"), "{}", rest[0]);

    // Timeout: the command and its children are killed on the node.
    let mut slow = Cmd::new("sleep 60 & sleep 60");
    slow.timeout = Some(Duration::from_secs(1));
    let start = Instant::now();
    let err = t.run(&slow).unwrap_err();
    assert!(matches!(err, ExecError::Timeout { .. }), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );
    std::thread::sleep(Duration::from_millis(300));
    let left = node.sh("pgrep -c -x sleep || true").unwrap();
    assert_eq!(left, "0", "sleep processes left after the timeout");

    // Streamed, redacted output: chunks arrive while the command runs.
    let mut s = Cmd::new("echo key=K3Y; sleep 0.5; echo done");
    s.secrets.push("K3Y".into());
    let mut chunks: Vec<(Instant, String)> = Vec::new();
    t.run_streaming(&s, &mut |b| {
        chunks.push((Instant::now(), String::from_utf8_lossy(b).into_owned()))
    })
    .unwrap();
    let all: String = chunks.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(all, "key=<redacted>\ndone\n");
    assert!(
        chunks.len() >= 2 && chunks[chunks.len() - 1].0 - chunks[0].0 >= Duration::from_millis(300)
    );

    // Every call above used one TCP connection: same source port, one connect.
    let p1 = t
        .run(&Cmd::new("echo $SSH_CONNECTION"))
        .unwrap()
        .stdout_str();
    let p2 = t
        .run(&Cmd::new("echo $SSH_CONNECTION"))
        .unwrap()
        .stdout_str();
    assert!(!p1.is_empty());
    assert_eq!(p1, p2);
    assert_eq!(t.connections(), 1);
    let sessions = node
        .sh("ss -tn state established '( sport = :22 )' | tail -n +2 | wc -l")
        .unwrap();
    assert_eq!(sessions, "1", "one SSH connection expected on the node");

    // Threads sharing the transport take turns on the one connection.
    std::thread::scope(|s| {
        for i in 0..4 {
            let t = &t;
            s.spawn(move || {
                for j in 0..5 {
                    let out = t.run(&Cmd::new(format!("echo {i}-{j}"))).unwrap();
                    assert_eq!(out.stdout_str(), format!("{i}-{j}"));
                }
            });
        }
    });
    assert_eq!(t.connections(), 1);

    // The node drops the connection (sshd session killed): the next call reconnects once.
    node.sh("pkill -f '^sshd: root@' || true").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let out = t.run(&Cmd::new("echo again")).unwrap();
    assert_eq!(out.stdout_str(), "again");
    assert_eq!(t.connections(), 2);
}

#[test]
fn uploads_and_downloads_with_mode_owner_and_progress() {
    let Some(c) = cluster("sshu") else { return };
    let node = &c.nodes[0];
    let t = node.transport().unwrap();
    let spec = FileSpec {
        path: "/etc/clusterctl/test/a.conf".into(),
        mode: 0o640,
        owner: Some("tester:tester".into()),
    };
    t.upload(b"one\n", &spec).unwrap();
    t.upload(b"two\n", &spec).unwrap();
    assert_eq!(
        node.sh(
            "stat -c '%a %U:%G %s' /etc/clusterctl/test/a.conf; cat /etc/clusterctl/test/a.conf"
        )
        .unwrap(),
        "640 tester:tester 4\ntwo"
    );
    assert_eq!(
        node.sh("ls -A /etc/clusterctl/test").unwrap(),
        "a.conf",
        "temp files left"
    );
    assert_eq!(
        t.download("/etc/clusterctl/test/a.conf")
            .unwrap()
            .as_deref(),
        Some(&b"two\n"[..])
    );
    assert_eq!(t.download("/etc/clusterctl/none").unwrap(), None);

    // A 24 MiB stream with byte progress, checked on the node by sha256.
    let size = 24 * 1024 * 1024usize;
    let data: Vec<u8> = (0..size)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let mut seen: Vec<u64> = Vec::new();
    let big = FileSpec {
        path: "/var/tmp/big.bin".into(),
        mode: 0o600,
        owner: None,
    };
    t.upload_stream(&mut &data[..], size as u64, &big, &mut |n| seen.push(n))
        .unwrap();
    assert!(seen.len() > 10 && seen.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(seen.last().copied(), Some(size as u64));
    let local = {
        use std::io::Write;
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&data).unwrap();
        let o = std::process::Command::new("sha256sum")
            .arg(f.path())
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(
        node.sh("sha256sum /var/tmp/big.bin | cut -d' ' -f1; stat -c %a /var/tmp/big.bin")
            .unwrap(),
        format!("{local}\n600")
    );
    assert_eq!(
        t.download("/var/tmp/big.bin").unwrap().map(|d| d.len()),
        Some(size)
    );
}

#[test]
fn sudo_as_a_non_root_user() {
    let Some(c) = cluster("sshs") else { return };
    let node = &c.nodes[0];
    let t = SshTransport::connect(node.ssh_target("tester"), node.ssh_options()).unwrap();
    assert_eq!(t.run(&Cmd::new("id -un")).unwrap().stdout_str(), "tester");
    let mut cmd = Cmd::new("id -un; echo $V").sudo();
    cmd.env.push(("V".into(), "kept".into()));
    assert_eq!(t.run(&cmd).unwrap().stdout_str(), "root\nkept");
    // Uploads go through sudo: a root-owned file where tester cannot write.
    let spec = FileSpec {
        path: "/etc/kubernetes/manifests/x.yaml".into(),
        mode: 0o600,
        owner: None,
    };
    t.upload(b"kind: Pod\n", &spec).unwrap();
    assert_eq!(
        node.sh("stat -c '%a %U' /etc/kubernetes/manifests/x.yaml")
            .unwrap(),
        "600 root"
    );
    assert_eq!(
        t.download("/etc/kubernetes/manifests/x.yaml")
            .unwrap()
            .as_deref(),
        Some(&b"kind: Pod\n"[..])
    );
    // Without sudo the same read is refused by the node.
    let out = t
        .run(&Cmd::new("cat /etc/kubernetes/manifests/x.yaml"))
        .unwrap();
    assert_ne!(out.status, 0);
}

#[test]
fn host_keys_strict_tofu_and_changed() {
    let Some(c) = cluster("sshk") else { return };
    let node = &c.nodes[0];
    let kh = c.dir().join("tofu_known_hosts");
    let mut opts = node.ssh_options();
    opts.known_hosts = kh.clone();

    // Strict, unknown host: refused.
    let err = SshTransport::connect(node.ssh_target("root"), opts.clone()).unwrap_err();
    assert!(matches!(err, ExecError::HostKey { .. }), "{err}");
    assert!(!kh.exists());

    // Trust on first use: recorded (0600), then pinned even under the strict policy.
    opts.host_key_policy = HostKeyPolicy::AcceptNew;
    let t = SshTransport::connect(node.ssh_target("root"), opts.clone()).unwrap();
    assert_eq!(t.run(&Cmd::new("true")).unwrap().status, 0);
    drop(t);
    let recorded = std::fs::read_to_string(&kh).unwrap();
    assert_eq!(recorded.trim(), node.known_hosts_line("ed25519").unwrap());
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&kh).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    opts.host_key_policy = HostKeyPolicy::Strict;
    SshTransport::connect(node.ssh_target("root"), opts.clone()).unwrap();

    // A different key recorded for this address: refused under both policies, file unchanged.
    let other = TestKey::generate().unwrap();
    let fake_kh = c.dir().join("wrong_known_hosts");
    let mut w = other.public.split_whitespace();
    std::fs::write(
        &fake_kh,
        format!(
            "{} {} {}\n",
            node.address,
            w.next().unwrap(),
            w.next().unwrap()
        ),
    )
    .unwrap();
    for policy in [HostKeyPolicy::Strict, HostKeyPolicy::AcceptNew] {
        let mut o = opts.clone();
        o.known_hosts = fake_kh.clone();
        o.host_key_policy = policy;
        let err = SshTransport::connect(node.ssh_target("root"), o).unwrap_err();
        match &err {
            ExecError::HostKey { reason, .. } => assert!(reason.contains("differs"), "{reason}"),
            e => panic!("expected a host key error, got {e}"),
        }
    }
    assert_eq!(
        std::fs::read_to_string(&fake_kh).unwrap().lines().count(),
        1
    );

    // The node's key really changes (re-installed host): the pinned entry now refuses it.
    node.sh("rm -f /etc/ssh/ssh_host_*; ssh-keygen -A >/dev/null; systemctl restart ssh")
        .unwrap();
    opts.host_key_policy = HostKeyPolicy::AcceptNew;
    let err = SshTransport::connect(node.ssh_target("root"), opts).unwrap_err();
    assert!(matches!(err, ExecError::HostKey { .. }), "{err}");
}

#[test]
fn a_host_known_only_by_another_algorithm_is_refused_naming_both() {
    // Issue 17, finding 13: known_hosts holds only the host's current key of another algorithm
    // (its ECDSA key; the server offers ed25519 first). Not "differs … man-in-the-middle": the keys
    // cannot be compared, so it is refused under both policies, naming both algorithms, and nothing
    // is recorded.
    let Some(c) = cluster("sshalg") else { return };
    let node = &c.nodes[0];
    let kh = c.dir().join("ecdsa_only_known_hosts");
    let ecdsa = node.known_hosts_line("ecdsa").unwrap();
    std::fs::write(&kh, format!("{ecdsa}\n")).unwrap();
    for policy in [HostKeyPolicy::Strict, HostKeyPolicy::AcceptNew] {
        let mut o = node.ssh_options();
        o.known_hosts = kh.clone();
        o.host_key_policy = policy;
        let err = SshTransport::connect(node.ssh_target("root"), o).unwrap_err();
        match &err {
            ExecError::HostKey { reason, .. } => {
                assert!(
                    reason.contains("offers a ssh-ed25519 host key")
                        && reason.contains("records only ecdsa-sha2-nistp256"),
                    "{reason}"
                );
                assert!(!reason.contains("man-in-the-middle"), "{reason}");
            }
            e => panic!("expected a host key error, got {e}"),
        }
    }
    assert_eq!(std::fs::read_to_string(&kh).unwrap(), format!("{ecdsa}\n"));
    // With the ed25519 line added beside it, the host is accepted.
    std::fs::write(
        &kh,
        format!("{ecdsa}\n{}\n", node.known_hosts_line("ed25519").unwrap()),
    )
    .unwrap();
    let mut o = node.ssh_options();
    o.known_hosts = kh.clone();
    let t = SshTransport::connect(node.ssh_target("root"), o).unwrap();
    assert_eq!(t.run(&Cmd::new("true")).unwrap().status, 0);
}

/// An ssh-agent of our own on a socket in a temp dir, killed on drop.
struct Agent {
    child: std::process::Child,
    socket: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Agent {
    fn start(key: &std::path::Path) -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("agent.sock");
        let child = std::process::Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&socket)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let agent = Agent {
            child,
            socket,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !agent.socket.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let st = std::process::Command::new("ssh-add")
            .arg(key)
            .env("SSH_AUTH_SOCK", &agent.socket)
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "ssh-add failed");
        agent
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn agent_auth_and_the_ssh_provider() {
    use clusterctl_exec::{NodeSpec, Provider, SshAuth, SshProvider};
    use clusterctl_spec::model::Role;
    let Some(c) = cluster("ssha") else { return };
    let node = &c.nodes[0];

    // Agent authentication, with no key file given.
    let agent = Agent::start(&node.key_file);
    let mut opts = node.ssh_options();
    opts.auth = SshAuth::AgentSocket(agent.socket.clone());
    let t = SshTransport::connect(node.ssh_target("tester"), opts.clone()).unwrap();
    assert_eq!(t.run(&Cmd::new("id -un")).unwrap().stdout_str(), "tester");
    // An agent without the right key is refused.
    let empty = Agent::start(&TestKey::generate().unwrap().private);
    opts.auth = SshAuth::AgentSocket(empty.socket.clone());
    let err = SshTransport::connect(node.ssh_target("tester"), opts).unwrap_err();
    assert!(matches!(err, ExecError::Connect { .. }), "{err}");

    // The SSH provider: defaults, and a node's own user and key overriding them.
    let provider = SshProvider::new("root", SshAuth::AgentSocket(agent.socket.clone()))
        .with_known_hosts(node.known_hosts.clone(), HostKeyPolicy::Strict);
    assert_eq!(provider.kind(), "ssh");
    let spec = NodeSpec::new("cp1", Role::ControlPlane, node.address.clone());
    let t = provider.transport(&spec).unwrap();
    assert_eq!(t.node(), "cp1");
    assert_eq!(t.run(&Cmd::new("id -un")).unwrap().stdout_str(), "root");
    let mut own = spec.clone();
    own.ssh_user = Some("tester".into());
    own.ssh_key = Some(node.key_file.clone());
    drop(agent);
    let t = provider.transport(&own).unwrap();
    assert_eq!(t.run(&Cmd::new("id -un")).unwrap().stdout_str(), "tester");
    // Several nodes at once, each with its own result.
    let all = provider.transports(&[own.clone(), own.clone()]);
    assert_eq!(all.len(), 2);
    for t in all {
        assert_eq!(
            t.unwrap().run(&Cmd::new("id -un")).unwrap().stdout_str(),
            "tester"
        );
    }
    // An unreachable port fails with a connect error naming the node.
    let mut bad = spec;
    bad.ssh_port = Some(1);
    match provider.transport(&bad) {
        Err(ExecError::Connect { node, .. }) => assert_eq!(node, "cp1"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("connected to port 1"),
    }
}

/// Connection set-up is retried while the node's sshd is not yet listening (a node still booting),
/// within `connect_retry`; with one attempt the same start fails at once; a refused host key is never
/// retried.
#[test]
fn connect_retries_while_sshd_starts_but_never_on_a_refused_host_key() {
    let Some(c) = cluster("sshy") else { return };
    let node = &c.nodes[0];
    node.sh("systemctl stop ssh.socket ssh.service 2>/dev/null; systemctl stop ssh")
        .unwrap();

    // One attempt: refused at once, and the error says nothing of retries.
    let mut once = node.ssh_options();
    once.connect_retry = ConnectRetry {
        attempts: 1,
        first_delay: Duration::from_millis(200),
    };
    let err = SshTransport::connect(node.ssh_target("root"), once).unwrap_err();
    match &err {
        ExecError::Connect { reason, .. } => assert!(!reason.contains("attempts"), "{reason}"),
        e => panic!("expected a connect error, got {e}"),
    }

    // Four attempts (waits of 1, 2, 4 s): sshd comes up 1.5 s later and the connection is made.
    let starter = {
        let name = node.name.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            std::process::Command::new("docker")
                .args(["exec", &name, "systemctl", "start", "ssh"])
                .status()
                .expect("docker exec")
        })
    };
    let mut retrying = node.ssh_options();
    retrying.connect_retry = ConnectRetry {
        attempts: 4,
        first_delay: Duration::from_secs(1),
    };
    let t = SshTransport::connect(node.ssh_target("root"), retrying.clone()).unwrap();
    assert!(starter.join().unwrap().success());
    assert_eq!(t.run(&Cmd::new("true")).unwrap().status, 0);
    assert_eq!(t.connections(), 1);

    // Exhausted: the error names the attempts made.
    node.sh("systemctl stop ssh").unwrap();
    let mut short = retrying.clone();
    short.connect_retry.first_delay = Duration::from_millis(100);
    let err = SshTransport::connect(node.ssh_target("root"), short).unwrap_err();
    match &err {
        ExecError::Connect { reason, .. } => {
            assert!(reason.contains("after 4 attempts"), "{reason}")
        }
        e => panic!("expected a connect error, got {e}"),
    }
    node.sh("systemctl start ssh").unwrap();

    // A changed host key: refused on the first attempt, without waiting for any retry.
    let other = TestKey::generate().unwrap();
    let fake_kh = c.dir().join("retry_known_hosts");
    let mut w = other.public.split_whitespace();
    std::fs::write(
        &fake_kh,
        format!(
            "{} {} {}\n",
            node.address,
            w.next().unwrap(),
            w.next().unwrap()
        ),
    )
    .unwrap();
    let mut pinned = retrying;
    pinned.known_hosts = fake_kh;
    pinned.connect_retry.first_delay = Duration::from_secs(5);
    let start = Instant::now();
    let err = SshTransport::connect(node.ssh_target("root"), pinned).unwrap_err();
    assert!(matches!(err, ExecError::HostKey { .. }), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}
