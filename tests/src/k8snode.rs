//! Real Kubernetes node containers for whole-system tests: what the test bed prepares on a node before
//! `clusterctl up` (what a host's packages would install), never what `clusterctl` itself does.
//!
//! - [`K8sNodeImage`]: the node image of [`crate::docker::NodeImage`] plus the upstream `kubeadm`,
//!   `kubelet`, `kubectl` and `crictl` of one Kubernetes version built from their Go modules
//!   ([`crate::k8sbin`]) in `/usr/bin`, and kubeadm's packaging units (`scripts/k8s/node/kubelet.service`,
//!   `10-kubeadm.conf`) with the kubelet enabled — as the kubeadm/kubelet/kubectl packages leave a host.
//!   Built once per machine and version (`docker build` on the node image, tagged by a hash of its
//!   inputs, under a file lock).
//! - [`ImageStore`]: the version's images (`scripts/k8s/images.sh`, no pulls) pushed (again when one is
//!   new or rebuilt) into a registry storage directory under the test-bed cache (`scripts/k8s/push.sh`), and
//!   [`ImageStore::serve`]: that storage served read-only over HTTPS on a test network's gateway, with
//!   a CA made for the test, as the cluster file's `registry.mirror` or an air-gap bundle's source.
//! - [`prepare_resolver`]: `/etc/kubernetes/resolv.conf` naming the test network's gateway on each node,
//!   for the cluster file's `kubelet.resolvConf` (the nodes' own `/etc/resolv.conf` names Docker's embedded
//!   DNS, a loopback address).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::docker::{docker, NodeImage, TestNode};
use crate::registry::{Registry, TestCa};

/// kubeadm's packaging kubelet unit (`/etc/systemd/system/kubelet.service`).
pub const KUBELET_UNIT: &str = include_str!("../../scripts/k8s/node/kubelet.service");
/// kubeadm's packaging drop-in (`/etc/systemd/system/kubelet.service.d/10-kubeadm.conf`).
pub const KUBEADM_DROPIN: &str = include_str!("../../scripts/k8s/node/10-kubeadm.conf");

/// kind's "network magic" for the node's resolver, as a unit of the image (kind's node image does this
/// in its entrypoint): Docker's embedded DNS answers at `127.0.0.11` only inside the node's own network
/// namespace, where the nodes' `/etc/resolv.conf` names it. The unit makes it answer on the network's
/// gateway address, port 53, too — for the node itself (nat OUTPUT) and for its pods (nat PREROUTING;
/// kube-proxy sets `route_localnet`) — so that a kubelet `resolvConf` naming the gateway
/// ([`prepare_resolver`]) resolves the other node containers' names (the docker provider's
/// control-plane endpoint `<cluster>-<node>:6443`, which kube-proxy, a host-network pod, dials) without
/// CoreDNS forwarding to itself. Nothing is forwarded for a node whose resolver is not Docker's.
pub const GATEWAY_DNS_SCRIPT: &str = r#"#!/bin/sh
set -eu
grep -q '^nameserver 127\.0\.0\.11' /etc/resolv.conf || exit 0
gw=$(ip -4 route show default | awk '{print $3; exit}')
[ -n "$gw" ] || exit 0
for proto in udp tcp; do
  port=$(iptables-save -t nat | sed -n "s/^-A DOCKER_OUTPUT .*-p $proto .*--to-destination 127\.0\.0\.11:\([0-9]*\).*/\1/p" | head -n1)
  [ -n "$port" ] || continue
  for chain in OUTPUT PREROUTING; do
    iptables -t nat -C $chain -d "$gw" -p $proto --dport 53 -j DNAT --to-destination "127.0.0.11:$port" 2>/dev/null ||
      iptables -t nat -A $chain -d "$gw" -p $proto --dport 53 -j DNAT --to-destination "127.0.0.11:$port"
  done
done
sysctl -qw net.ipv4.conf.all.route_localnet=1 2>/dev/null || true
"#;

