//! The ADD success result (CNI spec 1.1.0, section 5 "ADD Success"), in the config's version: 1.x
//! results as the spec shows; 0.3.x/0.4.0 results add `"version": "4"` to each IP; results before
//! 1.1.0 carry none of the keys 1.1.0 added (`interfaces[].mtu`, `socketPath`, `pciID`;
//! `routes[].mtu`, `advmss`, `priority`, `table`, `scope`). A `prevResult` from an earlier plugin in
//! the chain is kept and ours appended to it.

use super::config::NetConf;
use serde_json::{json, Map, Value};
use std::net::Ipv4Addr;

/// The link-local gateway every pod routes through; the host end answers for it (proxy ARP, and a
/// permanent neighbour entry in the pod).
pub(crate) const GATEWAY: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 1);

/// What one ADD created.
#[derive(Debug, Clone)]
pub(crate) struct Attached<'a> {
    /// Host end name.
    pub host_name: &'a str,
    /// Host end MAC.
    pub host_mac: String,
    /// Container interface name (`CNI_IFNAME`).
    pub ifname: &'a str,
    /// Container interface MAC.
    pub container_mac: String,
    /// `CNI_NETNS`.
    pub netns: &'a str,
    /// Pod address (a /32).
    pub ip: Ipv4Addr,
}

