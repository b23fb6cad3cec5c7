//! Syntax checks of Kubernetes and Go value formats: DNS-1123 labels and subdomains, label keys and
//! values and taint effects (k8s.io/apimachinery `pkg/util/validation/validation.go`), Go durations
//! (`time.ParseDuration`), resource quantities (`k8s.io/apimachinery/pkg/api/resource`), environment
//! variable names (POSIX). Each returns a [`SyntaxError`] whose text is the human reason validation
//! quotes after the value (`dnsDomain "x" must not be empty`).

/// Why a value does not have its format. The text continues a sentence about the value; a reason
/// about one part of the value (a subdomain's label, a label key's prefix) names the part and keeps
/// the part's own reason as its [`source`](std::error::Error::source), written after it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SyntaxError {
    /// The value is empty.
    #[error("must not be empty")]
    Empty,
    /// The value is longer than its limit (in bytes, as Kubernetes counts).
    #[error("is {len} characters long, at most {max} are allowed")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A DNS-1123 label with a character outside `[a-z0-9-]`.
    #[error("may contain only lower-case letters, digits and '-'")]
    LabelChars,
    /// A label or name that starts or ends with something other than a letter or digit.
    #[error("must start and end with a letter or digit")]
    Ends,
    /// One dot-separated part of a DNS-1123 subdomain is not a label.
    #[error("part {part:?} {source}")]
    Part {
        /// The part.
        part: String,
        /// Why it is not a label.
        #[source]
        source: Box<SyntaxError>,
    },
    /// The name part of a label key is empty.
    #[error("name part must not be empty")]
    EmptyName,
    /// A qualified name with a character outside `[A-Za-z0-9-_.]`.
    #[error("may contain only letters, digits, '-', '_' and '.'")]
    NameChars,
    /// A label key with an empty prefix before `/`.
    #[error("prefix before '/' must not be empty")]
    EmptyPrefix,
    /// A label key whose prefix is not a DNS-1123 subdomain.
    #[error("prefix {source}")]
    Prefix {
        /// Why the prefix is not a subdomain.
        #[source]
        source: Box<SyntaxError>,
    },
    /// A negative duration.
    #[error("must not be negative")]
    Negative,
    /// A duration with no number where one is expected (at the rest of the text).
    #[error("expected a number at {0:?} (e.g. 30s, 5m, 1h30m)")]
    NumberExpected(String),
    /// A duration's number that does not parse.
    #[error("bad number {text:?}")]
    BadNumber {
        /// The number as written.
        text: String,
        /// The parser's error.
        #[source]
        source: std::num::ParseFloatError,
    },
    /// A duration's number without a unit.
    #[error("missing unit (one of ns, us, ms, s, m, h)")]
    MissingUnit,
    /// A duration's unit that Go does not know.
    #[error("unknown unit {0:?} (one of ns, us, ms, s, m, h)")]
    UnknownUnit(String),
    /// A duration beyond Go's `time.Duration` (about 292 years).
    #[error("is too large")]
    TooLarge,
    /// A quantity that does not start with a number.
    #[error("must start with a number (e.g. 500m, 1Gi, 2)")]
    QuantityNumber,
    /// A quantity with an unknown suffix.
    #[error("unknown suffix {0:?} (use n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)")]
    UnknownSuffix(String),
    /// An environment variable name starting with something other than a letter or `_`.
    #[error("must start with a letter or '_'")]
    EnvStart,
    /// An environment variable name with a character outside `[A-Za-z0-9_]`.
    #[error("may contain only letters, digits and '_'")]
    EnvChars,
}

/// DNS-1123 label: at most 63 characters of `[a-z0-9-]`, starting and ending alphanumeric.
pub(crate) fn dns1123_label(s: &str) -> Result<(), SyntaxError> {
    if s.is_empty() {
        return Err(SyntaxError::Empty);
    }
    if s.len() > 63 {
        return Err(SyntaxError::TooLong {
            len: s.len(),
            max: 63,
        });
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(SyntaxError::LabelChars);
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Err(SyntaxError::Ends);
    }
    Ok(())
}

/// DNS-1123 subdomain: at most 253 characters, dot-separated DNS-1123 labels.
pub(crate) fn dns1123_subdomain(s: &str) -> Result<(), SyntaxError> {
    if s.len() > 253 {
        return Err(SyntaxError::TooLong {
            len: s.len(),
            max: 253,
        });
    }
    for part in s.split('.') {
        dns1123_label(part).map_err(|e| SyntaxError::Part {
            part: part.to_string(),
            source: Box::new(e),
        })?;
    }
    Ok(())
}

