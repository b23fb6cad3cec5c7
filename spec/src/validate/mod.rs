//! Validation: from a [`Loaded`] file to a [`Validated`] cluster or a [`Diagnostics`] report holding every
//! problem at once. Steps: YAML syntax (with position), duplicate keys, `apiVersion`/`kind`, the typed
//! model (unknown fields, wrong types — recovering after each to find the next), then the semantic rules
//! (`rules_*` modules), each reporting a field path that is turned into file:line:column by the
//! [`PathIndex`]. Pure: no I/O, no panics on any input.

mod credentials;
mod parse;
mod rules_access;
mod rules_apiserver;
mod rules_encryption;
mod rules_kubeadm;
mod rules_lab;
mod rules_lb_pool;
mod rules_meta;
mod rules_network;
mod rules_nodes;
mod rules_packages;
mod rules_proxy;
mod rules_registry;
mod rules_runtime;
mod rules_sources;
mod rules_vip;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::diag::{Diagnostic, Diagnostics, Severity, Source};
use crate::limits::{LimitError, CLUSTER_FILE};
use crate::load::Loaded;
use crate::model::ClusterFile;
use crate::position::PathIndex;
use crate::valid::ValidCluster;

/// The defaults of the kube-vip images, kept beside the accessors that apply them
/// ([`ValidCluster::kube_vip_image`]).
pub use crate::valid::{DEFAULT_KUBE_VIP_CLOUD_PROVIDER_IMAGE, DEFAULT_KUBE_VIP_IMAGE};

/// A file that passed validation: the cluster and the warnings found on the way.
#[derive(Debug, Clone)]
pub struct Validated {
    /// The defaulted, resolved cluster.
    pub cluster: ValidCluster,
    /// Warnings (never errors), already positioned.
    pub warnings: Vec<Diagnostic>,
}

/// Checks `loaded` and resolves it. Pure (no I/O). Errors: a report with every error (and warning) found,
/// each pointing at file:line:column of the offending value, sorted by severity then position.
pub fn validate(loaded: &Loaded) -> Result<Validated, Diagnostics> {
    let text = loaded.source_text.as_str();
    // Nothing parses a text over the size budget: one diagnostic, no snippet of it.
    if text.len() as u64 > CLUSTER_FILE.max_bytes {
        let source = Arc::new(Source {
            name: loaded.source_name.clone(),
            text: Arc::new(String::new()),
        });
        let e = LimitError::Bytes {
            what: CLUSTER_FILE.what,
            size: text.len() as u64,
            limit: CLUSTER_FILE.max_bytes,
        };
        return Err(Diagnostics::single(
            source,
            Diagnostic::error("spec::limit", e.to_string())
                .help("check that -f names the cluster file; a cluster file of 16,000 nodes is about 1 MiB"),
        ));
    }
    // The index stops at the depth and value budget, so it is built before anything else parses.
    let index = PathIndex::build(text);
    let source = Arc::new(Source {
        name: loaded.source_name.clone(),
        text: Arc::new(redact(text, &index)),
    });
    let mut ctx = Ctx {
        index: &index,
        loaded,
        diags: Vec::new(),
        retried_bytes: 0,
        retry_budget: parse::RECOVERY_BYTES,
    };

    let file = parse::parse(&mut ctx);
    let mut report = Diagnostics::new(source.clone());
    let built = match file {
        Some(file) => {
            let resolved = resolve(&mut ctx, file);
            if ctx
                .diags
                .iter()
                .any(|d| d.severity == crate::diag::Severity::Error)
            {
                None
            } else {
                resolved
            }
        }
        None => None,
    };
    let secrets = Secrets::of(&index);
    for d in std::mem::take(&mut ctx.diags) {
        report.push(position(&index, &source, &secrets, d));
    }
    report.sort();
    cap_per_code(&mut report);
    match built {
        Some(cluster) if !report.has_errors() => Ok(Validated {
            cluster,
            warnings: report.warnings(),
        }),
        _ => {
            if !report.has_errors() {
                // Defensive: resolution failed without saying why.
                report.push(
                    Diagnostic::error("spec::internal", "the file could not be resolved")
                        .help("report this as a bug"),
                );
            }
            Err(report)
        }
    }
}

