//! The two subjects, each one process inside the node namespace, and what is read of them:
//! * ours: this benchmark binary run again with [`AGENT_ENV`] set, which runs exactly the agent's
//!   policy loop (`clusterctl_cni::agent::netpol::watch::run`, what `clusterctl cni agent` starts on
//!   its `network-policy` thread) with the node's `nft`;
//! * the peer: kube-network-policies (`sigs.k8s.io/kube-network-policies`, built from its Go module
//!   by `scripts/k8s/build.sh`), started as its DaemonSet starts it — in-cluster configuration from
//!   `KUBERNETES_SERVICE_HOST`/`PORT` and the ServiceAccount files under
//!   `/var/run/secrets/kubernetes.io/serviceaccount` (a tmpfs on `/run` in a mount namespace of its
//!   own), `--hostname-override` the node, NRI off (no container runtime here).
//!
//! CPU is `utime + stime + cutime + cstime` of `/proc/PID/stat` (children waited for included: our
//! `nft` runs), memory `VmRSS`/`VmHWM` of `/proc/PID/status`.

use crate::world::World;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Set (to the node name) in the environment of the re-run binary that is our agent.
pub(crate) const AGENT_ENV: &str = "CLUSTERCTL_NETPOL_BENCH_AGENT";

/// Which program enforces.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The builtin CNI agent's policy loop.
    Ours,
    /// kube-network-policies.
    Peer,
}

impl Kind {
    /// The subject's column label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Ours => "clusterctl agent",
            Kind::Peer => "kube-network-policies",
        }
    }

    /// Its nftables table in the node namespace (`family name`).
    fn table(self) -> [&'static str; 2] {
        match self {
            Kind::Ours => ["inet", "clusterctl-netpol"],
            Kind::Peer => ["inet", "kube-network-policies"],
        }
    }
}

/// A running subject; killed, and its table deleted, on drop.
pub(crate) struct Running {
    pub(crate) kind: Kind,
    child: Child,
    log: PathBuf,
    node: String,
}

/// Starts `kind` in the node namespace of `w`; its stderr goes to `<dir>/<kind>.log` (this run's).
pub(crate) fn start(w: &World, kind: Kind, peer: &Path) -> Running {
    let log = w.dir.path().join(match kind {
        Kind::Ours => "ours.log",
        Kind::Peer => "peer.log",
    });
    let err = std::fs::File::create(&log).expect("log");
    let mut c = Command::new("ip");
    c.args(["netns", "exec", w.node_name()]);
    match kind {
        Kind::Ours => {
            c.arg(std::env::current_exe().expect("current exe"))
                .env(AGENT_ENV, w.node_name())
                .env("KUBECONFIG", w.kubeconfig());
        }
        Kind::Peer => {
            let secrets = "/run/secrets/kubernetes.io/serviceaccount";
            let script = format!(
                "mount -t tmpfs tmpfs /run && mkdir -p {secrets} && cp \"$0\" \"$1\" {secrets}/ && exec \"$2\" \
                 --hostname-override=\"$3\" --disable-nri --metrics-bind-address=127.0.0.1:19080 --v=2"
            );
            c.args([
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
            ])
            .arg(w.dir.path().join("token"))
            .arg(w.dir.path().join("ca.crt"))
            .arg(peer)
            .arg(w.node_name())
            .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
            .env("KUBERNETES_SERVICE_PORT", w.env.addr().port().to_string());
        }
    }
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .expect("start subject");
    Running {
        kind,
        child,
        log,
        node: w.node_name().to_string(),
    }
}