/// The "qualified name" part of a label key or a label value: at most 63 characters, alphanumerics with
/// `-`, `_`, `.` inside, alphanumeric at both ends. `allow_empty` for label values.
fn qualified_part(s: &str, allow_empty: bool) -> Result<(), SyntaxError> {
    if s.is_empty() {
        return if allow_empty {
            Ok(())
        } else {
            Err(SyntaxError::EmptyName)
        };
    }
    if s.len() > 63 {
        return Err(SyntaxError::TooLong {
            len: s.len(),
            max: 63,
        });
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(SyntaxError::NameChars);
    }
    let first = s.chars().next().unwrap_or('-');
    let last = s.chars().last().unwrap_or('-');
    if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
        return Err(SyntaxError::Ends);
    }
    Ok(())
}

/// A label (or taint) key: `[prefix/]name`, prefix a DNS-1123 subdomain, name a qualified name.
pub(crate) fn label_key(s: &str) -> Result<(), SyntaxError> {
    match s.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() {
                return Err(SyntaxError::EmptyPrefix);
            }
            dns1123_subdomain(prefix).map_err(|e| SyntaxError::Prefix {
                source: Box::new(e),
            })?;
            qualified_part(name, false)
        }
        None => qualified_part(s, false),
    }
}

/// A label (or taint) value: empty, or a qualified name.
pub(crate) fn label_value(s: &str) -> Result<(), SyntaxError> {
    qualified_part(s, true)
}

/// A Go duration as `time.ParseDuration` accepts it, e.g. `30s`, `1m30s`, `1.5h`, `0`; returns
/// nanoseconds. Negative durations are refused (none of our fields allow them).
pub(crate) fn go_duration(s: &str) -> Result<u128, SyntaxError> {
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(SyntaxError::Empty);
    }
    if s.starts_with('-') {
        return Err(SyntaxError::Negative);
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(SyntaxError::NumberExpected(rest.to_string()));
        }
        let num: f64 = rest[..num_len]
            .parse()
            .map_err(|source| SyntaxError::BadNumber {
                text: rest[..num_len].to_string(),
                source,
            })?;
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
            "" => return Err(SyntaxError::MissingUnit),
            u => return Err(SyntaxError::UnknownUnit(u.to_string())),
        };
        total += num * ns;
        rest = &rest[unit_len..];
    }
    if total > 9.2e18 {
        return Err(SyntaxError::TooLarge);
    }
    Ok(total as u128)
}

/// A Kubernetes resource quantity, e.g. `500m`, `1Gi`, `2`, `1.5G`, `1e3`.
pub(crate) fn quantity(s: &str) -> Result<(), SyntaxError> {
    let num_len = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_len);
    let digits = num.trim_start_matches(['+', '-']);
    if digits.is_empty() || digits.parse::<f64>().is_err() || digits.contains(['+', '-']) {
        return Err(SyntaxError::QuantityNumber);
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
        Err(SyntaxError::UnknownSuffix(suffix.to_string()))
    }
}

/// An environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn env_name(s: &str) -> Result<(), SyntaxError> {
    let mut chars = s.chars();
    match chars.next() {
        None => Err(SyntaxError::Empty),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => Err(SyntaxError::EnvStart),
        Some(_) if chars.all(|c| c.is_ascii_alphanumeric() || c == '_') => Ok(()),
        Some(_) => Err(SyntaxError::EnvChars),
    }
}

/// A DNS name as used in certSANs: a subdomain, optionally starting with `*.`, upper case allowed.
pub(crate) fn dns_name(s: &str) -> Result<(), SyntaxError> {
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

    #[test]
    fn reasons_read_as_before() {
        // The words validation quotes, nested reasons included after their part.
        assert_eq!(
            dns1123_subdomain("a.B").unwrap_err().to_string(),
            "part \"B\" may contain only lower-case letters, digits and '-'"
        );
        let e = label_key("-x.com/y").unwrap_err();
        assert_eq!(
            e.to_string(),
            "prefix part \"-x\" must start and end with a letter or digit"
        );
        // The chain keeps each part's own reason.
        let part = std::error::Error::source(&e).expect("prefix cause");
        assert_eq!(
            part.to_string(),
            "part \"-x\" must start and end with a letter or digit"
        );
        assert_eq!(
            dns1123_label(&"a".repeat(64)).unwrap_err().to_string(),
            "is 64 characters long, at most 63 are allowed"
        );
        assert_eq!(
            go_duration("1..2s").unwrap_err().to_string(),
            "bad number \"1..2\""
        );
        assert_eq!(
            go_duration("5x").unwrap_err().to_string(),
            "unknown unit \"x\" (one of ns, us, ms, s, m, h)"
        );
        assert_eq!(
            quantity("1GB").unwrap_err().to_string(),
            "unknown suffix \"GB\" (use n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)"
        );
    }
}
