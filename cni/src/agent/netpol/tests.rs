//! Table-driven tests of the compiler and of the script it becomes.

use super::compile::{compile, PolicyError, PortMatch, Proto, Rule, Ruleset};
use super::nft::script;
use super::select::Ranges;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;

const NODE: &str = "n1";

fn pod(ns: &str, name: &str, node: &str, ip: &str, labels: Value, ports: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x", "ports": ports}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}
    }))
    .unwrap()
}

fn ns(name: &str, labels: Value) -> Namespace {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

fn pol(ns: &str, name: &str, spec: Value) -> NetworkPolicy {
    serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}))
        .unwrap()
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn ips(list: &[&str]) -> BTreeSet<Ipv4Addr> {
    list.iter().map(|s| ip(s)).collect()
}

/// The world every case compiles against: namespaces `a` (team=x) and `b` (team=y); on this node
/// a-web (10.0.1.2, port http=8080/TCP, dns=53/UDP), a-cli (10.0.1.3), b-cli (10.0.1.4); on
/// another node a-web2 (10.0.2.2, http=9090), b-db (10.0.2.3); a host-network pod and a finished
/// pod that must be ignored.
fn world() -> (Vec<Pod>, Vec<Namespace>) {
    let web_ports = json!([{"name": "http", "containerPort": 8080},
                           {"name": "dns", "containerPort": 53, "protocol": "UDP"}]);
    let mut pods = vec![
        pod(
            "a",
            "web",
            NODE,
            "10.0.1.2",
            json!({"app": "web"}),
            web_ports,
        ),
        pod(
            "a",
            "cli",
            NODE,
            "10.0.1.3",
            json!({"app": "cli"}),
            json!([]),
        ),
        pod(
            "b",
            "cli",
            NODE,
            "10.0.1.4",
            json!({"app": "cli"}),
            json!([]),
        ),
        pod(
            "a",
            "web2",
            "n2",
            "10.0.2.2",
            json!({"app": "web"}),
            json!([{"name": "http", "containerPort": 9090}]),
        ),
        pod("b", "db", "n2", "10.0.2.3", json!({"app": "db"}), json!([])),
    ];
    let mut host = pod(
        "a",
        "host",
        NODE,
        "192.168.0.1",
        json!({"app": "web"}),
        json!([]),
    );
    host.spec.as_mut().unwrap().host_network = Some(true);
    let mut done = pod(
        "a",
        "done",
        NODE,
        "10.0.1.9",
        json!({"app": "web"}),
        json!([]),
    );
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    pods.extend([host, done]);
    (
        pods,
        vec![ns("a", json!({"team": "x"})), ns("b", json!({"team": "y"}))],
    )
}

fn run(policies: &[NetworkPolicy]) -> Ruleset {
    let (pods, nss) = world();
    compile(NODE, policies, &pods, &nss)
}

fn tcp(ports: &[(u16, u16)]) -> PortMatch {
    PortMatch {
        pods: None,
        proto: Proto::Tcp,
        ports: Some(ports.to_vec()),
    }
}

fn peers(list: &[&str]) -> Option<Ranges> {
    let mut r = Ranges::new();
    for a in list {
        r.add_addr(ip(a));
    }
    Some(r)
}

#[test]
fn isolation_by_policy_types() {
    // (spec, ingress-isolated, egress-isolated)
    let cases: Vec<(Value, &[&str], &[&str])> = vec![
        (
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
            &["10.0.1.2", "10.0.1.3"],
            &[],
        ),
        (
            json!({"podSelector": {}, "policyTypes": ["Egress"]}),
            &[],
            &["10.0.1.2", "10.0.1.3"],
        ),
        (
            json!({"podSelector": {"matchLabels": {"app": "web"}}}),
            &["10.0.1.2"],
            &[],
        ),
        // No policyTypes, egress rules present: both.
        (
            json!({"podSelector": {"matchLabels": {"app": "web"}}, "egress": [{}]}),
            &["10.0.1.2"],
            &["10.0.1.2"],
        ),
        // An empty egress list is not an egress rule.
        (
            json!({"podSelector": {"matchLabels": {"app": "web"}}, "egress": []}),
            &["10.0.1.2"],
            &[],
        ),
        // No podSelector at all: every pod of the namespace.
        (
            json!({"policyTypes": ["Ingress"]}),
            &["10.0.1.2", "10.0.1.3"],
            &[],
        ),
        (
            json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
            &["10.0.1.2", "10.0.1.3"],
            &["10.0.1.2", "10.0.1.3"],
        ),
        // Selects nobody here (a-web2 is on n2): nothing isolated, no rules.
        (
            json!({"podSelector": {"matchLabels": {"app": "nope"}}}),
            &[],
            &[],
        ),
    ];
    for (spec, ing, eg) in cases {
        let rs = run(&[pol("a", "p", spec.clone())]);
        assert_eq!(rs.ingress_isolated, ips(ing), "{spec}");
        assert_eq!(rs.egress_isolated, ips(eg), "{spec}");
        assert!(rs.failed.is_empty());
        if ing.is_empty() && eg.is_empty() {
            assert!(rs.policies.is_empty(), "{spec}");
        } else {
            assert!(rs.policies[0].ingress.is_empty(), "{spec}");
        }
    }
    assert_eq!(run(&[]), Ruleset::default());
}

