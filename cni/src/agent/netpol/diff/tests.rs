//! The difference between two tables compiled from two states of the API: a pod's labels or
//! address changing touches only set elements, a policy changing only its own chains and sets,
//! nothing changing gives an empty script; and the policies' indices stay put.

use super::super::compile::compile;
use super::super::table::{Names, Table};
use super::diff;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::{json, Value};

fn pod(name: &str, ip: &str, app: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"namespace": "a", "name": name, "labels": {"app": app}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "podIP": ip}
    }))
    .unwrap()
}

fn pol(name: &str, spec: Value) -> NetworkPolicy {
    serde_json::from_value(json!({"metadata": {"namespace": "a", "name": name}, "spec": spec}))
        .unwrap()
}

/// a/web (10.0.1.2), a/cli (10.0.1.3), a/db (10.0.1.4), a/cli2 (10.0.1.9).
fn pods() -> Vec<Pod> {
    vec![
        pod("web", "10.0.1.2", "web"),
        pod("cli", "10.0.1.3", "cli"),
        pod("db", "10.0.1.4", "db"),
        pod("cli2", "10.0.1.9", "cli"),
    ]
}

fn allow(to: &str, port: u16) -> Value {
    json!({"podSelector": {"matchLabels": {"app": to}},
           "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "cli"}}}],
                        "ports": [{"port": port}]}]})
}

/// web and db each allow the cli pods on one port; the cli pods may reach 10.9.0.0/16 but
/// 10.9.1.0/24.
fn policies() -> Vec<NetworkPolicy> {
    vec![
        pol("db", allow("db", 5432)),
        pol(
            "out",
            json!({"podSelector": {"matchLabels": {"app": "cli"}}, "policyTypes": ["Egress"],
                   "egress": [{"to": [{"ipBlock": {"cidr": "10.9.0.0/16", "except": ["10.9.1.0/24"]}}]}]}),
        ),
        pol("web", allow("web", 80)),
    ]
}

/// The table for `pods` and `pols`, names following `prev` (fresh without).
fn table(prev: Option<&Names>, pods: &[Pod], pols: &[NetworkPolicy]) -> (Table, Names) {
    let ns: Vec<Namespace> =
        vec![serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap()];
    let rs = compile("n1", pols, pods, &ns);
    let names = prev.map_or_else(|| Names::fresh(&rs), |n| n.next(&rs));
    (Table::build(&rs, &names), names)
}

fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

#[test]
fn nothing_changed_is_an_empty_script() {
    let (old, names) = table(None, &pods(), &policies());
    let (new, _) = table(Some(&names), &pods(), &policies());
    assert_eq!(diff(&old, &new), Some((String::new(), 0)));
}

#[test]
fn a_pod_label_change_only_moves_elements() {
    let (old, names) = table(None, &pods(), &policies());
    // cli2 stops being a client: it leaves the one set of the clients, which web's and db's rules
    // share (s1), and out's pods (l2).
    let mut p = pods();
    p[3] = pod("cli2", "10.0.1.9", "batch");
    let (new, _) = table(Some(&names), &p, &policies());
    let (s, n) = diff(&old, &new).expect("in place");
    assert_eq!(
        lines(&s),
        [
            "delete element inet clusterctl-netpol egress_isolated { 10.0.1.9 }",
            "delete element inet clusterctl-netpol l2 { 10.0.1.9 }",
            "delete element inet clusterctl-netpol s1 { 10.0.1.9 }",
        ],
        "{s}"
    );
    assert_eq!(n, 3);
    // And back: the same elements added.
    let (s, _) = diff(&new, &old).expect("in place");
    assert!(s.lines().all(|l| l.starts_with("add element ")), "{s}");
    assert_eq!(s.lines().count(), 3, "{s}");
}

#[test]
fn a_pod_address_change_replaces_its_elements() {
    let (old, names) = table(None, &pods(), &policies());
    // db moves to 10.0.1.7 and cli2 to its old 10.0.1.4: the clients 10.0.1.3 and 10.0.1.4 are one
    // range of the (interval) peers sets now, replacing the two single addresses.
    let mut p = pods();
    p[2] = pod("db", "10.0.1.7", "db");
    p[3] = pod("cli2", "10.0.1.4", "cli");
    let (new, _) = table(Some(&names), &p, &policies());
    let (s, _) = diff(&old, &new).expect("in place");
    let t = "inet clusterctl-netpol";
    assert_eq!(
        lines(&s),
        [
            format!("delete element {t} egress_isolated {{ 10.0.1.9 }}"),
            format!("add element {t} egress_isolated {{ 10.0.1.4 }}"),
            format!("delete element {t} ingress_isolated {{ 10.0.1.4 }}"),
            format!("add element {t} ingress_isolated {{ 10.0.1.7 }}"),
            format!("delete element {t} l0 {{ 10.0.1.4 }}"),
            format!("add element {t} l0 {{ 10.0.1.7 }}"),
            format!("delete element {t} l2 {{ 10.0.1.9 }}"),
            format!("add element {t} l2 {{ 10.0.1.4 }}"),
            format!("delete element {t} s1 {{ 10.0.1.3, 10.0.1.9 }}"),
            format!("add element {t} s1 {{ 10.0.1.3-10.0.1.4 }}"),
        ],
        "{s}"
    );
}

#[test]
fn a_policy_change_touches_only_its_chain() {
    let (old, names) = table(None, &pods(), &policies());
    let mut pols = policies();
    pols[2] = pol("web", allow("web", 8080));
    let (new, _) = table(Some(&names), &pods(), &pols);
    let (s, n) = diff(&old, &new).expect("in place");
    assert_eq!(
        lines(&s),
        [
            "flush chain inet clusterctl-netpol p2_ingress",
            "add rule inet clusterctl-netpol p2_ingress ip saddr @s1 meta l4proto tcp th dport { 8080 } accept comment \"a/web ingress 0\"",
        ],
        "{s}"
    );
    assert_eq!(n, 2);
}

