//! Syntax checks of Kubernetes and Go value formats: DNS-1123 labels and subdomains, label keys and
//! values and taint effects (k8s.io/apimachinery `pkg/util/validation/validation.go`), Go durations
//! (`time.ParseDuration`), resource quantities (`k8s.io/apimachinery/pkg/api/resource`), environment
//! variable names (POSIX). Each returns `Err(reason)` with a human reason.

/// DNS-1123 label: at most 63 characters of `[a-z0-9-]`, starting and ending alphanumeric.
pub fn dns1123_label(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.len() > 63 {
        return Err(format!(
            "is {} characters long, at most 63 are allowed",
            s.len()
        ));
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err("may contain only lower-case letters, digits and '-'".into());
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Err("must start and end with a letter or digit".into());
    }
    Ok(())
}

/// DNS-1123 subdomain: at most 253 characters, dot-separated DNS-1123 labels.
pub fn dns1123_subdomain(s: &str) -> Result<(), String> {
    if s.len() > 253 {
        return Err(format!(
            "is {} characters long, at most 253 are allowed",
            s.len()
        ));
    }
    for part in s.split('.') {
        dns1123_label(part).map_err(|e| format!("part {part:?} {e}"))?;
    }
    Ok(())
}

/// The "qualified name" part of a label key or a label value: at most 63 characters, alphanumerics with
/// `-`, `_`, `.` inside, alphanumeric at both ends. `allow_empty` for label values.
fn qualified_part(s: &str, allow_empty: bool) -> Result<(), String> {
    if s.is_empty() {
        return if allow_empty {
            Ok(())
        } else {
            Err("name part must not be empty".into())
        };
    }
    if s.len() > 63 {
        return Err(format!(
            "is {} characters long, at most 63 are allowed",
            s.len()
        ));
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err("may contain only letters, digits, '-', '_' and '.'".into());
    }
    let first = s.chars().next().unwrap_or('-');
    let last = s.chars().last().unwrap_or('-');
    if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
        return Err("must start and end with a letter or digit".into());
    }
    Ok(())
}

/// A label (or taint) key: `[prefix/]name`, prefix a DNS-1123 subdomain, name a qualified name.
pub fn label_key(s: &str) -> Result<(), String> {
    match s.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() {
                return Err("prefix before '/' must not be empty".into());
            }
            dns1123_subdomain(prefix).map_err(|e| format!("prefix {e}"))?;
            qualified_part(name, false)
        }
        None => qualified_part(s, false),
    }
}

/// A label (or taint) value: empty, or a qualified name.
pub fn label_value(s: &str) -> Result<(), String> {
    qualified_part(s, true)
}

/// A Go duration as `time.ParseDuration` accepts it, e.g. `30s`, `1m30s`, `1.5h`, `0`; returns
/// nanoseconds. Negative durations are refused (none of our fields allow them).
pub fn go_duration(s: &str) -> Result<u128, String> {
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.starts_with('-') {
        return Err("must not be negative".into());
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!(
                "expected a number at {rest:?} (e.g. 30s, 5m, 1h30m)"
            ));
        }
        let num: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("bad number {:?}", &rest[..num_len]))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let ns = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err("missing unit (one of ns, us, ms, s, m, h)".into()),
            u => return Err(format!("unknown unit {u:?} (one of ns, us, ms, s, m, h)")),
        };
        total += num * ns;
        rest = &rest[unit_len..];
    }
    if total > 9.2e18 {
        return Err("is too large".into());
    }
    Ok(total as u128)
}

/// A Kubernetes resource quantity, e.g. `500m`, `1Gi`, `2`, `1.5G`, `1e3`.
pub fn quantity(s: &str) -> Result<(), String> {
    let num_len = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_len);
    let digits = num.trim_start_matches(['+', '-']);
    if digits.is_empty() || digits.parse::<f64>().is_err() || digits.contains(['+', '-']) {
        return Err("must start with a number (e.g. 500m, 1Gi, 2)".into());
    }
    let ok = matches!(
        suffix,
        "" | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
            | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
    ) || (suffix.len() > 1
        && suffix.starts_with(['e', 'E'])
        && suffix[1..]
            .trim_start_matches(['+', '-'])
            .chars()
            .all(|c| c.is_ascii_digit())
        && !suffix[1..].trim_start_matches(['+', '-']).is_empty());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "unknown suffix {suffix:?} (use n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)"
        ))
    }
}

/// An environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn env_name(s: &str) -> Result<(), String> {
    let mut chars = s.chars();
    match chars.next() {
        None => Err("must not be empty".into()),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => {
            Err("must start with a letter or '_'".into())
        }
        Some(_) if chars.all(|c| c.is_ascii_alphanumeric() || c == '_') => Ok(()),
        Some(_) => Err("may contain only letters, digits and '_'".into()),
    }
}

/// A DNS name as used in certSANs: a subdomain, optionally starting with `*.`, upper case allowed.
pub fn dns_name(s: &str) -> Result<(), String> {
    let s = s.strip_prefix("*.").unwrap_or(s).to_ascii_lowercase();
    dns1123_subdomain(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert!(dns1123_label("worker-1").is_ok());
        for bad in ["", "Worker", "-a", "a-", "a_b", &"a".repeat(64)] {
            assert!(dns1123_label(bad).is_err(), "{bad}");
        }
        assert!(label_key("disktype").is_ok());
        assert!(label_key("node-role.kubernetes.io/worker").is_ok());
        assert!(label_key("example.com/").is_err());
        assert!(label_key("/x").is_err());
        assert!(label_key("Bad_Prefix.com/x").is_err());
        assert!(label_value("").is_ok());
        assert!(label_value("ssd").is_ok());
        assert!(label_value("-ssd").is_err());
        assert!(label_value("a b").is_err());
    }

    #[test]
    fn durations_and_quantities() {
        assert_eq!(go_duration("30s"), Ok(30_000_000_000));
        assert_eq!(go_duration("1m30s"), Ok(90_000_000_000));
        assert_eq!(go_duration("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(go_duration("0"), Ok(0));
        for bad in ["", "30", "5x", "-1s", "s", "1..2s"] {
            assert!(go_duration(bad).is_err(), "{bad}");
        }
        for good in ["500m", "1Gi", "2", "1.5G", "1e3", "100Mi"] {
            assert!(quantity(good).is_ok(), "{good}");
        }
        for bad in ["", "Gi", "1GB", "1 Gi", "1e"] {
            assert!(quantity(bad).is_err(), "{bad}");
        }
        assert!(env_name("HARBOR_PASSWORD").is_ok());
        assert!(env_name("1X").is_err());
        assert!(env_name("A-B").is_err());
    }
}
