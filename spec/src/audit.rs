//! The audit policy: the `audit.k8s.io/v1` `Policy` type, transcribed from upstream
//! `k8s.io/apiserver/pkg/apis/audit/v1/types.go` (Policy, PolicyRule, GroupResources, Level, Stage), used to
//! check a user's policy file strictly, and clusterctl's built-in default policy.

use serde::Deserialize;

use crate::limits::{self, LimitError, REFERENCED_FILE};

/// The built-in policy (`audit.policy: default`): no logging of read-only health and discovery noise,
/// Metadata for Secrets/ConfigMaps/TokenReviews (never their bodies), Request bodies for changes, Metadata
/// for everything else. Never logs the RequestReceived stage.
pub const DEFAULT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages:
  - RequestReceived
rules:
  - level: None
    nonResourceURLs:
      - /healthz*
      - /livez*
      - /readyz*
      - /version
      - /openapi*
      - /api
      - /apis
  - level: None
    users:
      - system:kube-proxy
    verbs:
      - watch
  - level: None
    userGroups:
      - system:nodes
    verbs:
      - get
    resources:
      - group: ""
        resources:
          - nodes
          - nodes/status
  - level: None
    resources:
      - group: coordination.k8s.io
        resources:
          - leases
  - level: Metadata
    resources:
      - group: ""
        resources:
          - secrets
          - configmaps
          - serviceaccounts/token
      - group: authentication.k8s.io
        resources:
          - tokenreviews
  - level: Request
    verbs:
      - create
      - update
      - patch
      - delete
      - deletecollection
  - level: Metadata
"#;

/// `audit.k8s.io/v1` `Policy`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Policy {
    /// Must be `audit.k8s.io/v1`.
    pub api_version: String,
    /// Must be `Policy`.
    pub kind: String,
    /// ObjectMeta, not checked (kubectl-generated files carry `creationTimestamp: null`).
    #[serde(default)]
    pub metadata: Option<serde_yaml::Value>,
    /// Rules, first match wins.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
    /// Stages never logged.
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    /// Drop managedFields from logged objects.
    #[serde(default)]
    pub omit_managed_fields: bool,
}

/// `PolicyRule`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyRule {
    /// Level of events matched by this rule.
    pub level: Level,
    /// Users matched (empty: all).
    #[serde(default)]
    pub users: Vec<String>,
    /// User groups matched.
    #[serde(default)]
    pub user_groups: Vec<String>,
    /// Verbs matched.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Resources matched.
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    /// Namespaces matched (`""` = non-namespaced).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Non-resource URL paths matched (`*` suffix allowed).
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    /// Stages omitted for this rule.
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    /// Overrides the policy's omitManagedFields.
    #[serde(default)]
    pub omit_managed_fields: Option<bool>,
}

/// `GroupResources`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GroupResources {
    /// API group (`""` = core).
    #[serde(default)]
    pub group: String,
    /// Resources (`pods`, `pods/log`, `*/status`).
    #[serde(default)]
    pub resources: Vec<String>,
    /// Object names.
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// `Level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Level {
    /// Do not log.
    None,
    /// Request metadata only.
    Metadata,
    /// Metadata and request body.
    Request,
    /// Metadata, request and response bodies.
    RequestResponse,
}

/// `Stage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Stage {
    /// As soon as the handler receives the request.
    RequestReceived,
    /// Response headers sent (long-running requests).
    ResponseStarted,
    /// Response complete.
    ResponseComplete,
    /// A panic occurred.
    Panic,
}

/// Why a policy file is refused. No variant carries text from the file: a policy path may name any
/// file (`/etc/shadow`, a private key, an `.env`), and a report must not quote it. Positions are
/// 1-based line and column within the policy file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Over the referenced-file budget (size, depth, values) or holding a control character.
    #[error("{0}")]
    Limit(#[from] LimitError),
    /// Not YAML.
    #[error("not valid YAML at line {line}, column {column}{}", detail(.problem))]
    Syntax {
        /// The parser's fixed description, when it quotes nothing from the file.
        problem: Option<String>,
        /// Line.
        line: usize,
        /// Column.
        column: usize,
    },
    /// YAML, but not the `Policy` type: what kind of mistake, and what the type expected there.
    #[error("{what} at line {line}, column {column}")]
    Schema {
        /// The mistake, in words of the schema only (e.g. `an unknown field (allowed: …)`).
        what: String,
        /// Line (0 when unknown).
        line: usize,
        /// Column (0 when unknown).
        column: usize,
    },
    /// `apiVersion` is not `audit.k8s.io/v1`.
    #[error("apiVersion is not audit.k8s.io/v1")]
    ApiVersion,
    /// `kind` is not `Policy`.
    #[error("kind is not Policy")]
    Kind,
    /// No rules.
    #[error("the policy has no rules, so nothing would be logged")]
    NoRules,
    /// A rule mixes `nonResourceURLs` with resources or namespaces.
    #[error(
        "rules[{0}] mixes nonResourceURLs with resources or namespaces (upstream refuses this)"
    )]
    Mixed(usize),
    /// A non-resource URL that does not start with `/`.
    #[error("rules[{rule}].nonResourceURLs[{index}] must start with '/'")]
    NonResourceUrl {
        /// The rule.
        rule: usize,
        /// The URL's index.
        index: usize,
    },
}

