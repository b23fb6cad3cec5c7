//! Registry authentication (distribution "Token Authentication Specification"): parsing a
//! `WWW-Authenticate` challenge (`Bearer realm=…,service=…,scope=…` or `Basic realm=…`), and the
//! credentials used to answer it, read from environment variables whose *names* the caller gives so
//! that no secret ever sits in the cluster file, a log or the bundle.

use std::collections::BTreeMap;

/// A parsed `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// Token auth: fetch a token from `realm` with `service` and `scope` query parameters.
    Bearer {
        /// The token endpoint.
        realm: String,
        /// The `service` parameter, when the challenge names one.
        service: Option<String>,
        /// The `scope` parameter, when the challenge names one.
        scope: Option<String>,
    },
    /// HTTP basic auth.
    Basic,
}

/// Parses the value of a `WWW-Authenticate` header; `None` for schemes other than Bearer/Basic.
pub(crate) fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    match scheme.to_ascii_lowercase().as_str() {
        "basic" => Some(Challenge::Basic),
        "bearer" => {
            let params = parse_params(rest);
            Some(Challenge::Bearer {
                realm: params.get("realm")?.clone(),
                service: params.get("service").cloned(),
                scope: params.get("scope").cloned(),
            })
        }
        _ => None,
    }
}

/// Parses `k="v",k2=v2` (quoted values may contain commas).
fn parse_params(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            match q.find('"') {
                Some(end) => (q[..end].to_string(), &q[end + 1..]),
                None => (q.to_string(), ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (after[..end].trim().to_string(), &after[end..]),
                None => (after.trim().to_string(), ""),
            }
        };
        out.insert(key, value);
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

/// Where basic credentials for one registry come from: the names of two environment variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvCredentials {
    /// Registry host[:port] these credentials are for.
    pub registry: String,
    /// Name of the variable holding the user name.
    pub username_var: String,
    /// Name of the variable holding the password or token.
    pub password_var: String,
}

impl EnvCredentials {
    /// Reads the two variables; `None` when either is unset or empty. The values are returned to
    /// the caller only to be put into an `Authorization` header.
    pub fn resolve(&self) -> Option<(String, String)> {
        let u = std::env::var(&self.username_var)
            .ok()
            .filter(|v| !v.is_empty())?;
        let p = std::env::var(&self.password_var)
            .ok()
            .filter(|v| !v.is_empty())?;
        Some((u, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bearer_challenge() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull,push""#,
        );
        assert_eq!(
            c,
            Some(Challenge::Bearer {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into()),
                scope: Some("repository:library/nginx:pull,push".into()),
            })
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="Registry""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse_challenge("Negotiate x"), None);
        assert_eq!(parse_challenge("Bearer service=x"), None);
    }
}
