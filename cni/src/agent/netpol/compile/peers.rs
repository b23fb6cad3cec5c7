//! The peers of a rule as address sets: each peer (`podSelector`, `namespaceSelector`, both,
//! `ipBlock` minus `except`) evaluated once per compile however many policies name it, and kept as
//! a [`Source`] of its own so that the table can share one set per distinct peer.

use super::{key, PolicyError, Source, World};
use crate::agent::netpol::select::{self, Ranges};
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;

impl World<'_> {
    /// The addresses of `peers` and their sources; `None` for everyone (absent or empty).
    pub(super) fn peers(
        &self,
        ns: &str,
        peers: Option<&[NetworkPolicyPeer]>,
    ) -> Result<Option<(Ranges, Vec<Source>)>, PolicyError> {
        let Some(peers) = peers.filter(|p| !p.is_empty()) else {
            return Ok(None);
        };
        let mut r = Ranges::new();
        let mut sources: Vec<Source> = Vec::new();
        for p in peers {
            let key = match (&p.ip_block, &p.pod_selector, &p.namespace_selector) {
                (Some(b), None, None) => {
                    let except = b.except.as_deref().unwrap_or_default().join(",");
                    format!("block {} except {except}", b.cidr)
                }
                (Some(_), _, _) => return Err(PolicyError::MixedPeer),
                (None, pod_sel, None) => format!("pods ns={ns} pods={}", opt_key(pod_sel)),
                (None, pod_sel, Some(n)) => {
                    format!("pods namespaces={} pods={}", key(n), opt_key(pod_sel))
                }
            };
            let cached = self.memo.borrow().get(&key).cloned();
            let addrs = match cached {
                Some(a) => a,
                None => {
                    let a = self.source(ns, p)?;
                    self.memo.borrow_mut().insert(key.clone(), a.clone());
                    a
                }
            };
            r.union(&addrs);
            if !sources.iter().any(|s| s.key == key) {
                sources.push(Source { key, addrs });
            }
        }
        Ok(Some((r, sources)))
    }

    /// The addresses of one peer of a policy of namespace `ns`.
    fn source(&self, ns: &str, p: &NetworkPolicyPeer) -> Result<Ranges, PolicyError> {
        if let Some(b) = &p.ip_block {
            return ip_block(&b.cidr, b.except.as_deref());
        }
        let (pod_sel, ns_sel) = (&p.pod_selector, &p.namespace_selector);
        // Each namespace's selector result once, not once per pod.
        let mut ns_ok: BTreeMap<&str, bool> = BTreeMap::new();
        let mut found = Vec::new();
        for v in &self.pods {
            let ok = match (ns_sel, ns_ok.get(v.ns)) {
                (None, _) => v.ns == ns,
                (Some(_), Some(&ok)) => ok,
                (Some(s), None) => {
                    let labels = self.ns_labels.get(v.ns).copied().flatten();
                    let ok = select::matches(s, labels)?;
                    ns_ok.insert(v.ns, ok);
                    ok
                }
            };
            if ok
                && pod_sel
                    .as_ref()
                    .map_or(Ok(true), |s| select::matches(s, v.labels))?
            {
                found.push(v.ip);
            }
        }
        let mut r = Ranges::new();
        r.add_addrs(found);
        Ok(r)
    }
}

fn opt_key(sel: &Option<LabelSelector>) -> String {
    sel.as_ref().map_or_else(|| "*".to_string(), key)
}

/// `cidr` minus `except`; IPv6 blocks give the empty set (no pod has an IPv6 address here).
fn ip_block(cidr: &str, except: Option<&[String]>) -> Result<Ranges, PolicyError> {
    let net: ipnet::IpNet = cidr
        .parse()
        .map_err(|_| PolicyError::Cidr(cidr.to_string()))?;
    let ipnet::IpNet::V4(net) = net else {
        return Ok(Ranges::new());
    };
    let mut r = Ranges::cidr(net);
    for e in except.into_iter().flatten() {
        let x: ipnet::IpNet = e.parse().map_err(|_| PolicyError::Cidr(e.clone()))?;
        let ipnet::IpNet::V4(x) = x else {
            continue;
        };
        if !net.trunc().contains(&x.trunc()) {
            return Err(PolicyError::Except {
                cidr: cidr.to_string(),
                except: e.clone(),
            });
        }
        r.subtract(x);
    }
    Ok(r)
}
