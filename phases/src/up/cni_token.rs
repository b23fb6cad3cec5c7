//! `cni/agent-credentials`: the builtin CNI agent's kubeconfig, `/etc/clusterctl/cni/agent.kubeconfig`
//! (mode 0600, root-owned) on every node, after `cni` applied the agent's ServiceAccount and RBAC on the
//! first control plane. The token comes from the TokenRequest API (authentication.k8s.io/v1, one per
//! node, valid [`TOKEN_SECONDS`]) through the run's API client; the server is the
//! `controlPlaneEndpoint` and the CA the one `admin.conf` carries. A node whose file already names the
//! same server and CA and holds a token keeps it (no request, no write). The token is registered for
//! redaction as soon as it is known and only ever written into that file.

use super::UpData;
use crate::ctx::NodeCtx;
use crate::error::PhaseError;

/// Where the agent reads its kubeconfig (render's `AGENT_KUBECONFIG_PATH`, agent.json `kubeconfig`).
pub const AGENT_KUBECONFIG: &str = "/etc/clusterctl/cni/agent.kubeconfig";
/// The agent's ServiceAccount namespace (as render's builtin CNI manifests create it).
pub const NAMESPACE: &str = "kube-system";
/// The agent's ServiceAccount (render's `SERVICE_ACCOUNT`).
pub const SERVICE_ACCOUNT: &str = "clusterctl-cni";
/// Requested token lifetime in seconds: one year (365 days). The API server may cap it
/// (`--service-account-max-token-expiration`); re-running `up` after the file is removed renews it.
pub const TOKEN_SECONDS: i64 = 365 * 24 * 3600;
/// A kept token expiring sooner than this (30 days, in seconds) is renewed by `up`.
pub const RENEW_BEFORE_SECONDS: i64 = 30 * 24 * 3600;

/// The `exp` claim (seconds since the Unix epoch) of a JWT (RFC 7519 section 4.1.4; the payload is
/// the second dot-separated part, base64url without padding, RFC 7515 section 2). `None` when
/// `token` is not a JWT or has no numeric `exp`. The signature is not checked: the API server does.
pub fn token_expiry(token: &str) -> Option<i64> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("exp")?.as_i64()
}

/// True when `token` should be renewed at `now` (Unix seconds): its `exp` is known and less than
/// [`RENEW_BEFORE_SECONDS`] away (or past). A token whose expiry cannot be read is kept.
pub fn needs_renewal(token: &str, now: i64) -> bool {
    token_expiry(token).is_some_and(|exp| exp - now < RENEW_BEFORE_SECONDS)
}

/// Digest material: the endpoint and the builtin CNI's inputs (the token is never part of it).
pub fn inputs(data: &UpData, node: &clusterctl_spec::ValidNode) -> String {
    format!(
        "endpoint {}\n{}",
        data.spec.endpoint,
        super::cni::inputs(data, node)
    )
}

/// The kubeconfig text (`v1.Config`, one cluster/user/context named `clusterctl-cni`) for `server`
/// (`https://host:port`), the base64 PEM CA `ca_data` and the bearer `token`.
pub fn kubeconfig(server: &str, ca_data: &str, token: &str) -> String {
    let v = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": SERVICE_ACCOUNT,
                      "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": SERVICE_ACCOUNT,
                      "context": {"cluster": SERVICE_ACCOUNT, "user": SERVICE_ACCOUNT}}],
        "current-context": SERVICE_ACCOUNT,
    });
    serde_yaml::to_string(&v).unwrap_or_default()
}

