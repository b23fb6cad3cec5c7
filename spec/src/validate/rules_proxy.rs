//! `spec.proxy`: at least one of `http`/`https`, each an `http://` or `https://` URL of a host and
//! optional port (no credentials: they would land in the nodes' unit files; no path), and `noProxy`
//! entries that are host names, domains, IP addresses or CIDRs. Only characters that need no quoting
//! in a systemd `Environment=` line or a shell word are accepted.

use crate::diag::Diagnostic;
use crate::model::ClusterFile;

use super::Ctx;

/// Checks `spec.proxy` when the file gives one.
pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    let Some(p) = &file.spec.proxy else {
        return;
    };
    if p.http.is_none() && p.https.is_none() {
        ctx.push(
            Diagnostic::error("spec::proxy", "spec.proxy names no proxy")
                .help("give `http` and/or `https`, e.g. `proxy: {http: http://proxy.example.com:3128, https: http://proxy.example.com:3128}`, or remove spec.proxy")
                .at("spec.proxy#key"),
        );
    }
    for (field, value) in [("http", &p.http), ("https", &p.https)] {
        if let Some(v) = value {
            if let Err(why) = proxy_url(v) {
                ctx.push(
                    Diagnostic::error(
                        "spec::proxy",
                        format!("proxy.{field} {v:?} is not a proxy URL: {why}"),
                    )
                    .help("write `http://HOST:PORT` (or `https://HOST:PORT`), e.g. `http://proxy.example.com:3128`")
                    .at(format!("spec.proxy.{field}")),
                );
            }
        }
    }
    for (i, e) in p.no_proxy.iter().enumerate() {
        if let Err(why) = no_proxy_entry(e) {
            ctx.push(
                Diagnostic::error(
                    "spec::proxy",
                    format!("noProxy entry {e:?} is not valid: {why}"),
                )
                .help("give one host name, `.domain`, IP address or CIDR per entry, e.g. `[registry.local, .corp.example.com, 10.0.0.0/8]`")
                .at(format!("spec.proxy.noProxy[{i}]")),
            );
        }
    }
}

/// A proxy URL: scheme `http` or `https`, a host (name, IPv4, or `[IPv6]`), an optional port, at most
/// a trailing `/`.
fn proxy_url(v: &str) -> Result<(), &'static str> {
    let rest = v
        .strip_prefix("http://")
        .or_else(|| v.strip_prefix("https://"))
        .ok_or("it must start with http:// or https://")?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains('@') {
        return Err("credentials in the URL are not supported (they would be written into the nodes' unit files); let the proxy admit the nodes by address");
    }
    if authority.contains('/') || authority.contains('?') || authority.contains('#') {
        return Err("a proxy URL has no path");
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (h, after) = v6.split_once(']').ok_or("an unclosed `[`")?;
            if h.parse::<std::net::Ipv6Addr>().is_err() {
                return Err("the bracketed host is not an IPv6 address");
            }
            (h, after.strip_prefix(':'))
        }
        None => match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Err("no host");
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
    {
        return Err("the host has characters a host name cannot have");
    }
    if let Some(p) = port {
        match p.parse::<u16>() {
            Ok(n) if n > 0 => {}
            _ => return Err("the port is not 1–65535"),
        }
    }
    Ok(())
}

/// One `NO_PROXY` entry: letters, digits, `.`, `-`, `:`, `/` and a leading `*` (no spaces, commas,
/// quotes, `%`).
fn no_proxy_entry(e: &str) -> Result<(), &'static str> {
    let e = e.trim();
    if e.is_empty() {
        return Err("it is empty");
    }
    if e.contains("://") {
        return Err("give a host, not a URL");
    }
    let body = e.strip_prefix('*').unwrap_or(e);
    if !body
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '/' | '_'))
    {
        return Err("only letters, digits, `.`, `-`, `_`, `:`, `/` and a leading `*` are allowed (one entry per list item)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{no_proxy_entry, proxy_url};

    #[test]
    fn proxy_urls_and_no_proxy_entries() {
        for ok in [
            "http://proxy:3128",
            "https://proxy.example.com:8443/",
            "http://10.0.0.1",
            "http://[fd00::1]:3128",
        ] {
            assert_eq!(proxy_url(ok), Ok(()), "{ok}");
        }
        for bad in [
            "proxy:3128",
            "socks5://p:1080",
            "http://u:pw@proxy:3128",
            "http://proxy:3128/path",
            "http://:3128",
            "http://proxy:0",
            "http://pro xy:1",
            "http://[fd00::1:3128",
        ] {
            assert!(proxy_url(bad).is_err(), "{bad}");
        }
        for ok in [
            "registry.local",
            ".corp.example.com",
            "10.0.0.0/8",
            "*.svc",
            "fd00::/8",
        ] {
            assert_eq!(no_proxy_entry(ok), Ok(()), "{ok}");
        }
        for bad in ["", "a,b", "a b", "http://x", "100%"] {
            assert!(no_proxy_entry(bad).is_err(), "{bad}");
        }
    }
}
