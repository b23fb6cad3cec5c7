//! Docker node containers for tests: the locally built Debian node image (debootstrap, tagged by a hash of its recipe) and containers started from it, removed by a drop guard.
//!
//! The node image is built once per machine by [`NodeImage::ensure`] from `tests/node-image/build.sh`
//! (systemd as PID 1, sshd with per-container host keys, containerd, runc, the CNI reference plugins,
//! sudo and a passwordless-sudo user `tester`), under a file lock so that parallel tests build it once.
//! [`TestCluster::start`] starts systemd node containers on a uniquely named user-defined network with
//! the run options of `shared/TESTBED.md` (no `--privileged`), installs a freshly generated test key
//! as `authorized_keys` for `root` and `tester`, and waits until systemd runs and sshd answers. Dropping
//! the cluster removes its containers and network, also when a test fails.
//!
//! Everything goes through the `docker` CLI so that the harness does not depend on the code under test.

mod budget;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clusterctl_exec::{SshAuth, SshOptions, SshTarget, SshTransport};
use clusterctl_spec::model::HostKeyPolicy;
use sha2::{Digest, Sha256};

/// The node image recipe (a POSIX shell script taking TAG SUITE MIRROR).
pub const NODE_IMAGE_RECIPE: &str = include_str!("../node-image/build.sh");

/// The node image's entrypoint (`scripts/k8s/node/node-init.sh`): remounts the container's private
/// cgroup tree read-write, then execs its command (`/sbin/init`). Part of the image's tag.
pub const NODE_INIT: &str = include_str!("../../scripts/k8s/node/node-init.sh");

/// Label put on every container and network the test bed creates (value: the creating process id).
pub const TESTBED_LABEL: &str = "io.clusterctl.testbed.pid";