/// Runs every semantic rule, then builds the [`ValidCluster`] from what parsed.
fn resolve(ctx: &mut Ctx<'_>, file: ClusterFile) -> Option<ValidCluster> {
    let meta = rules_meta::check(ctx, &file);
    let net = rules_network::check(ctx, &file);
    let nodes = rules_nodes::check(ctx, &file);
    let vip = rules_vip::check(ctx, &file, &nodes);
    rules_lb_pool::check(ctx, &file, &nodes);
    rules_network::check_with_nodes(ctx, &file, &nodes, vip.as_ref().and_then(|v| v.vip));
    let mirror = rules_registry::check(ctx, &file, meta.as_ref());
    let api = rules_apiserver::check(ctx, &file, meta.as_ref().map(|m| &m.version));
    rules_encryption::check(ctx, &file);
    rules_runtime::check(ctx, &file, meta.as_ref().map(|m| &m.version));
    rules_access::check(ctx, &file);
    rules_proxy::check(ctx, &file);
    rules_lab::check(ctx, &file);
    let source_auth = rules_sources::check(ctx, &file);
    let packages_ca = rules_packages::check(ctx, &file, meta.as_ref().map(|m| &m.version));
    rules_kubeadm::check(ctx, &file);
    rules_kubeadm::check_ignored(ctx, &file);

    let meta = meta?;
    let net = net?;
    let vip = vip?;
    let api = api?;
    let mirror = mirror?;
    Some(ValidCluster {
        version: meta.version,
        extra_versions: meta.extra_versions,
        endpoint: vip.endpoint,
        vip: vip.vip,
        nodes,
        pod_subnet: net.pod_subnet,
        service_subnet: net.service_subnet,
        node_cidr_mask_size: net.node_cidr_mask_size,
        mirror,
        oidc_ca_pem: api.oidc_ca_pem,
        audit_policy: api.audit_policy,
        source_auth: source_auth?,
        packages_mirror_ca_pem: packages_ca.ok()?,
        file,
    })
}

/// What the rules share: the index, the loaded files, and the findings so far.
pub(crate) struct Ctx<'a> {
    pub(crate) index: &'a PathIndex,
    pub(crate) loaded: &'a Loaded,
    pub(crate) diags: Vec<Diagnostic>,
    /// Bytes decoded again by the retries after schema errors (at most `retry_budget`).
    pub(crate) retried_bytes: usize,
    /// Most bytes those retries may decode: [`parse::RECOVERY_BYTES`].
    pub(crate) retry_budget: usize,
}

impl Ctx<'_> {
    /// Records a finding (its `path` says where).
    pub(crate) fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }
}

/// Most diagnostics of one code in a report; the rest are counted in one closing diagnostic (8,000
/// duplicate keys are one mistake repeated, and printing each would bury the others).
pub const MAX_PER_CODE: usize = 20;

/// Keeps the first [`MAX_PER_CODE`] diagnostics of each code (the report is sorted) and adds one
/// `spec::more` diagnostic per code that had more, saying how many were left out.
fn cap_per_code(report: &mut Diagnostics) {
    let mut seen: BTreeMap<&'static str, (usize, Severity)> = BTreeMap::new();
    let items = std::mem::take(&mut report.items);
    for d in items {
        let e = seen.entry(d.code).or_insert((0, d.severity));
        e.0 += 1;
        e.1 = e.1.min(d.severity);
        if e.0 <= MAX_PER_CODE {
            report.items.push(d);
        }
    }
    for (code, (n, severity)) in seen {
        if n > MAX_PER_CODE {
            let msg = format!(
                "{} more `{code}` diagnostics are not shown",
                n - MAX_PER_CODE
            );
            let d = match severity {
                Severity::Error => Diagnostic::error("spec::more", msg),
                Severity::Warning => Diagnostic::warning("spec::more", msg),
            };
            report.push(
                d.help("fix the ones shown (they are likely the same mistake) and validate again"),
            );
        }
    }
}

/// The source text as shown in reports: every byte range the index found to hold a secret (any value
/// under a secret-bearing key, whatever its YAML shape, and anchored values such a key reuses) has
/// each character replaced by `*`s of the same byte length, so positions stay valid and no secret is
/// printed. Line breaks are kept.
fn redact(text: &str, index: &PathIndex) -> String {
    let ranges = index.secret_ranges();
    if ranges.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for &(s, e) in ranges {
        let (s, e) = (s.min(text.len()), e.min(text.len()));
        if s < at || !text.is_char_boundary(s) || !text.is_char_boundary(e) {
            continue;
        }
        out.push_str(&text[at..s]);
        for c in text[s..e].chars() {
            if c == '\n' || c == '\r' {
                out.push(c);
            } else {
                out.extend(std::iter::repeat_n('*', c.len_utf8()));
            }
        }
        at = e;
    }
    out.push_str(&text[at..]);
    out
}

