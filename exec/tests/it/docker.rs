//! `DockerTransport` and `DockerProvider` on the real Docker engine: exec with env, stdin, exit codes,
//! timeout and streamed output; uploads through the archive API that land in tmpfs paths too, with
//! mode, owner and byte progress; the kind-style provider creating, finding (by label) and removing
//! node containers and their network.

use std::time::{Duration, Instant};

use clusterctl_exec::{
    Cmd, DockerClient, DockerNodeOptions, DockerProvider, DockerTransport, ExecError, FileSpec,
    NodeSpec, Provider, Transport,
};
use clusterctl_spec::model::Role;
use clusterctl_testbed::docker::{
    docker, docker_available, systemd_node_run_args, NodeImage, TestCluster,
};
use clusterctl_testbed::{is_root, require, unique_name};

fn ready() -> bool {
    require(
        "root and a Docker engine (scripts/services/docker.sh)",
        is_root() && docker_available(),
    )
}

#[test]
fn docker_transport_runs_commands_and_moves_files() {
    if !ready() {
        return;
    }
    let c = TestCluster::start("dkrt", 1).expect("test cluster");
    let node = &c.nodes[0];
    let client = DockerClient::connect().unwrap();
    let server_api = docker(&["version", "--format", "{{.Server.APIVersion}}"]).unwrap();
    assert_eq!(
        client.api_version(),
        server_api,
        "API version not negotiated down to the engine's"
    );
    let t = DockerTransport::new(client, node.name.clone(), "n0");

    let mut cmd = Cmd::new("read a; echo \"$TOKEN/$a\"; echo e >&2; exit 5");
    cmd.env.push(("TOKEN".into(), "s'cret".into()));
    cmd.stdin = Some(b"in put\n".to_vec());
    let out = t.run(&cmd).unwrap();
    assert_eq!(
        (out.status, out.stdout_str()),
        (5, "s'cret/in put".to_string())
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "e\n");
    assert_eq!(
        t.run(&Cmd::new("hostname")).unwrap().stdout_str(),
        node.name
    );

    // Standard input is closed after the given bytes (the command sees EOF).
    let mut wc = Cmd::new("wc -c");
    wc.stdin = Some(vec![b'x'; 70_000]);
    wc.timeout = Some(Duration::from_secs(20));
    assert_eq!(t.run(&wc).unwrap().stdout_str(), "70000");

    let mut slow = Cmd::new("sleep 60");
    slow.timeout = Some(Duration::from_secs(1));
    let start = Instant::now();
    assert!(matches!(t.run(&slow), Err(ExecError::Timeout { .. })));
    assert!(start.elapsed() < Duration::from_secs(8));

    let mut chunks: Vec<(Instant, String)> = Vec::new();
    let mut s = Cmd::new("echo a=SECRET; sleep 0.5; echo b");
    s.secrets.push("SECRET".into());
    t.run_streaming(&s, &mut |b| {
        chunks.push((Instant::now(), String::from_utf8_lossy(b).into_owned()))
    })
    .unwrap();
    let all: String = chunks.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(all, "a=<redacted>\nb\n");
    assert!(
        chunks.len() >= 2 && chunks[chunks.len() - 1].0 - chunks[0].0 >= Duration::from_millis(300)
    );

    // Into a tmpfs path (/run) and a path on the container's own file system, with mode and owner.
    for path in ["/run/clusterctl/token", "/etc/clusterctl/a.conf"] {
        let spec = FileSpec {
            path: path.into(),
            mode: 0o640,
            owner: Some("tester:tester".into()),
        };
        t.upload(b"old\n", &spec).unwrap();
        t.upload(b"new\n", &spec).unwrap();
        assert_eq!(
            node.sh(&format!("stat -c '%a %U:%G' {path}; cat {path}"))
                .unwrap(),
            "640 tester:tester\nnew"
        );
        assert_eq!(t.download(path).unwrap().as_deref(), Some(&b"new\n"[..]));
    }
    assert_eq!(
        node.sh("ls -A /run/clusterctl; ls -A /var/tmp | grep -c clusterctl-stage || true")
            .unwrap(),
        "token\n0",
        "staged files left"
    );
    assert_eq!(t.download("/nonexistent").unwrap(), None);

    let size = 12 * 1024 * 1024 + 123;
    let data: Vec<u8> = (0..size).map(|i| (i % 253) as u8).collect();
    let mut seen = Vec::new();
    let spec = FileSpec {
        path: "/var/lib/clusterctl/big.bin".into(),
        mode: 0o600,
        owner: None,
    };
    t.upload_stream(&mut &data[..], size as u64, &spec, &mut |n| seen.push(n))
        .unwrap();
    assert!(seen.len() > 10 && seen.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(seen.last().copied(), Some(size as u64));
    assert_eq!(
        t.download("/var/lib/clusterctl/big.bin").unwrap(),
        Some(data)
    );
    // A reader shorter than announced is refused and leaves nothing behind.
    let short = FileSpec {
        path: "/etc/clusterctl/short".into(),
        mode: 0o600,
        owner: None,
    };
    assert!(t
        .upload_stream(&mut &b"abc"[..], 100, &short, &mut |_| {})
        .is_err());
    assert_eq!(node.sh("ls -A /etc/clusterctl").unwrap(), "a.conf");
}

/// Removes the provider's cluster on drop, also when the test fails.
struct Cleanup(DockerProvider);
impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Err(e) = self.0.remove() {
            eprintln!("cleanup: {e}");
        }
    }
}

