//! The conflist declares the newest CNI version the node can use (issue 15, item 1): render writes
//! the newest its runtime speaks (containerd 2.x: 1.1.0; containerd 1.x: 1.0.0), and the agent
//! lowers it to what every chained plugin installed on the node supports — asked through `VERSION`
//! as libcni asks. Then STATUS and GC, which need 1.1.0, work through the list the agent wrote
//! (containerd 2.x calls STATUS on every plugin of a 1.1.0 list; an older `portmap` would refuse).

use crate::support::*;
use clusterctl_cni::agent::{self, peers::Peer, AgentConfig};
use clusterctl_render::cni::builtin::{AGENT_CONFIG_PATH, CONFLIST_TEMPLATE_PATH};
use clusterctl_testbed::netns::Underlay;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The builtin profile rendered for one node named `n1` at `addr`, with every node's containerd
/// of major version `containerd_major`: (agent settings, conflist template).
fn rendered(addr: std::net::Ipv4Addr, containerd_major: u32) -> (AgentConfig, String) {
    let profile = clusterctl_spec::from_profile("builtin").expect("builtin profile");
    let text = profile.source_text.replace("      mtu: 1450\n", "");
    let head = text.split("\n  nodes:\n").next().expect("nodes section");
    let yaml = format!(
        "{head}\n  nodes:\n    - name: n1\n      role: control-plane\n      address: {addr}/24\n"
    );
    let loaded = clusterctl_spec::Loaded::from_text("cni-version-test.yaml", yaml);
    let cluster = match clusterctl_spec::validate(&loaded) {
        Ok(v) => v.cluster,
        Err(d) => panic!("test cluster does not validate: {}", d.summary()),
    };
    let mut facts = clusterctl_render::Facts::assumed(&cluster);
    for f in facts.nodes.values_mut() {
        f.containerd_major = containerd_major;
    }
    let r = clusterctl_render::render(&cluster, &facts).expect("render");
    let file = |p: &str| r.node_file("n1", p).expect(p).as_text().to_string();
    let cfg: AgentConfig = serde_json::from_str(&file(AGENT_CONFIG_PATH)).expect("agent.json");
    (cfg, file(CONFLIST_TEMPLATE_PATH))
}

/// A CNI bin dir holding `portmap` from `from` (a symlink), as a node would have it.
fn bin_dir(from: &Path) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(from.join("portmap"), d.path().join("portmap")).unwrap();
    std::os::unix::fs::symlink(plugin_path(), d.path().join("clusterctl-cni")).unwrap();
    d
}

#[test]
fn render_declares_the_runtimes_newest_version() {
    let addr = "172.31.74.1".parse().unwrap();
    let v = |t: &str| -> String {
        serde_json::from_str::<Value>(t).unwrap()["cniVersion"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(v(&rendered(addr, 2).1), "1.1.0", "containerd 2.x");
    assert_eq!(v(&rendered(addr, 1).1), "1.0.0", "containerd 1.x");
}

#[test]
fn the_agent_fits_the_version_to_the_installed_plugins() {
    if !gate() {
        return;
    }
    let Some(v110) = reference_plugins() else {
        return;
    };
    let debian = PathBuf::from("/usr/lib/cni");
    if !clusterctl_testbed::require(
        "Debian's containernetworking-plugins in /usr/lib/cni",
        debian.join("portmap").is_file(),
    ) {
        return;
    }
    let ul = Underlay::new(74).unwrap();
    let node = ul.add_node(1500).unwrap();
    let me = Peer {
        name: "n1".into(),
        node_ip: node.addr,
        pod_cidr: "10.249.74.0/24".parse().unwrap(),
    };
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let (mut cfg, template) = rendered(node.addr, 2);
    let mut t: Value = serde_json::from_str(&template).unwrap();
    assert_eq!(t["cniVersion"], "1.1.0");
    t["plugins"][0]["dataDir"] = json!(data.display().to_string());
    let template_path = work.path().join("10-clusterctl.conflist.template");
    std::fs::write(&template_path, t.to_string()).unwrap();
    cfg.conflist_template = template_path.display().to_string();
    cfg.conflist_path = work
        .path()
        .join("net.d/10-clusterctl.conflist")
        .display()
        .to_string();
    cfg.pod_cidr_file = work.path().join("podcidr").display().to_string();
    cfg.pod_subnet = None;
    cfg.vxlan_device = clusterctl_testbed::unique_name("cv");

    let written = |cfg: &AgentConfig| -> Value {
        serde_json::from_str(&std::fs::read_to_string(&cfg.conflist_path).unwrap()).unwrap()
    };
    // Debian 12's portmap (plugins 1.1.1) stops at 1.0.0: the agent writes 1.0.0.
    let old = bin_dir(&debian);
    cfg.cni_bin_dir = old.path().display().to_string();
    let ch = in_ns(&node.ns, || agent::pass(&cfg, std::slice::from_ref(&me)))
        .expect("pass")
        .expect("n1 is a peer");
    assert_eq!(written(&cfg)["cniVersion"], "1.0.0");
    assert!(
        ch.log.iter().any(|l| l.contains("lowered to 1.0.0")),
        "{:?}",
        ch.log
    );
    // portmap v1.10.0 supports 1.1.0: the agent writes what render declared.
    let new = bin_dir(&v110);
    cfg.cni_bin_dir = new.path().display().to_string();
    in_ns(&node.ns, || agent::pass(&cfg, std::slice::from_ref(&me)))
        .expect("pass")
        .expect("n1 is a peer");
    let list = written(&cfg);
    assert_eq!(list["cniVersion"], "1.1.0");

    // STATUS and GC through the written list, every plugin, as containerd 2.x / libcni call them.
    for (i, entry) in list["plugins"].as_array().unwrap().iter().enumerate() {
        let mut c = entry.clone();
        c["cniVersion"] = list["cniVersion"].clone();
        c["name"] = list["name"].clone();
        let prog = new.path().join(entry["type"].as_str().unwrap());
        let st = run(
            &prog,
            &node.ns,
            "STATUS",
            "",
            None,
            "",
            &c.to_string(),
            new.path(),
        );
        assert!(st.ok, "STATUS plugin {i}: {} {}", st.stdout, st.stderr);
        c["cni.dev/valid-attachments"] = json!([]);
        let gc = run(
            &prog,
            &node.ns,
            "GC",
            "",
            None,
            "",
            &c.to_string(),
            new.path(),
        );
        assert!(gc.ok, "GC plugin {i}: {} {}", gc.stdout, gc.stderr);
    }
    in_ns(&node.ns, || agent::cleanup(&cfg)).expect("cleanup");
}
