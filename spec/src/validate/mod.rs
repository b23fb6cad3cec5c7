//! Validation: from a [`Loaded`] file to a [`Validated`] cluster or a [`Diagnostics`] report holding every
//! problem at once. Steps: YAML syntax (with position), duplicate keys, `apiVersion`/`kind`, the typed
//! model (unknown fields, wrong types — recovering after each to find the next), then the semantic rules
//! (`rules_*` modules), each reporting a field path that is turned into file:line:column by the
//! [`PathIndex`]. Pure: no I/O, no panics on any input.

mod credentials;
mod parse;
mod rules_apiserver;
mod rules_meta;
mod rules_network;
mod rules_nodes;
mod rules_registry;
mod rules_runtime;
mod rules_sources;
mod rules_vip;

use std::sync::Arc;

use crate::diag::{Diagnostic, Diagnostics, Source};
use crate::load::Loaded;
use crate::model::ClusterFile;
use crate::position::PathIndex;
use crate::valid::ValidCluster;

/// The kube-vip image used when `vip.image` is not set.
pub const DEFAULT_KUBE_VIP_IMAGE: &str = "ghcr.io/kube-vip/kube-vip:v1.0.1";

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
    let index = PathIndex::build(&loaded.source_text);
    let source = Arc::new(Source {
        name: loaded.source_name.clone(),
        text: Arc::new(redact(&loaded.source_text, &index)),
    });
    let mut ctx = Ctx {
        index: &index,
        loaded,
        diags: Vec::new(),
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
    for d in std::mem::take(&mut ctx.diags) {
        report.push(position(&index, &source, d));
    }
    report.sort();
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
    if let Some(n) = &net {
        rules_network::check_with_nodes(ctx, &file, n, &nodes, vip.as_ref().and_then(|v| v.vip));
    }
    let mirror = rules_registry::check(ctx, &file, meta.as_ref());
    let api = rules_apiserver::check(ctx, &file, meta.as_ref().map(|m| &m.version));
    rules_runtime::check(ctx, &file, meta.as_ref().map(|m| &m.version));
    let source_auth = rules_sources::check(ctx, &file);

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
        file,
    })
}

/// What the rules share: the index, the loaded files, and the findings so far.
pub(crate) struct Ctx<'a> {
    pub(crate) index: &'a PathIndex,
    pub(crate) loaded: &'a Loaded,
    pub(crate) diags: Vec<Diagnostic>,
}

impl Ctx<'_> {
    /// Records a finding (its `path` says where).
    pub(crate) fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }
}

/// The source text as shown in reports: values of keys that hold secrets (`password`, `token`, `secret`,
/// not `…Env`) replaced by `*` of the same byte length, so positions stay valid and no secret is printed.
fn redact(text: &str, index: &PathIndex) -> String {
    let mut bytes: Vec<u8> = text.as_bytes().to_vec();
    let mut changed = false;
    for path in index.paths() {
        let last = path
            .rsplit(['.', '['])
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let secret = ["password", "token", "secret"]
            .iter()
            .any(|w| last.contains(w))
            && !last.ends_with("env");
        if !secret {
            continue;
        }
        if let Some(p) = index.value(path) {
            let end = (p.offset + p.len).min(bytes.len());
            for b in &mut bytes[p.offset.min(end)..end] {
                if *b != b'\n' {
                    *b = b'*';
                }
            }
            changed = true;
        }
    }
    if !changed {
        return text.to_string();
    }
    // Replacing whole bytes of a span can split a multi-byte character at its edges; repair lossily.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Fills in span, line and column from the diagnostic's path: the value at the path, else (for
/// diagnostics whose path ends in `#key`) the key, else the nearest ancestor present in the file.
fn position(index: &PathIndex, source: &Arc<Source>, mut d: Diagnostic) -> Diagnostic {
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
    if d.label.is_empty() {
        d.label = if d.path.is_empty() {
            "here".to_string()
        } else {
            d.path.clone()
        };
    }
    d
}