#[test]
fn docker_provider_creates_finds_and_removes_labelled_nodes() {
    if !ready() {
        return;
    }
    let image = NodeImage::ensure().unwrap();
    let cluster = unique_name("dkp");
    // Unprivileged systemd nodes (TESTBED.md's options), expressed through the provider's settings.
    let mut opts = DockerNodeOptions::kind("v1.34.1");
    opts.image = image.tag.clone();
    opts.privileged = false;
    opts.cap_add = vec!["SYS_ADMIN".into(), "NET_ADMIN".into()];
    opts.tmpfs = vec![
        ("/run".into(), "exec".into()),
        ("/run/lock".into(), String::new()),
        ("/tmp".into(), "exec".into()),
        ("/var/lib/containerd".into(), "exec".into()),
    ];
    // No bind mount of the host's /sys/fs/cgroup: the node image's entrypoint remounts the node's own,
    // private cgroup tree read-write (tests/node-image/build.sh).
    opts.binds = Vec::new();
    opts.volumes = Vec::new();
    opts.command = Some(vec!["/sbin/init".into()]);
    let provider = DockerProvider::new(cluster.clone(), opts).unwrap();
    let guard = Cleanup(provider.clone());
    let nodes = vec![
        NodeSpec::new("cp1", Role::ControlPlane, ""),
        NodeSpec::new("w1", Role::Worker, ""),
    ];
    let created = provider.create(&nodes).unwrap();
    assert_eq!(
        created
            .iter()
            .map(|n| (n.name.as_str(), n.role))
            .collect::<Vec<_>>(),
        [("cp1", Role::ControlPlane), ("w1", Role::Worker)]
    );
    assert!(
        created
            .iter()
            .all(|n| n.state == "running" && n.address.is_some()),
        "{created:?}"
    );

    // Labels and the published API server port, seen by the docker CLI.
    let cp = provider.container_name("cp1");
    let labels = docker(&["inspect", "--format", "{{index .Config.Labels \"io.clusterctl.cluster\"}} {{index .Config.Labels \"io.clusterctl.role\"}}", &cp]).unwrap();
    assert_eq!(labels, format!("{cluster} control-plane"));
    let published = docker(&["port", &cp, "6443/tcp"]).unwrap();
    assert_eq!(
        published,
        format!("127.0.0.1:{}", created[0].api_server_port.unwrap())
    );
    assert!(
        docker(&["port", &provider.container_name("w1"), "6443/tcp"])
            .unwrap_or_default()
            .is_empty()
    );
    assert_eq!(created[1].api_server_port, None);
    let net_label = docker(&[
        "network",
        "inspect",
        "--format",
        "{{index .Labels \"io.clusterctl.cluster\"}}",
        &provider.network_name(),
    ])
    .unwrap();
    assert_eq!(net_label, cluster);
    let privileged = docker(&[
        "inspect",
        "--format",
        "{{.HostConfig.Privileged}} {{.HostConfig.CgroupnsMode}}",
        &cp,
    ])
    .unwrap();
    assert_eq!(privileged, "false private");

    provider.wait_ready(Duration::from_secs(90)).unwrap();

    // Transports from the provider reach the right containers.
    for n in &nodes {
        let t = provider.transport(n).unwrap();
        let out = t
            .run(&Cmd::new(
                "hostname; for i in $(seq 1 300); do s=$(systemctl is-system-running --wait 2>/dev/null); case $s in running|degraded) break;; esac; sleep 0.2; done; echo $s",
            ))
            .unwrap();
        let text = out.stdout_str();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(n.name.as_str()));
        assert!(
            matches!(lines.next(), Some("running") | Some("degraded")),
            "{text}"
        );
    }

    // A second create changes nothing.
    let ids = |name: &str| docker(&["inspect", "--format", "{{.Id}}", name]).unwrap();
    let before = ids(&cp);
    assert_eq!(provider.create(&nodes).unwrap().len(), 2);
    assert_eq!(ids(&cp), before);

    // Remove finds everything by label, from the cluster name alone.
    let again = DockerProvider::new(cluster.clone(), DockerNodeOptions::kind("v1.34.1")).unwrap();
    assert_eq!(again.remove().unwrap(), 2);
    assert!(again.list().unwrap().is_empty());
    assert!(docker(&["inspect", &cp]).is_err());
    assert!(docker(&["network", "inspect", &provider.network_name()]).is_err());
    drop(guard);
}

