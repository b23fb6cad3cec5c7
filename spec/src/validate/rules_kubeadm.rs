//! `spec.kubeadm`: each timeout a positive Go duration; each ignored preflight check named (not `all`),
//! once, with a reason.

use super::Ctx;
use crate::diag::Diagnostic;
use crate::model::ClusterFile;
use crate::syntax;

pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    for (field, value) in file.spec.kubeadm.timeouts.fields() {
        let Some(text) = value else {
            continue;
        };
        let problem = match syntax::go_duration(text) {
            Ok(0) => Some("a timeout of 0 would fail at once".to_string()),
            Ok(_) => None,
            Err(why) => Some(format!("not a duration: {why}")),
        };
        if let Some(why) = problem {
            ctx.push(
                Diagnostic::error(
                    "spec::kubeadm-timeout",
                    format!("kubeadm timeout {field} {text:?}: {why}"),
                )
                .help("write a positive Go duration such as 4m, 10m0s or 1h (leave it out for kubeadm's default)")
                .at(format!("spec.kubeadm.timeouts.{field}")),
            );
        }
    }
}

/// `spec.kubeadm.ignorePreflightErrors`: a check name as kubeadm writes them (letters, digits, `.`,
/// `_`, `-`; not `all`, which would hide every failure), each once, each with a reason.
pub(crate) fn check_ignored(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    let mut seen = std::collections::BTreeSet::new();
    for (i, e) in file.spec.kubeadm.ignore_preflight_errors.iter().enumerate() {
        let at = format!("spec.kubeadm.ignorePreflightErrors[{i}]");
        let name_ok = !e.check.is_empty()
            && e.check
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        let problem = if e.check.eq_ignore_ascii_case("all") {
            Some("`all` would turn every kubeadm preflight failure into a warning")
        } else if !name_ok {
            Some("not a kubeadm preflight check name")
        } else if !seen.insert(e.check.to_ascii_lowercase()) {
            Some("named twice")
        } else {
            None
        };
        if let Some(why) = problem {
            ctx.push(
                Diagnostic::error(
                    "spec::kubeadm-preflight",
                    format!("ignored kubeadm preflight check {:?}: {why}", e.check),
                )
                .help("name one check as kubeadm prints it in `[ERROR <check>]`, e.g. SystemVerification, once")
                .at(format!("{at}.check")),
            );
        }
        if e.reason.trim().is_empty() {
            ctx.push(
                Diagnostic::error(
                    "spec::kubeadm-preflight",
                    format!("ignored kubeadm preflight check {:?} has no reason", e.check),
                )
                .help("say why this cluster may skip the check, e.g. `cgroup v1 hosts, kubelet failCgroupV1 is false`")
                .at(format!("{at}.reason")),
            );
        }
    }
}