/// Runs `docker ARGS`, returning trimmed stdout, or an error with stderr.
pub fn docker(args: &[&str]) -> Result<String> {
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running docker {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "docker {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// True when the Docker engine answers `docker info` (see `scripts/services/docker.sh`).
pub fn docker_available() -> bool {
    Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The IPv4 gateway of docker network `network` (this machine, as the network's containers see it).
///
/// An engine may leave `IPAM.Config[].Gateway` empty (the default `bridge` on an engine's first start
/// holds only its subnet), so this falls back to the address of the network's bridge interface on this
/// machine (`docker0` for `bridge`, `br-<id12>` for user-defined networks) and then to the subnet's
/// first host, which is where the engine puts the gateway. Errors: `docker network inspect` fails, or
/// the network has no IPv4 subnet.
pub fn network_gateway(network: &str) -> Result<std::net::Ipv4Addr> {
    let out = docker(&["network", "inspect", "--format", "{{json .}}", network])?;
    let v: serde_json::Value =
        serde_json::from_str(&out).with_context(|| format!("docker network inspect {network}"))?;
    let configs = v["IPAM"]["Config"].as_array().cloned().unwrap_or_default();
    let field = |c: &serde_json::Value, k: &str| c[k].as_str().unwrap_or_default().to_string();
    if let Some(ip) = configs
        .iter()
        .find_map(|c| field(c, "Gateway").parse::<std::net::Ipv4Addr>().ok())
    {
        return Ok(ip);
    }
    let id = v["Id"].as_str().unwrap_or_default();
    let bridge = match v["Options"]["com.docker.network.bridge.name"].as_str() {
        Some(b) => b.to_string(),
        None if network == "bridge" => "docker0".to_string(),
        None => format!("br-{}", id.get(..12).unwrap_or(id)),
    };
    if let Some(ip) = interface_ipv4(&bridge) {
        return Ok(ip);
    }
    let (addr, len) = configs
        .iter()
        .find_map(|c| {
            let subnet = field(c, "Subnet");
            let (a, l) = subnet.split_once('/')?;
            Some((
                a.parse::<std::net::Ipv4Addr>().ok()?,
                l.parse::<u32>().ok()?,
            ))
        })
        .with_context(|| format!("docker network {network} has no IPv4 subnet: {out}"))?;
    let mask = if len == 0 {
        0
    } else {
        u32::MAX << (32 - len.min(32))
    };
    Ok(std::net::Ipv4Addr::from((u32::from(addr) & mask) + 1))
}

/// The first IPv4 address of interface `name` on this machine (`ip -4 -o addr show dev NAME`), if any.
fn interface_ipv4(name: &str) -> Option<std::net::Ipv4Addr> {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show", "dev", name])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    words.find(|w| *w == "inet")?;
    words.next()?.split('/').next()?.parse().ok()
}

/// The Debian suite and mirror apt is configured with: `(suite, mirror URL)`, read from
/// `/etc/apt/sources.list.d/debian.sources` (deb822) or else `/etc/apt/sources.list`.
pub fn apt_mirror() -> Result<(String, String)> {
    let os = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let suite = os
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|s| s.trim_matches('"').to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "bookworm".to_string());
    if let Ok(text) = std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources") {
        for stanza in text.split("\n\n") {
            let field = |name: &str| {
                stanza.lines().find_map(|l| {
                    l.strip_prefix(name)
                        .and_then(|r| r.strip_prefix(':'))
                        .map(|v| v.trim().to_string())
                })
            };
            let suites = field("Suites").unwrap_or_default();
            if suites.split_whitespace().any(|s| s == suite) {
                if let Some(uri) =
                    field("URIs").and_then(|u| u.split_whitespace().next().map(String::from))
                {
                    return Ok((suite, uri));
                }
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string("/etc/apt/sources.list") {
        for l in text.lines() {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() >= 3 && w[0] == "deb" {
                let (url, s) = if w[1].starts_with('[') {
                    (w.get(2), w.get(3))
                } else {
                    (w.get(1), w.get(2))
                };
                if let (Some(url), Some(s)) = (url, s) {
                    if *s == suite {
                        return Ok((suite, url.to_string()));
                    }
                }
            }
        }
    }
    bail!("no Debian mirror for {suite} found in apt's sources")
}

/// The locally built node image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeImage {
    /// Image reference, `clusterctl-node:<12 hex digits of sha256(recipe, suite)>`.
    pub tag: String,
}

impl NodeImage {
    /// The image tag for the current recipe and suite, without building anything.
    pub fn tag_for(suite: &str) -> String {
        let mut h = Sha256::new();
        h.update(NODE_IMAGE_RECIPE.as_bytes());
        h.update(b"\0");
        h.update(NODE_INIT.as_bytes());
        h.update(b"\0");
        h.update(suite.as_bytes());
        let hex = hex::encode(h.finalize());
        format!("clusterctl-node:{}", &hex[..12])
    }

    /// Builds the node image unless it exists (once per machine; about 1–3 min, network bound), under
    /// an exclusive `flock` on `/run/lock/clusterctl-node-image.lock`. Memoised per process.
    pub fn ensure() -> Result<NodeImage> {
        static IMAGE: OnceLock<Mutex<Option<NodeImage>>> = OnceLock::new();
        let cell = IMAGE.get_or_init(|| Mutex::new(None));
        let mut guard = cell
            .lock()
            .map_err(|_| anyhow!("node image lock poisoned"))?;
        if let Some(img) = guard.as_ref() {
            return Ok(img.clone());
        }
        let (suite, mirror) = apt_mirror()?;
        let tag = Self::tag_for(&suite);
        if docker(&["image", "inspect", "--format", "{{.Id}}", &tag]).is_err() {
            let dir = tempfile::tempdir()?;
            let script = dir.path().join("build.sh");
            std::fs::write(&script, NODE_IMAGE_RECIPE)?;
            std::fs::write(dir.path().join("node-init.sh"), NODE_INIT)?;
            let lock_dir = if Path::new("/run/lock").is_dir() {
                "/run/lock"
            } else {
                "/tmp"
            };
            let lock = format!("{lock_dir}/clusterctl-node-image.lock");
            eprintln!("[testbed] building node image {tag} from {mirror} ({suite}); this takes a few minutes once");
            let out = Command::new("flock")
                .arg(&lock)
                .arg("sh")
                .arg(&script)
                .args([&tag, &suite, &mirror])
                .stdin(Stdio::null())
                .output()
                .context("running flock sh build.sh (util-linux, debootstrap)")?;
            if !out.status.success() {
                bail!(
                    "node image build failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
        let img = NodeImage { tag };
        *guard = Some(img.clone());
        Ok(img)
    }
}

/// An SSH key pair generated for one test run (ed25519, no passphrase), in a temp dir removed on drop.
#[derive(Debug)]
pub struct TestKey {
    _dir: tempfile::TempDir,
    /// Path of the private key (mode 0600, OpenSSH format).
    pub private: PathBuf,
    /// The public key line (`ssh-ed25519 AAAA… comment`).
    pub public: String,
}

impl TestKey {
    /// Generates a key with `ssh-keygen` (package openssh-client).
    pub fn generate() -> Result<TestKey> {
        let dir = tempfile::tempdir()?;
        let private = dir.path().join("id_ed25519");
        let st = Command::new("ssh-keygen")
            .args([
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "clusterctl-testbed",
                "-f",
            ])
            .arg(&private)
            .stdin(Stdio::null())
            .status()
            .context("running ssh-keygen")?;
        if !st.success() {
            bail!("ssh-keygen failed: {st}");
        }
        let public = std::fs::read_to_string(private.with_extension("pub"))?
            .trim()
            .to_string();
        Ok(TestKey {
            _dir: dir,
            private,
            public,
        })
    }
}

/// How to start a test cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Name prefix (at most 5 bytes), made unique with [`crate::unique_name`].
    pub prefix: String,
    /// Number of node containers.
    pub nodes: usize,
    /// Extra `docker run` arguments added to the TESTBED.md defaults.
    pub extra_run_args: Vec<String>,
    /// How long to wait for each node to boot and answer on port 22.
    pub boot_timeout: Duration,
    /// The image the nodes run instead of the node image (e.g. a
    /// [`crate::k8snode::K8sNodeImage`] built on it); `None`: [`NodeImage::ensure`]'s.
    pub image: Option<String>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            prefix: "ctn".into(),
            nodes: 1,
            extra_run_args: Vec::new(),
            boot_timeout: Duration::from_secs(90),
            image: None,
        }
    }
}

/// The `docker run` options of a systemd node container (TESTBED.md), without name, network and image.
///
/// No `-v /sys/fs/cgroup:/sys/fs/cgroup:rw`: with `--cgroupns private` the engine mounts the node's own
/// cgroup tree, which the image's entrypoint (`node-init.sh`, [`NODE_INIT`]) remounts read-write, so a
/// node's systemd units (and a kubelet's pods) stay inside the node's cgroup instead of sharing the
/// host's root cgroups (docs/testbed-kubernetes.md, "Node container").
///
/// `SYS_PTRACE`: runc, root in the node, opens `/proc/<sandbox pid>/ns/*` of the pod it joins; when the
/// pod's sandbox runs as another user (a pod-level `runAsUser`, e.g. kubeadm's upgrade health-check
/// Job) the kernel's ptrace access check refuses that without CAP_SYS_PTRACE (runc's log: `failed to
/// open /proc/N/ns/ipc: Permission denied`, the kubelet's: `can't get final child's PID from pipe:
/// EOF`), with any runc; runc ≥ 1.2 needs it for every pod.
pub fn systemd_node_run_args() -> Vec<String> {
    [
        "--cap-add",
        "SYS_ADMIN",
        "--cap-add",
        "NET_ADMIN",
        "--cap-add",
        "SYS_PTRACE",
        "--security-opt",
        "seccomp=unconfined",
        "--security-opt",
        "apparmor=unconfined",
        "--tmpfs",
        "/run:exec",
        "--tmpfs",
        "/run/lock",
        "--tmpfs",
        "/tmp:exec",
        "--tmpfs",
        "/var/lib/containerd:exec",
        "--cgroupns",
        "private",
        "-e",
        "container=docker",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// One running node container.
#[derive(Debug, Clone)]
pub struct TestNode {
    /// Container name (also its hostname).
    pub name: String,
    /// IPv4 address on the cluster's network.
    pub address: String,
    /// SSH port (22).
    pub port: u16,
    /// Private key accepted for `root` and `tester`.
    pub key_file: PathBuf,
    /// A known_hosts file holding the ed25519 host key of every node of the cluster.
    pub known_hosts: PathBuf,
}

impl TestNode {
    /// Where to reach this node over SSH as `user` (`root` or `tester`).
    pub fn ssh_target(&self, user: &str) -> SshTarget {
        SshTarget {
            node: self.name.clone(),
            host: self.address.clone(),
            port: self.port,
            user: user.to_string(),
        }
    }

    /// SSH options with the test key, the cluster's known_hosts file and the strict host-key policy.
    pub fn ssh_options(&self) -> SshOptions {
        let mut o = SshOptions::new(SshAuth::KeyFile {
            path: self.key_file.clone(),
            passphrase: None,
        });
        o.known_hosts = self.known_hosts.clone();
        o.host_key_policy = HostKeyPolicy::Strict;
        o
    }

    /// A connected SSH transport to this node as `root`, host key checked strictly.
    pub fn transport(&self) -> Result<SshTransport> {
        Ok(SshTransport::connect(
            self.ssh_target("root"),
            self.ssh_options(),
        )?)
    }

    /// Runs `script` with `sh -c` inside the container through `docker exec` (independent of the
    /// transports under test), feeding `stdin`. Returns (exit status, stdout, stderr).
    pub fn exec(&self, script: &str, stdin: &[u8]) -> Result<(i32, String, String)> {
        let mut child = Command::new("docker")
            .args(["exec", "-i", &self.name, "sh", "-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("docker exec")?;
        if let Some(mut i) = child.stdin.take() {
            i.write_all(stdin)?;
        }
        let out = child.wait_with_output()?;
        Ok((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// Runs `script` inside the container and returns its trimmed stdout, failing on non-zero exit.
    pub fn sh(&self, script: &str) -> Result<String> {
        let (st, out, err) = self.exec(script, b"")?;
        if st != 0 {
            bail!("{} in {}: exit {st}: {}", script, self.name, err.trim());
        }
        Ok(out.trim().to_string())
    }

    /// The images in the node's containerd (`/usr/bin/ctr -n k8s.io images ls`, namespace `k8s.io`):
    /// name → manifest digest (`sha256:<hex>`). The absolute path bypasses any recording `ctr`
    /// wrapper a test put first on `PATH`. Errors: `ctr` failing.
    pub fn ctr_images(&self) -> Result<std::collections::BTreeMap<String, String>> {
        Ok(self
            .sh("/usr/bin/ctr -n k8s.io images ls")?
            .lines()
            .skip(1)
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let name = w.next()?;
                let digest = w.nth(1)?;
                Some((name.to_string(), digest.to_string()))
            })
            .collect())
    }

    /// The node's SSH host key of `kind` (`ed25519`, `ecdsa`, `rsa`) as a known_hosts line for its
    /// address and port (`ADDR keytype base64`, or `[ADDR]:PORT …` for a port other than 22).
    pub fn known_hosts_line(&self, kind: &str) -> Result<String> {
        let pubkey = self.sh(&format!("cat /etc/ssh/ssh_host_{kind}_key.pub"))?;
        let mut parts = pubkey.split_whitespace();
        let (t, k) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let host = if self.port == 22 {
            self.address.clone()
        } else {
            format!("[{}]:{}", self.address, self.port)
        };
        Ok(format!("{host} {t} {k}"))
    }

    /// Waits until sshd accepts the test key for `root` and `tester` (OpenSSH's client, independent of
    /// the transport under test): a node whose sshd answers may still be too busy to read
    /// `authorized_keys` in time on a loaded machine.
    fn wait_key_accepted(&self, deadline: Instant) -> Result<()> {
        let key = self.key_file.to_string_lossy();
        for user in ["root", "tester"] {
            let login = format!("{user}@{}", self.address);
            let port = self.port.to_string();
            loop {
                let out = Command::new("ssh")
                    .args([
                        "-i",
                        &key,
                        "-p",
                        &port,
                        "-o",
                        "BatchMode=yes",
                        "-o",
                        "IdentitiesOnly=yes",
                        "-o",
                        "StrictHostKeyChecking=no",
                        "-o",
                        "UserKnownHostsFile=/dev/null",
                        "-o",
                        "ConnectTimeout=5",
                        "-o",
                        "LogLevel=ERROR",
                        &login,
                        "true",
                    ])
                    .stdin(Stdio::null())
                    .output()
                    .context("running ssh (package openssh-client)")?;
                if out.status.success() {
                    break;
                }
                if Instant::now() > deadline {
                    bail!(
                        "sshd of {} does not accept the test key for {user}: {}",
                        self.name,
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        Ok(())
    }

    fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let state = self
                .exec("systemctl is-system-running --wait 2>/dev/null", b"")
                .map(|r| r.1);
            let state = state.unwrap_or_default();
            let state = state.trim();
            if state == "running" || state == "degraded" {
                break;
            }
            if Instant::now() > deadline {
                let logs = docker(&["logs", "--tail", "20", &self.name]).unwrap_or_default();
                bail!(
                    "node {} did not boot (state {state:?}); logs:\n{logs}",
                    self.name
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let addr: SocketAddr = format!("{}:{}", self.address, self.port).parse()?;
        let mut retried = false;
        let since = Instant::now();
        loop {
            if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut banner = [0u8; 4];
                if s.read_exact(&mut banner).is_ok() && &banner == b"SSH-" {
                    return self.wait_key_accepted(deadline);
                }
            }
            // systemd is up but the ssh unit gave up (e.g. its start limit on a very loaded host):
            // start it once more before waiting on.
            if !retried && since.elapsed() > Duration::from_secs(10) {
                retried = true;
                let (_, state, _) =
                    self.exec("systemctl is-failed ssh clusterctl-hostkeys || true", b"")?;
                if state.lines().any(|l| l.trim() == "failed") {
                    let journal = self
                        .exec(
                            "systemctl status --no-pager -n 5 clusterctl-hostkeys ssh 2>&1 | head -n 40",
                            b"",
                        )
                        .map(|r| r.1)
                        .unwrap_or_default();
                    eprintln!(
                        "[testbed] {}: ssh unit failed at boot, starting it again:\n{journal}",
                        self.name
                    );
                    let _ = self.exec(
                        "systemctl reset-failed ssh clusterctl-hostkeys; systemctl start clusterctl-hostkeys ssh",
                        b"",
                    );
                }
            }
            if Instant::now() > deadline {
                let diag = self
                    .exec("systemctl is-active ssh clusterctl-hostkeys; journalctl -u clusterctl-hostkeys -u ssh --no-pager -n 12 2>&1", b"")
                    .map(|r| r.1)
                    .unwrap_or_default();
                bail!("sshd of {} does not answer on {addr}:\n{diag}", self.name);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Node containers on their own user-defined network, removed (with the network) on drop.
#[derive(Debug)]
pub struct TestCluster {
    /// The network's name (unique to this test).
    pub network: String,
    /// The network's gateway address (this machine, as seen from the nodes).
    pub gateway: String,
    /// The nodes, in creation order.
    pub nodes: Vec<TestNode>,
    /// The key the nodes accept for `root` and `tester`.
    pub key: Arc<TestKey>,
    /// The image the nodes run.
    pub image: NodeImage,
    containers: Vec<String>,
    dir: tempfile::TempDir,
    /// The nodes taken from the machine's budget (given back after the containers are removed).
    _budget: budget::Nodes,
}

impl TestCluster {
    /// Starts `nodes` node containers with default options.
    pub fn start(prefix: &str, nodes: usize) -> Result<TestCluster> {
        Self::start_with(ClusterOptions {
            prefix: prefix.into(),
            nodes,
            ..Default::default()
        })
    }

    /// Builds the image if needed, creates the network, starts every node, installs the test key and
    /// waits (in parallel) for each node's systemd and sshd. On any error everything made is removed.
    pub fn start_with(opts: ClusterOptions) -> Result<TestCluster> {
        let budget = budget::Nodes::take(opts.nodes);
        remove_stale();
        let image = NodeImage::ensure()?;
        let key = Arc::new(TestKey::generate()?);
        let dir = tempfile::tempdir()?;
        let known_hosts = dir.path().join("known_hosts");
        let network = crate::unique_name(&opts.prefix);
        let pid = std::process::id().to_string();
        let label = format!("{TESTBED_LABEL}={pid}");
        docker(&["network", "create", "--label", &label, &network])?;
        let mut cluster = TestCluster {
            gateway: String::new(),
            network: network.clone(),
            nodes: Vec::new(),
            key: key.clone(),
            image: image.clone(),
            containers: Vec::new(),
            dir,
            _budget: budget,
        };
        cluster.gateway = network_gateway(&network)?.to_string();
        // Containers are created a few at a time in parallel (the engine serialises much of it).
        let names: Vec<String> = (0..opts.nodes).map(|i| format!("{network}-n{i}")).collect();
        cluster.containers = names.clone();
        let run_one = |name: &String| -> Result<String> {
            let mut args: Vec<String> = vec![
                "run".into(),
                "-d".into(),
                "--name".into(),
                name.clone(),
                "--hostname".into(),
                name.clone(),
                "--network".into(),
                network.clone(),
                "--label".into(),
                label.clone(),
            ];
            args.extend(systemd_node_run_args());
            args.extend(opts.extra_run_args.iter().cloned());
            args.push(opts.image.clone().unwrap_or_else(|| image.tag.clone()));
            args.push("/sbin/init".into());
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            docker(&refs)?;
            docker(&[
                "inspect",
                "--format",
                &format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"),
                name,
            ])
        };
        for group in names.chunks(4) {
            let addresses: Vec<Result<String>> = std::thread::scope(|s| {
                let hs: Vec<_> = group.iter().map(|n| s.spawn(|| run_one(n))).collect();
                hs.into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(anyhow!("docker run thread panicked")))
                    })
                    .collect()
            });
            for (name, address) in group.iter().zip(addresses) {
                cluster.nodes.push(TestNode {
                    name: name.clone(),
                    address: address?,
                    port: 22,
                    key_file: key.private.clone(),
                    known_hosts: known_hosts.clone(),
                });
            }
        }
        let setup = "set -e; k=$(cat); for h in /root /home/tester; do mkdir -p $h/.ssh; chmod 700 $h/.ssh; \
                     printf '%s\\n' \"$k\" > $h/.ssh/authorized_keys; chmod 600 $h/.ssh/authorized_keys; done; \
                     chown -R tester:tester /home/tester/.ssh";
        let errors: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = cluster
                .nodes
                .iter()
                .map(|n| {
                    let public = key.public.clone();
                    s.spawn(move || -> Result<()> {
                        let (st, _, err) = n.exec(setup, public.as_bytes())?;
                        if st != 0 {
                            bail!("installing authorized_keys on {}: {}", n.name, err.trim());
                        }
                        n.wait_ready(opts.boot_timeout)
                    })
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| match h.join() {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(format!("{e:#}")),
                    Err(_) => Some("node setup thread panicked".to_string()),
                })
                .collect()
        });
        if !errors.is_empty() {
            bail!(
                "test cluster {network} did not start: {}",
                errors.join("; ")
            );
        }
        let text = cluster.known_hosts()?;
        std::fs::write(&known_hosts, text)?;
        Ok(cluster)
    }

    /// A directory removed with the cluster (holds its known_hosts file), for tests' own files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A known_hosts file text holding every node's ed25519 host key.
    pub fn known_hosts(&self) -> Result<String> {
        let mut s = String::new();
        for n in &self.nodes {
            s.push_str(&n.known_hosts_line("ed25519")?);
            s.push('\n');
        }
        Ok(s)
    }
}

/// `docker rm -f -v NAMES`; when that fails, every freezer cgroup (cgroup v1) under a container still
/// there that is `FROZEN` (or `FREEZING`) is thawed and the removal tried once more. A node container
/// torn down while its kubelet starts a pod can leave a `runc init` in a cgroup runc froze to kill it
/// (runc itself killed before it thawed it): frozen, it never dies, and Docker answers "tried to kill
/// container, but did not receive an exit event". Errors: the second removal's.
pub fn remove_containers(names: &[&str]) -> Result<()> {
    let mut args = vec!["rm", "-f", "-v"];
    args.extend(names);
    if docker(&args).is_ok() {
        return Ok(());
    }
    for name in names {
        if let Ok(id) = docker(&["inspect", "-f", "{{.Id}}", name]) {
            for root in [
                format!("/sys/fs/cgroup/freezer/docker/{id}"),
                format!("/sys/fs/cgroup/freezer/system.slice/docker-{id}.scope"),
            ] {
                thaw_under(Path::new(&root));
            }
        }
    }
    docker(&args).map(|_| ())
}

/// Writes `THAWED` to every `freezer.state` under `dir` (recursively) that reads `FROZEN` or
/// `FREEZING`. Best effort.
fn thaw_under(dir: &Path) {
    let state = dir.join("freezer.state");
    if std::fs::read_to_string(&state).is_ok_and(|s| s.trim() != "THAWED") {
        let _ = std::fs::write(&state, "THAWED");
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                thaw_under(&e.path());
            }
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if !self.containers.is_empty() {
            let names: Vec<&str> = self.containers.iter().map(String::as_str).collect();
            if let Err(e) = remove_containers(&names) {
                eprintln!("[testbed] removing containers: {e:#}");
            }
        }
        if let Err(e) = docker(&["network", "rm", &self.network]) {
            eprintln!("[testbed] removing network {}: {e:#}", self.network);
        }
    }
}

/// Removes containers and networks left by test processes that no longer exist (killed runs, whose
/// drop guards never ran), found by [`TESTBED_LABEL`]. Best effort.
pub fn remove_stale() {
    let alive = |pid: &str| {
        pid.parse::<u32>()
            .is_ok_and(|p| Path::new(&format!("/proc/{p}")).exists())
    };
    if let Ok(list) = docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label={TESTBED_LABEL}"),
        "--format",
        &format!("{{{{.Names}}}} {{{{.Label \"{TESTBED_LABEL}\"}}}}"),
    ]) {
        for l in list.lines() {
            let mut w = l.split_whitespace();
            if let (Some(name), Some(pid)) = (w.next(), w.next()) {
                if !alive(pid) {
                    let _ = remove_containers(&[name]);
                }
            }
        }
    }
    if let Ok(list) = docker(&[
        "network",
        "ls",
        "--filter",
        &format!("label={TESTBED_LABEL}"),
        "--format",
        &format!("{{{{.Name}}}} {{{{.Label \"{TESTBED_LABEL}\"}}}}"),
    ]) {
        for l in list.lines() {
            let mut w = l.split_whitespace();
            if let (Some(name), Some(pid)) = (w.next(), w.next()) {
                if !alive(pid) {
                    // Containers on it that carry no pid label of their own (made by clusterctl's
                    // docker provider on a network a test created) go with it.
                    if let Ok(on) = docker(&[
                        "network",
                        "inspect",
                        "--format",
                        "{{range .Containers}}{{.Name}} {{end}}",
                        name,
                    ]) {
                        for c in on.split_whitespace() {
                            let _ = docker(&["rm", "-f", "-v", c]);
                        }
                    }
                    let _ = docker(&["network", "rm", name]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thaw_under_thaws_every_frozen_or_freezing_freezer_below() {
        let dir = tempfile::tempdir().expect("tempdir");
        let deep = dir
            .path()
            .join("kubepods.slice/pod1.slice/cri-containerd-1.scope");
        let other = dir.path().join("kubepods.slice/pod2.slice");
        std::fs::create_dir_all(&deep).expect("dirs");
        std::fs::create_dir_all(&other).expect("dirs");
        std::fs::write(dir.path().join("freezer.state"), "THAWED\n").expect("state");
        std::fs::write(deep.join("freezer.state"), "FROZEN\n").expect("state");
        std::fs::write(other.join("freezer.state"), "FREEZING\n").expect("state");
        thaw_under(dir.path());
        let read = |p: &Path| std::fs::read_to_string(p.join("freezer.state")).expect("read");
        assert_eq!(read(&deep), "THAWED");
        assert_eq!(read(&other), "THAWED");
        assert_eq!(read(dir.path()), "THAWED\n");
    }
}
