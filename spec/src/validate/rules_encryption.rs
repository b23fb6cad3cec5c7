//! `spec.apiServer.encryption`: the resources to encrypt follow the API server's own rules for an
//! `EncryptionConfiguration` (k8s.io/apiserver pkg/apis/apiserver/validation/validation_encryption.go):
//! at least one; each `resource` or `resource.group` in lower case; not `*` alone, `resource.*`, the
//! resources without a REST API, the `events.k8s.io` or `extensions` groups; none twice; no wildcard
//! beside a resource it covers. (The provider is an enum: an unknown one is refused by the schema with
//! the allowed values.)

use super::Ctx;
use crate::diag::Diagnostic;
use crate::model::ClusterFile;

const AT: &str = "spec.apiServer.encryption.resources";

/// What is wrong with one resource name, with its hint; `None` when it is fine.
fn resource_problem(res: &str) -> Option<(String, &'static str)> {
    let (resource, group) = res.split_once('.').unwrap_or((res, ""));
    let chars_ok = !res.is_empty()
        && res
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '*'));
    if !chars_ok {
        let hint = if res.chars().any(|c| c.is_ascii_uppercase()) {
            "resource names are lower case (the plural of the kind), e.g. `secrets` or `deployments.apps`"
        } else {
            "write `name` or `name.group`, e.g. `secrets`, `configmaps`, `deployments.apps`, `*.apps` or `*.*`"
        };
        return Some((format!("{res:?} is not a resource name"), hint));
    }
    let problem: Option<(&str, &'static str)> = match (resource, group) {
        // Only `*` itself: `*.` (every resource of the core group) parses to the same pair.
        ("*", "") if res == "*" => Some((
            "`*` alone names no group",
            "use `*.` for every resource of the core group or `*.*` for every resource",
        )),
        ("apiserveripinfo" | "serviceipallocations" | "servicenodeportallocations", "") => Some((
            "this resource has no REST API and cannot be encrypted",
            "remove it",
        )),
        (_, "events.k8s.io") => Some((
            "events.k8s.io objects are stored in etcd under the core `events`",
            "write `events` instead",
        )),
        (_, "extensions") => Some((
            "the extensions group has been removed",
            "name the resource's current group, e.g. `deployments.apps`",
        )),
        (r, "*") if r != "*" => Some((
            "the same resource cannot be encrypted across every group",
            "name the group, e.g. `deployments.apps`, or use `*.*`",
        )),
        _ => None,
    };
    problem.map(|(why, hint)| (format!("{res:?}: {why}"), hint))
}

/// `(resource, group)` as the API server parses it (`schema.ParseGroupResource`).
fn group_resource(res: &str) -> (&str, &str) {
    res.split_once('.').unwrap_or((res, ""))
}

/// Whether `a` and `b` (different entries) mask each other: `*.*` beside anything, or a group's `*`
/// beside another resource of that group.
fn overlaps(a: &str, b: &str) -> bool {
    let (ra, ga) = group_resource(a);
    let (rb, gb) = group_resource(b);
    (ra, ga) == ("*", "*") || (rb, gb) == ("*", "*") || (ga == gb && (ra == "*" || rb == "*"))
}

/// The rules on `spec.apiServer.encryption`.
pub(crate) fn check(ctx: &mut Ctx<'_>, file: &ClusterFile) {
    let Some(enc) = &file.spec.api_server.encryption else {
        return;
    };
    if enc.resources.is_empty() {
        ctx.push(
            Diagnostic::error("spec::encryption-resources", "encryption.resources is empty")
                .help("name at least one resource, e.g. `[secrets]` (the default when the field is left out)")
                .at(AT),
        );
        return;
    }
    for (i, res) in enc.resources.iter().enumerate() {
        let at = format!("{AT}[{i}]");
        if let Some((why, hint)) = resource_problem(res) {
            ctx.push(
                Diagnostic::error("spec::encryption-resources", why)
                    .help(hint)
                    .at(at),
            );
            continue;
        }
        if let Some(j) = enc.resources[..i].iter().position(|r| r == res) {
            ctx.push(
                Diagnostic::error(
                    "spec::encryption-resources",
                    format!("{res:?} is listed twice (also resources[{j}])"),
                )
                .help("list each resource once")
                .at(at),
            );
        } else if let Some(other) = enc.resources[..i].iter().find(|r| overlaps(r, res)) {
            ctx.push(
                Diagnostic::error(
                    "spec::encryption-resources",
                    format!("{res:?} overlaps {other:?}: the API server refuses resources that mask each other"),
                )
                .help("keep either the wildcard or the resources it covers")
                .at(at),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_follow_the_api_servers_rules() {
        for ok in [
            "secrets",
            "configmaps",
            "deployments.apps",
            "*.apps",
            "*.",
            "*.*",
            "events",
        ] {
            assert!(resource_problem(ok).is_none(), "{ok}");
        }
        for bad in [
            "Secrets",
            "",
            "secrets/x",
            "*",
            "serviceipallocations",
            "events.events.k8s.io",
            "deployments.extensions",
            "deployments.*",
        ] {
            assert!(resource_problem(bad).is_some(), "{bad}");
        }
        assert!(overlaps("*.*", "secrets"));
        assert!(overlaps("secrets", "*."));
        assert!(overlaps("*.apps", "deployments.apps"));
        assert!(!overlaps("*.apps", "secrets"));
        assert!(!overlaps("secrets", "configmaps"));
    }
}
