//! Measures the test bed's Keycloak start (docs/testing.md, "Keycloak in the test bed"): starts
//! `N` servers one after the other (`cargo run -p clusterctl-testbed --example keycloak_starts -- N`,
//! default 3) and prints for each the time from spawning `kc.sh` until the realm's discovery document
//! answered, the CPU time (user + system) its processes had used by then, its resident memory and the
//! machine's load average; each server is stopped before the next starts.

use clusterctl_testbed::keycloak::{self, Keycloak};

fn main() -> Result<(), keycloak::KeycloakError> {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    for i in 1..=n {
        let load_before = load_average();
        let kc = Keycloak::start()?;
        let cpu = kc.cpu_time().unwrap_or_default();
        println!(
            "start {i}/{n}: ready in {:.1} s, CPU {:.1} s, RSS {} MiB, load average {load_before} before, {} at ready",
            kc.started_in().as_secs_f64(),
            cpu.as_secs_f64(),
            kc.rss_kib().unwrap_or(0) / 1024,
            load_average()
        );
    }
    Ok(())
}

/// The first three fields of `/proc/loadavg` (1, 5 and 15 minutes).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
