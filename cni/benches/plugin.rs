//! Pod set-up and tear-down speed: our plugin (`clusterctl-cni`, in-process IPAM, netlink) against
//! the reference `ptp` + `host-local` plugins (Debian's containernetworking-plugins, /usr/lib/cni)
//! on the same machine in the same run. "Ours" is exactly the file `up` installs on nodes as
//! `/opt/cni/bin/clusterctl-cni`: the bytes clusterctl carries (`clusterctl_cni_embed::PLUGIN`),
//! written out by the same `install` function. Both run inside one "node" namespace, invoked exactly as a
//! runtime does (a process per call, environment + stdin), for the same pod namespaces.
//!
//! Reports, for ADD and DEL separately: p50/p99 latency and pods/s sequentially and with
//! concurrency, as ratios (reference ÷ ours for latency, ours ÷ reference for throughput), and a
//! breakdown of where the time goes (process start, config parsing, IPAM, netlink calls, the
//! kernel's veth teardown; for the reference, the `host-local` exec alone).
//!
//! `BENCH_SHORT=1`: a tiny run (a few pods) that only proves the benchmark works; it never fails
//! on a ratio. Needs root and network namespaces (`clusterctl_testbed::require`).

use clusterctl_cni::netlink::{Netlink, VethSpec};
use clusterctl_cni::netns::NetnsGuard;
use clusterctl_testbed::netns::{Netns, Underlay};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const REF_DIR: &str = "/usr/lib/cni";

struct Subject {
    label: &'static str,
    prog: PathBuf,
    conf: String,
}

struct Out {
    took: Duration,
    stderr: String,
}

fn invoke(s: &Subject, cmd: &str, cid: &str, netns: &Path, timing: bool) -> Out {
    let mut c = Command::new(&s.prog);
    c.env_clear()
        .env("CNI_COMMAND", cmd)
        .env("CNI_CONTAINERID", cid)
        .env("CNI_NETNS", netns)
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", REF_DIR)
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if timing {
        c.env("CLUSTERCTL_CNI_TIMING", "1");
    }
    let start = Instant::now();
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", s.prog.display()));
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(s.conf.as_bytes());
    }
    let out = child.wait_with_output().expect("wait");
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{} {cmd} {cid} failed: {} {}",
        s.label,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Out {
        took,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn pct(v: &[Duration], q: f64) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    if s.is_empty() {
        return Duration::ZERO;
    }
    s[((s.len() - 1) as f64 * q).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Run {
    lat: Vec<Duration>,
    wall: Duration,
    stderr: Vec<String>,
}

/// Runs `cmd` for every pod with `threads` workers; per-call latency and wall time.
fn phase(
    s: &Subject,
    cmd: &str,
    pods: &[Netns],
    prefix: &str,
    threads: usize,
    timing: bool,
) -> Run {
    let next = AtomicUsize::new(0);
    let lat = Mutex::new(Vec::new());
    let errs = Mutex::new(Vec::new());
    let start = Instant::now();
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= pods.len() {
                    break;
                }
                let o = invoke(s, cmd, &format!("{prefix}{i}"), &pods[i].path(), timing);
                lat.lock().expect("lock").push(o.took);
                errs.lock().expect("lock").push(o.stderr);
            });
        }
    });
    Run {
        lat: lat.into_inner().expect("lock"),
        wall: start.elapsed(),
        stderr: errs.into_inner().expect("lock"),
    }
}

/// Mean microseconds per phase from the plugin's `clusterctl-cni-timing {…}` lines.
fn breakdown(lines: &[String]) -> BTreeMap<String, f64> {
    let mut sum: BTreeMap<String, (f64, u32)> = BTreeMap::new();
    for l in lines {
        let Some(json) = l
            .lines()
            .find_map(|x| x.strip_prefix("clusterctl-cni-timing "))
        else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
            continue;
        };
        if let Some(m) = v.as_object() {
            for (k, us) in m {
                let e = sum.entry(k.clone()).or_default();
                e.0 += us.as_f64().unwrap_or(0.0);
                e.1 += 1;
            }
        }
    }
    sum.into_iter()
        .map(|(k, (t, n))| (k, t / f64::from(n.max(1))))
        .collect()
}

