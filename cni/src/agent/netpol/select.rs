//! The two pieces of arithmetic the policy compiler needs: Kubernetes label selectors
//! (`matchLabels` and `matchExpressions` with `In`, `NotIn`, `Exists`, `DoesNotExist`) and sets of
//! IPv4 addresses as sorted, disjoint, inclusive ranges (an `ipBlock`'s CIDR minus its `except`s,
//! unions of peers), which become nftables interval sets.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// Why a label selector cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// An operator other than the four Kubernetes defines.
    #[error("label selector: unknown operator {0:?}")]
    Operator(String),
    /// `In`/`NotIn` without values, or `Exists`/`DoesNotExist` with values.
    #[error("label selector: operator {op} on key {key:?} with the wrong number of values")]
    Values {
        /// The operator.
        op: String,
        /// The key.
        key: String,
    },
}

/// Whether `labels` match `sel`. An empty selector matches everything. Errors: a malformed
/// expression ([`SelectorError`]).
pub fn matches(
    sel: &LabelSelector,
    labels: Option<&BTreeMap<String, String>>,
) -> Result<bool, SelectorError> {
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    let mut ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or_default();
        let have = labels.get(&e.key);
        let bad = || SelectorError::Values {
            op: e.operator.clone(),
            key: e.key.clone(),
        };
        let this = match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => return Err(bad()),
            "Exists" | "DoesNotExist" if !values.is_empty() => return Err(bad()),
            "In" => have.is_some_and(|v| values.contains(v)),
            "NotIn" => !have.is_some_and(|v| values.contains(v)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            other => return Err(SelectorError::Operator(other.to_string())),
        };
        ok &= this;
    }
    Ok(ok)
}

/// A set of IPv4 addresses as sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ranges(Vec<(u32, u32)>);

impl Ranges {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every address of `net`.
    pub fn cidr(net: ipnet::Ipv4Net) -> Self {
        let net = net.trunc();
        Self(vec![(u32::from(net.network()), u32::from(net.broadcast()))])
    }

    /// Adds one address.
    pub fn add_addr(&mut self, a: Ipv4Addr) {
        let a = u32::from(a);
        self.add_range(a, a);
    }

    /// Adds every address of `addrs` (sorting and merging once, not per address).
    pub fn add_addrs(&mut self, addrs: impl IntoIterator<Item = Ipv4Addr>) {
        let before = self.0.len();
        self.0
            .extend(addrs.into_iter().map(u32::from).map(|a| (a, a)));
        if self.0.len() != before {
            self.normalize();
        }
    }

    /// Adds the inclusive range `lo..=hi`.
    pub fn add_range(&mut self, lo: u32, hi: u32) {
        self.0.push((lo.min(hi), lo.max(hi)));
        self.normalize();
    }

    /// Adds every address of `other`.
    pub fn union(&mut self, other: &Ranges) {
        self.0.extend_from_slice(&other.0);
        self.normalize();
    }

    /// Removes every address of `net`.
    pub fn subtract(&mut self, net: ipnet::Ipv4Net) {
        let net = net.trunc();
        let (lo, hi) = (u32::from(net.network()), u32::from(net.broadcast()));
        let mut out = Vec::with_capacity(self.0.len() + 1);
        for &(a, b) in &self.0 {
            if b < lo || a > hi {
                out.push((a, b));
                continue;
            }
            if a < lo {
                out.push((a, lo - 1));
            }
            if b > hi {
                out.push((hi + 1, b));
            }
        }
        self.0 = out;
    }

    /// Whether `a` is in the set.
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        let a = u32::from(a);
        self.0.iter().any(|&(lo, hi)| lo <= a && a <= hi)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ranges: inclusive, sorted, disjoint, non-adjacent.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.0
    }

    /// The ranges, as nftables set elements: `10.0.0.1` for one address, `10.0.0.0-10.0.0.255`
    /// for more.
    pub fn elements(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|&(lo, hi)| {
                if lo == hi {
                    Ipv4Addr::from(lo).to_string()
                } else {
                    format!("{}-{}", Ipv4Addr::from(lo), Ipv4Addr::from(hi))
                }
            })
            .collect()
    }

    fn normalize(&mut self) {
        self.0.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(self.0.len());
        for &(a, b) in &self.0 {
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        self.0 = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sel(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selectors() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let cases: &[(serde_json::Value, bool)] = &[
            (json!({}), true),
            (json!({"matchLabels": {"app": "web"}}), true),
            (json!({"matchLabels": {"app": "db"}}), false),
            (
                json!({"matchLabels": {"app": "web", "tier": "back"}}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "web"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["web"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
                false,
            ),
            (
                json!({"matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "x", "operator": "Exists"}]}),
                false,
            ),
        ];
        for (s, want) in cases {
            assert_eq!(matches(&sel(s.clone()), Some(&l)), Ok(*want), "{s}");
        }
        assert_eq!(matches(&sel(json!({})), None), Ok(true));
        assert!(matches(
            &sel(json!({"matchExpressions": [{"key": "a", "operator": "Like", "values": ["x"]}]})),
            Some(&l)
        )
        .is_err());
        assert!(matches(
            &sel(json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})),
            Some(&l)
        )
        .is_err());
        assert!(matches(
            &sel(
                json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})
            ),
            Some(&l)
        )
        .is_err());
    }

    #[test]
    fn ranges() {
        let mut r = Ranges::cidr("10.0.0.0/24".parse().unwrap());
        r.subtract("10.0.0.128/25".parse().unwrap());
        r.subtract("10.0.0.5/32".parse().unwrap());
        assert_eq!(r.elements(), ["10.0.0.0-10.0.0.4", "10.0.0.6-10.0.0.127"]);
        assert!(!r.contains("10.0.0.5".parse().unwrap()));
        assert!(r.contains("10.0.0.6".parse().unwrap()));
        r.add_addr("10.0.0.5".parse().unwrap());
        r.add_addr("10.0.1.9".parse().unwrap());
        assert_eq!(r.elements(), ["10.0.0.0-10.0.0.127", "10.0.1.9"]);
        let mut all = Ranges::cidr("0.0.0.0/0".parse().unwrap());
        all.subtract("0.0.0.0/32".parse().unwrap());
        all.subtract("255.255.255.255/32".parse().unwrap());
        assert_eq!(all.elements(), ["0.0.0.1-255.255.255.254"]);
        let mut u = Ranges::new();
        u.union(&Ranges::cidr("10.0.0.0/25".parse().unwrap()));
        u.union(&Ranges::cidr("10.0.0.128/25".parse().unwrap()));
        assert_eq!(
            u.elements(),
            ["10.0.0.0-10.0.0.255"],
            "adjacent ranges merge"
        );
        assert!(Ranges::new().is_empty());
    }
}