/// The unit running [`GATEWAY_DNS_SCRIPT`] once at boot, before containerd and the kubelet.
pub const GATEWAY_DNS_UNIT: &str = "[Unit]\nDescription=test bed: Docker's embedded DNS on the gateway address (kind's network magic)\nBefore=containerd.service kubelet.service\nAfter=network.target\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/sbin/testbed-gateway-dns.sh\n\n[Install]\nWantedBy=multi-user.target\n";

/// The programs placed in `/usr/bin` of a [`K8sNodeImage`].
pub const NODE_PROGRAMS: &[&str] = &["kubeadm", "kubelet", "kubectl", "crictl"];

/// Where node-side resolver file [`prepare_resolver`] writes (the cluster file's `kubelet.resolvConf`).
pub const RESOLV_CONF: &str = "/etc/kubernetes/resolv.conf";

/// The test-bed cache root (`CLUSTERCTL_TESTBED_CACHE`, default `/var/cache/clusterctl-testbed`).
pub fn cache_root() -> PathBuf {
    std::env::var_os("CLUSTERCTL_TESTBED_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/clusterctl-testbed"))
}

fn lock_dir() -> &'static str {
    if Path::new("/run/lock").is_dir() {
        "/run/lock"
    } else {
        "/tmp"
    }
}

/// Runs `sh -c script` under an exclusive `flock` on `lock`, failing with its stderr.
fn locked_sh(lock: &str, script: &str, envs: &[(&str, &str)]) -> Result<String> {
    let out = Command::new("flock")
        .arg(lock)
        .args(["sh", "-c", script])
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .output()
        .context("running flock sh -c (util-linux)")?;
    if !out.status.success() {
        bail!(
            "{script} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A node image with one Kubernetes version's kubeadm, kubelet, kubectl and crictl installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct K8sNodeImage {
    /// Image reference, `clusterctl-k8s-node:<12 hex digits>` (hash of the base image tag, the version,
    /// the unit files and each program's path, size and modification time).
    pub tag: String,
    /// The Kubernetes version, e.g. `v1.34.4`.
    pub version: String,
}

impl K8sNodeImage {
    /// Builds the image unless it exists (once per machine and version; the programs are built by
    /// [`crate::k8sbin::ensure`] when missing — minutes cold). Memoised per process. Errors: the node
    /// image, a program or `docker build` failed.
    pub fn ensure(version: &str) -> Result<K8sNodeImage> {
        static DONE: OnceLock<Mutex<Vec<K8sNodeImage>>> = OnceLock::new();
        let cell = DONE.get_or_init(|| Mutex::new(Vec::new()));
        let mut done = cell.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = done.iter().find(|i| i.version == version) {
            return Ok(i.clone());
        }
        let base = NodeImage::ensure()?;
        let bins = crate::k8sbin::ensure(version, NODE_PROGRAMS)?;
        let mut h = Sha256::new();
        for part in [
            base.tag.as_str(),
            version,
            KUBELET_UNIT,
            KUBEADM_DROPIN,
            GATEWAY_DNS_SCRIPT,
            GATEWAY_DNS_UNIT,
        ] {
            h.update(part.as_bytes());
            h.update(b"\0");
        }
        for p in NODE_PROGRAMS {
            let path = bins.path(p);
            let meta = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_secs())
                .unwrap_or(0);
            h.update(format!("{p} {} {} {mtime}\0", path.display(), meta.len()).as_bytes());
        }
        let tag = format!("clusterctl-k8s-node:{}", &hex::encode(h.finalize())[..12]);
        if docker(&["image", "inspect", "--format", "{{.Id}}", &tag]).is_err() {
            let ctx = tempfile::Builder::new()
                .prefix("cc-k8s-node-")
                .tempdir_in("/var/tmp")?;
            for p in NODE_PROGRAMS {
                std::fs::copy(bins.path(p), ctx.path().join(p))
                    .with_context(|| format!("copying {p}"))?;
            }
            std::fs::write(ctx.path().join("kubelet.service"), KUBELET_UNIT)?;
            std::fs::write(ctx.path().join("10-kubeadm.conf"), KUBEADM_DROPIN)?;
            std::fs::write(
                ctx.path().join("testbed-gateway-dns.sh"),
                GATEWAY_DNS_SCRIPT,
            )?;
            std::fs::write(
                ctx.path().join("testbed-gateway-dns.service"),
                GATEWAY_DNS_UNIT,
            )?;
            std::fs::write(
                ctx.path().join("Dockerfile"),
                format!(
                    "FROM {}\nCOPY {} /usr/bin/\nCOPY kubelet.service /etc/systemd/system/kubelet.service\n\
                     COPY 10-kubeadm.conf /etc/systemd/system/kubelet.service.d/10-kubeadm.conf\n\
                     COPY testbed-gateway-dns.sh /usr/local/sbin/testbed-gateway-dns.sh\n\
                     COPY testbed-gateway-dns.service /etc/systemd/system/testbed-gateway-dns.service\n\
                     RUN chmod 0755 /usr/local/sbin/testbed-gateway-dns.sh && \
                     ln -s /etc/systemd/system/kubelet.service /etc/systemd/system/multi-user.target.wants/kubelet.service && \
                     ln -s /etc/systemd/system/testbed-gateway-dns.service /etc/systemd/system/multi-user.target.wants/testbed-gateway-dns.service\n",
                    base.tag,
                    NODE_PROGRAMS.join(" ")
                ),
            )?;
            eprintln!("[testbed] building {tag} (node image + kubeadm, kubelet, kubectl, crictl {version})");
            let lock = format!("{}/clusterctl-k8s-node-image.lock", lock_dir());
            locked_sh(
                &lock,
                "docker image inspect \"$TAG\" >/dev/null 2>&1 || docker build -q -t \"$TAG\" \"$CTX\" >/dev/null",
                &[("TAG", &tag), ("CTX", &ctx.path().to_string_lossy())],
            )?;
        }
        let img = K8sNodeImage {
            tag,
            version: version.to_string(),
        };
        done.push(img.clone());
        Ok(img)
    }
}

/// The images of one Kubernetes version (`scripts/k8s/images.sh`: kube-apiserver, …, etcd, CoreDNS,
/// pause, kube-vip, flannel and its CNI plugin, and the workload image `clusterctl.test/busybox:1`) in a
/// registry storage directory under the cache, pushed with `scripts/k8s/push.sh` (upstream paths without
/// the registry host: `kube-apiserver:v1.34.4`, `coredns/coredns:v1.12.1`, `kube-vip/kube-vip:v1.0.0`,
/// `flannel-io/flannel:v0.28.4`, `busybox:1`) once per machine and again whenever `images.sh` wrote
/// an image the storage does not hold yet (the storage's `.pushed` records each pushed reference with
/// its layout's input key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageStore {
    /// The storage directory (`<cache>/registry/<version>`).
    pub storage: PathBuf,
    /// The Kubernetes version.
    pub version: String,
}

