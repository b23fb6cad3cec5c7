//! Shared apimachinery shapes: `metav1.Duration` (a Go duration string such as "4m0s"), `ObjectMeta`
//! (subset) and the core/v1 `Taint`, as the upstream types serialize them to JSON/YAML.
//! Source: k8s.io/apimachinery/pkg/apis/meta/v1/{duration.go,types.go}; k8s.io/api/core/v1/types.go.

use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// `metav1.Duration`: a string parsed by Go's `time.ParseDuration` ("4m0s", "168h", "0s", "1.5h").
/// Decoding fails for anything Go would reject (a bare number, an unknown unit).
#[derive(Debug, Clone)]
pub(crate) struct Duration(pub String);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if go_duration_ok(&s) {
            Ok(Duration(s))
        } else {
            Err(serde::de::Error::custom(format!(
                "invalid Go duration {s:?}"
            )))
        }
    }
}

/// True when `s` parses as a Go `time.Duration` string.
pub(crate) fn go_duration_ok(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
            i += 1;
        }
        if i == start {
            return false;
        }
        let ustart = i;
        while i < b.len() && !(b[i].is_ascii_digit() || b[i] == b'.') {
            i += 1;
        }
        let unit = &s[ustart..i];
        if !["ns", "us", "µs", "μs", "ms", "s", "m", "h"].contains(&unit) {
            return false;
        }
    }
    true
}

/// `resource.Quantity` in its string form ("1Gi", "500m", "100"). Numbers are accepted as upstream does.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Quantity {
    Str(String),
    Int(i64),
}

/// `metav1.ObjectMeta`, the subset static pods and add-on objects use.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ObjectMeta {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub labels: Option<BTreeMap<String, String>>,
    pub annotations: Option<BTreeMap<String, String>>,
    pub creation_timestamp: Option<serde_yaml::Value>,
}

/// core/v1 `Taint` (key, value, effect NoSchedule|PreferNoSchedule|NoExecute, timeAdded).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Taint {
    pub key: String,
    pub value: Option<String>,
    pub effect: TaintEffect,
    pub time_added: Option<String>,
}

/// core/v1 `TaintEffect`.
#[derive(Debug, Deserialize)]
pub(crate) enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

/// core/v1 `PullPolicy`.
#[derive(Debug, Deserialize)]
pub(crate) enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

/// core/v1 `EnvVar` subset (name, value; valueFrom kept opaque).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct EnvVar {
    pub name: String,
    pub value: Option<String>,
    pub value_from: Option<serde_yaml::Value>,
}
