//! Benchmark: SSH upload throughput of clusterctl's `SshTransport::upload_stream` (atomic write through
//! `cat` into a temp file, then rename) against OpenSSH's `scp` of the same file to the same node
//! container, same key and known_hosts, in the same run; both timings include connecting. Reports MiB/s (median of the repetitions) and
//! the ratio clusterctl / scp (above 1: clusterctl is faster). The upload is checked by size on the node.
//!
//! `BENCH_SHORT=1`: a 4 MiB file, once; proves it works and never fails on a ratio. Needs root and a
//! Docker engine (skips outside CI when missing, fails in CI).

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use clusterctl_exec::{FileSpec, Transport};
use clusterctl_testbed::docker::{docker_available, TestCluster};
use clusterctl_testbed::{is_root, require};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    if !require(
        "root and a Docker engine (scripts/services/docker.sh)",
        is_root() && docker_available(),
    ) {
        return;
    }
    let short = std::env::var_os("BENCH_SHORT").is_some_and(|v| !v.is_empty() && v != "0");
    let (mib, reps) = if short { (4usize, 1) } else { (128usize, 5) };
    let size = mib * 1024 * 1024;
    let cluster = TestCluster::start("bxfr", 1).expect("test cluster");
    let node = &cluster.nodes[0];
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    {
        // Incompressible-looking data (xorshift), written once.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut buf = Vec::with_capacity(size);
        while buf.len() < size {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf.extend_from_slice(&x.to_le_bytes());
        }
        buf.truncate(size);
        file.write_all(&buf).expect("write temp file");
    }
    let spec = FileSpec {
        path: "/var/tmp/clusterctl-bench.bin".into(),
        mode: 0o600,
        owner: None,
    };
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let mut f = std::fs::File::open(file.path()).expect("open");
        let start = Instant::now();
        let t = node.transport().expect("connect");
        t.upload_stream(&mut f, size as u64, &spec, &mut |_| {})
            .expect("clusterctl upload");
        ours.push(start.elapsed());
        assert_eq!(
            node.sh("stat -c %s /var/tmp/clusterctl-bench.bin").unwrap(),
            size.to_string()
        );

        let start = Instant::now();
        let st = Command::new("scp")
            .arg("-q")
            .arg("-i")
            .arg(&node.key_file)
            .args(["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", node.known_hosts.display()))
            .arg(file.path())
            .arg(format!("root@{}:/var/tmp/scp-bench.bin", node.address))
            .status()
            .expect("scp");
        theirs.push(start.elapsed());
        assert!(st.success(), "scp failed");
        assert_eq!(
            node.sh("stat -c %s /var/tmp/scp-bench.bin").unwrap(),
            size.to_string()
        );
    }
    let (o, s) = (median(ours), median(theirs));
    let rate = |d: Duration| mib as f64 / d.as_secs_f64();
    println!("ssh_transfer: {mib} MiB upload, median of {reps} (both include their connect)");
    println!("{:>12} {:>10} {:>10}", "", "seconds", "MiB/s");
    println!(
        "{:>12} {:>10.3} {:>10.1}",
        "clusterctl",
        o.as_secs_f64(),
        rate(o)
    );
    println!("{:>12} {:>10.3} {:>10.1}", "scp", s.as_secs_f64(), rate(s));
    println!(
        "ratio (clusterctl MiB/s / scp MiB/s): {:.2}",
        rate(o) / rate(s)
    );
}