/// The storage's record of what it holds: one `REF KEY` line per image of `images.txt`.
const PUSHED: &str = ".pushed";

impl ImageStore {
    /// Brings the images up to date (`images.sh`, once per process and version: under a second when
    /// cached, minutes cold) and pushes them into the storage when it lacks one (a first fill goes
    /// through a temporary copy renamed into place; a later one adds to the storage in place, which
    /// readers serving it are unaffected by), under a file lock. Errors: a script failed.
    pub fn ensure(version: &str) -> Result<ImageStore> {
        let storage = cache_root().join("registry").join(version);
        let want = images_record(version)?;
        let current = |dir: &Path| {
            dir.join("docker/registry/v2/repositories").is_dir()
                && std::fs::read_to_string(dir.join(PUSHED)).is_ok_and(|s| s == want)
        };
        let store = ImageStore {
            storage: storage.clone(),
            version: version.to_string(),
        };
        if current(&storage) {
            return Ok(store);
        }
        let lock = format!("{}/clusterctl-k8s-registry-{version}.lock", lock_dir());
        let _guard = FileLock::take(&lock)?;
        if current(&storage) {
            return Ok(store);
        }
        if storage.join("docker/registry/v2/repositories").is_dir() {
            push(version, &storage)?;
            std::fs::write(storage.join(PUSHED), &want)?;
            return Ok(store);
        }
        let parent = storage.parent().context("storage parent")?;
        std::fs::create_dir_all(parent)?;
        let tmp = tempfile::Builder::new()
            .prefix(".filling-")
            .tempdir_in(parent)?;
        push(version, tmp.path())?;
        std::fs::write(tmp.path().join(PUSHED), &want)?;
        let kept = tmp.keep();
        std::fs::rename(&kept, &storage)
            .with_context(|| format!("renaming {} into place", kept.display()))?;
        Ok(store)
    }