#[test]
fn a_policy_added_and_one_deleted_touch_their_chains_and_the_dispatch() {
    let (old, names) = table(None, &pods(), &policies());
    // db deleted (index 0 and its pods set l0 freed; the clients' set s1 stays, web uses it), a
    // new one taking them: index 0 and l0 again, s1 shared.
    let mut pols = policies();
    pols.remove(0);
    let (mid, mid_names) = table(Some(&names), &pods(), &pols);
    let (s, _) = diff(&old, &mid).expect("in place");
    assert_eq!(
        lines(&s),
        [
            "flush chain inet clusterctl-netpol ingress",
            "flush chain inet clusterctl-netpol p0_ingress",
            "delete chain inet clusterctl-netpol p0_ingress",
            "delete set inet clusterctl-netpol l0",
            "delete element inet clusterctl-netpol ingress_isolated { 10.0.1.4 }",
            "add rule inet clusterctl-netpol ingress ip daddr @l4 jump p2_ingress",
            "add rule inet clusterctl-netpol ingress counter drop",
        ],
        "{s}"
    );
    assert!(!s.contains("p1_") && !s.contains("p2_ingress ip"), "{s}");
    pols.push(pol("zz", allow("db", 5433)));
    let (new, new_names) = table(Some(&mid_names), &pods(), &pols);
    assert_eq!(
        new_names.next(&compile_of(&pols)),
        new_names,
        "indices stay put"
    );
    let (s, _) = diff(&mid, &new).expect("in place");
    for want in [
        "add set inet clusterctl-netpol l0 { type ipv4_addr; elements = { 10.0.1.4 } }",
        "add chain inet clusterctl-netpol p0_ingress",
        "add rule inet clusterctl-netpol p0_ingress ip saddr @s1 meta l4proto tcp th dport { 5433 } accept comment \"a/zz ingress 0\"",
        "add rule inet clusterctl-netpol ingress ip daddr @l4 jump p2_ingress",
        "add rule inet clusterctl-netpol ingress ip daddr @l0 jump p0_ingress",
    ] {
        assert!(s.lines().any(|l| l == want), "{want:?} in\n{s}");
    }
    assert!(
        !s.contains("p1_")
            && !s.contains("chain inet clusterctl-netpol p2_")
            && !s.contains(" s1 "),
        "{s}"
    );
}

fn compile_of(pols: &[NetworkPolicy]) -> super::super::compile::Ruleset {
    let ns: Vec<Namespace> =
        vec![serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap()];
    compile("n1", pols, &pods(), &ns)
}

#[test]
fn a_diff_applied_to_the_old_table_gives_the_new_one() {
    // The whole scripts of old and new differ; old + diff, listed as objects, is new: checked
    // on the model by replaying the commands.
    let (old, names) = table(None, &pods(), &policies());
    let mut pols = policies();
    pols[1] = pol("out", allow("cli", 22));
    let mut p = pods();
    p[2] = pod("db", "10.0.1.7", "db");
    let (new, _) = table(Some(&names), &p, &pols);
    let (s, _) = diff(&old, &new).expect("in place");
    assert_eq!(replay(&old, &s), new, "{s}");
}

/// `old` with the commands of a difference script carried out on the model.
fn replay(old: &Table, script: &str) -> Table {
    use super::super::table::{Chain, Set};
    let mut t = old.clone();
    let pre = "inet clusterctl-netpol ";
    let elems = |rest: &str| -> Vec<(u32, u32)> {
        let inner = rest.trim().trim_start_matches('{').trim_end_matches('}');
        let addr = |a: &str| u32::from(a.trim().parse::<std::net::Ipv4Addr>().expect("address"));
        inner
            .split(", ")
            .map(|e| match e.split_once('-') {
                Some((lo, hi)) => (addr(lo), addr(hi)),
                None => (addr(e), addr(e)),
            })
            .collect()
    };
    for l in script.lines() {
        let (verb, rest) = l.split_once(pre).expect("table named");
        let (name, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        match verb.trim() {
            "flush chain" => t.chains.get_mut(name).expect("chain").rules.clear(),
            "delete chain" => assert!(t.chains.remove(name).is_some_and(|c| c.rules.is_empty())),
            "delete set" => assert!(t.sets.remove(name).is_some()),
            "add set" => {
                let interval = rest.contains("flags interval");
                let elements = rest
                    .split_once("elements = ")
                    .map(|(_, e)| elems(e.trim_end_matches(" }")))
                    .unwrap_or_default();
                t.sets.insert(
                    name.into(),
                    Set {
                        interval,
                        elements: elements.into_iter().collect(),
                    },
                );
            }
            "delete element" => {
                let s = t.sets.get_mut(name).expect("set");
                for e in elems(rest) {
                    assert!(s.elements.remove(&e), "{e:?} in {name}");
                }
            }
            "add element" => t
                .sets
                .get_mut(name)
                .expect("set")
                .elements
                .extend(elems(rest)),
            "add chain" => {
                let c = Chain {
                    hook: None,
                    rules: Vec::new(),
                };
                assert!(t.chains.insert(name.into(), c).is_none());
            }
            "add rule" => t
                .chains
                .get_mut(name)
                .expect("chain")
                .rules
                .push(rest.into()),
            other => panic!("unexpected command {other:?}"),
        }
    }
    t
}