/// Builds the result JSON for `conf.cni_version`, merged into `conf.prev_result` when present.
pub(crate) fn add_result(conf: &NetConf, a: &Attached<'_>) -> Value {
    let mut out = match &conf.prev_result {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    let mut ifaces = take_array(&mut out, "interfaces");
    let host_idx = ifaces.len();
    ifaces.push(json!({"name": a.host_name, "mac": a.host_mac, "mtu": conf.mtu}));
    let pod_idx = ifaces.len();
    ifaces.push(
        json!({"name": a.ifname, "mac": a.container_mac, "mtu": conf.mtu, "sandbox": a.netns}),
    );
    let _ = host_idx;
    let mut ips = take_array(&mut out, "ips");
    ips.push(json!({"address": format!("{}/32", a.ip), "gateway": GATEWAY.to_string(), "interface": pod_idx}));
    let mut routes = take_array(&mut out, "routes");
    routes.push(json!({"dst": "0.0.0.0/0", "gw": GATEWAY.to_string()}));
    let legacy = conf.cni_version.starts_with("0.");
    if !conf.at_least_1_1() {
        strip(&mut ifaces, INTERFACE_KEYS_1_1);
        strip(&mut routes, ROUTE_KEYS_1_1);
    }
    for ip in ips.iter_mut() {
        if let Value::Object(m) = ip {
            if legacy {
                m.entry("version").or_insert_with(|| json!("4"));
            } else {
                m.remove("version");
            }
        }
    }
    out.insert("cniVersion".into(), json!(conf.cni_version));
    out.insert("interfaces".into(), Value::Array(ifaces));
    out.insert("ips".into(), Value::Array(ips));
    out.insert("routes".into(), Value::Array(routes));
    if let Some(dns) = &conf.dns {
        let empty = out
            .get("dns")
            .is_none_or(|d| d.as_object().is_none_or(|o| o.is_empty()));
        if empty {
            out.insert(
                "dns".into(),
                serde_json::to_value(dns).unwrap_or(Value::Null),
            );
        }
    }
    Value::Object(out)
}

/// Keys of a result's `interfaces[]` that CNI 1.1.0 added.
const INTERFACE_KEYS_1_1: &[&str] = &["mtu", "socketPath", "pciID"];
/// Keys of a result's `routes[]` that CNI 1.1.0 added.
const ROUTE_KEYS_1_1: &[&str] = &["mtu", "advmss", "priority", "table", "scope"];

fn strip(items: &mut [Value], keys: &[&str]) {
    for m in items.iter_mut().filter_map(Value::as_object_mut) {
        for k in keys {
            m.remove(*k);
        }
    }
}

fn take_array(m: &mut Map<String, Value>, key: &str) -> Vec<Value> {
    match m.remove(key) {
        Some(Value::Array(v)) => v,
        _ => Vec::new(),
    }
}

/// IPv4 addresses listed in a result's `ips` (without prefix), in order.
pub(crate) fn result_ipv4s(result: &Value) -> Vec<Ipv4Addr> {
    result
        .get("ips")
        .and_then(Value::as_array)
        .map(|ips| {
            ips.iter()
                .filter_map(|ip| ip.get("address").and_then(Value::as_str))
                .filter_map(|s| s.split('/').next().and_then(|a| a.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(v: &str, prev: Option<Value>) -> NetConf {
        let mut c = super::super::config::parse(
            format!(r#"{{"cniVersion":"{v}","name":"n","type":"t","dns":{{"nameservers":["10.96.0.10"]}}}}"#).as_bytes(),
        )
        .unwrap();
        c.prev_result = prev;
        c
    }

    fn att() -> Attached<'static> {
        Attached {
            host_name: "cc0123456789abc",
            host_mac: "ee:ee:ee:ee:ee:ee".into(),
            ifname: "eth0",
            container_mac: "0a:58:0a:f4:01:05".into(),
            netns: "/run/netns/p",
            ip: Ipv4Addr::new(10, 244, 1, 5),
        }
    }

    #[test]
    fn shapes_per_version() {
        let r = add_result(&conf("1.1.0", None), &att());
        assert_eq!(r["cniVersion"], "1.1.0");
        assert_eq!(r["ips"][0]["address"], "10.244.1.5/32");
        assert_eq!(r["ips"][0]["interface"], 1);
        assert!(r["ips"][0].get("version").is_none());
        assert_eq!(r["interfaces"][1]["sandbox"], "/run/netns/p");
        assert_eq!(r["routes"][0]["gw"], "169.254.1.1");
        assert_eq!(r["dns"]["nameservers"][0], "10.96.0.10");
        assert_eq!(
            r["interfaces"][0]["mtu"], 1450,
            "1.1.0 defines interfaces[].mtu"
        );
        let r = add_result(&conf("0.4.0", None), &att());
        assert_eq!(r["ips"][0]["version"], "4");
        assert_eq!(result_ipv4s(&r), vec![Ipv4Addr::new(10, 244, 1, 5)]);
    }

    #[test]
    fn results_before_1_1_carry_no_key_of_1_1() {
        let prev = json!({"cniVersion":"1.0.0",
            "interfaces":[{"name":"x","mtu":9000,"socketPath":"/s","pciID":"0000:00:01.0"}],
            "routes":[{"dst":"10.0.0.0/8","mtu":1400,"advmss":1360,"priority":5,"table":7,"scope":0}]});
        for v in ["0.3.0", "0.3.1", "0.4.0", "1.0.0"] {
            let r = add_result(&conf(v, Some(prev.clone())), &att());
            for i in r["interfaces"].as_array().unwrap() {
                for k in INTERFACE_KEYS_1_1 {
                    assert!(i.get(*k).is_none(), "{v}: interfaces[].{k} in {r}");
                }
            }
            for rt in r["routes"].as_array().unwrap() {
                for k in ROUTE_KEYS_1_1 {
                    assert!(rt.get(*k).is_none(), "{v}: routes[].{k} in {r}");
                }
            }
        }
        let r = add_result(&conf("1.1.0", Some(prev)), &att());
        assert_eq!(r["interfaces"][0]["mtu"], 9000);
        assert_eq!(r["routes"][0]["table"], 7);
    }

    #[test]
    fn appends_to_prev_result() {
        let prev = json!({"cniVersion":"1.0.0","interfaces":[{"name":"x"}],"ips":[{"address":"10.9.0.2/24","interface":0}]});
        let r = add_result(&conf("1.0.0", Some(prev)), &att());
        assert_eq!(r["interfaces"].as_array().unwrap().len(), 3);
        assert_eq!(r["ips"][1]["interface"], 2);
        assert_eq!(r["ips"][0]["address"], "10.9.0.2/24");
    }
}
