//! One writer at a time, with real processes: `clusterctl up` held mid-run (its node's SSH port on this
//! machine accepts the connection and never answers, so `up` waits in its SSH handshake) holds the
//! cluster's lock; a second `up`, a `destroy --yes`, a `certs renew --all` and an `etcd snapshot restore` are refused at once with exit 3, naming the
//! holder (command, process id, machine, since when); `status` and `up --dry-run` run meanwhile and
//! never mention the lock; the lock file is 0600 and holds only the holder's record. The holder is
//! then SIGKILLed: its record stays, and the next `up` takes the lock over and says whose it was.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clusterctl_testbed::cli::Clusterctl;

/// A TCP port on a local address that accepts connections and never says anything (a node whose
/// SSH server hangs), for as long as the test runs.
fn silent_port() -> Option<(String, u16)> {
    let (addr, _) = clusterctl_testbed::refusing_address()?;
    let l = TcpListener::bind(format!("{addr}:0")).expect("listener");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            held.push(s);
        }
    });
    Some((addr, port))
}

fn spawn(dir: &std::path::Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_clusterctl"))
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("XDG_CACHE_HOME")
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clusterctl starts")
}

/// Waits until the lock file names process `pid`.
fn wait_held(lock: &std::path::Path, pid: u32) -> String {
    let t = Instant::now();
    loop {
        let text = std::fs::read_to_string(lock).unwrap_or_default();
        if text.contains(&format!("\"pid\":{pid}")) {
            return text;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "lock not taken: {text:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_second_writer_is_refused_readers_run_and_a_dead_holders_lock_is_taken_over() {
    let Some((addr, port)) = silent_port() else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let name = "lockheld";
    std::fs::write(
        d.join("cluster.yaml"),
        format!("apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  ssh: {{user: ops, port: {port}, connectAttempts: 5}}\n  nodes:\n    - {{name: cp1, role: control-plane, address: {addr}}}\n"),
    )
    .expect("cluster file");
    let cli = Clusterctl::new(env!("CARGO_BIN_EXE_clusterctl"), d);
    // `status` asks the API of the cluster's context: a closed port here, so it fails at once.
    let (closed_addr, closed) = clusterctl_testbed::refusing_address().expect("closed port");
    std::fs::write(cli.kubeconfig(), format!("apiVersion: v1\nkind: Config\nclusters:\n- name: clusterctl-{name}\n  cluster: {{server: 'https://{closed_addr}:{closed}'}}\nusers:\n- name: clusterctl-{name}\n  user: {{token: t}}\ncontexts:\n- name: clusterctl-{name}\n  context: {{cluster: clusterctl-{name}, user: clusterctl-{name}}}\ncurrent-context: clusterctl-{name}\n")).expect("kubeconfig");
    let lock = d.join(".cache/clusterctl").join(name).join("lock");
    let t = Instant::now();

    // 1. `up` held in its SSH handshake holds the lock.
    let mut holder = spawn(d, &["up", "-f", "cluster.yaml"]);
    let record = wait_held(&lock, holder.id());
    assert!(record.contains("\"command\":\"clusterctl up\""), "{record}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&lock).expect("lock").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // 2. A second writer is refused at once, naming the holder; exit 3.
    for args in [
        vec!["up", "-f", "cluster.yaml"],
        vec!["destroy", "-f", "cluster.yaml", "--yes"],
        vec!["certs", "renew", "-f", "cluster.yaml", "--all"],
        vec![
            "etcd",
            "snapshot",
            "restore",
            "-f",
            "cluster.yaml",
            "snap.db",
        ],
    ] {
        let started = Instant::now();
        let r = cli.run(&args).expect("run");
        let out = r.all();
        assert_eq!(r.code, 3, "{args:?}: {out}");
        assert!(
            out.contains(&format!(
                "cluster {name} is being changed by another clusterctl"
            )) && out.contains(&format!("`clusterctl up` (process {} on ", holder.id()))
                && out.contains(" UTC, "),
            "{args:?}: {out}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{args:?} waited"
        );
    }

    // 3. Readers never wait for it: status (no API here: it fails, but not on the lock) and a dry run.
    for args in [
        vec!["status", "-f", "cluster.yaml"],
        vec!["up", "-f", "cluster.yaml", "--dry-run"],
        vec!["validate", "-f", "cluster.yaml"],
    ] {
        let started = Instant::now();
        let r = cli.run(&args).expect("run");
        assert_ne!(r.code, 3, "{args:?}: {}", r.all());
        assert!(!r.all().contains("being changed"), "{args:?}: {}", r.all());
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{args:?} waited"
        );
    }
    assert!(
        holder.try_wait().expect("wait").is_none(),
        "the holder is still running"
    );

    // 4. The holder dies (SIGKILL): its record stays; the next writer takes the lock over.
    let dead = holder.id();
    holder.kill().expect("kill");
    let _ = holder.wait();
    assert!(std::fs::read_to_string(&lock)
        .expect("lock")
        .contains(&format!("\"pid\":{dead}")));
    let mut next = spawn(d, &["up", "-f", "cluster.yaml"]);
    let stderr = next.stderr.take().expect("stderr");
    let mut said = String::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("line");
        said.push_str(&line);
        said.push('\n');
        if line.contains("took over the lock") {
            break;
        }
    }
    wait_held(&lock, next.id());
    next.kill().expect("kill");
    let _ = next.wait();
    assert!(
        said.contains(&format!(
            "up: took over the lock of cluster {name} from `clusterctl up` (process {dead} on "
        )) && said.contains("that process ended without releasing it"),
        "{said}"
    );
    eprintln!("cluster_lock: {:.1}s", t.elapsed().as_secs_f64());
}