/// `(server, certificate-authority-data, token)` of a kubeconfig's first cluster and user; empty
/// strings for what is missing (also when `text` is not YAML).
pub fn parts(text: &str) -> (String, String, String) {
    let v: serde_yaml::Value = serde_yaml::from_str(text).unwrap_or_default();
    let get = |list: &str, entry: &str, key: &str| {
        v.get(list)
            .and_then(|l| l.get(0))
            .and_then(|c| c.get(entry))
            .and_then(|c| c.get(key))
            .and_then(serde_yaml::Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (
        get("clusters", "cluster", "server"),
        get("clusters", "cluster", "certificate-authority-data"),
        get("users", "user", "token"),
    )
}

/// The phase (every node, after `cni`).
pub fn run(ctx: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let phase = ctx.phase.clone();
    super::on_first_cp(ctx, data, phase, |ctx, cp| run_with(ctx, cp, data))
}

fn run_with(ctx: &mut NodeCtx, cp: &mut NodeCtx, data: &UpData) -> Result<(), PhaseError> {
    let server = format!("https://{}", data.spec.endpoint);
    let ca = match cp.read_file(super::ADMIN_CONF)? {
        Some(Some(b)) => parts(&String::from_utf8_lossy(&b)).1,
        // Offline, or a dry run before `init`: the CA is not known yet.
        _ => String::new(),
    };
    // Not a change: only a run that changes things needs the CA (a probing dry run may precede init).
    if ca.is_empty() && !ctx.mode.dry_run && ctx.can_query() {
        return Err(ctx.local_error(format!(
            "{} on the first control plane names no certificate-authority-data",
            super::ADMIN_CONF
        )));
    }
    if let Some(Some(b)) = ctx.read_file(AGENT_KUBECONFIG)? {
        let (s, c, token) = parts(&String::from_utf8_lossy(&b));
        if !token.is_empty() {
            data.secrets.add(&token);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default();
        if s == server && c == ca && !token.is_empty() {
            if !needs_renewal(&token, now) {
                return Ok(());
            }
            ctx.info(&format!(
                "the agent token expires {} (within {} days): renewing it",
                token_expiry(&token)
                    .map(|e| format!("in {} day(s)", (e - now).max(0) / 86_400))
                    .unwrap_or_default(),
                RENEW_BEFORE_SECONDS / 86_400
            ));
        }
    }
    let api = data.api.get(cp)?;
    let what = format!("create token for serviceaccount {NAMESPACE}/{SERVICE_ACCOUNT} (TokenRequest, {TOKEN_SECONDS} s)");
    let mut token = None;
    let secrets = data.secrets.clone();
    ctx.api_change(&what, || {
        let Some(api) = api else {
            return Err("no API client (admin.conf unreadable)".to_string());
        };
        let t = api
            .service_account_token(NAMESPACE, SERVICE_ACCOUNT, TOKEN_SECONDS)
            .map_err(|e| e.to_string())?;
        secrets.add(&t);
        token = Some(t);
        Ok(())
    })?;
    let token = token.unwrap_or_else(|| "<token>".to_string());
    ctx.put_file(
        AGENT_KUBECONFIG,
        0o600,
        kubeconfig(&server, &ca, &token).as_bytes(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    /// A JWT-shaped token whose payload is `claims` (header and signature are placeholders).
    fn jwt(claims: &str) -> String {
        let b = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.c2ln", b(r#"{"alg":"RS256"}"#), b(claims))
    }

    #[test]
    fn a_token_is_renewed_only_when_its_known_expiry_is_near() {
        let now = 1_800_000_000;
        let day = 86_400;
        assert_eq!(
            super::token_expiry(&jwt(&format!(r#"{{"exp":{}}}"#, now + 5))),
            Some(now + 5)
        );
        // A year left: kept. 29 days left, or expired: renewed.
        assert!(!super::needs_renewal(
            &jwt(&format!(r#"{{"exp":{}}}"#, now + 365 * day)),
            now
        ));
        assert!(super::needs_renewal(
            &jwt(&format!(r#"{{"exp":{}}}"#, now + 29 * day)),
            now
        ));
        assert!(super::needs_renewal(
            &jwt(&format!(r#"{{"exp":{}}}"#, now - day)),
            now
        ));
        // Unreadable expiry (not a JWT, no exp, bad base64): kept, never renewed on every run.
        for t in ["tok-abcdef", &jwt(r#"{"sub":"x"}"#), "a.!!!.c", "a.b"] {
            assert!(!super::needs_renewal(t, now), "{t}");
        }
    }

    #[test]
    fn the_kubeconfig_round_trips_its_parts() {
        let text = super::kubeconfig("https://lab:6443", "Q0E=", "tok-abcdef");
        assert_eq!(
            super::parts(&text),
            (
                "https://lab:6443".to_string(),
                "Q0E=".to_string(),
                "tok-abcdef".to_string()
            )
        );
        assert!(text.contains("current-context: clusterctl-cni"), "{text}");
        assert_eq!(
            super::parts("not: [yaml"),
            (String::new(), String::new(), String::new())
        );
    }
}