#[test]
fn peers_and_ports() {
    let web = json!({"matchLabels": {"app": "web"}});
    // (one ingress rule of a policy selecting a-web, the compiled rule; None: dropped)
    let cases: Vec<(Value, Option<Rule>)> = vec![
        (
            json!({}),
            Some(Rule {
                sources: Vec::new(),
                peers: None,
                ports: None,
            }),
        ),
        (
            json!({"from": [], "ports": []}),
            Some(Rule {
                sources: Vec::new(),
                peers: None,
                ports: None,
            }),
        ),
        // Pod selector: pods of the policy's namespace, on any node.
        (
            json!({"from": [{"podSelector": {"matchLabels": {"app": "cli"}}}],
                "ports": [{"port": 80}]}),
            Some(Rule {
                sources: Vec::new(),
                peers: peers(&["10.0.1.3"]),
                ports: Some(vec![tcp(&[(80, 80)])]),
            }),
        ),
        (
            json!({"from": [{"podSelector": {}}]}),
            Some(Rule {
                sources: Vec::new(),
                peers: peers(&["10.0.1.2", "10.0.1.3", "10.0.2.2"]),
                ports: None,
            }),
        ),
        // Namespace selector alone: every pod of those namespaces.
        (
            json!({"from": [{"namespaceSelector": {"matchLabels": {"team": "y"}}}]}),
            Some(Rule {
                sources: Vec::new(),
                peers: peers(&["10.0.1.4", "10.0.2.3"]),
                ports: None,
            }),
        ),
        // Both together: pods matching in namespaces matching.
        (
            json!({"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "cli"}}}]}),
            Some(Rule {
                sources: Vec::new(),
                peers: peers(&["10.0.1.3", "10.0.1.4"]),
                ports: None,
            }),
        ),
        // Selecting nobody: the rule can never match and is dropped.
        (
            json!({"from": [{"podSelector": {"matchLabels": {"app": "none"}}}]}),
            None,
        ),
        // ipBlock minus except; IPv6 blocks add nothing.
        (
            json!({"from": [{"ipBlock": {"cidr": "10.0.1.0/24", "except": ["10.0.1.3/32"]}},
                         {"ipBlock": {"cidr": "fd00::/64"}}]}),
            Some(Rule {
                sources: Vec::new(),
                peers: {
                    let mut r = Ranges::cidr("10.0.1.0/24".parse().unwrap());
                    r.subtract("10.0.1.3/32".parse().unwrap());
                    Some(r)
                },
                ports: None,
            }),
        ),
        // Ranges, protocols, protocol without port.
        (
            json!({"ports": [{"port": 8000, "endPort": 8080}, {"port": 443}, {"port": 53, "protocol": "UDP"},
                          {"protocol": "SCTP"}]}),
            Some(Rule {
                sources: Vec::new(),
                peers: None,
                ports: Some(vec![
                    tcp(&[(443, 443), (8000, 8080)]),
                    PortMatch {
                        pods: None,
                        proto: Proto::Udp,
                        ports: Some(vec![(53, 53)]),
                    },
                    PortMatch {
                        pods: None,
                        proto: Proto::Sctp,
                        ports: None,
                    },
                ]),
            }),
        ),
        // A named port resolves on the selected pod; a name no pod has makes the rule match nothing.
        (
            json!({"ports": [{"port": "http"}]}),
            Some(Rule {
                sources: Vec::new(),
                peers: None,
                ports: Some(vec![PortMatch {
                    pods: Some(ips(&["10.0.1.2"])),
                    proto: Proto::Tcp,
                    ports: Some(vec![(8080, 8080)]),
                }]),
            }),
        ),
        (
            json!({"ports": [{"port": "dns", "protocol": "UDP"}]}),
            Some(Rule {
                sources: Vec::new(),
                peers: None,
                ports: Some(vec![PortMatch {
                    pods: Some(ips(&["10.0.1.2"])),
                    proto: Proto::Udp,
                    ports: Some(vec![(53, 53)]),
                }]),
            }),
        ),
        (json!({"ports": [{"port": "dns"}]}), None),
    ];
    for (r, want) in cases {
        let rs = run(&[pol("a", "p", json!({"podSelector": web, "ingress": [r]}))]);
        assert!(rs.failed.is_empty(), "{r}: {:?}", rs.failed);
        let got = rs.policies[0].ingress.first();
        // The sources (one per peer, for the table's shared sets) add up to the peers.
        if let Some(g) = got {
            let mut union = Ranges::new();
            g.sources.iter().for_each(|s| union.union(&s.addrs));
            let want_union = g.peers.clone().map(|_| union);
            assert_eq!(g.peers, want_union, "{r}");
            assert_eq!(g.sources.is_empty(), g.peers.is_none(), "{r}");
        }
        let got = got.map(|g| Rule {
            sources: Vec::new(),
            ..g.clone()
        });
        assert_eq!(got, want, "{r}");
        assert_eq!(rs.ingress_isolated, ips(&["10.0.1.2"]));
    }
}

#[test]
fn egress_named_ports_resolve_on_the_destination() {
    let rs = run(&[pol(
        "b",
        "p",
        json!({
        "podSelector": {}, "policyTypes": ["Egress"],
        "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"team": "x"}}}],
                    "ports": [{"port": "http"}]}]}),
    )]);
    assert_eq!(rs.egress_isolated, ips(&["10.0.1.4"]));
    let r = &rs.policies[0].egress[0];
    assert_eq!(
        r.ports.as_deref().unwrap(),
        [
            PortMatch {
                pods: Some(ips(&["10.0.1.2"])),
                proto: Proto::Tcp,
                ports: Some(vec![(8080, 8080)])
            },
            PortMatch {
                pods: Some(ips(&["10.0.2.2"])),
                proto: Proto::Tcp,
                ports: Some(vec![(9090, 9090)])
            },
        ]
    );
    let s = script(&rs);
    assert!(s.contains("ip saddr @l0 jump p0_egress\n"), "{s}");
    assert!(s.contains("ip daddr @s1 ip daddr { 10.0.1.2 } meta l4proto tcp th dport { 8080 } goto egress_allowed comment \"b/p egress 0\""), "{s}");
}