    /// Serves the storage read-only over HTTPS on `gateway` with a CA made for this call (its
    /// certificate names `gateway`). Returns the registry (stopped on drop) and the CA.
    pub fn serve(&self, gateway: &str) -> Result<(Registry, TestCa)> {
        let ip: std::net::IpAddr = gateway
            .parse()
            .with_context(|| format!("gateway {gateway}"))?;
        let ca = TestCa::for_ips("clusterctl-real-cluster", &[ip])?;
        let reg = Registry::serve_readonly_tls(&self.storage, ip, &ca)?;
        Ok((reg, ca))
    }
}

/// Runs `scripts/k8s/images.sh VERSION` (once per process and version) and returns one `REF KEY` line
/// per image it lists (`KEY`: the layout's `.key`, a hash of the image's inputs).
fn images_record(version: &str) -> Result<String> {
    static DONE: OnceLock<Mutex<Vec<(String, String)>>> = OnceLock::new();
    let mut done = DONE
        .get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = done.iter().find(|(v, _)| v == version) {
        return Ok(r.clone());
    }
    let script = crate::k8sbin::scripts_dir().join("images.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(version)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("running scripts/k8s/images.sh")?;
    if !out.status.success() {
        bail!(
            "images.sh {version} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut record = String::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut w = line.split_whitespace();
        let (Some(r), Some(dir)) = (w.next(), w.next()) else {
            continue;
        };
        let key = std::fs::read_to_string(Path::new(dir).join(".key"))
            .with_context(|| format!("{dir}/.key"))?;
        record.push_str(&format!("{r} {}\n", key.trim()));
    }
    done.push((version.to_string(), record.clone()));
    Ok(record)
}

/// `scripts/k8s/push.sh VERSION` into `storage` through a loopback registry serving it read-write.
fn push(version: &str, storage: &Path) -> Result<()> {
    let reg = Registry::serve_readwrite(storage)?;
    let script = crate::k8sbin::scripts_dir().join("push.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(version)
        .arg(reg.addr())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("running scripts/k8s/push.sh (skopeo)")?;
    drop(reg);
    if !out.status.success() {
        bail!(
            "push.sh {version} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// An exclusive `flock` held until dropped.
struct FileLock(#[allow(dead_code)] std::process::Child);

impl FileLock {
    fn take(path: &str) -> Result<FileLock> {
        // `flock PATH cat` holds the lock while cat waits on its stdin; dropping closes stdin.
        let mut child = Command::new("flock")
            .arg(path)
            .arg("sh")
            .arg("-c")
            .arg("echo locked; cat >/dev/null")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("flock")?;
        let mut out = child.stdout.take().context("flock stdout")?;
        let mut buf = [0u8; 7];
        std::io::Read::read_exact(&mut out, &mut buf).context("waiting for the lock")?;
        Ok(FileLock(child))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

/// Writes [`RESOLV_CONF`] (`nameserver <gateway>`) on every node: the resolver the kubelet hands pods
/// (`kubelet.resolvConf`). Nothing listens on port 53 of the gateway, so outside names fail fast and
/// cluster names resolve through CoreDNS.
pub fn prepare_resolver(nodes: &[TestNode], gateway: &str) -> Result<()> {
    for n in nodes {
        n.sh(&format!(
            "mkdir -p /etc/kubernetes && echo 'nameserver {gateway}' > {RESOLV_CONF}"
        ))
        .with_context(|| format!("resolver file on {}", n.name))?;
    }
    Ok(())
}
