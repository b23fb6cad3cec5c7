//! `spec.kubeadm`: each timeout a positive Go duration.

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