#[test]
fn a_missing_image_is_reported_by_name() {
    if !ready() {
        return;
    }
    let cluster = unique_name("dkm");
    let mut opts = DockerNodeOptions::kind("v0.0.0-missing");
    // A registry on a closed loopback port: the pull fails at once and no traffic leaves the machine.
    opts.image = format!("127.0.0.1:9/clusterctl-missing/{cluster}:v0");
    let provider = DockerProvider::new(cluster, opts).unwrap();
    let guard = Cleanup(provider.clone());
    let err = provider
        .create(&[NodeSpec::new("cp1", Role::ControlPlane, "")])
        .unwrap_err();
    assert!(err.to_string().contains("clusterctl-missing/"), "{err}");
    assert!(provider.list().unwrap().is_empty());
    drop(guard);
}

#[test]
fn kind_defaults_follow_kind() {
    let o = DockerNodeOptions::kind("v1.34.1");
    assert_eq!(o.image, "kindest/node:v1.34.1");
    assert!(o.privileged);
    assert_eq!(o.cgroupns.as_deref(), Some("private"));
    assert!(o.security_opt.contains(&"seccomp=unconfined".to_string()));
    assert!(o.tmpfs.iter().any(|(p, _)| p == "/run") && o.tmpfs.iter().any(|(p, _)| p == "/tmp"));
    assert_eq!(o.volumes, ["/var"]);
    assert_eq!(o.api_server_host_port, Some(0));
    let _ = systemd_node_run_args();
}

/// The run options `up` reads from the cluster file reach the engine: an explicit network (joined as
/// it is when it exists), extra published ports on the listen address asked for, memory and CPU
/// limits. The network `remove` did not create stays.
#[test]
fn explicit_network_ports_and_limits_reach_the_engine() {
    if !ready() {
        return;
    }
    let image = NodeImage::ensure().unwrap();
    let cluster = unique_name("dko");
    let network = format!("{cluster}-net");
    docker(&["network", "create", &network]).unwrap();
    struct Net(String);
    impl Drop for Net {
        fn drop(&mut self) {
            let _ = docker(&["network", "rm", &self.0]);
        }
    }
    let _net = Net(network.clone());
    let mut opts = DockerNodeOptions::kind("v1.34.1");
    opts.image = image.tag.clone();
    opts.privileged = false;
    opts.cap_add = vec!["SYS_ADMIN".into(), "NET_ADMIN".into()];
    opts.tmpfs = vec![
        ("/run".into(), "exec".into()),
        ("/run/lock".into(), String::new()),
        ("/tmp".into(), "exec".into()),
    ];
    opts.binds = Vec::new();
    opts.volumes = Vec::new();
    opts.command = Some(vec!["/sbin/init".into()]);
    opts.network = Some(network.clone());
    opts.memory = Some(512 << 20);
    opts.nano_cpus = Some(1_500_000_000);
    opts.port_mappings.insert(
        "cp1".into(),
        vec![
            clusterctl_exec::PortMapping {
                container_port: 80,
                host_port: 0,
                listen_address: "127.0.0.1".into(),
                protocol: "tcp".into(),
            },
            clusterctl_exec::PortMapping {
                container_port: 53,
                host_port: 0,
                listen_address: "127.0.0.1".into(),
                protocol: "udp".into(),
            },
        ],
    );
    let provider = DockerProvider::new(cluster.clone(), opts).unwrap();
    let guard = Cleanup(provider.clone());
    assert_eq!(provider.network_name(), network);
    let created = provider
        .create(&[NodeSpec::new("cp1", Role::ControlPlane, "")])
        .unwrap();
    assert!(created[0].address.is_some(), "{created:?}");
    let cp = provider.container_name("cp1");
    let nets = docker(&[
        "inspect",
        "--format",
        "{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}",
        &cp,
    ])
    .unwrap();
    assert_eq!(nets, network);
    for port in ["6443/tcp", "80/tcp", "53/udp"] {
        let published = docker(&["port", &cp, port]).unwrap_or_else(|e| {
            let bindings = docker(&["inspect", "--format", "{{json .HostConfig.PortBindings}} {{json .NetworkSettings.Ports}} {{json .Config.ExposedPorts}}", &cp]);
            panic!("{port} not published ({e}); bindings {bindings:?}")
        });
        assert!(published.starts_with("127.0.0.1:"), "{port}: {published}");
    }
    let limits = docker(&[
        "inspect",
        "--format",
        "{{.HostConfig.Memory}} {{.HostConfig.NanoCpus}}",
        &cp,
    ])
    .unwrap();
    assert_eq!(limits, format!("{} 1500000000", 512u64 << 20));
    // A provider without the file's network (destroy, status) still finds the address.
    let plain = DockerProvider::new(cluster.clone(), DockerNodeOptions::kind("v1.34.1")).unwrap();
    assert_eq!(plain.list().unwrap()[0].address, created[0].address);
    let removed = plain.remove_all().unwrap();
    assert_eq!(removed.containers, vec![cp.clone()]);
    assert!(removed.networks.is_empty(), "{removed:?}");
    assert!(docker(&["network", "inspect", &network]).is_ok());
    drop(guard);
}
