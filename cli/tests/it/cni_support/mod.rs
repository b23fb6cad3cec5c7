//! Shared helpers of the `cni_*` tests: the built binary symlinked as `clusterctl-cni` and invoked
//! exactly as a runtime does (environment + stdin, inside a node's network namespace), plugin
//! configurations, and reading results.
#![allow(dead_code)]

use clusterctl_testbed::netns::Netns;
use serde_json::{json, Value};
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// True when the test may run (root and network namespaces); fails in CI when not.
pub(crate) fn gate() -> bool {
    clusterctl_testbed::require(
        "root with network namespaces (ip netns add)",
        clusterctl_testbed::netns::available(),
    )
}

/// The binary under its plugin name, in a temp dir that also serves as `CNI_PATH`.
pub(crate) struct Plugin {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

/// One plugin invocation's outcome.
#[derive(Debug)]
pub(crate) struct Call {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Call {
    /// stdout as JSON (Null when empty).
    pub(crate) fn json(&self) -> Value {
        if self.stdout.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&self.stdout)
                .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", self.stdout))
        }
    }
    /// The CNI error code of a failed call.
    pub(crate) fn code(&self) -> u64 {
        assert!(!self.ok, "expected a failure, got success: {}", self.stdout);
        self.json()["code"]
            .as_u64()
            .unwrap_or_else(|| panic!("no code in {}", self.stdout))
    }
}