fn detail(problem: &Option<String>) -> String {
    problem
        .as_deref()
        .map(|p| format!(": {p}"))
        .unwrap_or_default()
}

/// A serde or YAML message said in the schema's words only: the category of mistake and what the
/// type expected, never the value or key found (they are the file's content).
fn schema_words(msg: &str) -> String {
    // serde_yaml may end the message with the location, which is reported separately.
    let msg = msg.rfind(" at line ").map_or(msg, |i| &msg[..i]);
    let expected = msg
        .rfind(", expected ")
        .map(|i| msg[i + 2..].to_string())
        .filter(|e| !e.contains('"'));
    let with = |what: &str| match &expected {
        Some(e) => format!("{what} ({e})"),
        None => what.to_string(),
    };
    for (start, what) in [
        ("unknown field", "an unknown field"),
        ("unknown variant", "an unknown value"),
        ("invalid type", "a value of the wrong type"),
        ("invalid value", "an invalid value"),
        ("invalid length", "a list of the wrong length"),
    ] {
        if msg.contains(start) {
            return with(what);
        }
    }
    for start in ["missing field `", "duplicate field `"] {
        // The field named is one of the schema's, not the file's.
        if let Some(i) = msg.find(start) {
            let rest = &msg[i + start.len()..];
            if let Some((field, _)) = rest.split_once('`') {
                if KNOWN_FIELDS.contains(&field) {
                    return format!("{}{field}`", &start);
                }
            }
        }
    }
    if !msg.contains(['`', '"', '\'']) {
        return msg.to_string();
    }
    "a value the Policy type does not accept".to_string()
}

/// Every field name of the policy types (what a `missing field` or `duplicate field` may name).
const KNOWN_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "rules",
    "omitStages",
    "omitManagedFields",
    "level",
    "users",
    "userGroups",
    "verbs",
    "resources",
    "namespaces",
    "nonResourceURLs",
    "group",
    "resourceNames",
];

/// Parses and checks a policy text within the referenced-file budget ([`REFERENCED_FILE`]: checked
/// before the decoder runs). Errors: a [`PolicyError`], which never quotes the text.
pub fn check_policy(text: &str) -> Result<Policy, PolicyError> {
    if let Some(e) = limits::check_yaml(text, &REFERENCED_FILE)? {
        let problem = (!e.message.contains(['`', '"', '\''])).then_some(e.message);
        return Err(PolicyError::Syntax {
            problem,
            line: e.at.line,
            column: e.at.column,
        });
    }
    let p: Policy = serde_yaml::from_str(text).map_err(|e| {
        let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
        PolicyError::Schema {
            what: schema_words(&e.to_string()),
            line,
            column,
        }
    })?;
    if p.api_version != "audit.k8s.io/v1" {
        return Err(PolicyError::ApiVersion);
    }
    if p.kind != "Policy" {
        return Err(PolicyError::Kind);
    }
    if p.rules.is_empty() {
        return Err(PolicyError::NoRules);
    }
    for (i, r) in p.rules.iter().enumerate() {
        if !r.non_resource_urls.is_empty() && (!r.resources.is_empty() || !r.namespaces.is_empty())
        {
            return Err(PolicyError::Mixed(i));
        }
        for (j, u) in r.non_resource_urls.iter().enumerate() {
            if !u.starts_with('/') && u != "*" {
                return Err(PolicyError::NonResourceUrl { rule: i, index: j });
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_policy_is_valid() {
        let p = check_policy(DEFAULT_POLICY).expect("valid");
        assert_eq!(p.omit_stages, vec![Stage::RequestReceived]);
        assert_eq!(p.rules.last().map(|r| r.level), Some(Level::Metadata));
    }

    #[test]
    fn bad_policies() {
        assert!(check_policy(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n"
        )
        .is_err());
        assert!(check_policy(
            "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules:\n- level: None\n"
        )
        .is_err());
        assert!(check_policy(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  foo: 1\n"
        )
        .is_err());
        assert!(check_policy("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n").is_err());
        assert!(check_policy("{").is_err());
    }

    #[test]
    fn errors_never_quote_the_file() {
        // What an audit.policy pointing at another file would show: none of it may be echoed.
        for (text, shown) in [
            ("root:$6$saltsalt$hashhashhash:19000:0:99999:7:::\n", "line 1"),
            ("AWS_SECRET_ACCESS_KEY=AKIAsecretsecret\n", "line 1"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n", "line 1"),
            ("root: x\ndaemon: hunter2secret\n", "unknown field"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  hunter2secret: 1\n", "unknown field"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: hunter2secret\n", "unknown value"),
            ("apiVersion: hunter2secret\nkind: Policy\nrules:\n- level: None\n", "apiVersion"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [hunter2secret]\n", "must start with '/'"),
            ("a: 'hunter2secret\n", "not valid YAML"),
            ("a: \"\\qhunter2secret\"\n", "not valid YAML"),
        ] {
            let e = check_policy(text).expect_err(text).to_string();
            assert!(e.contains(shown), "{e}");
            for secret in ["saltsalt", "AKIAsecret", "b3BlbnNzaC1", "hunter2", "OPENSSH", "root"] {
                assert!(!e.contains(secret), "{e} quotes the file");
            }
        }
        let e = check_policy(&format!("a: {}1{}", "[".repeat(40), "]".repeat(40)))
            .expect_err("deep")
            .to_string();
        assert!(e.contains("limit of 32 levels"), "{e}");
    }
}