/// The secret texts of a document, for masking messages.
pub(crate) struct Secrets<'a> {
    exact: HashSet<&'a str>,
    /// The longest few (at least 4 bytes), looked for inside quoted parts (bounded work).
    longest: Vec<&'a str>,
}

impl<'a> Secrets<'a> {
    fn of(index: &'a PathIndex) -> Self {
        let texts = index.secret_texts();
        Secrets {
            exact: texts.iter().map(String::as_str).collect(),
            longest: texts
                .iter()
                .map(String::as_str)
                .filter(|t| t.len() >= 4)
                .take(256)
                .collect(),
        }
    }
}

/// `s` with every quoted part (`` `…` ``, `"…"`, `'…'`) that is, or holds, one of the `secrets` (as
/// written, or as Rust's `{:?}` writes it) replaced by `***`: serde and the rules quote values in
/// messages.
pub(crate) fn mask_secrets(s: &str, secrets: &Secrets<'_>) -> String {
    if secrets.exact.is_empty() {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(['`', '"', '\'']) {
        let q = rest[i..].chars().next().unwrap_or('"');
        out.push_str(&rest[..=i]);
        let after = &rest[i + 1..];
        // The closing quote (for `"`, not one escaped by a backslash).
        let mut close = None;
        let mut escaped = false;
        for (j, c) in after.char_indices() {
            if q == '"' && c == '\\' && !escaped {
                escaped = true;
                continue;
            }
            if c == q && !escaped {
                close = Some(j);
                break;
            }
            escaped = false;
        }
        let Some(j) = close else {
            out.push_str(after);
            return out;
        };
        let inner = &after[..j];
        let unescaped = if q == '"' {
            serde_json::from_str::<String>(&format!("\"{inner}\"")).ok()
        } else {
            None
        };
        let secret = secrets.exact.contains(inner)
            || unescaped
                .as_deref()
                .is_some_and(|u| secrets.exact.contains(u))
            || secrets.longest.iter().any(|t| {
                inner.contains(*t)
                    || unescaped.as_deref().is_some_and(|u| u.contains(*t))
                    || (inner.len() >= 6 && t.contains(inner))
            });
        if secret {
            out.push_str("***");
        } else {
            out.push_str(inner);
        }
        out.push(q);
        rest = &after[j + q.len_utf8()..];
    }
    out.push_str(rest);
    out
}

/// Fills in span, line and column from the diagnostic's path: the value at the path, else (for
/// diagnostics whose path ends in `#key`) the key, else the nearest ancestor present in the file.
fn position(
    index: &PathIndex,
    source: &Arc<Source>,
    secrets: &Secrets<'_>,
    mut d: Diagnostic,
) -> Diagnostic {
    if d.span.is_none() {
        let pos = match d.path.strip_suffix("#key").map(str::to_string) {
            Some(p) => {
                let pos = index.key_of(&p).or_else(|| index.nearest(&p));
                d.path = p;
                pos
            }
            None => index
                .value(&d.path)
                .or_else(|| index.key_of(&d.path))
                .or_else(|| index.nearest(&d.path)),
        };
        if let Some(p) = pos {
            d.span = Some((p.offset, p.len).into());
            d.line = p.line;
            d.column = p.column;
        } else if !source.text.is_empty() {
            d.span = Some((0, 0).into());
            d.line = 1;
            d.column = 1;
        }
    }
    // Nothing quoted from a secret value, and a path ends at the secret-bearing key.
    d.path = crate::position::secret_prefix(&d.path).unwrap_or(d.path);
    d.message = mask_secrets(&d.message, secrets);
    d.help = d.help.map(|h| mask_secrets(&h, secrets));
    d.label = mask_secrets(&d.label, secrets);
    if d.label.is_empty() {
        d.label = if d.path.is_empty() {
            "here".to_string()
        } else {
            d.path.clone()
        };
    }
    d
}