impl Plugin {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("clusterctl-cni");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_clusterctl"), &path).expect("symlink");
        Self { dir, path }
    }

    /// Runs a plugin binary `prog` (ours or a reference one) inside `node` with `CNI_*` set.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &self,
        prog: &Path,
        node: &Netns,
        cmd: &str,
        cid: &str,
        netns: Option<&Path>,
        ifname: &str,
        conf: &str,
    ) -> Call {
        let mut c = node.command(prog.to_str().expect("utf8 path"));
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("CNI_COMMAND", cmd)
            .env("CNI_CONTAINERID", cid)
            .env("CNI_IFNAME", ifname)
            .env(
                "CNI_PATH",
                format!("{}:/usr/lib/cni", self.dir.path().display()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(n) = netns {
            c.env("CNI_NETNS", n);
        }
        let mut child = c.spawn().expect("spawn plugin");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(conf.as_bytes())
            .expect("write stdin");
        let out = child.wait_with_output().expect("wait plugin");
        Call {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs our plugin.
    pub(crate) fn call(
        &self,
        node: &Netns,
        cmd: &str,
        cid: &str,
        netns: Option<&Path>,
        ifname: &str,
        conf: &str,
    ) -> Call {
        self.run(&self.path, node, cmd, cid, netns, ifname, conf)
    }

    /// ADD that must succeed; returns the result.
    pub(crate) fn add(&self, node: &Netns, cid: &str, pod: &Netns, conf: &str) -> Value {
        let c = self.call(node, "ADD", cid, Some(&pod.path()), "eth0", conf);
        assert!(c.ok, "ADD {cid} failed: {} {}", c.stdout, c.stderr);
        c.json()
    }

    /// DEL that must succeed.
    pub(crate) fn del(&self, node: &Netns, cid: &str, pod: Option<&Netns>, conf: &str) {
        let p = pod.map(|p| p.path());
        let c = self.call(node, "DEL", cid, p.as_deref(), "eth0", conf);
        assert!(c.ok, "DEL {cid} failed: {} {}", c.stdout, c.stderr);
        assert!(
            c.stdout.trim().is_empty(),
            "DEL prints nothing on success: {}",
            c.stdout
        );
    }
}

/// A plugin configuration of our type.
pub(crate) fn conf(version: &str, pod_cidr: &str, data_dir: &Path) -> Value {
    json!({"cniVersion": version, "name": "cctest", "type": "clusterctl-cni", "mtu": 1400,
           "podCIDR": pod_cidr, "dataDir": data_dir.display().to_string()})
}

/// The first IPv4 address in a result.
pub(crate) fn result_ip(r: &Value) -> Ipv4Addr {
    let a = r["ips"][0]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("no ips in {r}"));
    a.split('/')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad address {a}"))
}

/// Every allocation recorded in the IPAM state of network `cctest`.
pub(crate) fn allocations(data_dir: &Path, network: &str) -> Vec<String> {
    let p = data_dir.join(network).join("state.json");
    match std::fs::read_to_string(&p) {
        Ok(s) => {
            let v: Value = serde_json::from_str(&s).expect("state json");
            v["allocations"]
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        }
        Err(_) => Vec::new(),
    }
}

/// Links of a namespace whose names start with the host-end prefix `cc`.
pub(crate) fn host_ends(node: &Netns) -> Vec<String> {
    node.links()
        .expect("links")
        .into_iter()
        .filter(|l| l.starts_with("cc") && l.len() == 15)
        .collect()
}

/// Output of `PROG ARGS` inside `ns`, stdout as text; panics on failure.
pub(crate) fn sh(ns: &Netns, prog: &str, args: &[&str]) -> String {
    let o = ns.exec(prog, args).expect("exec");
    assert!(
        o.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What render writes for the builtin CNI on each node: the agent's settings (decoded with the
/// agent's own type) and the conflist template text.
pub(crate) struct RenderedCni {
    /// Per node, in the order given: the agent's settings (`/etc/clusterctl/cni/agent.json`).
    pub agents: Vec<clusterctl_render::cni::builtin::AgentConfig>,
    /// The conflist template (`/etc/clusterctl/cni/10-clusterctl.conflist`), with the podCIDR placeholder.
    pub template: String,
    /// The systemd unit (`/etc/systemd/system/clusterctl-cni-agent.service`).
    pub unit: String,
}

/// Renders the `builtin` profile through `clusterctl_render` with its nodes replaced by `nodes`
/// (name, address; the first is the control plane) and its CNI MTU left unset (so the agent derives
/// it from the underlay), and returns the builtin CNI's node files, decoded by the agent's parser.
pub(crate) fn rendered_builtin(nodes: &[(&str, Ipv4Addr)]) -> RenderedCni {
    use clusterctl_render::cni::builtin::{AGENT_CONFIG_PATH, CONFLIST_TEMPLATE_PATH, UNIT_PATH};
    let profile = clusterctl_spec::from_profile("builtin").expect("builtin profile");
    let text = profile.source_text.replace("      mtu: 1450\n", "");
    let head = text.split("\n  nodes:\n").next().expect("nodes section");
    let mut yaml = format!("{head}\n  nodes:\n");
    for (i, (name, addr)) in nodes.iter().enumerate() {
        let role = if i == 0 { "control-plane" } else { "worker" };
        yaml.push_str(&format!(
            "    - name: {name}\n      role: {role}\n      address: {addr}/16\n"
        ));
    }
    let loaded = clusterctl_spec::Loaded::from_text("cni-test.yaml", yaml);
    let cluster = match clusterctl_spec::validate(&loaded) {
        Ok(v) => v.cluster,
        Err(d) => panic!("test cluster does not validate: {}", d.summary()),
    };
    let facts = clusterctl_render::Facts::assumed(&cluster);
    let r = clusterctl_render::render(&cluster, &facts).expect("render");
    let file = |node: &str, path: &str| -> String {
        r.node_file(node, path)
            .unwrap_or_else(|| panic!("{node} lacks {path}"))
            .as_text()
            .to_string()
    };
    let agents = nodes
        .iter()
        .map(|(name, _)| {
            let dir = tempfile::tempdir().expect("tempdir");
            let p = dir.path().join("agent.json");
            std::fs::write(&p, file(name, AGENT_CONFIG_PATH)).expect("write agent.json");
            clusterctl_cni::agent::load_config(&p)
                .expect("the agent parses the rendered agent.json")
        })
        .collect();
    let first = nodes[0].0;
    RenderedCni {
        agents,
        template: file(first, CONFLIST_TEMPLATE_PATH),
        unit: file(first, UNIT_PATH),
    }
}

/// `template` with the `dataDir` of our plugin's entry set to `data_dir` (tests keep IPAM state in
/// their own directories).
pub(crate) fn with_data_dir(template: &str, data_dir: &Path) -> String {
    let mut v: Value = serde_json::from_str(template).expect("template JSON");
    v["plugins"][0]["dataDir"] = Value::from(data_dir.display().to_string());
    serde_json::to_string_pretty(&v).expect("json")
}

/// `cfg` written as JSON to `path` (what the agent's `--config` reads).
pub(crate) fn write_agent_config(path: &Path, cfg: &clusterctl_render::cni::builtin::AgentConfig) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(path, serde_json::to_string_pretty(cfg).expect("json")).expect("write");
}