#[test]
fn what_cannot_be_compiled_fails_closed() {
    let cases: Vec<(Value, PolicyError)> = vec![
        (
            json!({"ingress": [{"ports": [{"port": 90, "endPort": 80}]}]}),
            PolicyError::EndPort {
                port: "90".into(),
                end: 80,
            },
        ),
        (
            json!({"ingress": [{"ports": [{"port": "http", "endPort": 80}]}]}),
            PolicyError::EndPort {
                port: "http".into(),
                end: 80,
            },
        ),
        (
            json!({"ingress": [{"ports": [{"port": 0}]}]}),
            PolicyError::Port(0),
        ),
        (
            json!({"ingress": [{"ports": [{"port": 70000}]}]}),
            PolicyError::Port(70000),
        ),
        (
            json!({"ingress": [{"ports": [{"port": 80, "protocol": "ICMP"}]}]}),
            PolicyError::Protocol("ICMP".into()),
        ),
        (
            json!({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}),
            PolicyError::Cidr("10.0.0.0/33".into()),
        ),
        (
            json!({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/24", "except": ["10.1.0.0/24"]}}]}]}),
            PolicyError::Except {
                cidr: "10.0.0.0/24".into(),
                except: "10.1.0.0/24".into(),
            },
        ),
        (
            json!({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/24"}, "podSelector": {}}]}]}),
            PolicyError::MixedPeer,
        ),
        // Even in a rule whose peers select nobody.
        (
            json!({"ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "x"}}}],
                             "ports": [{"port": 0}]}]}),
            PolicyError::Port(0),
        ),
    ];
    for (mut spec, err) in cases {
        spec["podSelector"] = json!({"matchLabels": {"app": "web"}});
        spec["policyTypes"] = json!(["Ingress", "Egress"]);
        // A second, valid policy selecting the same pod keeps its allowance.
        let ok = pol(
            "a",
            "ok",
            json!({"podSelector": {}, "ingress": [{"ports": [{"port": 22}]}]}),
        );
        let rs = run(&[pol("a", "bad", spec.clone()), ok]);
        assert_eq!(rs.failed.len(), 1, "{spec}");
        assert_eq!(
            (rs.failed[0].id.as_str(), &rs.failed[0].error),
            ("a/bad", &err),
            "{spec}"
        );
        assert_eq!(rs.ingress_isolated, ips(&["10.0.1.2", "10.0.1.3"]));
        assert_eq!(
            rs.egress_isolated,
            ips(&["10.0.1.2"]),
            "isolated for its types"
        );
        assert_eq!(rs.policies.len(), 1, "only the valid one allows anything");
        assert_eq!(rs.policies[0].id, "a/ok");
    }
    // A selector that cannot be evaluated isolates every pod of the namespace here.
    let rs = run(&[pol(
        "a",
        "bad",
        json!({"podSelector": {"matchExpressions":
        [{"key": "app", "operator": "Near", "values": ["web"]}]}}),
    )]);
    assert_eq!(rs.ingress_isolated, ips(&["10.0.1.2", "10.0.1.3"]));
    assert!(rs.policies.is_empty());
    assert_eq!(
        rs.failed[0].error.to_string(),
        "label selector: unknown operator \"Near\""
    );
}

#[test]
fn the_script() {
    let rs = run(&[
        pol(
            "a",
            "deny",
            json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        ),
        pol(
            "a",
            "web",
            json!({"podSelector": {"matchLabels": {"app": "web"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "cli"}}},
                                  {"ipBlock": {"cidr": "10.9.0.0/16", "except": ["10.9.1.0/24"]}}],
                         "ports": [{"port": 80}, {"port": 8000, "endPort": 8080}]}]}),
        ),
    ]);
    let s = script(&rs);
    // a/deny (p0) has no rule: it isolates, and has no chain or pods set of its own (its
    // selection's index, l0, is taken but no set made). a/web's rule has two peers: one set each
    // (s2 for the pods, s3 for the block), one rule line each.
    let want = [
        "table inet clusterctl-netpol {}\ndelete table inet clusterctl-netpol\ntable inet clusterctl-netpol {\n",
        "  set egress_isolated { type ipv4_addr; elements = { 10.0.1.2, 10.0.1.3 } }\n",
        "  set ingress_isolated { type ipv4_addr; elements = { 10.0.1.2, 10.0.1.3 } }\n",
        "  set l1 { type ipv4_addr; elements = { 10.0.1.2 } }\n",
        "  set s2 { type ipv4_addr; flags interval; elements = { 10.0.1.3 } }\n",
        "  set s3 { type ipv4_addr; flags interval; elements = { 10.9.0.0-10.9.0.255, 10.9.2.0-10.9.255.255 } }\n",
        "  chain egress {\n    counter drop\n  }\n",
        "  chain egress_allowed {\n    ip daddr @ingress_isolated jump ingress\n    accept\n  }\n",
        "    type filter hook forward priority filter; policy accept;\n    ct state established,related accept\n",
        "    ip saddr @egress_isolated jump egress\n    ip daddr @ingress_isolated jump ingress\n",
        "  chain ingress {\n    ip daddr @l1 jump p1_ingress\n    counter drop\n  }\n",
        "  chain p1_ingress {\n    ip saddr @s2 meta l4proto tcp th dport { 80, 8000-8080 } accept comment \"a/web ingress 0\"\n    ip saddr @s3 meta l4proto tcp th dport { 80, 8000-8080 } accept comment \"a/web ingress 0\"\n  }\n}\n",
    ];
    assert!(!s.contains("p0_") && !s.contains("set l0"), "{s}");
    for w in want {
        assert!(s.contains(w), "missing {w:?} in\n{s}");
    }
    // Nothing selected: the table with empty sets and empty chains.
    let empty = script(&Ruleset::default());
    assert!(
        empty.contains("  set ingress_isolated { type ipv4_addr; }\n"),
        "{empty}"
    );
}