impl Running {
    /// Whether the process has exited.
    pub(crate) fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// CPU seconds used so far (its own and its waited-for children's).
    pub(crate) fn cpu(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
        // Fields after the name: state is 3rd overall, utime 14th … cstime 17th.
        let f: Vec<f64> = after
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0.0))
            .collect();
        let ticks: f64 = f.get(11..15).map(|s| s.iter().sum()).unwrap_or(0.0);
        ticks / clk_tck()
    }

    /// `(VmRSS, VmHWM)` in MiB.
    pub(crate) fn memory(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let kib = |key: &str| -> f64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0)
        };
        (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
    }

    /// The lines of its log that say what went wrong (errors, panics, with the indented lines that
    /// continue them, as klog writes a multi-line `error=<`), each distinct one once, at most `n`.
    pub(crate) fn errors(&self, n: usize) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut out: Vec<String> = Vec::new();
        let mut inside = false;
        for l in text.lines() {
            let low = l.to_ascii_lowercase();
            let continues = inside && l.starts_with(char::is_whitespace) || l.trim() == ">";
            inside = low.contains("error")
                || low.contains("panic")
                || low.contains("fatal")
                || continues;
            // Without klog's header (level, time, pid, file:line), so repeats compare equal.
            let msg = l
                .split_once("] ")
                .map_or(l, |(_, m)| m)
                .trim_end()
                .to_string();
            if inside && !out.contains(&msg) && out.len() < n {
                out.push(msg.chars().take(400).collect());
            }
        }
        out
    }

    /// The durations (ms) our agent logged for its applies (`… applied in N ms`: compile, script and
    /// `nft -f -`); empty for the peer.
    pub(crate) fn applies_ms(&self) -> Vec<f64> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                l.split_once("applied in ")?
                    .1
                    .strip_suffix(" ms")?
                    .parse()
                    .ok()
            })
            .collect()
    }

    /// How long `nft -f -` takes to replace the table with itself (its listing after `delete table`,
    /// one transaction): the share of an apply that is `nft`'s (ms; `None` without a table).
    pub(crate) fn reload_ms(&self) -> Option<f64> {
        let [family, name] = self.kind.table();
        let listing = nft(&self.node, &["list", "table", family, name])?;
        let script = format!("delete table {family} {name}\n{listing}");
        let t = std::time::Instant::now();
        let mut c = Command::new("ip")
            .args(["netns", "exec", &self.node, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .ok()?;
        std::io::Write::write_all(&mut c.stdin.take()?, script.as_bytes()).ok()?;
        c.wait()
            .ok()?
            .success()
            .then(|| t.elapsed().as_secs_f64() * 1000.0)
    }

    /// The lines of the table as `nft` lists it (0 when the table is absent).
    pub(crate) fn table_lines(&self) -> usize {
        let [family, name] = self.kind.table();
        nft(&self.node, &["list", "table", family, name])
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let [family, name] = self.kind.table();
        let _ = nft(&self.node, &["delete", "table", family, name]);
    }
}

/// `nft ARGS` in the node namespace; its stdout, or `None` when it failed.
fn nft(node: &str, args: &[&str]) -> Option<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", node, "nft"])
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn clk_tck() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The body of the re-run binary: our agent's policy loop for node `node` until killed.
pub(crate) fn agent_main(node: &str) {
    use std::sync::atomic::AtomicBool;
    static NEVER: AtomicBool = AtomicBool::new(false);
    let kc = std::env::var_os("KUBECONFIG").map(PathBuf::from);
    let nft = clusterctl_cni::agent::netpol::Nft::default();
    if let Err(e) =
        clusterctl_cni::agent::netpol::watch::run(node, kc, &nft, Duration::from_secs(30), &NEVER)
    {
        eprintln!("policy loop: {e}");
        std::process::exit(1);
    }
}

/// An iperf (iperf2, as in the agnhost image) server on TCP 5001 inside `ns`; killed on drop.
pub(crate) struct Iperf(Child);

impl Iperf {
    /// Starts `iperf -s -p 5001` in `ns`.
    pub(crate) fn serve(ns: &clusterctl_testbed::netns::Netns) -> Iperf {
        let c = ns
            .command("iperf")
            .args(["-s", "-p", "5001"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf -s");
        std::thread::sleep(Duration::from_millis(300));
        Iperf(c)
    }
}

impl Drop for Iperf {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One `iperf -c` run of `secs` seconds from `ns` to `ip`: Mbit/s (the CSV report's last field).
pub(crate) fn iperf(
    ns: &clusterctl_testbed::netns::Netns,
    ip: std::net::Ipv4Addr,
    secs: u32,
) -> f64 {
    let out = ns
        .exec(
            "iperf",
            &[
                "-c",
                &ip.to_string(),
                "-p",
                "5001",
                "-t",
                &secs.to_string(),
                "-y",
                "C",
            ],
        )
        .expect("iperf -c");
    let text = String::from_utf8_lossy(&out.stdout);
    let bps: f64 = text
        .lines()
        .last()
        .and_then(|l| l.rsplit(',').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("iperf: {text} {}", String::from_utf8_lossy(&out.stderr)));
    bps / 1e6
}
