//! `spec.controlPlane.vip.loadBalancerPool` (kube-vip-cloud-provider's address pools): a valid pool
//! resolves to the allocator's image; each wrong pool is refused at the line of the offending value with a
//! help line (needs loadBalancerServices; inside the nodes' network; clear of nodes, VIP, podSubnet and
//! serviceSubnet; entries that parse; namespace names that are DNS labels).

use clusterctl_spec::{load, validate, Diagnostic, Severity};

const BASE: &str = "\
apiVersion: clusterctl.io/v1alpha1
kind: Cluster
metadata:
  name: demo
spec:
  kubernetesVersion: v1.34.1
  provider: ssh
  controlPlane:
    vip:
      address: 10.0.0.100
      interface: eth0
      loadBalancerServices: true
      loadBalancerPool:
        range: 10.0.0.200-10.0.0.202
        cidr: 10.0.0.240/29
        namespaces:
          team-a: {cidr: 10.0.0.232/30}
  networking:
    podSubnet: 10.244.0.0/16
    serviceSubnet: 10.96.0.0/16
  nodes:
    - name: cp1
      role: control-plane
      address: 10.0.0.11/24
    - name: w1
      role: worker
      address: 10.0.0.21/24
";

fn diags(text: &str) -> (Result<clusterctl_spec::Validated, ()>, Vec<Diagnostic>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cluster.yaml");
    std::fs::write(&path, text).expect("write");
    let loaded = load(&path).expect("load");
    match validate(&loaded) {
        Ok(v) => {
            let w = v.warnings.clone();
            (Ok(v), w)
        }
        Err(d) => (Err(()), d.items),
    }
}

#[test]
fn a_pool_inside_the_nodes_network_resolves_to_the_allocator_image() {
    let (v, d) = diags(BASE);
    let v = v.unwrap_or_else(|_| panic!("valid file refused: {d:?}"));
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(
        v.cluster.kube_vip_cloud_provider_image(),
        Some("ghcr.io/kube-vip/kube-vip-cloud-provider:v0.0.12")
    );
    let (v, _) = diags(&BASE.replace(
        "      loadBalancerPool:\n        range: 10.0.0.200-10.0.0.202\n        cidr: 10.0.0.240/29\n        namespaces:\n          team-a: {cidr: 10.0.0.232/30}\n",
        "",
    ));
    assert_eq!(
        v.map(|v| v
            .cluster
            .kube_vip_cloud_provider_image()
            .map(str::to_string)),
        Ok(None),
        "no pool, no allocator"
    );
}

#[test]
fn wrong_pools_are_refused_at_their_line() {
    // (edit from, edit to, message, the line's text that must be pointed at, severity)
    let rows: &[(&str, &str, &str, &str, Severity)] = &[
        (
            "      loadBalancerServices: true\n",
            "",
            "loadBalancerServices is not",
            "loadBalancerPool:",
            Severity::Error,
        ),
        (
            "10.0.0.200-10.0.0.202",
            "10.0.0.20-10.0.0.22",
            "holds the address 10.0.0.21 of node w1",
            "range:",
            Severity::Error,
        ),
        (
            "10.0.0.240/29",
            "10.0.0.96/27",
            "holds the VIP 10.0.0.100",
            "cidr: 10.0.0.96",
            Severity::Error,
        ),
        (
            "10.0.0.240/29",
            "10.0.1.0/29",
            "is not inside the nodes' network 10.0.0.0/24 (from node cp1)",
            "cidr: 10.0.1",
            Severity::Error,
        ),
        (
            "10.0.0.232/30",
            "10.96.0.0/30",
            "overlaps serviceSubnet 10.96.0.0/16",
            "team-a",
            Severity::Error,
        ),
        (
            "10.0.0.200-10.0.0.202",
            "10.0.0.202-10.0.0.200",
            "runs backwards",
            "range:",
            Severity::Error,
        ),
        (
            "10.0.0.240/29",
            "10.0.0.240",
            "is not a CIDR",
            "cidr: 10.0.0.240",
            Severity::Error,
        ),
        (
            "team-a:",
            "Team_A:",
            "namespace name \"Team_A\"",
            "Team_A",
            Severity::Error,
        ),
        (
            "address: 10.0.0.11/24",
            "address: 10.0.0.11",
            "",
            "",
            Severity::Error,
        ),
    ];
    let mut failures = Vec::new();
    for (from, to, message, line_of, severity) in rows {
        assert!(BASE.contains(from), "{from}");
        let mut text = BASE.replacen(from, to, 1);
        if message.is_empty() {
            // Without any prefix length the network is unknown: a warning, at the pool's entries.
            text = text.replacen("address: 10.0.0.21/24", "address: 10.0.0.21", 1);
            let (v, d) = diags(&text);
            assert!(v.is_ok(), "{d:?}");
            assert!(
                d.iter().any(|d| d.severity == Severity::Warning
                    && d.code == "spec::lb-pool-network-unknown"),
                "{d:?}"
            );
            continue;
        }
        let (_, d) = diags(&text);
        let Some(hit) = d.iter().find(|d| d.message.contains(message)) else {
            failures.push(format!("{message}: not reported; got {d:?}"));
            continue;
        };
        let want = text
            .lines()
            .position(|l| l.contains(line_of))
            .map(|i| i + 1)
            .unwrap_or(0);
        if hit.line != want || hit.severity != *severity || hit.help.is_none() {
            failures.push(format!(
                "{message}: at line {} ({:?}), expected line {want} ({severity:?}) — {hit}",
                hit.line, hit.severity
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