fn main() {
    let short = std::env::var_os("BENCH_SHORT").is_some();
    if !clusterctl_testbed::require(
        "root with network namespaces",
        clusterctl_testbed::netns::available(),
    ) {
        return;
    }
    let have_ref =
        Path::new(REF_DIR).join("ptp").exists() && Path::new(REF_DIR).join("host-local").exists();
    if !clusterctl_testbed::require("reference ptp + host-local in /usr/lib/cni", have_ref) {
        return;
    }
    let (n, threads) = if short { (4, 2) } else { (200, 8) };
    let ul = Underlay::new(60).expect("underlay");
    let node = ul.add_node(1500).expect("node");
    let pods: Vec<Netns> = (0..n)
        .map(|_| Netns::new("bp").expect("pod netns"))
        .collect();
    let data = tempfile::tempdir().expect("tempdir");
    // What `up` installs: the embedded plugin, written as a node gets it.
    let installed = data.path().join("clusterctl-cni");
    clusterctl_cni_embed::install(&installed).expect("write the embedded plugin");
    let ours = Subject {
        label: "clusterctl-cni",
        prog: installed.clone(),
        conf: serde_json::json!({"cniVersion": "1.0.0", "name": "bench", "type": "clusterctl-cni", "mtu": 1450,
            "podCIDR": "10.252.0.0/16", "dataDir": data.path().join("ours").display().to_string()})
        .to_string(),
    };
    let reference = Subject {
        label: "ptp+host-local",
        prog: Path::new(REF_DIR).join("ptp"),
        conf: serde_json::json!({"cniVersion": "1.0.0", "name": "bench", "type": "ptp", "mtu": 1450, "ipMasq": false,
            "ipam": {"type": "host-local", "subnet": "10.253.0.0/16", "routes": [{"dst": "0.0.0.0/0"}],
                     "dataDir": data.path().join("ref").display().to_string()}})
        .to_string(),
    };
    let host_local = Subject {
        label: "host-local",
        prog: Path::new(REF_DIR).join("host-local"),
        conf: serde_json::json!({"cniVersion": "1.0.0", "name": "benchipam",
            "ipam": {"type": "host-local", "subnet": "10.254.0.0/16", "dataDir": data.path().join("hl").display().to_string()}})
        .to_string(),
    };

    // Everything below runs in the node's namespace; child processes inherit it.
    let node_ns = std::fs::File::open(node.ns.path()).expect("open node netns");
    let _inside = NetnsGuard::enter(&node_ns).expect("enter node netns");

    // Warm-up (page cache, first-exec costs) for both.
    for s in [&ours, &reference] {
        invoke(s, "ADD", "warm", &pods[0].path(), false);
        invoke(s, "DEL", "warm", &pods[0].path(), false);
    }

    let mut rows = Vec::new();
    let mut ours_add_lines = Vec::new();
    let mut ours_del_lines = Vec::new();
    for (mode, t) in [("sequential", 1usize), ("concurrent", threads)] {
        // Alternate who goes first so neither always gets the colder machine.
        let order: [&Subject; 2] = if t == 1 {
            [&ours, &reference]
        } else {
            [&reference, &ours]
        };
        let mut res: BTreeMap<(&str, &str), Run> = BTreeMap::new();
        for s in order {
            let add = phase(
                s,
                "ADD",
                &pods,
                &format!("{mode}-"),
                t,
                s.label == ours.label,
            );
            let del = phase(
                s,
                "DEL",
                &pods,
                &format!("{mode}-"),
                t,
                s.label == ours.label,
            );
            if s.label == ours.label && t == 1 {
                ours_add_lines = add.stderr.clone();
                ours_del_lines = del.stderr.clone();
            }
            res.insert((s.label, "ADD"), add);
            res.insert((s.label, "DEL"), del);
        }
        for op in ["ADD", "DEL"] {
            let o = &res[&(ours.label, op)];
            let r = &res[&(reference.label, op)];
            let pods_s = |x: &Run| x.lat.len() as f64 / x.wall.as_secs_f64();
            rows.push(format!(
                "{op} {mode:<10} (x{t}) | ours p50 {:7.2} ms p99 {:7.2} ms {:7.1} pods/s | ptp+host-local p50 {:7.2} ms p99 {:7.2} ms {:7.1} pods/s | p50 ratio {:5.2}x  throughput ratio {:5.2}x",
                ms(pct(&o.lat, 0.5)), ms(pct(&o.lat, 0.99)), pods_s(o),
                ms(pct(&r.lat, 0.5)), ms(pct(&r.lat, 0.99)), pods_s(r),
                ms(pct(&r.lat, 0.5)) / ms(pct(&o.lat, 0.5)).max(1e-9),
                pods_s(o) / pods_s(r).max(1e-9),
            ));
        }
    }

    // Breakdown.
    let reps = if short { 3 } else { 30 };
    let version = Subject {
        label: "version",
        prog: ours.prog.clone(),
        conf: r#"{"cniVersion":"1.0.0"}"#.into(),
    };
    let start_lat: Vec<Duration> = (0..reps)
        .map(|_| invoke(&version, "VERSION", "v", &pods[0].path(), false).took)
        .collect();
    let ref_version = Subject {
        label: "ptp version",
        prog: reference.prog.clone(),
        conf: r#"{"cniVersion":"1.0.0"}"#.into(),
    };
    let ref_start_lat: Vec<Duration> = (0..reps)
        .map(|_| invoke(&ref_version, "VERSION", "v", &pods[0].path(), false).took)
        .collect();
    let hl_add: Vec<Duration> = (0..reps)
        .map(|i| {
            invoke(
                &host_local,
                "ADD",
                &format!("hl{i}"),
                &pods[0].path(),
                false,
            )
            .took
        })
        .collect();
    let hl_del: Vec<Duration> = (0..reps)
        .map(|i| {
            invoke(
                &host_local,
                "DEL",
                &format!("hl{i}"),
                &pods[0].path(),
                false,
            )
            .took
        })
        .collect();
    let mut nl = Netlink::open().expect("netlink");
    let own_ns = std::fs::File::open("/proc/thread-self/ns/net").expect("own netns");
    let mut veth_add = Vec::new();
    let mut veth_del = Vec::new();
    for i in 0..reps {
        let name = format!("bvh{i}");
        let spec = VethSpec {
            host_name: &name,
            host_mac: [0xee; 6],
            peer_name: &format!("bvp{i}"),
            peer_mac: [0x0a, 0x58, 0, 0, 0, 1],
            mtu: 1450,
            peer_netns_fd: std::os::fd::AsRawFd::as_raw_fd(&own_ns),
        };
        let t = Instant::now();
        nl.create_veth(&spec).expect("create veth");
        veth_add.push(t.elapsed());
        let t = Instant::now();
        nl.delete_link(&name).expect("delete veth");
        veth_del.push(t.elapsed());
    }
    let add_b = breakdown(&ours_add_lines);
    let del_b = breakdown(&ours_del_lines);

    println!(
        "CNI plugin benchmark: ours = the embedded plugin `up` installs ({} bytes, sha256 {}), \
         reference = {REF_DIR}/ptp + host-local",
        clusterctl_cni_embed::PLUGIN.len(),
        &clusterctl_cni_embed::sha256()[..16]
    );
    println!(
        "CNI plugin benchmark ({} pods per phase{})",
        n,
        if short {
            ", BENCH_SHORT: tiny run, ratios not meaningful"
        } else {
            ""
        }
    );
    for r in &rows {
        println!("  {r}");
    }
    println!("  where the time goes (p50 unless marked mean):");
    println!(
        "    process start + exit of our binary (VERSION):       {:7.2} ms",
        ms(pct(&start_lat, 0.5))
    );
    println!(
        "    process start + exit of the reference ptp (VERSION): {:7.2} ms",
        ms(pct(&ref_start_lat, 0.5))
    );
    println!("    our ADD phases, mean µs: {}", fmt_map(&add_b));
    println!("      (config = parse stdin; ipam = lock+read+write state; veth = create pair into the netns;");
    println!("       container = setns + up + address + neighbour + 2 routes; netlink = host route + sysctls)");
    println!("    our DEL phases, mean µs: {}", fmt_map(&del_b));
    println!("      (netlink = RTM_DELLINK of the host end, i.e. the kernel's veth teardown; ipam = release)");
    println!(
        "    kernel veth create (in-process netlink):            {:7.2} ms",
        ms(pct(&veth_add, 0.5))
    );
    println!(
        "    kernel veth delete (in-process netlink):            {:7.2} ms",
        ms(pct(&veth_del, 0.5))
    );
    println!(
        "    reference host-local exec alone ADD / DEL:          {:7.2} / {:.2} ms",
        ms(pct(&hl_add, 0.5)),
        ms(pct(&hl_del, 0.5))
    );
}

fn fmt_map(m: &BTreeMap<String, f64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k} {v:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}
