//! Benchmark: validate + render of a 100-node cluster file (3 control planes with kube-vip, 97 workers,
//! a registry mirror, audit, Calico). Target: under 50 ms per validate + render. Reports the median and
//! best time, the split between validate and render, and two ratios: against the target, and against
//! the floor of merely parsing the same YAML (serde_yaml into a generic value) — no peer tool renders
//! these files on this machine (kubeadm and kind cannot be installed here), so the parse floor is the
//! in-run comparison. `BENCH_SHORT=1`: a few iterations that only prove it works; never fails on a ratio.
//! Full run: `cargo bench -p clusterctl-render --bench render_100`.

use std::time::{Duration, Instant};

fn cluster_text(nodes: usize) -> String {
    let mut s = String::from(
        "apiVersion: clusterctl.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: bench\nspec:\n  kubernetesVersion: v1.34.1\n  provider: ssh\n  controlPlane:\n    vip:\n      address: 10.0.0.5\n      interface: eth0\n  networking:\n    podSubnet: 10.128.0.0/12\n    serviceSubnet: 10.96.0.0/16\n    cni:\n      plugin: calico\n  registry:\n    mirror: harbor.example.com/library\n  apiServer:\n    audit:\n      policy: default\n  nodes:\n",
    );
    for i in 0..nodes {
        let role = if i < 3 { "control-plane" } else { "worker" };
        s.push_str(&format!(
            "    - {{name: node-{i:03}, role: {role}, address: 10.0.{}.{}/16, labels: {{rack: r{}}}}}\n",
            1 + i / 200,
            10 + i % 200,
            i % 8
        ));
    }
    s
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let short = std::env::var_os("BENCH_SHORT").is_some();
    let iterations = if short { 3 } else { 60 };
    let text = cluster_text(100);
    let loaded = clusterctl_spec::Loaded::from_text("bench.yaml", text.clone());

    let mut total = Vec::new();
    let mut validate_only = Vec::new();
    let mut render_only = Vec::new();
    let mut parse_floor = Vec::new();
    let mut files = 0;
    for _ in 0..iterations {
        let t0 = Instant::now();
        let v = match clusterctl_spec::validate(&loaded) {
            Ok(v) => v,
            Err(d) => {
                eprintln!("bench input does not validate: {d}");
                std::process::exit(1);
            }
        };
        let t1 = Instant::now();
        let facts = clusterctl_render::Facts::assumed(&v.cluster);
        let r = match clusterctl_render::render(&v.cluster, &facts) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("render failed: {e}");
                std::process::exit(1);
            }
        };
        let t2 = Instant::now();
        files = r.all().count();
        validate_only.push(t1 - t0);
        render_only.push(t2 - t1);
        total.push(t2 - t0);

        let p0 = Instant::now();
        let parsed: serde_yaml::Value =
            serde_yaml::from_str(&text).unwrap_or(serde_yaml::Value::Null);
        std::hint::black_box(&parsed);
        parse_floor.push(p0.elapsed());
    }
    let med = median(total.clone());
    let best = total.iter().min().copied().unwrap_or_default();
    let floor = median(parse_floor);
    let target = Duration::from_millis(50);
    println!(
        "render_100: {} iterations{}, {} files per run",
        iterations,
        if short { " (BENCH_SHORT)" } else { "" },
        files
    );
    println!(
        "  validate+render median {:.2} ms (best {:.2} ms): validate {:.2} ms, render {:.2} ms",
        med.as_secs_f64() * 1e3,
        best.as_secs_f64() * 1e3,
        median(validate_only).as_secs_f64() * 1e3,
        median(render_only).as_secs_f64() * 1e3
    );
    println!(
        "  ratio to the 50 ms target: {:.2}; ratio to the YAML parse floor ({:.3} ms): {:.1}x",
        med.as_secs_f64() / target.as_secs_f64(),
        floor.as_secs_f64() * 1e3,
        med.as_secs_f64() / floor.as_secs_f64().max(1e-9)
    );
    if files < 100 * 5 {
        eprintln!("too few files rendered: {files}");
        std::process::exit(1);
    }
}
